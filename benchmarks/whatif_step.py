"""What-if: a leaner static-cache step graph with step.onnx's exact I/O, to size a fix.

Profiling (benchmarks/ANALYSIS.md) shows tickformer's step.onnx at d_model 64 is dominated by
ONNX Runtime's per-node dispatch cost (~133 nodes after ORT's optimiser), not by arithmetic. This
graph computes the same function with fewer nodes, to measure how much a rewrite of
export/graphs.py `build_step` would buy before anyone does it:

- activations stay 2-D [1, D] (B = 1) so every projection is one Gemm/MatMul+Add with no
  Reshape pair around it (ORT inserts Reshape-Gemm-Reshape for 3-D MatMul+Add);
- per layer, one softmax over Concat(cache scores [H, 1, N], own score [H, 1, 1]), masked by
  selection as step.onnx does (Where(key_index < pos) at -inf for the max, and to exactly 0
  after the Exp, so Exp never sees -inf: ORT's Exp is ~16x slower on -inf, see diagnose.py);
  the own key is always live, so the max is finite and the normaliser >= 1. Mathematically the
  same as merging the two online-softmax pieces (cache, own key); within fp32 roundoff.

Same inputs/outputs as step.onnx (docs/artifact_format.md): x [1, 1, d_in], pos [1],
k_cache/v_cache [L, 1, H, N, dh] -> y [1, 1, d_out], k_new/v_new [L, 1, H, 1, dh].
Batch 1, decoder-only, continuous inputs only. Benchmark-side; not part of the package.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from growing_step import OPSET, _G
from tickformer.model import Config
from tickformer.model.layers import positional_encoding


def build_lean_step(params: dict[str, np.ndarray], config: Config, *, per_layer_cache: bool = False) -> onnx.ModelProto:
    """per_layer_cache=False: step.onnx's exact I/O (stacked caches [L, 1, H, N, dh]).
    per_layer_cache=True: inputs k_cache.{i} / v_cache.{i} [H, N, dh] per layer instead, so no
    Gather/Split copies a layer's cache out of the stack every step (a different I/O: bare ORT
    only, it cannot run through tickformer's Session)."""
    if config.arch != "decoder" or config.inputs != "continuous":
        raise ValueError("the what-if step covers decoder-only continuous models")
    g = _G()
    d, h, dh, n, layers = config.d_model, config.n_heads, config.d_head, config.max_len, config.n_layers
    w = {name: g.const(value, name) for name, value in params.items()}
    pe = g.const(positional_encoding(n, d), "pe")  # [N, D]
    key_index = g.const(np.arange(n, dtype=np.int64), "key_index")  # [N]
    minus_inf = g.const(np.array(-np.inf, dtype=np.float32))
    scale = g.const(np.array(1.0 / np.sqrt(dh), dtype=np.float32))
    to_heads = g.const(np.array([h, 1, dh], dtype=np.int64))  # [1, D] -> [H, 1, dh]
    to_model = g.const(np.array([1, d], dtype=np.int64))
    to_row = g.const(np.array([1, 1, h, 1, dh], dtype=np.int64))  # [H, 1, dh] -> [1, 1, H, 1, dh]

    def linear(x: str, prefix: str, wn: str, bn: str) -> str:
        return g.op("Add", g.op("MatMul", x, w[f"{prefix}.{wn}"]), w[f"{prefix}.{bn}"])  # [1, n_in] -> [1, n_out]

    def norm(x: str, prefix: str) -> str:
        return g.op("LayerNormalization", x, w[f"{prefix}.g"], w[f"{prefix}.b"], axis=-1, epsilon=config.ln_eps)

    x2 = g.op("Reshape", "x", g.const(np.array([1, config.d_in], dtype=np.int64)))  # [1, d_in]
    x = g.op("Add", linear(x2, "in_proj", "w", "b"), g.op("Gather", pe, "pos", axis=0))  # [1, D]
    live = g.op("Less", key_index, "pos")  # [N]
    live_own = g.op("Concat", live, g.const(np.array([True])), axis=0)  # [N+1]: the own key is always live
    zero = g.const(np.array(0.0, dtype=np.float32))
    axes_last = g.const(np.array([-1], dtype=np.int64))
    ks, vs = [], []
    for i in range(layers):
        a = f"dec.{i}.self_attn"
        q = g.op("Mul", g.op("Reshape", linear(x, a, "w_q", "b_q"), to_heads), scale)  # [H, 1, dh]
        k = g.op("Reshape", linear(x, a, "w_k", "b_k"), to_heads)  # [H, 1, dh]
        v = g.op("Reshape", linear(x, a, "w_v", "b_v"), to_heads)
        layer = g.const(np.array([i, 0], dtype=np.int64))
        if per_layer_cache:
            kc, vc = f"k_cache.{i}", f"v_cache.{i}"  # [H, N, dh], read in place
        else:
            kc = g.op("GatherND", "k_cache", g.const(np.array([[i, 0]], dtype=np.int64)))  # [1, H, N, dh]: a copy
            vc = g.op("GatherND", "v_cache", g.const(np.array([[i, 0]], dtype=np.int64)))
            kc = g.op("Squeeze", kc, g.const(np.array([0], dtype=np.int64)))  # [H, N, dh]
            vc = g.op("Squeeze", vc, g.const(np.array([0], dtype=np.int64)))
        del layer
        s_cache = g.op("MatMul", q, g.op("Transpose", kc, perm=[0, 2, 1]))  # [H, 1, N], stale rows too
        s_own = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 2, 1]))  # [H, 1, 1]
        s_all = g.op("Concat", s_cache, s_own, axis=-1)  # [H, 1, N+1]
        m = g.op("ReduceMax", g.op("Where", live_own, s_all, minus_inf), axes=[-1], keepdims=1)  # [H, 1, 1], finite
        p = g.op("Where", live_own, g.op("Exp", g.op("Sub", s_all, m)), zero)  # [H, 1, N+1]; Exp sees no -inf
        att = g.op("Div", g.op("MatMul", p, g.op("Concat", vc, v, axis=1)), g.op("ReduceSum", p, axes_last, keepdims=1))  # [H, 1, dh]
        att = g.op("Reshape", g.op("Transpose", att, perm=[1, 0, 2]), to_model)  # [1, D]
        x = norm(g.op("Add", x, linear(att, a, "w_o", "b_o")), f"dec.{i}.ln1")
        f = f"dec.{i}.ffn"
        x = norm(g.op("Add", x, linear(g.op("Relu", linear(x, f, "w1", "b1")), f, "w2", "b2")), f"dec.{i}.ln2")
        ks.append(g.op("Reshape", k, to_row))  # [1, 1, H, 1, dh]
        vs.append(g.op("Reshape", v, to_row))
    y = g.op("Add", g.op("MatMul", x, w["out_proj.w"]), w["out_proj.b"])  # [1, d_out]
    g.nodes.append(helper.make_node("Reshape", [y, g.const(np.array([1, 1, config.d_out], dtype=np.int64))], ["y"]))
    g.nodes.append(helper.make_node("Concat", ks, ["k_new"], axis=0) if layers > 1 else helper.make_node("Identity", ks, ["k_new"]))
    g.nodes.append(helper.make_node("Concat", vs, ["v_new"], axis=0) if layers > 1 else helper.make_node("Identity", vs, ["v_new"]))
    row = [layers, 1, h, 1, dh]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, config.d_in]),
        helper.make_tensor_value_info("pos", TensorProto.INT64, [1]),
    ]
    if per_layer_cache:
        for i in range(layers):
            inputs.append(helper.make_tensor_value_info(f"k_cache.{i}", TensorProto.FLOAT, [h, n, dh]))
            inputs.append(helper.make_tensor_value_info(f"v_cache.{i}", TensorProto.FLOAT, [h, n, dh]))
    else:
        inputs.append(helper.make_tensor_value_info("k_cache", TensorProto.FLOAT, [layers, 1, h, n, dh]))
        inputs.append(helper.make_tensor_value_info("v_cache", TensorProto.FLOAT, [layers, 1, h, n, dh]))
    graph = helper.make_graph(
        g.nodes,
        "lean_step",
        inputs,
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, config.d_out]),
            helper.make_tensor_value_info("k_new", TensorProto.FLOAT, row),
            helper.make_tensor_value_info("v_new", TensorProto.FLOAT, row),
        ],
        initializer=g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tickformer-benchmarks", ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model
