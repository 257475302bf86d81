"""The exported graphs: ONNX checker, strict shape inference, plain operators, static step
shapes, initializers named and valued as the parameters, and causality of model.onnx."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

from tickformer.errors import ExportError
from tickformer.export.builder import GraphBuilder, check_opset
from tickformer.export.graphs import build_graphs, build_model
from tickformer.model import init_params, preset

# Everything TensorRT 10.x's ONNX parser imports; no Attention (rejected with past K/V).
PLAIN_OPS = {
    "MatMul",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Reshape",
    "Transpose",
    "Where",
    "ReduceMax",
    "ReduceSum",
    "Exp",
    "Max",
    "Equal",
    "Greater",
    "Less",
    "LayerNormalization",
    "Relu",
    "Gather",
    "Concat",
    "Expand",
    "Unsqueeze",
    "Slice",
    "Shape",
    "Identity",
    "Gemm",
    "Softmax",
    "Split",
}


@pytest.mark.parametrize("opset", [17, 18, 21])
@pytest.mark.parametrize("name", ["tiny", "tiny-tokens", "tiny-seq2seq"])
def test_every_graph_passes_checker_and_strict_shape_inference(configs, name, opset):
    cfg = configs[name]
    params = init_params(cfg, 0)
    graphs = build_graphs(params, cfg, 2, opset)
    assert set(graphs) == ({"model", "step"} if cfg.arch == "decoder" else {"encoder", "step"})
    for gname, model in graphs.items():
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        ops = {n.op_type for n in model.graph.node}
        assert ops <= PLAIN_OPS, f"{gname}: unexpected operators {ops - PLAIN_OPS}"
        assert model.opset_import[0].version == opset
        inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        for pname, value in params.items():
            if pname in inits:
                assert np.array_equal(inits[pname], value), f"initializer {pname} differs from the parameter"
        # The full pass names W_q; the step uses the fused, pre-scaled [W_q / sqrt(dh) | W_k | W_v].
        assert ("dec.0.self_attn.w_q" in inits) == (gname == "model")
        assert ("dec.0.self_attn.w_qkv_step" in inits) == (gname == "step")
        if gname == "step":
            dh = cfg.d_head
            w = inits["dec.0.self_attn.w_qkv_step"]  # [D, 3D]
            want = np.concatenate(
                [
                    params["dec.0.self_attn.w_q"] / np.sqrt(dh),
                    params["dec.0.self_attn.w_k"],
                    params["dec.0.self_attn.w_v"],
                ],
                axis=1,
            )
            np.testing.assert_allclose(w, want, rtol=2**-23, atol=0)


@pytest.mark.parametrize("name", ["tiny", "tiny-tokens", "tiny-seq2seq"])
def test_step_and_encoder_shapes_are_static(configs, name):
    cfg = configs[name]
    graphs = build_graphs(init_params(cfg, 0), cfg, 1, 17)
    for gname in set(graphs) - {"model"}:
        for value in list(graphs[gname].graph.input) + list(graphs[gname].graph.output):
            dims = value.type.tensor_type.shape.dim
            assert all(d.HasField("dim_value") for d in dims), (
                f"{gname}.{value.name} has a dynamic dim (TensorRT needs min=opt=max)"
            )


def test_model_has_exactly_one_input_and_one_output(configs):
    for name in ("tiny", "tiny-tokens"):
        cfg = configs[name]
        g = build_model(init_params(cfg, 0), cfg, 1, 17).graph
        want = ("x", "y") if cfg.inputs == "continuous" else ("tokens", "logits")
        assert [i.name for i in g.input] == [want[0]] and [o.name for o in g.output] == [want[1]]
        assert g.input[0].type.tensor_type.shape.dim[1].dim_param == "T"


def test_checker_rejects_a_broken_graph():
    """The check can fail: a MatMul of incompatible shapes is refused with ExportError."""
    g = GraphBuilder("broken", 17)
    x = g.input("x", "float32", [1, 3])
    y = g.op("MatMul", x, g.const(np.zeros((4, 2), np.float32)))
    g.output(y, "y", "float32", [1, 2])
    with pytest.raises(ExportError, match="broken"):
        g.model()


@pytest.mark.parametrize("opset", [16, 22, "17"])
def test_unsupported_opset_is_refused(opset):
    with pytest.raises(ExportError, match="--opset"):
        check_opset(opset)


CAUSAL_CFG = preset("tiny")
CAUSAL_PARAMS = init_params(CAUSAL_CFG, 5)
CAUSAL_SESSION = None


def _causal_session():
    global CAUSAL_SESSION
    if CAUSAL_SESSION is None:
        model = build_model(CAUSAL_PARAMS, CAUSAL_CFG, 1, 17)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        CAUSAL_SESSION = ort.InferenceSession(
            model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"]
        )
    return CAUSAL_SESSION


@settings(max_examples=40)
@given(
    t=st.integers(0, CAUSAL_CFG.max_len - 1),
    length=st.integers(1, CAUSAL_CFG.max_len),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([1e-3, 1.0, 10.0]),
)
def test_model_onnx_is_causal_bitwise(t, length, seed, scale):
    """Perturbing inputs after position t leaves outputs 0..t *bitwise* unchanged under ORT:
    future keys get weight exactly 0 by selection, 0 * v = 0 for finite v, and the single-thread
    kernels sum in a fixed order, so not one bit may differ."""
    t = min(t, length - 1)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-10, 10, size=(1, length, 3)).astype(np.float32)
    x2 = x.copy()
    x2[:, t + 1 :] += (scale * rng.standard_normal(x2[:, t + 1 :].shape)).astype(np.float32)
    x2 = np.clip(x2, -10, 10)
    s = _causal_session()
    y, y2 = s.run(None, {"x": x})[0], s.run(None, {"x": x2})[0]
    assert np.array_equal(y[:, : t + 1], y2[:, : t + 1])
    if length > t + 1 and not np.array_equal(x[:, t + 1 :], x2[:, t + 1 :]):
        assert not np.array_equal(y[:, t + 1 :], y2[:, t + 1 :]), "the perturbation must reach later outputs"


@pytest.mark.parametrize("window", [None, 3])
def test_step_builds_the_live_masks_once_for_every_layer(window):
    """The step graph's stale-row selections read masks made once per graph: every layer's score
    Where (Where(live, s, -inf)) takes the same [N + 1] condition and every layer's V selection
    (Gather(Concat(V_cache, zero row), index), export/blocks.attend_step) the same zero row and
    the same [N] row index, made by one Split of `live` and one Where per step, not one per layer
    (a per-layer copy is work the step repeats L times at every position on an engine that does
    not merge common subexpressions)."""
    cfg = preset("tiny").replace(n_layers=3, window=window)
    assert cfg.n_layers == 3
    step = build_graphs(init_params(cfg, 0), cfg, 1, 17)["step"]
    producers = {o: n for n in step.graph.node for o in n.output}
    v_caches = {f"v_cache.{i}" for i in range(cfg.n_layers)}
    v_pad = [n for n in step.graph.node if n.op_type == "Concat" and n.input[0] in v_caches]
    assert sorted(n.input[0] for n in v_pad) == sorted(v_caches)  # every layer selects its V rows
    assert len({n.input[1] for n in v_pad}) == 1  # ... with one shared zero row
    gathers = [
        n for n in step.graph.node if n.op_type == "Gather" and n.input[0] in {p.output[0] for p in v_pad}
    ]
    assert len(gathers) == cfg.n_layers and len({n.input[1] for n in gathers}) == 1  # ... by one shared index
    index = producers[gathers[0].input[1]]
    assert index.op_type == "Where"
    live = producers[index.input[0]]
    assert live.op_type == "Split"
    splits_of_live = [n for n in step.graph.node if n.op_type == "Split" and n.input[0] == live.input[0]]
    assert splits_of_live == [live]
    score_where = [n for n in step.graph.node if n.op_type == "Where" and n.input[0] == live.input[0]]
    assert len(score_where) == cfg.n_layers  # the score selections read `live` itself, once made
