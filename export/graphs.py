"""The exported graphs: full-sequence `model`, cached `step`, and `encoder` (encoder-decoder).

Written from the numpy parameters with `GraphBuilder` (no tracing), computing what
model/transformer.py computes (Vaswani et al. 2017, post-LN). The I/O contract of every graph is
defined in `tickformer.artifact.format` (documented in docs/artifact_format.md); in short
(B batch, N max_len, L decoder layers, i < L):

    model    x [B, T, d_in] -> y [B, T, d_out]   (tokens [B, T] -> logits [B, T, V]); T <= N
    step     x [B, d_in] (tokens [B]), pos [1], k_cache.i [B, H, dh, N], v_cache.i [B, H, N, dh]
             -> y [B, d_out] (logits [B, V]), k_new.i, v_new.i [B, H, 1, dh]
             (+ cross_k.i, cross_v.i [B, H, N, dh], src_valid [B, N] for encoder-decoder)
    encoder  src [B, N], src_valid [B, N] -> cross_k, cross_v [L, B, H, N, dh]

The step is the real-time graph and is shaped for ONNX Runtime's per-node cost, which dominates
at small d_model (benchmarks/ANALYSIS.md): activations are 2-D [B, D] (a 3-D MatMul + Add
becomes Reshape-Gemm-Reshape), the three projections are one Gemm, every layer's cache is its
own input, read in place (a stacked [L, ...] input costs a copy of each layer's cache per step),
and K is stored transposed [dh, N] so the score product reads it as it lies. It attends over the
cache -- whose stale rows (key_index >= pos) are selected out of the scores (weight exactly 0)
and of V (so whatever they hold, inf and NaN included, cannot leak) -- and the new key itself,
in one Softmax (blocks.attend_step). Hosts
keep the caches stacked over layers and bind layer i's slice (runtime/backends/layout.py).
Every shape of `step` and `encoder` is static (TensorRT: min = opt = max).

Windowed models (config.window = W, docs/streaming.md): no positional table; `model` takes any T
and selects keys with contracts.masking.window_allowed and adds the relative-position bias
rel_bias[h, window_distance(i, j, W)], both built by calling the contract functions on index
tensors (export/expr.py); `step` keeps ring caches of W rows and selects slot s by
contracts.ring_buffer.slot_read(pos, s, W), its bias column window_distance(pos, s, W), also by
calling them on the pos input: the graph holds the proven slot arithmetic, not a copy of it.

Not real-time code: runs once, at export.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import onnx

from tickformer.artifact import format as fmt
from tickformer.artifact.format import cache_rows, cache_shape, io_names, out_width, step_signature
from tickformer.contracts.masking import cache_row_live, causal_allowed, window_allowed
from tickformer.contracts.ring_buffer import slot_read, window_distance
from tickformer.model import names
from tickformer.model.config import Config
from tickformer.model.layers import positional_encoding

from . import blocks as b
from .blocks import Params
from .builder import GraphBuilder
from .expr import Expr


def _embed(g: GraphBuilder, params: Params, config: Config, x: str, pe_rows: str | None) -> str:
    """Token or continuous embedding plus the given positional rows [T, D] (None: windowed models,
    no positions) -> [B, T, D]."""
    if config.inputs == "tokens":
        e = g.op("Gather", b.param(g, params, names.TOK_EMBED), x, axis=0)  # [B, T] -> [B, T, D]
        h = g.op("Mul", e, g.scalar(np.sqrt(config.d_model)))
    else:
        h = b.linear(g, params, x, names.IN_PROJ)  # [B, T, d_in] -> [B, T, D]
    return h if pe_rows is None else g.op("Add", h, pe_rows)  # [B, T, D]


def _project_out(g: GraphBuilder, params: Params, config: Config, h: str) -> str:
    if config.inputs == "tokens":
        et = g.op("Transpose", b.param(g, params, names.TOK_EMBED), perm=[1, 0])  # [V, D] -> [D, V]
        return g.op("MatMul", h, et)  # [B, T, V] (tied)
    return b.linear(g, params, h, names.OUT_PROJ)  # [B, T, d_out]


def _pe(g: GraphBuilder, config: Config) -> str:
    return g.const(positional_encoding(config.max_len, config.d_model), "pe")  # [N, D]


def _ffn_block(g: GraphBuilder, params: Params, config: Config, h: str, layer: names.Layer) -> str:
    ff = b.feed_forward(g, params, h, layer.ffn)
    return b.layer_norm(g, params, g.op("Add", h, ff), layer.ffn_norm, config.ln_eps)


def _self_attn_full(
    g: GraphBuilder,
    params: Params,
    config: Config,
    h: str,
    layer: names.Layer,
    batch: int,
    allowed: str | None,
    distance: str | None = None,
) -> str:
    """Post-LN self-attention sublayer over the whole sequence (distance [T, T]: windowed, the
    bias column of each score)."""
    nh, dh = config.n_heads, config.d_head
    q, k, v = (
        b.project_heads(g, params, h, layer.self_attn, w, batch, nh, dh) for w in "qkv"
    )  # [B, H, T, dh]
    bias = None
    if layer.self_attn_position is not None and distance is not None:
        table = b.param(g, params, layer.self_attn_position["rel_bias"])  # [H, W]
        bias = g.op("Gather", table, distance, axis=1)  # [H, T, T], broadcast over B
    heads = b.attend(g, q, k, v, allowed, dh, bias)  # [B, H, T, dh]
    attn = b.out_proj(g, params, heads, layer.self_attn, batch, config.d_model)  # [B, T, D]
    return b.layer_norm(g, params, g.op("Add", h, attn), layer.self_attn_norm, config.ln_eps)


def build_model(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """Decoder-only full pass: exactly one input, one output, T symbolic (1..max_len; windowed: any T)."""
    if config.arch != "decoder":
        raise ValueError("build_model is for decoder-only configs; encoder-decoder exports encoder + step")
    g = GraphBuilder("tickformer_model", opset)
    in_name, out_name = io_names(config)
    if config.inputs == "tokens":
        x = g.input(in_name, "int64", [batch, "T"])
    else:
        x = g.input(in_name, "float32", [batch, "T", config.d_in])
    t = g.op("Shape", x, start=1, end=2)  # [1] = T
    zero = g.ints([0])
    distance = None
    if config.window is None:
        pe: str | None = g.op("Slice", _pe(g, config), zero, t, zero)  # [T, D]
        index = np.arange(config.max_len)  # [N]
        causal = g.const(
            causal_allowed(index[:, None], index[None, :], 0), "causal"
        )  # [N, N] j <= i (called)
        allowed = g.op(
            "Slice", causal, g.ints([0, 0]), g.op("Concat", t, t, axis=0), g.ints([0, 1])
        )  # [T, T]
    else:
        pe = None  # no absolute positions
        index = g.op(
            "Range",
            g.const(np.asarray(0, np.int64)),
            g.op("Squeeze", t, zero),
            g.const(np.asarray(1, np.int64)),
        )
        i = Expr(g, g.op("Unsqueeze", index, g.ints([1])))  # [T, 1] query positions
        j = Expr(g, g.op("Unsqueeze", index, zero))  # [1, T] key positions
        allowed = window_allowed(i, j, config.window).name  # [T, T]: i - W < j <= i (the contract, called)
        distance = window_distance(i, j, config.window).name  # [T, T]: (i - j) mod W
    h = _embed(g, params, config, x, pe)  # [B, T, D]
    for layer in names.decoder_layers(config):
        h = _self_attn_full(g, params, config, h, layer, batch, allowed, distance)
        h = _ffn_block(g, params, config, h, layer)
    y = _project_out(g, params, config, h)
    g.output(y, out_name, "float32", [batch, "T", out_width(config)])
    return g.model()


class _Shifted(NamedTuple):
    """A residual-stream tensor [B, D] held as the true activation plus a constant shift [D]."""

    name: str
    shift: np.ndarray  # float64 [D]


def _f64(params: Params, name: str) -> np.ndarray:
    return params[name].astype(np.float64)


def _bias_for(g: GraphBuilder, params: Params, h: _Shifted, w: str, bias: str) -> str:
    """Bias of a Gemm reading h: b - shift @ W (float64, one rounding), so that it computes h_true W + b."""
    folded = _f64(params, bias) - h.shift @ _f64(params, w)
    return g.const(folded.astype(np.float32), f"{bias}_step" if h.shift.any() else bias)


def _residual(g: GraphBuilder, params: Params, h: _Shifted, a: str, w: str) -> str:
    """h_true + a W + b as ONE Gemm(a, W, C=h): h carries the projection's bias b as its shift."""
    return g.op("Gemm", a, b.param(g, params, w), h.name)


def _norm(
    g: GraphBuilder, params: Params, config: Config, r: str, norm: names.Group, shift: np.ndarray
) -> _Shifted:
    """LayerNorm whose beta also adds `shift` (the bias of the next residual projection)."""
    beta = _f64(params, norm["b"]) + shift
    name = g.op(
        "LayerNormalization",
        r,
        b.param(g, params, norm["g"]),
        g.const(beta.astype(np.float32), norm.derived("b_step")),
        axis=-1,
        epsilon=float(config.ln_eps),
    )
    return _Shifted(name, shift)


def _step_embed(
    g: GraphBuilder, params: Params, config: Config, x: str, pos: str, shift: np.ndarray
) -> _Shifted:
    """x [B, d_in] (tokens [B]) at position pos -> [B, D] (+ shift, added to the positional table;
    windowed models: no table, the shift is a constant row)."""
    if config.window is not None:
        if config.inputs == "tokens":
            e = g.op("Gather", b.param(g, params, names.TOK_EMBED), x, axis=0)  # [B, D]
            h = g.op("Mul", e, g.scalar(np.sqrt(config.d_model)))
            return _Shifted(g.op("Add", h, g.const(shift.astype(np.float32), "embed_shift_step")), shift)
        row = (_f64(params, names.IN_PROJ["b"]) + shift).astype(np.float32)  # [D] b_in + shift
        gemm = g.op("Gemm", x, b.param(g, params, names.IN_PROJ["w"]), g.const(row, "in_bias_step"))
        return _Shifted(gemm, shift)
    pe = positional_encoding(config.max_len, config.d_model).astype(np.float64) + shift  # [N, D]
    if config.inputs == "tokens":
        e = g.op("Gather", b.param(g, params, names.TOK_EMBED), x, axis=0)  # [B, D]
        h = g.op("Mul", e, g.scalar(np.sqrt(config.d_model)))
        return _Shifted(
            g.op("Add", h, g.op("Gather", g.const(pe.astype(np.float32), "pe_step"), pos, axis=0)), shift
        )
    # The input bias goes into the positional table too: one Gemm x W_in + (b_in + pe[pos] + shift).
    table = (pe + _f64(params, names.IN_PROJ["b"])).astype(np.float32)
    return _Shifted(
        g.op(
            "Gemm",
            x,
            b.param(g, params, names.IN_PROJ["w"]),
            g.op("Gather", g.const(table, "pe_plus_in_bias_step"), pos, axis=0),
        ),
        shift,
    )


def _step_bias(
    g: GraphBuilder, params: Params, position: names.Group, distance: str, n_heads: int
) -> tuple[str, str]:
    """The step's relative-position terms: rel_bias[:, distance] for the W cache slots -> [1, H, 1, W]
    and column 0 for the own key -> [1, H, 1, 1] (a constant)."""
    table = b.param(g, params, position["rel_bias"])  # [H, W]
    cache = g.op("Reshape", g.op("Gather", table, distance, axis=1), g.ints([1, n_heads, 1, -1]))
    own = params[position["rel_bias"]][:, 0].reshape(1, n_heads, 1, 1).astype(np.float32)
    return cache, g.const(own, position.derived("rel_bias_own_step"))


def build_step(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """One position over static per-layer KV caches of max_len rows (windowed: ring caches of W
    rows, module docstring); all shapes static.

    Bias folding (exact in real arithmetic, one float32 rounding apart): every residual sum
    h + a W + b is one Gemm(a, W, C=h) because the LayerNorm (or embedding) that produced h
    added b through its beta; each other reader of h subtracts b @ W through its own bias
    (`_bias_for`, blocks.qkv_step). Two fewer ORT nodes per sublayer: ONNX Runtime's per-node
    cost dominates the step at small d_model (benchmarks/ANALYSIS.md)."""
    g = GraphBuilder("tickformer_step", opset)
    sig = step_signature(config, batch)
    for name, (dtype, shape) in sig["inputs"].items():
        g.input(name, dtype, shape)
    in_name, out_name = io_names(config)
    nh, dh, n, d = config.n_heads, config.d_head, cache_rows(config), config.d_model
    distance = None
    if config.window is None:
        key_index = np.arange(n + 1, dtype=np.int64)
        key_index[n] = -1  # the own key: -1 < pos always, so it is always live
        # [N + 1]: rows 0..pos-1, then own -- the contract's predicate, called on graph expressions
        live = cache_row_live(Expr(g, g.const(key_index, "key_index")), Expr(g, "pos")).name
    else:
        pos, slot = Expr(g, "pos"), Expr(g, g.const(np.arange(n, dtype=np.int64), "ring_slot"))  # [1], [W]
        read = slot_read(
            pos, slot, config.window
        ).name  # [W]: the slots of the window (R7), the contract called
        distance = window_distance(pos, slot, config.window).name  # [W]: each slot's distance (R5)
        live = g.op("Concat", read, g.const(np.ones(1, np.bool_), "own_key_live"), axis=0)  # [W + 1]
    v_rows = b.cache_rows_live(g, live, n, (batch, nh, n, dh))  # the V-row selection, shared by every layer
    cross = config.arch == "encoder-decoder"
    if cross:
        src_allowed = g.op("Reshape", "src_valid", g.ints([batch, 1, 1, n]))  # [B, 1, 1, N]

    def merged(heads: str) -> str:
        return g.op("Reshape", heads, g.ints([batch, d]))  # [B, H, 1, dh] -> [B, D] (head-major)

    layers = names.decoder_layers(config)
    h = _step_embed(g, params, config, in_name, "pos", _f64(params, layers[0].self_attn["b_o"]))
    for i, layer in enumerate(layers):
        sa, ffn = layer.self_attn, layer.ffn
        q, k_new, v_new = b.qkv_step(
            g, params, h.name, h.shift, sa, batch, nh, dh, (f"q_{i}", fmt.k_new(i), fmt.v_new(i))
        )
        bias = None
        if layer.self_attn_position is not None and distance is not None:
            bias = _step_bias(g, params, layer.self_attn_position, distance, nh)
        heads = b.attend_step(
            g, q, fmt.k_cache(i), fmt.v_cache(i), k_new, v_new, live, v_rows, n, bias
        )  # [B, H, 1, dh]
        r = _residual(g, params, h, merged(heads), sa["w_o"])  # h + attn W_o + b_o
        if layer.cross_attn is not None and layer.cross_attn_norm is not None:
            ca = layer.cross_attn
            h = _norm(g, params, config, r, layer.self_attn_norm, _f64(params, ca["b_o"]))
            cq = g.op(
                "Gemm", h.name, b.param(g, params, ca["w_q"]), _bias_for(g, params, h, ca["w_q"], ca["b_q"])
            )
            q_heads = g.op("Reshape", cq, g.ints([batch, nh, 1, dh]))
            heads = b.attend(g, q_heads, fmt.cross_k(i), fmt.cross_v(i), src_allowed, dh)
            r = _residual(g, params, h, merged(heads), ca["w_o"])
            norm_before_ffn = layer.cross_attn_norm
        else:
            norm_before_ffn = layer.self_attn_norm
        h = _norm(g, params, config, r, norm_before_ffn, _f64(params, ffn["b2"]))
        hidden = g.op(
            "Relu",
            g.op(
                "Gemm", h.name, b.param(g, params, ffn["w1"]), _bias_for(g, params, h, ffn["w1"], ffn["b1"])
            ),
        )
        r = _residual(g, params, h, hidden, ffn["w2"])  # h + relu(.) W_2 + b_2
        last = i == len(layers) - 1
        next_shift = np.zeros(d) if last else _f64(params, layers[i + 1].self_attn["b_o"])
        h = _norm(g, params, config, r, layer.ffn_norm, next_shift)
    if config.inputs == "tokens":
        y = g.op(
            "Gemm", h.name, b.param(g, params, names.TOK_EMBED), transB=1
        )  # [B, V] (tied; the last shift is 0)
    else:
        out = names.OUT_PROJ
        y = g.op("Gemm", h.name, b.param(g, params, out["w"]), b.param(g, params, out["b"]))  # [B, d_out]
    for name, (dtype, shape) in sig["outputs"].items():
        g.output(y if name == out_name else name, name, dtype, shape)
    return g.model()


def _stack(g: GraphBuilder, rows: list[str]) -> str:
    return rows[0] if len(rows) == 1 else g.op("Concat", *rows, axis=0)  # [L, B, H, ., dh]


def build_encoder(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """Encoder stack over a padded source, then every decoder layer's cross-attention K/V."""
    if config.arch != "encoder-decoder":
        raise ValueError("build_encoder is for encoder-decoder configs")
    g = GraphBuilder("tickformer_encoder", opset)
    n = config.max_len
    src = g.input("src", "int64", [batch, n])
    src_valid = g.input("src_valid", "bool", [batch, n])
    allowed = g.op("Reshape", src_valid, g.ints([batch, 1, 1, n]))  # [B, 1, 1, N] over keys
    h = _embed(g, params, config, src, _pe(g, config))  # [B, N, D]
    for enc_layer in names.encoder_layers(config):
        h = _self_attn_full(g, params, config, h, enc_layer, batch, allowed)
        h = _ffn_block(g, params, config, h, enc_layer)
    ks: list[str] = []
    vs: list[str] = []
    for dec_layer in names.decoder_layers(config):
        assert dec_layer.cross_attn is not None  # encoder-decoder: every decoder layer has one
        for which, out in (("k", ks), ("v", vs)):
            kv = b.project_heads(
                g, params, h, dec_layer.cross_attn, which, batch, config.n_heads, config.d_head
            )  # [B, H, N, dh]
            out.append(g.op("Unsqueeze", kv, g.ints([0])))  # [1, B, H, N, dh]
    g.output(_stack(g, ks), "cross_k", "float32", cache_shape(config, batch))
    g.output(_stack(g, vs), "cross_v", "float32", cache_shape(config, batch))
    return g.model()


def build_graphs(params: Params, config: Config, batch: int, opset: int) -> dict[str, onnx.ModelProto]:
    """Every graph of the artifact, by name: decoder -> model, step; encoder-decoder -> encoder, step."""
    if config.block == "ssm":  # the "ssm" kind: its own module
        from .ssm_graphs import build_ssm_graphs

        return build_ssm_graphs(params, config, batch, opset)
    if config.arch == "decoder":
        return {
            "model": build_model(params, config, batch, opset),
            "step": build_step(params, config, batch, opset),
        }
    return {
        "encoder": build_encoder(params, config, batch, opset),
        "step": build_step(params, config, batch, opset),
    }
