"""`tickformer verify` on models exported by torch.onnx, as a new user brings them (torch_models.py;
skipped where torch is not installed: the same properties are covered by the onnx.helper models
of test_verify_onnx.py and test_verify_foreign.py, which always run):

    a GPT KV-cache pair (input_ids, attention_mask, past_key_values.0.*)    passes everything
    the same pair with the step's position off by one                       step_equals_full fails
    a model whose dynamic T is baked into a Reshape by int(x.shape[1])      dynamic_axes fails, named
                                                                            (not "finite_outputs")
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch_models as tm  # noqa: E402

from tickformer.artifact.foreign.spec import Flags  # noqa: E402
from tickformer.cli import main  # noqa: E402
from tickformer.verify.properties import verify_model  # noqa: E402
from tickformer.verify.properties.models import ForeignModel  # noqa: E402


def run(path, examples=20, **flags):
    model = ForeignModel(path, flags=Flags(**flags))
    try:
        return model, {
            r.name: r
            for r in verify_model(model, examples=examples, seed_value=0, out_dir=path.parent / "out")
        }
    finally:
        model.close()


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch")
    return {bug: tm.export_gpt(root / str(bug), bug) for bug in (None, "off_by_one")}


def test_torch_gpt_pair_passes(gpt):
    full, step = gpt[None]
    model, results = run(full, step=step)
    assert model.sig.input("input_ids").vocab == (0, tm.V - 1)
    assert model.sig.cache.prefill == "full"
    assert {n: r.status for n, r in results.items()} == {
        "dynamic_axes": "pass",
        "runs_in_domain": "pass",
        "finite_outputs": "pass",
        "output_bound": "skip",
        "causality": "pass",
        "padding_mask": "pass",
        "step_equals_full": "pass",
        "state_bounded": "skip",
        "state_reset": "pass",
        "optimizations_agree": "pass",
        "onnx_reference": "pass",
    }
    assert results["step_equals_full"].details["margin"] < 0.5


def test_torch_gpt_off_by_one_step_is_caught(gpt):
    full, step = gpt["off_by_one"]
    _, results = run(full, step=step)
    sf = results["step_equals_full"]
    assert sf.status == "fail" and "differs from the full pass" in sf.message
    assert np.load(sf.counterexample)["input_ids"].shape[1] == 2


def test_torch_baked_length_is_a_shape_contract_violation(tmp_path, capsys):
    path = tm.export_baked(tmp_path / "baked.onnx")
    assert (
        main(["verify", str(path), "--domain", "-1:1", "--examples", "15", "--out", str(tmp_path / "out")])
        == 1
    )
    out = capsys.readouterr().out
    assert "dynamic_axes violated" in out and "finite_outputs violated" not in out
    _, results = run(path, domain=(-1.0, 1.0))
    axes = results["dynamic_axes"]
    assert "x axis 1 ('T', declared dynamic) fails at sizes 1-7, 9-16 (runs at 8)" in axes.message
    assert "Reshape" in axes.message
    assert results["finite_outputs"].status == "pass" and results["causality"].status == "pass"


def test_torch_signal_model_passes(tmp_path):
    _, results = run(tm.export_signal(tmp_path / "s.onnx"), domain=(-1.0, 1.0))
    assert "fail" not in {r.status for r in results.values()}


def test_torch_step_mask_follows_the_cache_length(gpt, tmp_path):
    """The step was traced at past length 4 (keys 5): its causal mask tril(diagonal=keys - t) must
    be computed from the shapes in the graph, not baked in as 4, or steps past position 5 would
    mask real keys. The exported Trilu's k comes from Shape nodes, and stepping 14 positions (far
    past the trace) equals the full pass."""
    import onnx

    from tickformer.runtime.foreign import fixed_feeds

    full, step = gpt[None]
    graph = onnx.load(step).graph
    made_by = {o: n for n in graph.node for o in n.output}
    trilu = next(n for n in graph.node if n.op_type == "Trilu")
    seen, frontier = set(), [trilu.input[1]]
    while frontier:
        node = made_by.get(frontier.pop())
        if node is not None and node.name not in seen:
            seen.add(node.name)
            frontier += list(node.input)
    ops = {made_by[o].op_type for o in made_by if made_by[o].name in seen}
    assert "Shape" in ops and trilu.input[1] not in {i.name for i in graph.initializer}
    model = ForeignModel(full, flags=Flags(step=step))
    feeds = fixed_feeds(model.sig, {"batch": 2, "sequence": 14}, 0)
    stepped, _ = model.stepper.decode(feeds, 1, 14)
    want = model.full(feeds)["logits"][:, 1:14]
    model.close()
    np.testing.assert_allclose(stepped["logits"], want, rtol=0, atol=1e-5)
