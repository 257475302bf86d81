"""`tickformer prove ART | FILE.onnx`: the graph prover (verify/proofs/graphs/) on our exported
step and full graphs, and graphs mutated by one operator or one constant, each of which must FAIL
the proof (kept as tests: a prover that passes them would be no prover)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tickformer.cli import main
from tickformer.contracts import masking
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
from tickformer.verify.proofs.graphs import driver, ssm
from tickformer.verify.proofs.graphs.claims import FAILED, IF_FINITE, PROVEN
from tickformer.verify.proofs.graphs.specs import prove_model_proto


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    cfg = preset("tiny")
    path = tmp_path_factory.mktemp("prove") / "art"
    export_params(cfg, init_params(cfg, seed=3), path)
    return path, cfg


def _claims(proof) -> dict[str, str]:
    return {c.name: c.status for c in proof.claims}


def _save(model, tmp_path, name):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


# -- the exported graphs ---------------------------------------------------------------------------


def test_exported_step_and_model_proven(art):
    path, cfg = art
    proofs = {p.graph: p for p in driver.prove_artifact(str(path))}
    step, model = proofs["step"], proofs["model"]
    assert step.states == cfg.max_len and model.states == cfg.max_len
    assert _claims(step)["bounded work"] == PROVEN
    assert _claims(step)["reads every live row"] == PROVEN
    # the step selects V rows as well as scores: stale rows cannot leak whatever they hold
    assert _claims(step)["reads only live rows"] == PROVEN
    assert _claims(model)["causal"] in (PROVEN, IF_FINITE)
    assert _claims(model)["reads every past input"] == PROVEN
    assert _claims(model)["bounded work"] == PROVEN


def test_cli_report_json_and_exit_codes(art, tmp_path, capsys):
    path, _ = art
    out = tmp_path / "r" / "graphs.json"
    rc = main(["prove", str(path), "--json", str(out)])
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert rc == 0 and report["ok"], text
    assert [g["graph"] for g in report["graphs"]] == ["model", "step"]
    assert "reads only live rows" in text and "causal" in text
    # the step selects V rows too: proven outright, so --exact passes on it
    assert report["graphs"][1]["status"] == PROVEN
    assert main(["prove", str(path / "step.onnx"), "--exact"]) == 0
    # the full pass multiplies zero weights by V of future inputs: proven for finite inputs only
    assert main(["prove", str(path / "model.onnx"), "--max-len", "16", "--exact"]) == 3
    assert main(["prove", str(path / "model.onnx"), "--max-len", "16"]) == 0


def test_cli_usage_errors(art, tmp_path, capsys):
    path, _ = art
    assert main(["prove", str(path / "model.onnx")]) == 2  # full pass without --max-len
    assert "--max-len" in capsys.readouterr().err
    assert main(["prove", str(path), "--max-len", "4"]) == 2
    assert main(["prove", str(path), "--contract", "masking"]) == 2
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not onnx")
    assert main(["prove", str(garbage)]) == 2
    assert main(["prove", "--exact"]) == 2


# -- mutants: each must fail ----------------------------------------------------------------------


def _node(model, op):
    return next(n for n in model.graph.node if n.op_type == op)


def _replace_init(model, name, value):
    for i, t in enumerate(model.graph.initializer):
        if t.name == name:
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(value, name))
            return
    raise KeyError(name)


def _init(model, name):
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


def _step(art):
    return onnx.load(str(art[0] / "step.onnx"))


def _model(art):
    return onnx.load(str(art[0] / "model.onnx"))


def _drop_where(model, cond_from):
    """Rewire the first Where whose condition comes from `cond_from` to its 'true' input."""
    producers = {o: n for n in model.graph.node for o in n.output}
    node = next(
        n
        for n in model.graph.node
        if n.op_type == "Where"
        and producers.get(n.input[0]) is not None
        and producers[n.input[0]].op_type in cond_from
    )
    return _bypass(model, [node], node.input[1])


def _bypass(model, nodes, src):
    """Feed the last of `nodes`' consumers from `src` instead, and remove `nodes` (a mutant)."""
    dst = nodes[-1].output[0]
    for n in model.graph.node:
        for i, x in enumerate(n.input):
            if x == dst:
                n.input[i] = src
    for node in nodes:
        model.graph.node.remove(node)
    return model


def _drop_v_selection(model):
    """Rewire the first layer's V-row selection, Gather(Concat(v_cache.i, zero row), index), to
    v_cache.i itself (the mutant: stale V rows reach the product)."""
    producers = {o: n for n in model.graph.node for o in n.output}
    gather = next(
        n
        for n in model.graph.node
        if n.op_type == "Gather"
        and producers.get(n.input[0]) is not None
        and producers[n.input[0]].op_type == "Concat"
        and producers[n.input[0]].input[0].startswith("v_cache")
    )
    concat = producers[gather.input[0]]
    return _bypass(model, [concat, gather], concat.input[0])


def test_mutant_less_or_equal_reads_the_stale_row(art):
    m = _step(art)
    _node(m, "Less").op_type = "LessOrEqual"  # row pos (not yet written at this step) becomes live
    proof = prove_model_proto(m, "mutant")
    assert proof.status == FAILED
    detail = next(c.detail for c in proof.claims if c.name == "reads only live rows")
    assert _claims(proof)["reads only live rows"] == FAILED and "at pos 0" in detail and "row(s) 0" in detail


def test_mutant_dropped_where_reads_every_row(art):
    m = _drop_where(_step(art), ("Less",))
    proof = prove_model_proto(m, "mutant")
    assert _claims(proof)["reads only live rows"] == FAILED


def test_mutant_dropped_v_selection_fails_the_step(art, tmp_path):
    """Without the V-row selection a stale row reaches y through a zero weight (0 * inf = NaN):
    the step must not depend on stale rows whatever they hold, so this is FAILED, not 'proven if
    finite', and the CLI exits 1 without --exact."""
    m = _drop_v_selection(_step(art))
    proof = prove_model_proto(m, "mutant")
    detail = next(c.detail for c in proof.claims if c.name == "reads only live rows")
    assert _claims(proof)["reads only live rows"] == FAILED and "exactly-zero weight" in detail
    assert main(["prove", str(_save(m, tmp_path, "step.onnx"))]) == 1


def test_mutant_key_index_shifted_reads_a_row_out_of_range(art):
    m = _step(art)
    key_index = _init(m, "key_index").copy()
    n = key_index.size - 1
    key_index[:n] -= 1  # row r live iff r - 1 < pos: row pos is read, one beyond the live set
    _replace_init(m, "key_index", key_index)
    proof = prove_model_proto(m, "mutant")
    detail = next(c.detail for c in proof.claims if c.name == "reads only live rows")
    assert _claims(proof)["reads only live rows"] == FAILED and "row(s) 0" in detail


def test_mutant_key_index_shifted_drops_a_live_row(art):
    m = _step(art)
    key_index = _init(m, "key_index").copy()
    n = key_index.size - 1
    key_index[:n] += 1  # row r live iff r + 1 < pos: the newest cached row is never read
    _replace_init(m, "key_index", key_index)
    proof = prove_model_proto(m, "mutant")
    assert _claims(proof)["reads only live rows"] != FAILED  # reads fewer rows: still only live ones
    assert _claims(proof)["reads every live row"] == FAILED


def test_mutant_own_key_dropped(art):
    m = _step(art)
    key_index = _init(m, "key_index").copy()
    key_index[-1] = np.iinfo(np.int64).max  # the own key is never live
    _replace_init(m, "key_index", key_index)
    proof = prove_model_proto(m, "mutant")
    assert _claims(proof)["reads every live row"] == FAILED


def _causal_const(model):
    """The constant [N, N] bool causal mask the full pass slices to [T, T]."""
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == bool and a.ndim == 2 and a.shape[0] == a.shape[1]:
            return t.name, a
    for n in model.graph.node:
        if n.op_type == "Constant":
            a = numpy_helper.to_array(n.attribute[0].t)
            if a.dtype == bool and a.ndim == 2:
                return n, a
    raise AssertionError("no causal mask constant")


def test_mutant_causal_mask_sees_one_ahead(art):
    m = _model(art)
    where, mask = _causal_const(m)
    n = mask.shape[0]
    ahead = np.tril(np.ones((n, n), dtype=bool), k=1)  # query t sees key t + 1
    if isinstance(where, str):
        _replace_init(m, where, ahead)
    else:
        where.attribute[0].t.CopyFrom(numpy_helper.from_array(ahead))
    proof = prove_model_proto(m, "mutant", max_len=n)
    detail = next(c.detail for c in proof.claims if c.name == "causal")
    assert _claims(proof)["causal"] == FAILED and "t 0" in detail


def test_mutant_full_pass_dropped_where_is_not_causal(art):
    # the mask Where: its condition is the sliced constant (a Slice), its 'false' a -inf scalar
    m = _drop_where(_model(art), ("Slice",))
    proof = prove_model_proto(m, "mutant", max_len=16)
    assert _claims(proof)["causal"] == FAILED


def test_mutant_data_dependent_shape_cannot_be_proven(art):
    m = _step(art)
    # a Reshape whose target shape is computed from data: the analysis must refuse, not assume
    node = next(n for n in m.graph.node if n.op_type == "Reshape")
    cast = onnx.helper.make_node("Cast", ["x"], ["_x_int"], to=onnx.TensorProto.INT64)
    m.graph.node.insert(0, cast)
    red = onnx.helper.make_node("ReduceMax", ["_x_int"], ["_xmax"], keepdims=0)
    m.graph.node.insert(1, red)
    add = onnx.helper.make_node("Add", [node.input[1], "_xmax"], ["_target"])
    m.graph.node.insert(2, add)
    node.input[1] = "_target"
    proof = prove_model_proto(m, "mutant")
    assert proof.status == FAILED and "computed from data" in proof.claims[0].detail


def test_mutant_file_through_cli_exits_1(art, tmp_path, capsys):
    m = _step(art)
    _node(m, "Less").op_type = "LessOrEqual"
    path = _save(m, tmp_path, "step.onnx")
    out = tmp_path / "m.json"
    assert main(["prove", str(path), "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    assert report["status"] == FAILED and not report["ok"]
    assert "FAILED" in capsys.readouterr().out


# -- windowed (ring) artifacts ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def windowed(tmp_path_factory):
    cfg = preset("tiny").replace(window=4)
    path = tmp_path_factory.mktemp("prove_win") / "art"
    export_params(cfg, init_params(cfg, seed=4), path)
    return path, cfg


def test_windowed_step_proven_over_every_ring_state(windowed):
    path, cfg = windowed
    proofs = {p.graph: p for p in driver.prove_artifact(str(path))}
    step, model = proofs["step"], proofs["model"]
    assert step.domain == "ring positions" and step.states == 3 * cfg.window
    assert _claims(step)["reads only live rows"] == PROVEN
    assert _claims(step)["reads every live row"] == PROVEN
    # the full pass: exactly the receptive field L (W - 1) + 1 of every output
    assert _claims(model)["causal"] in (PROVEN, IF_FINITE)
    assert _claims(model)["reads every past input"] == PROVEN


def test_windowed_mutant_ring_slot_shifted_fails(windowed):
    m = onnx.load(str(windowed[0] / "step.onnx"))
    slots = _init(m, "ring_slot").copy()
    _replace_init(m, "ring_slot", (slots + 1) % slots.size)  # every slot reads its neighbour's verdict
    proof = prove_model_proto(m, "mutant", window=windowed[1].window)
    assert proof.status == FAILED


@pytest.mark.parametrize(
    ("op", "to", "claim"),
    [
        ("GreaterOrEqual", "Greater", "reads every live row"),  # d >= 1 -> d > 1: the newest slot dropped
        ("LessOrEqual", "Less", "reads every live row"),  # d <= pos -> d < pos: position 0 dropped early on
        ("LessOrEqual", "GreaterOrEqual", "reads only live rows"),  # reads slots never written
    ],
)
def test_windowed_step_operator_mutants_fail(windowed, op, to, claim):
    """slot_read's `(d >= 1) & (d <= pos)` in the windowed step graph, one operator changed."""
    m = onnx.load(str(windowed[0] / "step.onnx"))
    _node(m, op).op_type = to
    proof = prove_model_proto(m, "mutant", window=windowed[1].window)
    assert _claims(proof)[claim] == FAILED


def test_windowed_step_dropped_score_where_fails(windowed):
    m = _drop_where(onnx.load(str(windowed[0] / "step.onnx")), ("Concat",))  # Where(live, s, -inf)
    proof = prove_model_proto(m, "mutant", window=windowed[1].window)
    assert _claims(proof)["reads only live rows"] == FAILED


def test_windowed_model_operator_mutant_fails(windowed):
    """window_allowed's `(j <= i) & (i - j < W)` in the windowed model.onnx with `<` made `<=`: a
    window of W + 1 keys reaches one input beyond the receptive field."""
    m = onnx.load(str(windowed[0] / "model.onnx"))
    _node(m, "Less").op_type = "LessOrEqual"
    cfg = windowed[1]
    proof = prove_model_proto(m, "mutant", max_len=cfg.max_len, window=cfg.window, layers=cfg.n_layers)
    assert _claims(proof)["causal"] == FAILED


def test_windowed_model_self_exclusion_is_beyond_the_dependency_analysis(windowed):
    """A limit, pinned: `j <= i` made `j < i` (a query no longer sees its own key) changes no
    dependency set -- the residual stream still carries x[t] to y[t], and two layers of W - 1 keys
    stay inside the receptive field -- so the prover cannot see it; the export's three-way
    equivalence (step vs full pass) and `tickformer verify` do. The step graph's slot mutants,
    where cache rows enter only through attention, are caught (above)."""
    m = onnx.load(str(windowed[0] / "model.onnx"))
    _node(m, "LessOrEqual").op_type = "Less"
    cfg = windowed[1]
    proof = prove_model_proto(m, "mutant", max_len=cfg.max_len, window=cfg.window, layers=cfg.n_layers)
    assert proof.status != FAILED


def test_windowed_model_dropped_mask_where_fails(windowed):
    m = _drop_where(onnx.load(str(windowed[0] / "model.onnx")), ("And",))
    cfg = windowed[1]
    proof = prove_model_proto(m, "mutant", max_len=cfg.max_len, window=cfg.window, layers=cfg.n_layers)
    assert _claims(proof)["causal"] == FAILED


def test_bare_windowed_model_file_is_proven_against_its_window(windowed, tmp_path, capsys):
    """prove FILE.onnx on a windowed model.onnx reads W and the layer count from its relative-position
    tables and proves the window, not plain causality: a window one key too wide fails."""
    path, cfg = windowed
    assert main(["prove", str(path / "model.onnx"), "--max-len", str(cfg.max_len)]) == 0
    out = capsys.readouterr().out
    assert f"window W = {cfg.window}" in out and "accepts longer T" in out
    m = onnx.load(str(path / "model.onnx"))
    _node(m, "Less").op_type = "LessOrEqual"  # W + 1 keys: still causal, no longer the window
    assert main(["prove", str(_save(m, tmp_path, "model.onnx")), "--max-len", str(cfg.max_len)]) == 1


def test_windowed_full_pass_with_one_layer_field_fails(windowed):
    # proving the 2-layer model against a 1-layer receptive field must fail: the prover is exact
    m = onnx.load(str(windowed[0] / "model.onnx"))
    proof = prove_model_proto(m, "narrower spec", max_len=16, window=windowed[1].window, layers=1)
    assert _claims(proof)["causal"] == FAILED


# -- stale rows holding inf / NaN cannot leak (the V selection the prover proves) ----------------


@pytest.mark.parametrize("poison", [np.inf, -np.inf, np.nan])
def test_stale_rows_holding_non_finite_values_do_not_leak_ort(art, poison):
    """The exported step on ONNX Runtime: stale cache rows (r >= pos) filled with inf / -inf / NaN
    in K and V give bit for bit the output of the same step with finite stale rows."""
    from tickformer.artifact.format import step_signature
    from tickformer.runtime.ort_session import make_session

    path, cfg = art
    sess = make_session((path / "step.onnx").read_bytes())
    sig = step_signature(cfg, 1)["inputs"]
    rng = np.random.default_rng(0)
    for pos in (0, 1, 7, cfg.max_len - 1):
        feeds = {}
        for name, (dtype, shape) in sig.items():
            if name == "pos":
                feeds[name] = np.array([pos], np.int64)
            else:
                feeds[name] = rng.standard_normal(shape).astype(dtype)
        poisoned = {k: v.copy() for k, v in feeds.items()}
        for name in poisoned:
            if name.startswith("k_cache."):
                poisoned[name][..., pos:] = poison  # [B, H, dh, N]: rows on the last axis
            elif name.startswith("v_cache."):
                poisoned[name][:, :, pos:, :] = poison  # [B, H, N, dh]
        clean = sess.run(None, feeds)
        dirty = sess.run(None, poisoned)
        for a, b in zip(clean, dirty):
            assert np.isfinite(b).all() and a.tobytes() == b.tobytes(), (pos, poison)


# -- the graph's mask is the contract's predicate (call site) ---------------------------------------


def test_step_mask_is_built_by_calling_the_contract(monkeypatch):
    """export/graphs.py builds the static step's live set by calling masking.cache_row_live on graph
    expressions: swap in the wrong twin (row <= pos) and the rebuilt graph fails the proof."""
    from tickformer.export import graphs as export_graphs

    cfg = preset("tiny")
    params = init_params(cfg, seed=5)
    assert export_graphs.cache_row_live is masking.cache_row_live
    good = export_graphs.build_step(params, cfg, 1, 17)
    assert _claims(prove_model_proto(good, "good"))["reads only live rows"] == PROVEN
    monkeypatch.setattr(export_graphs, "cache_row_live", lambda row, position: row <= position)
    bad = export_graphs.build_step(params, cfg, 1, 17)
    assert _claims(prove_model_proto(bad, "twin"))["reads only live rows"] == FAILED
    # the prover's own table does not come from the predicate: the twin everywhere still fails
    monkeypatch.setattr(masking, "cache_row_live", lambda row, position: row <= position)
    assert _claims(prove_model_proto(bad, "twin everywhere"))["reads only live rows"] == FAILED


def test_model_causal_constant_is_built_by_calling_the_contract(monkeypatch):
    """export/graphs.py builds model.onnx's causal constant by calling masking.causal_allowed on
    index arrays: with a twin that lets a query see the next key, the rebuilt graph fails the
    causality proof."""
    from tickformer.export import graphs as export_graphs

    cfg = preset("tiny")
    params = init_params(cfg, seed=5)
    assert export_graphs.causal_allowed is masking.causal_allowed
    good = export_graphs.build_model(params, cfg, 1, 17)
    assert _claims(prove_model_proto(good, "good", max_len=cfg.max_len))["causal"] in (PROVEN, IF_FINITE)
    monkeypatch.setattr(export_graphs, "causal_allowed", lambda i, j, offset: j - offset <= i + 1)
    bad = export_graphs.build_model(params, cfg, 1, 17)
    assert _claims(prove_model_proto(bad, "twin", max_len=cfg.max_len))["causal"] == FAILED


# -- ssm artifacts ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ssm_art(tmp_path_factory):
    cfg = preset("tiny").replace(block="ssm", d_state=3)
    path = tmp_path_factory.mktemp("prove_ssm") / "art"
    export_params(cfg, init_params(cfg, seed=7), path)
    return path, cfg


def test_ssm_artifact_and_its_files_are_proven(ssm_art, capsys):
    path, cfg = ssm_art
    proofs = {p.graph: p for p in driver.prove_artifact(str(path))}
    step, model = _claims(proofs["step"]), _claims(proofs["model"])
    assert step == {
        "bounded work": PROVEN,
        "state-only": PROVEN,
        "reads its state": PROVEN,
        "layer order": PROVEN,
    }
    assert model == {"bounded work": PROVEN, "causal": PROVEN, "reads every past input": PROVEN}
    assert main(["prove", str(path)]) == 0
    assert main(["prove", str(path / "step.onnx"), "--exact"]) == 0
    assert main(["prove", str(path / "model.onnx"), "--exact"]) == 0  # causal for every T: no --max-len
    assert "re-export" not in capsys.readouterr().err
    assert main(["prove", str(path / "model.onnx"), "--max-len", "4"]) == 2  # an ssm graph has no max_len


def _scan(m):
    return next(n for n in m.graph.node if n.op_type == "Scan")


def test_ssm_reversed_scan_is_not_causal(ssm_art):
    m = onnx.load(str(ssm_art[0] / "model.onnx"))
    _scan(m).attribute.append(onnx.helper.make_attribute("scan_input_directions", [1]))
    proof = ssm.prove_ssm_model(m, "mutant")
    assert _claims(proof)["causal"] == FAILED


def test_ssm_initial_state_from_the_input_is_not_causal(ssm_art):
    m = onnx.load(str(ssm_art[0] / "model.onnx"))
    scan = _scan(m)
    shape = onnx.helper.make_node("ReduceSum", [scan.input[1]], ["_x_sum"], keepdims=0)
    add = onnx.helper.make_node("Add", [scan.input[0], "_x_sum"], ["_state0"])
    m.graph.node.insert(0, add)
    m.graph.node.insert(0, shape)
    scan.input[0] = "_state0"
    proof = ssm.prove_ssm_model(m, "mutant")
    assert _claims(proof)["causal"] == FAILED


def test_ssm_step_with_a_position_input_is_not_state_only(ssm_art):
    m = onnx.load(str(ssm_art[0] / "step.onnx"))
    m.graph.input.append(onnx.helper.make_tensor_value_info("pos", onnx.TensorProto.INT64, [1]))
    proof = ssm.prove_ssm_step(m, "mutant")
    assert _claims(proof)["state-only"] == FAILED


def test_ssm_step_that_forgets_a_layer_state_fails(ssm_art):
    """Layer 0's new state computed without its old state (h = (1 - lam) x B): 'reads its state' fails."""
    m = onnx.load(str(ssm_art[0] / "step.onnx"))
    squeeze = next(n for n in m.graph.node if n.op_type == "Squeeze")  # layer 0's h_prev [B, D, N]
    zero = onnx.helper.make_node("Mul", [squeeze.output[0], "_zero"], ["_h_prev_zero"])
    m.graph.initializer.append(numpy_helper.from_array(np.zeros((), np.float32), "_zero"))
    for n in m.graph.node:
        for i, x in enumerate(n.input):
            if x == squeeze.output[0]:
                n.input[i] = "_h_prev_zero"
    m.graph.node.insert(list(m.graph.node).index(squeeze) + 1, zero)
    proof = ssm.prove_ssm_step(m, "mutant")
    assert _claims(proof)["reads its state"] == FAILED


def test_ssm_step_whose_shallow_layer_reads_a_deeper_state_fails(ssm_art):
    """Layer 0's previous state mixed with layer 1's (h0 + h1 before the mixer): 'layer order' fails."""
    m = onnx.load(str(ssm_art[0] / "step.onnx"))
    split = next(n for n in m.graph.node if n.op_type == "Split" and n.input[0] == "state")
    s0, s1 = split.output[0], split.output[1]
    squeeze0 = next(n for n in m.graph.node if n.op_type == "Squeeze" and n.input[0] == s0)
    h0 = squeeze0.output[0]
    for n in m.graph.node:
        for i, x in enumerate(n.input):
            if x == h0:
                n.input[i] = "_h0_mixed"
    at = list(m.graph.node).index(squeeze0) + 1
    m.graph.node.insert(at, onnx.helper.make_node("Add", [h0, "_h1"], ["_h0_mixed"]))
    m.graph.node.insert(at, onnx.helper.make_node("Squeeze", [s1, squeeze0.input[1]], ["_h1"]))
    proof = ssm.prove_ssm_step(m, "mutant")
    assert _claims(proof)["layer order"] == FAILED
