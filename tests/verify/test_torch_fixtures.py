"""`tickformer verify` on the models issue 37's user made with torch (fixtures/, written by
make_torch_fixtures.py with torch 2.13 and committed, so these run without torch): a GRU as a full
graph and a step graph with its hidden state (an empty prefill: the full graph outputs no h_n), an
LSTM exported as one graph with its state (its own step graph), a linear state-space step by the
dynamo exporter, a Transformer with a KV cache in the past_key_values.0.key / present.0.key naming
whose full graph outputs no presents (both exporters; the dynamo one keeps its weights in
MODEL.onnx.data), and the dynamo exporter's defaults (batch and length fixed). Each correct model
passes; each mutant fails on the property that names its bug."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tickformer.artifact.foreign.spec import Flags
from tickformer.cli import main
from tickformer.verify.properties import verify_model
from tickformer.verify.properties.models import ForeignModel

FIXTURES = Path(__file__).parent / "fixtures"


def run(path, examples=10, max_t=4, **flags):
    model = ForeignModel(FIXTURES / path, max_t=max_t, flags=Flags(**flags))
    try:
        results = {r.name: r for r in verify_model(model, examples=examples, seed_value=0)}
    finally:
        model.close()
    return model, results


def failed(results):
    return sorted(n for n, r in results.items() if r.status in ("fail", "error"))


# (model, step graph, flags, the properties that fail): correct models first, then their mutants
CASES = [
    ("gru/model.onnx", "gru/step.onnx", {"domain": (-1.0, 1.0)}, []),
    ("gru_learned_h0/model.onnx", "gru_learned_h0/step.onnx", {"domain": (-1.0, 1.0)}, ["state_reset"]),
    ("lstm.onnx", None, {"domain": (-1.0, 1.0)}, []),
    ("lstm_swapped.onnx", None, {"domain": (-1.0, 1.0)}, ["step_equals_full"]),
    ("ssm_step.onnx", None, {"domain": (-1.0, 1.0), "state_bound": 10.001}, []),
    pytest.param(
        "ssm_step_unstable.onnx",
        None,
        {"domain": (-1.0, 1.0), "state_bound": 10.001},
        ["state_bounded"],
        marks=pytest.mark.slow,  # shrinking a sequence of up to 16 steps: ~10 s
    ),
    ("gpt_cache/model.onnx", "gpt_cache/step.onnx", {}, []),
    ("gpt_cache_off_by_one/model.onnx", "gpt_cache_off_by_one/step.onnx", {}, ["step_equals_full"]),
    ("gpt_cache_dynamo/model.onnx", "gpt_cache_dynamo/step.onnx", {}, []),
    ("gpt_cache_dynamo_aliased/model.onnx", "gpt_cache_dynamo_aliased/step.onnx", {}, ["step_equals_full"]),
    ("gru_dynamo.onnx", None, {"domain": (-1.0, 1.0)}, []),
]


@pytest.mark.parametrize(
    ("path", "step", "flags", "fails"),
    CASES,
    ids=[(c.values if hasattr(c, "values") else c)[0].split("/")[0] for c in CASES],
)
def test_each_correct_model_passes_and_each_mutant_fails_on_its_property(path, step, flags, fails):
    if step is not None:
        flags = {**flags, "step": FIXTURES / step}
    _, results = run(path, **flags)
    got = failed(results)
    # a mutant may fail a second pairing property beside its own (the learned h0 makes every
    # position of an empty prefill differ too): its own must be among them, nothing else breaks
    extra = {"state_reset": {"step_equals_full"}, "step_equals_full": {"state_reset"}}
    assert set(fails) <= set(got) and set(got) - set(fails) <= set().union(
        *(extra.get(f, set()) for f in fails)
    ), {n: (r.status, r.message[:200]) for n, r in results.items()}


def test_the_gru_state_is_a_role_with_its_batch_axis():
    """The GRU's h [1, batch, 16]: role state, batch axis 1 (named batch), no time axis (issue 37:
    inspect called axis 0 the batch and 'positions along axis 1', the batch axis); the full graph
    outputs no h_n, so the steps start from the zero state (prefill empty)."""
    model = ForeignModel(
        FIXTURES / "gru/model.onnx", flags=Flags(domain=(-1.0, 1.0), step=FIXTURES / "gru/step.onnx")
    )
    c = model.sig.cache
    model.close()
    assert c.pairs == (("h", "h_n"),) and c.kind("h") == "state" and c.batch_axis["h"] == 1
    assert c.prefill == "empty" and "h" not in c.time_axis


def test_the_lstm_is_its_own_step_graph():
    model = ForeignModel(FIXTURES / "lstm.onnx", flags=Flags(domain=(-1.0, 1.0)))
    sig = model.sig
    model.close()
    assert sig.cache.same and sig.cache.pairs == (("h0", "h_n"), ("c0", "c_n"))
    assert sig.input("h0").role == "state" and sig.input("h0").batch_axis == 1
    assert sig.cache.prefill == "full"  # its own outputs hand the state on


@pytest.mark.slow  # shrinking a sequence of up to 16 steps: ~10 s
def test_the_unstable_state_is_caught_with_its_position():
    _, results = run("ssm_step_unstable.onnx", domain=(-1.0, 1.0), state_bound=10.001)
    r = results["state_bounded"]
    assert "exceeds the declared state bound 10.001" in r.message and "state_out" in r.message, r.message
    _, results = run("ssm_step.onnx", domain=(-1.0, 1.0), state_bound=10.001)
    assert results["state_bounded"].status == "pass" and results["state_bounded"].details["worst"] <= 10.001


def test_the_dynamo_exporters_fixed_shapes_are_reported_with_the_argument_that_frees_them(tmp_path):
    out = tmp_path / "out"
    assert (
        main(
            [
                "verify",
                str(FIXTURES / "gru_dynamo.onnx"),
                "--domain",
                "-1:1",
                "--examples",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    axes = next(
        p for p in json.loads((out / "verify.json").read_text())["properties"] if p["name"] == "dynamic_axes"
    )
    assert axes["status"] == "skip"
    assert "x: batch axis 0 fixed at 1, time axis 1 fixed at 5" in axes["message"]
    assert (
        "torch.onnx.export(..., dynamo=True, dynamic_shapes={'x': {0: 'batch', 1: 'time'}})"
        in axes["message"]
    )


def test_the_torchscript_exporters_fix_names_dynamic_axes(tmp_path, capsys):
    """A TorchScript export with a fixed batch: the hint is dynamic_axes, inputs and outputs."""
    import onnx

    m = onnx.load(FIXTURES / "lstm.onnx")
    for vi in [*m.graph.input, *m.graph.output]:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param == "batch":
                d.dim_value = 1
    onnx.save(m, tmp_path / "fixed.onnx")
    assert main(["inspect", str(tmp_path / "fixed.onnx")]) == 0
    out = capsys.readouterr().out
    assert "fixed by the export: x: batch axis 0 fixed at 1" in out
    assert "torch.onnx.export(..., dynamo=False, dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}})" in out


def test_the_issues_crashes_now_pass(tmp_path, capsys):
    """The two KeyError tracebacks of the issue (exit 1): a GRU step graph with a spec declaring
    an empty prefill, and a KV pair whose full graph outputs no presents under --skip
    dynamic_axes. Both verify now (exit 0)."""
    spec = tmp_path / "gru.toml"
    spec.write_text('version = 1\n[cache]\nprefill = "empty"\n[cache.pairs]\nh = "h_n"\n')
    gru = ["verify", str(FIXTURES / "gru/model.onnx"), "--step", str(FIXTURES / "gru/step.onnx")]
    assert (
        main([*gru, "--spec", str(spec), "--domain", "-1:1", "--examples", "5", "--out", str(tmp_path / "a")])
        == 0
    )
    gpt = ["verify", str(FIXTURES / "gpt_cache/model.onnx"), "--step", str(FIXTURES / "gpt_cache/step.onnx")]
    assert main([*gpt, "--skip", "dynamic_axes", "--examples", "5", "--out", str(tmp_path / "b")]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_the_fixtures_are_what_the_script_makes(tmp_path):
    """Where torch is installed: the script writes graphs with the committed fixtures' inputs and
    outputs (names, dtypes, dims)."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    import make_torch_fixtures
    import onnx

    from tickformer.artifact.foreign.graph import graph_io

    made = make_torch_fixtures.make(tmp_path)
    for path in made:
        if path.suffix != ".onnx":
            continue
        committed = FIXTURES / path.relative_to(tmp_path)
        new, old = (graph_io(onnx.load(p, load_external_data=False)) for p in (path, committed))
        assert (new.inputs, new.outputs) == (old.inputs, old.outputs), path


def test_the_saved_counterexample_of_a_mutant_replays(tmp_path):
    """The lstm_swapped counterexample: stepping it again differs from its full pass."""
    model = ForeignModel(FIXTURES / "lstm_swapped.onnx", max_t=4, flags=Flags(domain=(-1.0, 1.0)))
    try:
        results = {r.name: r for r in verify_model(model, examples=10, seed_value=0, out_dir=tmp_path)}
        data = np.load(results["step_equals_full"].counterexample)
        feeds = {k: data[k] for k in ("x", "h0", "c0")}
        k = int(data["prefill"])
        stepped, _ = model.stepper.decode(feeds, k, feeds["x"].shape[1])
        assert not np.allclose(stepped["y"], model.full(feeds)["y"][:, k:], atol=1e-4)
    finally:
        model.close()


@pytest.mark.parametrize(
    ("model", "step"),
    [
        ("lstm.onnx", None),
        ("gru/model.onnx", "gru/step.onnx"),
        ("gpt_cache/model.onnx", "gpt_cache/step.onnx"),
    ],
)
def test_inspect_json_of_a_recurrent_model_is_a_spec_verify_reads_back(
    tmp_path, capsys, monkeypatch, model, step
):
    """The spec inspect --json writes for a recurrent model (dims named batch and time, which the
    spec's [axes] read as the role keys before; a step graph written relative to the working
    directory, read relative to the spec file) is one verify reads back and passes with."""
    monkeypatch.chdir(FIXTURES)  # the paths as a user types them: relative to the working directory
    argv = [model] + ([] if step is None else ["--step", step])
    assert main(["inspect", *argv, "--json"]) == 0
    spec = tmp_path / "sub" / "spec.json"
    spec.parent.mkdir()
    spec.write_text(capsys.readouterr().out)
    out = tmp_path / "out"
    rc = main(
        [
            "verify",
            str(FIXTURES / model),
            "--spec",
            str(spec),
            "--domain",
            "-1:1",
            "--examples",
            "5",
            "--out",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr()


def test_inspect_reports_roles_and_axes_batch_time_state(capsys):
    """The issue's inspect of the GRU: the state [1, batch, 16] was 'batch axis 0, time axis 1',
    then 'positions along axis 1' (its batch axis)."""
    assert main(["inspect", str(FIXTURES / "gru/model.onnx"), "--step", str(FIXTURES / "gru/step.onnx")]) == 0
    out = capsys.readouterr().out
    assert "  h <- h_n: a recurrent state, batch axis 1" in out and "positions along" not in out
    assert main(["inspect", str(FIXTURES / "gru/step.onnx")]) == 0
    out = capsys.readouterr().out
    assert (
        "h                    float32[1, batch, 16]  state: batch axis 1, fed the reset state: zeros" in out
    )
    assert "recurrent the model itself (its own step graph)" in out
    assert (
        main(
            [
                "inspect",
                str(FIXTURES / "gpt_cache/model.onnx"),
                "--step",
                str(FIXTURES / "gpt_cache/step.onnx"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "past_key_values.0.key <- present.0.key: a KV cache, positions along axis 2, batch axis 0" in out
    assert "prefill empty" in out
