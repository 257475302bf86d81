"""`export --precision fp16`: the mixed-precision artifact loads, runs under ORT CPU, and the
step-by-step outputs stay within the fp16 tolerance recorded in its manifest (bound derived in
export/fp16.py: 2 x roundings on the deepest path x 2^-11, times the analytic output bound)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tickformer import runtime
from tickformer.errors import ExportError
from tickformer.export.writer import export_params
from tickformer.model import forward, init_params, preset


@pytest.fixture(scope="module")
def fp16_art(tmp_path_factory):
    cfg = preset("tiny")
    params = init_params(cfg, seed=5)
    path = tmp_path_factory.mktemp("fp16") / "art"
    manifest = export_params(cfg, params, path, precision="fp16")
    return path, cfg, params, manifest


def test_manifest_records_precision_and_measured_error(fp16_art):
    path, _, _, manifest = fp16_art
    assert manifest["precision"] == "fp16"
    record = manifest["fp16"]
    assert record["within_bound"] and 0.0 < record["worst"] <= record["bound"]
    assert manifest["tolerance"]["atol"] > 0
    # The graphs really are mixed precision: fp16 initializers exist, I/O stays float32.
    model = onnx.load(str(path / "step.onnx"))
    dtypes = {init.data_type for init in model.graph.initializer}
    assert onnx.TensorProto.FLOAT16 in dtypes
    assert all(
        i.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
        for i in model.graph.input
    )


def test_fp16_step_matches_numpy_within_recorded_tolerance(fp16_art):
    path, cfg, params, manifest = fp16_art
    rng = np.random.default_rng(0)
    lo, hi = manifest["input_domain"]
    x = rng.uniform(lo, hi, (1, cfg.max_len, cfg.d_in)).astype(
        np.float32
    )  # edge-heavy: full domain, full length
    ref = forward(params, cfg, x)  # [1, N, d_out]
    atol = manifest["tolerance"]["atol"]
    session = runtime.load(path, backend="ort")
    for t in range(cfg.max_len):
        y = session.step(x[:, t : t + 1])
        assert np.abs(y - ref[:, t : t + 1]).max() <= atol
    session.close()


def test_unknown_precision_is_refused(tmp_path):
    cfg = preset("tiny")
    with pytest.raises(ExportError, match="precision"):
        export_params(cfg, init_params(cfg), tmp_path / "art", precision="int8")
    assert not (tmp_path / "art").exists()


def test_manifest_records_score_bounds_per_attention_layer(fp16_art):
    _, cfg, _, manifest = fp16_art
    record = manifest["score_bounds"]
    assert len(record["layers"]) == cfg.n_layers  # decoder-only: one self-attention per layer
    assert all(layer["score"] > 0 for layer in record["layers"])
    assert record["fp16_scores_safe"] == all(layer["fp16_safe"] for layer in record["layers"])
