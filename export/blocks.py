"""Transformer pieces as ONNX subgraphs, mirroring model/layers.py and model/attention.py.

Each function appends nodes to a `GraphBuilder` and returns the name of its result; weights are
referenced by their parameter names (the initializer names). Attention goes through the same
online-softmax state as the numpy operator (Milakov & Gimelshein 2018): a piece of keys is
summarised as (m, l, acc); the step merges the cache piece with the new key (`attend_cached`,
the merge rule specialised to a never-empty second piece); masks act by selection
(`Where(allowed, s, -inf)`), every Exp argument is <= 0, and a query with no selected key
yields exactly zeros. Shapes in comments: B batch, H heads, T/Tq/Tk lengths, dh head width.

Not real-time code: runs once, at export.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from tickformer.model.transformer import ATTN_NAMES

from .builder import GraphBuilder

Params = Mapping[str, np.ndarray]


class Piece(NamedTuple):
    """Names of an online-softmax state in the graph: m, l [B, H, Tq, 1], acc [B, H, Tq, dh]."""

    m: str
    l: str
    acc: str


def param(g: GraphBuilder, params: Params, name: str) -> str:
    return g.const(params[name].astype(np.float32), name)


def linear(g: GraphBuilder, params: Params, x: str, prefix_w: str, prefix_b: str) -> str:
    xw = g.op("MatMul", x, param(g, params, prefix_w))  # [..., n_in] @ [n_in, n_out]
    return g.op("Add", xw, param(g, params, prefix_b))  # [..., n_out]


def layer_norm(g: GraphBuilder, params: Params, x: str, prefix: str, eps: float) -> str:
    """LayerNormalization (opset 17) over the last axis, biased variance, as in Ba et al."""
    return g.op(
        "LayerNormalization", x, param(g, params, f"{prefix}.g"), param(g, params, f"{prefix}.b"), axis=-1, epsilon=float(eps)
    )


def feed_forward(g: GraphBuilder, params: Params, x: str, prefix: str) -> str:
    h = g.op("Relu", linear(g, params, x, f"{prefix}.w1", f"{prefix}.b1"))  # [..., D] -> [..., F]
    return linear(g, params, h, f"{prefix}.w2", f"{prefix}.b2")  # [..., F] -> [..., D]


def split_heads(g: GraphBuilder, x: str, batch: int, n_heads: int, d_head: int) -> str:
    r = g.op("Reshape", x, g.ints([batch, -1, n_heads, d_head]))  # [B, T, D] -> [B, T, H, dh]
    return g.op("Transpose", r, perm=[0, 2, 1, 3])  # [B, H, T, dh]


def merge_heads(g: GraphBuilder, x: str, batch: int, d_model: int) -> str:
    t = g.op("Transpose", x, perm=[0, 2, 1, 3])  # [B, H, T, dh] -> [B, T, H, dh]
    return g.op("Reshape", t, g.ints([batch, -1, d_model]))  # [B, T, D]


def project_heads(g: GraphBuilder, params: Params, x: str, prefix: str, which: str, batch: int, n_heads: int, d_head: int) -> str:
    """x W_which + b_which split into heads: [B, T, D] -> [B, H, T, dh]."""
    return split_heads(g, linear(g, params, x, f"{prefix}.w_{which}", f"{prefix}.b_{which}"), batch, n_heads, d_head)


def scaled_query(g: GraphBuilder, q: str, d_head: int) -> str:
    """q / sqrt(dh), scaled before the product as model.attention.scaled_scores does."""
    return g.op("Mul", q, g.scalar(1.0 / np.sqrt(d_head)))  # [B, H, Tq, dh]


def scores(g: GraphBuilder, q_scaled: str, k: str) -> str:
    kt = g.op("Transpose", k, perm=[0, 1, 3, 2])  # [B, H, Tk, dh] -> [B, H, dh, Tk]
    return g.op("MatMul", q_scaled, kt)  # [B, H, Tq, Tk]


def select(g: GraphBuilder, allowed: str, s: str) -> str:
    """Mask by selection: Where(allowed, s, -inf). Never additive."""
    return g.op("Where", allowed, s, g.scalar(-np.inf))  # [B, H, Tq, Tk]


def safe_max(g: GraphBuilder, m: str) -> str:
    """-inf (no key selected) -> 0 so that s - m stays -inf and Exp gives 0, not NaN."""
    empty = g.op("Equal", m, g.scalar(-np.inf))
    return g.op("Where", empty, g.scalar(0.0), m)


def chunk_state(g: GraphBuilder, s: str, v: str) -> Piece:
    """Summarise one piece of (already selected) scores s [B, H, Tq, Tk] with values v [B, H, Tk, dh]."""
    m = g.reduce("ReduceMax", s, [-1])  # [B, H, Tq, 1]
    p = g.op("Exp", g.op("Sub", s, safe_max(g, m)))  # [B, H, Tq, Tk], arguments <= 0
    l = g.reduce("ReduceSum", p, [-1])  # [B, H, Tq, 1]
    acc = g.op("MatMul", p, v)  # [B, H, Tq, dh]
    return Piece(m, l, acc)


def finalize(g: GraphBuilder, piece: Piece) -> str:
    """acc / l, exactly zero where no key was selected (l == 0)."""
    has_keys = g.op("Greater", piece.l, g.scalar(0.0))  # [B, H, Tq, 1]
    denom = g.op("Where", has_keys, piece.l, g.scalar(1.0))
    out = g.op("Div", piece.acc, denom)  # [B, H, Tq, dh]
    return g.op("Where", has_keys, out, g.scalar(0.0))


def attend(g: GraphBuilder, q: str, k: str, v: str, allowed: str | None, d_head: int) -> str:
    """Full attention over one piece: q [B, H, Tq, dh], k, v [B, H, Tk, dh], allowed bool
    broadcastable to [B, H, Tq, Tk] (None = all) -> [B, H, Tq, dh]."""
    s = scores(g, scaled_query(g, q, d_head), k)  # [B, H, Tq, Tk]
    if allowed is not None:
        s = select(g, allowed, s)
    return finalize(g, chunk_state(g, s, v))


def attend_cached(g: GraphBuilder, s_cache: str, live: str, v_cache: str, s_own: str, v_own: str) -> str:
    """The step's attention: the cache piece (raw scores s_cache [B, H, 1, N], `live` bool [N]
    selecting rows 0..pos-1; values v_cache [B, H, N, dh]) merged with the position's own key
    (score s_own [B, H, 1, 1], value v_own [B, H, 1, dh]).

    Equal to finalize(merge(chunk_state(cache), own)) in exact arithmetic, in fewer nodes: the
    own piece is never empty, so the merged max m = max(max live s_cache, s_own) is finite (no
    -inf guards) and l >= exp(0) = 1 (no l == 0 guard). Stale rows are removed by selection
    twice: at -inf for the max, and to exactly 0 *after* the Exp, so Exp only ever sees finite
    arguments -- the same values-independent work at every position (onnxruntime's Exp takes a
    measurably slower path on -inf: at pos 0, where all N rows are -inf, the step was ~10%
    slower). 0 * v = 0 for the finite cached values, so stale rows cannot leak.
    """
    m = g.op("Max", g.reduce("ReduceMax", select(g, live, s_cache), [-1]), s_own)  # [B, H, 1, 1], finite
    e_cache = g.op("Exp", g.op("Sub", s_cache, m))  # [B, H, 1, N]; stale rows: any value, dropped next
    p_cache = g.op("Where", live, e_cache, g.scalar(0.0))  # [B, H, 1, N], exactly 0 on stale rows
    p_own = g.op("Exp", g.op("Sub", s_own, m))  # [B, H, 1, 1]
    l = g.op("Add", g.reduce("ReduceSum", p_cache, [-1]), p_own)  # [B, H, 1, 1], >= 1
    acc = g.op("Add", g.op("MatMul", p_cache, v_cache), g.op("Mul", p_own, v_own))  # [B, H, 1, dh]
    return g.op("Div", acc, l)


def out_proj(g: GraphBuilder, params: Params, heads: str, prefix: str, batch: int, d_model: int) -> str:
    return linear(g, params, merge_heads(g, heads, batch, d_model), f"{prefix}.w_o", f"{prefix}.b_o")  # [B, T, D]


def attn_param_names(prefix: str) -> list[str]:
    return [f"{prefix}.{n}" for n in ATTN_NAMES]
