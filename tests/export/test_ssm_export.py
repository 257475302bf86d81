"""The "ssm" artifact kind: graphs (checker full check and strict shape inference happen in
GraphBuilder.model), I/O as artifact/format.py declares it, the Scan full graph at lengths past
max_len, the export and its manifest (kind, BIBO state bound), load with consistency, graph
rules per kind, the TensorRT 10.3 lint, and the clear refusals."""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import onnx
import pytest

from tickformer.artifact import format as fmt
from tickformer.artifact.graph_rules import check_graph
from tickformer.artifact.reader import open_artifact
from tickformer.errors import ArtifactError, ConfigError, ExportError
from tickformer.export import trt_support
from tickformer.export.builder import io_spec
from tickformer.export.consistency import check_graph_weights
from tickformer.export.equivalence import runners
from tickformer.export.ssm_graphs import build_ssm_graphs, ssm_step_through, ssm_tolerance
from tickformer.export.writer import export_params
from tickformer.model import Config, forward, init_params
from tickformer.model.config import preset

SSM = preset("tiny").replace(block="ssm", d_state=3)
SSM_TOKENS = SSM.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=7, n_layers=1)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    params = init_params(SSM, seed=4)
    path = tmp_path_factory.mktemp("ssm") / "art"
    manifest = export_params(SSM, params, path, domain=(-3.0, 3.0))
    return path, params, manifest


@pytest.mark.parametrize("config", [SSM, SSM_TOKENS], ids=["continuous", "tokens"])
def test_graphs_declare_the_format_io(config):
    graphs = build_ssm_graphs(init_params(config, seed=0), config, 2, 17)
    want = fmt.expected_io(config, 2)
    for name, graph in graphs.items():
        got = {"inputs": io_spec(graph.graph.input), "outputs": io_spec(graph.graph.output)}
        for side in ("inputs", "outputs"):
            assert [(v["name"], v["dtype"], v["shape"]) for v in got[side]] == [
                (k, dt, shape) for k, (dt, shape) in want[name][side].items()
            ]
    step = graphs["step"]
    assert not any(n.op_type in ("Scan", "Loop", "If") for n in step.graph.node)  # straight-line
    assert [n.op_type for n in graphs["model"].graph.node if n.op_type == "Scan"] == ["Scan"]
    assert fmt.ssm_state_shape(config, 2) == [2, config.n_layers, config.d_model, config.d_state]


@pytest.mark.parametrize("config", [SSM, SSM_TOKENS], ids=["continuous", "tokens"])
def test_full_graph_runs_past_max_len_and_equals_the_step_and_numpy(config):
    params = init_params(config, seed=1)
    graphs = build_ssm_graphs(params, config, 1, 17)
    t = 3 * config.max_len + 1  # no max_len: the Scan runs as many steps as x has
    rng = np.random.default_rng(0)
    x = (
        rng.integers(0, config.vocab_size, size=(1, t))
        if config.inputs == "tokens"
        else rng.uniform(-3, 3, size=(1, t, config.d_in)).astype(np.float32)
    )
    full = runners(graphs["model"], reference=False)["ort"]({fmt.io_names(config)[0]: x})[0]
    stepped = ssm_step_through(runners(graphs["step"], reference=False)["ort"], config, x)
    ref = forward(params, config, x)
    tol = ssm_tolerance(config.replace(max_len=t))["atol"]
    np.testing.assert_allclose(full, ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(stepped, ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(stepped, full, atol=tol, rtol=tol)


def test_export_manifest_load_and_consistency(artifact):
    path, params, manifest = artifact
    assert manifest["kind"] == "ssm" and manifest["config"]["block"] == "ssm"
    bound = manifest["state_bound"]
    assert len(bound["layers"]) == SSM.n_layers and all(
        s >= e > 0 for s, e in zip(bound["layers"], bound["exact"])
    )
    assert all(
        p["max_abs"] <= manifest["tolerance"]["atol"] for p in manifest["equivalence"]["pairs"].values()
    )
    art = open_artifact(path)
    assert art.config == SSM
    check_graph_weights(art)  # rebuilt bit for bit from weights.npz


def test_consistency_catches_graphs_of_other_weights(artifact, tmp_path):
    """A mutant: weights.npz of another seed, rehashed and resealed, must fail the rebuild."""
    import shutil

    from tickformer import sealed

    path, _, _ = artifact
    copy = tmp_path / "art"
    shutil.copytree(path, copy)
    other = init_params(SSM, seed=99)
    buffer = io.BytesIO()
    np.savez(buffer, **other)
    (copy / fmt.WEIGHTS).write_bytes(buffer.getvalue())
    manifest = json.loads((copy / fmt.MANIFEST).read_text())
    data = (copy / fmt.WEIGHTS).read_bytes()
    manifest["files"][fmt.WEIGHTS] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (copy / fmt.MANIFEST).write_text(json.dumps(sealed.seal(manifest)))
    with pytest.raises(ArtifactError, match="differ from the graph export builds"):
        check_graph_weights(open_artifact(copy))


def test_scan_is_allowed_for_the_ssm_kind_only(artifact):
    path, _, _ = artifact
    model = onnx.load(str(path / "model.onnx"))
    allowed = fmt.allowed_control_flow("ssm", "model")
    check_graph(model, allowed=allowed, max_trip=SSM.max_len, where="model.onnx", what="an ssm model graph")
    for kind, graph in (("decoder", "model"), ("ssm", "step")):
        with pytest.raises(ArtifactError, match="is control flow"):
            check_graph(
                model,
                allowed=fmt.allowed_control_flow(kind, graph),
                max_trip=SSM.max_len,
                where="x",
                what=kind,
            )


def test_trt_10_3_lint_is_clean(artifact):
    path, _, _ = artifact
    findings = trt_support.check_path(path, trt_support.target("trt-10.3"))
    assert trt_support.count(findings, "error") == 0 and trt_support.count(findings, "warning") == 0
    notes = [f for f in findings if f.severity == "note"]
    assert [(f.graph, f.code) for f in notes] == [("model.onnx", "pinned-shape")]  # T of the full graph


def test_fp16_is_refused_clearly(tmp_path):
    with pytest.raises(ExportError, match="not available for ssm artifacts"):
        export_params(SSM, init_params(SSM, seed=0), tmp_path / "a", precision="fp16")


def test_code_that_does_not_know_the_kind_fails_clearly(artifact):
    """A reader without Config.block (the format before this kind) refuses the config with the
    unknown field named; attention-only code paths refuse an ssm config by name."""
    _, _, manifest = artifact
    old_fields = {k: v for k, v in manifest["config"].items() if k not in ("block", "d_state")}
    assert Config.from_dict(old_fields).block == "attention"
    unknown = {**manifest["config"], "mixer_v2": 1}
    with pytest.raises(ConfigError, match=r"unknown config fields \['mixer_v2'\]"):
        Config.from_dict(unknown)  # how the older reader meets 'block' and 'd_state'
    from tickformer.model import names

    with pytest.raises(ValueError, match="not attention"):
        names.decoder_layers(SSM)
