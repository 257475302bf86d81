"""fp16 precision policy (`tickformer.export.fp16.to_fp16`) on the real exported graphs.

The fp16 graphs must pass onnx.checker, keep fp32 where the policy says (reductions, Exp,
LayerNorm, the attention core), run under ORT CPU, and stay within the recorded bound
`error_bound(...)` of the numpy reference -- measured at the edge of the input domain
(|x| = 10, the declared domain) and over the full max_len.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from tickformer.artifact.format import step_feeds, step_outputs
from tickformer.errors import ExportError
from tickformer.export import trt_support as ts
from tickformer.export.fp16 import FP32_OPS, UNIT_ROUNDOFF_FP16, error_bound, to_fp16
from tickformer.export.graphs import build_graphs
from tickformer.model.config import preset
from tickformer.model.transformer import forward, init_params

DOMAIN = 10.0  # declared input domain [-10, 10] of the continuous presets


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=["tiny", "control"])
def exported(request):
    cfg = preset(request.param)
    params = init_params(cfg, seed=0)
    graphs = build_graphs(params, cfg, batch=1, opset=17)
    return cfg, params, graphs, {name: to_fp16(g) for name, g in graphs.items()}


def edge_inputs(cfg, rng):
    """Inputs at and inside the edge of the declared domain, full length max_len."""
    shape = (1, cfg.max_len, cfg.d_in)
    alternating = np.where(np.arange(cfg.max_len)[None, :, None] % 2 == 0, DOMAIN, -DOMAIN)
    return {
        "uniform": rng.uniform(-DOMAIN, DOMAIN, shape),
        "plus_edge": np.full(shape, DOMAIN),
        "minus_edge": np.full(shape, -DOMAIN),
        "alternating": np.broadcast_to(alternating, shape),
    }


def normwise(a, ref):
    return float(np.abs(a - ref).max() / np.abs(ref).max())


def types_of(model):
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    g = inferred.graph
    types = {
        vi.name: vi.type.tensor_type.elem_type for vi in list(g.input) + list(g.output) + list(g.value_info)
    }
    types.update({i.name: i.data_type for i in g.initializer})
    return inferred, types


def test_policy_is_explicit_in_the_graph(exported):
    cfg, _, graphs, fp16 = exported
    for name, m16 in fp16.items():
        inferred, types = types_of(m16)
        # I/O types unchanged.
        assert [(v.name, v.type) for v in m16.graph.input] == [
            (v.name, v.type) for v in graphs[name].graph.input
        ]
        assert [(v.name, v.type) for v in m16.graph.output] == [
            (v.name, v.type) for v in graphs[name].graph.output
        ]
        consts = {i.name for i in m16.graph.initializer}
        n_half_matmul = 0
        for node in inferred.graph.node:
            floats = [
                types[n]
                for n in list(node.input) + list(node.output)
                if n and types.get(n) in (T.FLOAT, T.FLOAT16)
            ]
            if node.op_type in FP32_OPS:
                assert set(floats) == {T.FLOAT}, f"{node.op_type} {node.name} must run fp32"
            if node.op_type in ("MatMul", "Gemm"):
                weight = any(n in consts for n in node.input)
                assert set(floats) == ({T.FLOAT16} if weight else {T.FLOAT}), node.name
                n_half_matmul += weight
            if node.op_type not in ("Cast",) and floats:
                assert len(set(floats)) == 1, (
                    f"mixed float types at {node.op_type} {node.name}: explicit Casts required"
                )
        # The residual stream stays fp32: no fp16 Gemm adds an activation (C) into its product.
        for node in m16.graph.node:
            if node.op_type == "Gemm" and len(node.input) == 3 and node.input[2]:
                assert node.input[2] in consts, f"{node.name}: residual sum inside an fp16 Gemm"
        assert n_half_matmul >= 5 * cfg.n_layers  # per layer: fused QKV, W_o, W_1, W_2 (+ in/out projections)
        assert any(i.data_type == T.FLOAT16 for i in m16.graph.initializer)


def test_fp16_full_pass_within_recorded_bound_of_numpy(exported):
    cfg, params, graphs, fp16 = exported
    s32, s16 = session(graphs["model"]), session(fp16["model"])
    bound = error_bound(n_layers=cfg.n_layers)
    worst = 0.0
    for label, x in edge_inputs(cfg, np.random.default_rng(7)).items():
        x = np.ascontiguousarray(x, dtype=np.float32)
        ref = forward(params, cfg, x)  # numpy reference [1, N, d_out]
        y32 = s32.run(None, {"x": x})[0]
        y16 = s16.run(None, {"x": x})[0]
        assert np.isfinite(y16).all(), label
        assert normwise(y32, ref) < 1e-5, label  # the fp32 graph is the reference's twin
        err = normwise(y16, ref)
        assert err <= bound, f"{label}: fp16 error {err:.3g} above the recorded bound {bound:.3g}"
        worst = max(worst, err)
    # Not vacuous: the fp16 graph really rounds (error well above fp32 level, at least ~u/10).
    assert worst > UNIT_ROUNDOFF_FP16 / 10


def test_fp16_step_graph_matches_numpy_over_every_position(exported):
    cfg, params, graphs, fp16 = exported
    s16 = session(fp16["step"])
    x = np.random.default_rng(3).uniform(-DOMAIN, DOMAIN, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    ref = forward(params, cfg, x)  # [1, N, d_out]
    shape = [cfg.n_layers, 1, cfg.n_heads, cfg.max_len, cfg.d_head]
    k_cache, v_cache = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    out = np.empty_like(ref)
    for pos in range(cfg.max_len):
        feeds = step_feeds(cfg, x[:, pos : pos + 1], pos, k_cache, v_cache)
        y, k_new, v_new = step_outputs(cfg, s16.run(None, feeds))
        k_cache[:, :, :, pos] = k_new[:, :, :, 0]
        v_cache[:, :, :, pos] = v_new[:, :, :, 0]
        out[:, pos] = y[:, 0]
    assert normwise(out, ref) <= error_bound(n_layers=cfg.n_layers)


def test_fp16_graphs_pass_the_tensorrt_lint(exported):
    _, _, _, fp16 = exported
    for name, m16 in fp16.items():
        role = "step" if name == "step" else "full"
        for target in ("trt-10.3", "trt-10", "trt-11"):
            findings = ts.check_model(m16, ts.target(target), role=role, graph=f"{name}.onnx")
            assert [f.line() for f in findings if f.severity == "error"] == []
            assert "strong-typing" not in {f.code for f in findings}


def test_encoder_decoder_fp16_close_to_fp32():
    cfg = preset("tiny-seq2seq")
    params = init_params(cfg, seed=1)
    graphs = build_graphs(params, cfg, batch=1, opset=17)
    rng = np.random.default_rng(0)
    src = rng.integers(0, cfg.vocab_size, (1, cfg.max_len), dtype=np.int64)
    valid = np.arange(cfg.max_len)[None, :] < cfg.max_len - 3  # last 3 positions padded
    feeds = {"src": src, "src_valid": valid}
    k32, v32 = session(graphs["encoder"]).run(None, feeds)
    k16, v16 = session(to_fp16(graphs["encoder"])).run(None, feeds)
    bound = error_bound(n_layers=0, n_enc_layers=cfg.n_enc_layers)
    assert normwise(k16, k32) <= bound and normwise(v16, v32) <= bound


def test_weight_beyond_fp16_range_is_refused():
    w = numpy_helper.from_array(np.full((2, 2), 1e6, dtype=np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1, 2])],
        initializer=[w],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ExportError, match="65504"):
        to_fp16(m)


def test_input_model_is_not_modified(exported):
    _, _, graphs, _ = exported
    before = graphs["model"].SerializeToString()
    to_fp16(graphs["model"])
    assert graphs["model"].SerializeToString() == before


@pytest.mark.parametrize("preset_name", ["tiny", "tiny-seq2seq"])
def test_measure_error_records_error_and_bound(preset_name):
    from tickformer.export.fp16 import measure_error

    cfg = preset(preset_name)
    params = init_params(cfg, seed=2)
    graphs = build_graphs(params, cfg, batch=1, opset=17)
    record = measure_error(
        graphs, {k: to_fp16(v) for k, v in graphs.items()}, params, cfg, domain=(-DOMAIN, DOMAIN)
    )
    assert record["within_bound"] and 0 < record["worst"] <= record["bound"]
    assert record["worst"] == max(record["normwise"].values())
    import json

    json.dumps(record)  # manifest-ready
