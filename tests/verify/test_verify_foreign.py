"""`tickformer verify` on foreign models with real-world signatures, built with onnx.helper
(foreign_models.py; they always run): several inputs (a padding mask beside the signal), int64
token ids with the vocabulary inferred from the embedding, dynamic batch and time axes, and a
KV-cache pair (full + step graph, past_key_values.N.* / present.N.*). Each correct model passes
every property that applies; each planted bug is caught by the property that names it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from foreign_models import lm_pair, masked_model

from tickformer.artifact.foreign.spec import Flags
from tickformer.cli import main
from tickformer.errors import ConfigError
from tickformer.verify.properties import verify_model
from tickformer.verify.properties.models import ForeignModel

EXPECTED_PAIR = {
    "dynamic_axes": "pass",
    "runs_in_domain": "pass",
    "finite_outputs": "pass",
    "output_bound": "skip",
    "causality": "pass",
    "padding_mask": "pass",
    "step_equals_full": "pass",
    "state_bounded": "skip",  # a KV cache, no fixed-size state
    "state_reset": "pass",
    "optimizations_agree": "pass",
    "onnx_reference": "pass",
}


def run(path, examples=25, **flags):
    model = ForeignModel(path, flags=Flags(**flags))
    try:
        return model, {
            r.name: r
            for r in verify_model(model, examples=examples, seed_value=0, out_dir=path.parent / "out")
        }
    finally:
        model.close()


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    return {bug: lm_pair(root / str(bug), bug) for bug in (None, "off_by_one", "leak_future", "step_nan")}


def test_mask_beside_the_signal_passes_padding_invariance(tmp_path):
    model, results = run(masked_model(tmp_path / "masked.onnx"), domain=(-1.0, 1.0))
    assert model.sig.input("attention_mask").role == "mask"
    assert {n: r.status for n, r in results.items()} == {
        **EXPECTED_PAIR,
        "step_equals_full": "skip",
        "state_reset": "skip",
    }


def test_padding_that_leaks_is_caught(tmp_path):
    _, results = run(masked_model(tmp_path / "leak.onnx", leak=True), examples=40, domain=(-1.0, 1.0))
    pad = results["padding_mask"]
    assert pad.status == "fail" and "attention_mask marks as padding" in pad.message, pad
    data = np.load(pad.counterexample)
    valid = data["attention_mask"] == 1
    assert not valid.all()  # the shrunk example has a padded position
    assert np.array_equal(data["attention_mask"], data["changed.attention_mask"])
    assert results["causality"].status == "pass"  # the bug is named once, where it is


def test_correct_kv_cache_pair_passes_everything(pairs):
    full, step = pairs[None]
    model, results = run(full, step=step)
    assert model.sig.cache.pairs == (
        ("past_key_values.0.key", "present.0.key"),
        ("past_key_values.0.value", "present.0.value"),
    )
    assert model.sig.input("input_ids").vocab == (0, 10)  # from the 11-row embedding it indexes
    assert {n: r.status for n, r in results.items()} == EXPECTED_PAIR
    sf = results["step_equals_full"]
    assert 0 <= sf.details["margin"] < 0.5  # measured well inside the stated tolerance
    assert sf.details["tolerance"]["pair"]["n"] >= 16  # the cache length is a reduction of the step


def test_off_by_one_cache_position_is_caught(pairs):
    full, step = pairs["off_by_one"]
    _, results = run(full, step=step)
    sf = results["step_equals_full"]
    assert sf.status == "fail" and "differs from the full pass" in sf.message, sf
    data = np.load(sf.counterexample)
    assert (
        data["input_ids"].shape[1] == 2 and int(data["prefill"]) == 1
    )  # shrunk: one step after one position
    # each graph alone is fine: only the pairing is wrong (the step from the empty cache reads
    # position 1 too, so state_reset, the other pairing property, fails with it)
    others = {n: r.status for n, r in results.items() if n not in ("step_equals_full", "state_reset")}
    assert "fail" not in others.values()


def test_full_graph_that_sees_the_future_is_caught(pairs):
    full, step = pairs["leak_future"]
    _, results = run(full, step=step)
    assert (
        results["causality"].status == "fail"
        and "logits at position 0 changed" in results["causality"].message
    )
    assert results["step_equals_full"].status == "fail"  # the (causal) steps disagree with it too


def test_a_step_that_breaks_where_the_full_pass_does_not_is_caught_by_finite_outputs(pairs):
    """finite_outputs checks a pair's step outputs on their own (it used to check the full graph
    only): the step's logits are NaN past position 3, the full graph is finite everywhere."""
    full, step = pairs["step_nan"]
    _, results = run(full, step=step)
    fin = results["finite_outputs"]
    assert fin.status == "fail" and "step output logits" in fin.message and "at position 4" in fin.message, (
        fin
    )
    data = np.load(fin.counterexample)
    assert int(data["position"]) == 4 and data["input_ids"].shape[1] == 5  # shrunk to the first bad step
    assert np.isnan(data["step.logits"]).all()
    assert results["causality"].status == "pass" and results["runs_in_domain"].status == "pass"


def _renamed(path, names: dict[str, str]):
    """A copy of the graph at `path` with tensors renamed (graph inputs, outputs and node edges)."""
    import onnx

    m = onnx.load(path)
    for vi in [*m.graph.input, *m.graph.output]:
        vi.name = names.get(vi.name, vi.name)
    for node in m.graph.node:
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]
    out = path.with_name("renamed_" + path.name)
    onnx.save(m, out)
    return out


def test_declared_cache_pairs_with_other_names(pairs, tmp_path, capsys):
    """A pair whose cache tensors follow no naming convention (kc -> key_after): refused without a
    spec (exit 2, naming [cache.pairs]); with [cache.pairs] declared it is stepped and passes."""
    names = {
        "past_key_values.0.key": "kc",
        "past_key_values.0.value": "vc",
        "present.0.key": "key_after",
        "present.0.value": "value_after",
    }
    full, step = (_renamed(p, names) for p in pairs[None])
    out = tmp_path / "out"
    assert main(["verify", str(full), "--step", str(step), "--out", str(out)]) == 2
    assert "declare [cache.pairs] in a spec file" in capsys.readouterr().err
    spec = tmp_path / "pairs.toml"
    spec.write_text('version = 1\n[cache.pairs]\nkc = "key_after"\nvc = "value_after"\n')
    model = ForeignModel(full, spec=spec, flags=Flags(step=step))
    try:
        assert (
            model.sig.cache.pairs == (("kc", "key_after"), ("vc", "value_after"))
            and model.sig.cache.prefill == "full"
        )
        results = {r.name: r.status for r in verify_model(model, examples=15, seed_value=0)}
    finally:
        model.close()
    assert results == EXPECTED_PAIR
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('version = 1\n[cache.pairs]\nkc = "present.0.key"\n')
    with pytest.raises(ConfigError, match="'present.0.key' is not an output of the step graph"):
        ForeignModel(full, spec=wrong, flags=Flags(step=step))


def test_pair_from_an_empty_cache_via_a_spec_file(pairs, tmp_path):
    """The spec declares the pair (step graph relative to the spec file, prefill from an empty
    cache, the mask's pattern), the vocabulary and an output bound; verify reads it and passes."""
    full, step = pairs[None]
    spec = step.parent / "spec.toml"
    spec.write_text(
        "version = 1\n"
        '[inputs.input_ids]\nrole = "ids"\nvocab = [0, 10]\n'
        '[inputs.attention_mask]\nrole = "mask"\nvalid = 1\npattern = "right"\n'
        "[outputs.logits]\nbound = 1000.0\n"
        "[axes]\nseq = [1, 6]\n"
        f'[cache]\nstep = "{step.name}"\nprefill = "empty"\n'
    )
    out = tmp_path / "out"
    assert main(["verify", str(full), "--spec", str(spec), "--examples", "15", "--out", str(out)]) == 0
    report = json.loads((out / "verify.json").read_text())
    got = {p["name"]: p["status"] for p in report["properties"]}
    assert got == {**EXPECTED_PAIR, "output_bound": "pass"}
    assert report["model"]["signature"]["cache"]["prefill"] == "empty"
    assert report["model"]["signature"]["sizes"]["seq"] == [1, 6]


def test_step_on_the_command_line_and_in_the_spec_must_agree(pairs, tmp_path, capsys):
    full, step = pairs[None]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"version": 1, "cache": {"step": str(step)}}))
    other = pairs["off_by_one"][1]
    assert main(["verify", str(full), "--spec", str(spec), "--step", str(other)]) == 2
    assert "name different graphs" in capsys.readouterr().err


def test_inspect_json_is_a_spec_verify_reads_back(pairs, tmp_path, capsys):
    full, step = pairs[None]
    assert main(["inspect", str(full), "--step", str(step), "--json"]) == 0
    spec = tmp_path / "roundtrip.json"
    spec.write_text(capsys.readouterr().out)
    assert main(["inspect", str(full), "--spec", str(spec)]) == 0
    text = capsys.readouterr().out
    assert "past_key_values.0.key <- present.0.key" in text and "ids in [0, 10]" in text
    assert (
        main(["verify", str(full), "--spec", str(spec), "--examples", "5", "--out", str(tmp_path / "o")]) == 0
    )


def test_check_lints_the_step_graph_too(pairs, capsys):
    full, step = pairs[None]
    assert main(["check", str(full), "--step", str(step), "--target", "trt-10.3", "--notes"]) == 0
    out = capsys.readouterr().out
    assert "step.onnx: note: [step-dynamic]" in out and "model.onnx" in out
