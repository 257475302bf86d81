"""Transformer pieces as ONNX subgraphs, mirroring model/layers.py and model/attention.py.

Each function appends nodes to a `GraphBuilder` and returns the name of its result; weights are
referenced by their parameter names (the initializer names). Attention goes through the same
online-softmax state as the numpy operator (Milakov & Gimelshein 2018): a piece of keys is
summarised as (m, l, acc); masks act by selection (`Where(allowed, s, -inf)`), every Exp
argument is <= 0, and a query with no selected key yields exactly zeros. The step
(`attend_step`) has one piece that is never empty (its own key), so it uses one Softmax over the
cache's scores and its own. Shapes in comments: B batch, H heads, T/Tq/Tk lengths, dh head width.

Not real-time code: runs once, at export.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

import numpy as np

from tickformer.model.names import Group

from .builder import GraphBuilder

Params = Mapping[str, np.ndarray]


class Piece(NamedTuple):
    """Names of an online-softmax state in the graph: m, l [B, H, Tq, 1], acc [B, H, Tq, dh]."""

    m: str
    l: str
    acc: str


def param(g: GraphBuilder, params: Params, name: str) -> str:
    return g.const(params[name].astype(np.float32), name)


def linear(g: GraphBuilder, params: Params, x: str, group: Group, w: str = "w", b: str = "b") -> str:
    """x W + b with the group's weights `w` and `b` (leaf names)."""
    xw = g.op("MatMul", x, param(g, params, group[w]))  # [..., n_in] @ [n_in, n_out]
    return g.op("Add", xw, param(g, params, group[b]))  # [..., n_out]


def layer_norm(g: GraphBuilder, params: Params, x: str, norm: Group, eps: float) -> str:
    """LayerNormalization (opset 17) over the last axis, biased variance, as in Ba et al."""
    return g.op(
        "LayerNormalization",
        x,
        param(g, params, norm["g"]),
        param(g, params, norm["b"]),
        axis=-1,
        epsilon=float(eps),
    )


def feed_forward(g: GraphBuilder, params: Params, x: str, ffn: Group) -> str:
    h = g.op("Relu", linear(g, params, x, ffn, "w1", "b1"))  # [..., D] -> [..., F]
    return linear(g, params, h, ffn, "w2", "b2")  # [..., F] -> [..., D]


def split_heads(g: GraphBuilder, x: str, batch: int, n_heads: int, d_head: int) -> str:
    r = g.op("Reshape", x, g.ints([batch, -1, n_heads, d_head]))  # [B, T, D] -> [B, T, H, dh]
    return g.op("Transpose", r, perm=[0, 2, 1, 3])  # [B, H, T, dh]


def merge_heads(g: GraphBuilder, x: str, batch: int, d_model: int) -> str:
    t = g.op("Transpose", x, perm=[0, 2, 1, 3])  # [B, H, T, dh] -> [B, T, H, dh]
    return g.op("Reshape", t, g.ints([batch, -1, d_model]))  # [B, T, D]


def project_heads(
    g: GraphBuilder, params: Params, x: str, attn: Group, which: str, batch: int, n_heads: int, d_head: int
) -> str:
    """x W_which + b_which split into heads: [B, T, D] -> [B, H, T, dh]."""
    return split_heads(g, linear(g, params, x, attn, f"w_{which}", f"b_{which}"), batch, n_heads, d_head)


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


def attend(
    g: GraphBuilder, q: str, k: str, v: str, allowed: str | None, d_head: int, bias: str | None = None
) -> str:
    """Full attention over one piece: q [B, H, Tq, dh], k, v [B, H, Tk, dh], allowed bool
    broadcastable to [B, H, Tq, Tk] (None = all), bias float broadcastable to it (a relative-position
    score term, added before the selection) -> [B, H, Tq, dh]."""
    s = scores(g, scaled_query(g, q, d_head), k)  # [B, H, Tq, Tk]
    if bias is not None:
        s = g.op("Add", s, bias)
    if allowed is not None:
        s = select(g, allowed, s)
    return finalize(g, chunk_state(g, s, v))


def qkv_step(
    g: GraphBuilder,
    params: Params,
    h: str,
    shift: np.ndarray,
    attn: Group,
    batch: int,
    n_heads: int,
    d_head: int,
    names: tuple[str, str, str],
) -> tuple[str, str, str]:
    """The step's three projections as one Gemm: h [B, D] @ [W_q / sqrt(dh) | W_k | W_v] -> [B, 3D],
    viewed as [B, 3H, 1, dh] and split into q (pre-scaled), k, v [B, H, 1, dh] named `names`.

    h holds the true activation plus a constant `shift` [D] (see graphs.build_step: the bias of
    the residual projection, folded into the LayerNorm before); the bias subtracts shift @ W
    again, computed in float64: (h + c) W + (b - c W) = h W + b. Folding 1/sqrt(dh) into W_q and
    b_q is exact when dh is a power of 4 (the scale is a power of two) and within one rounding
    otherwise; the query is scaled before the product either way, as model.attention does."""
    scale = 1.0 / np.sqrt(d_head)
    w = np.concatenate(
        [
            params[attn["w_q"]].astype(np.float64) * scale,
            params[attn["w_k"]],
            params[attn["w_v"]],
        ],
        axis=1,
    )
    bias = (
        np.concatenate(
            [
                params[attn["b_q"]].astype(np.float64) * scale,
                params[attn["b_k"]],
                params[attn["b_v"]],
            ]
        )
        - shift @ w
    )
    qkv = g.op(
        "Gemm",
        h,
        g.const(w.astype(np.float32), attn.derived("w_qkv_step")),
        g.const(bias.astype(np.float32), attn.derived("b_qkv_step")),
    )
    heads = g.op(
        "Reshape", qkv, g.ints([batch, 3 * n_heads, 1, d_head])
    )  # [B, 3H, 1, dh]: D = (H, dh) head-major
    q, k, v = g.split(heads, [n_heads] * 3, axis=1, names=names)
    return q, k, v


def cache_rows_live(g: GraphBuilder, live: str, n_rows: int, v_cache_shape: Sequence[int]) -> tuple[str, str]:
    """What attend_step's V-row selection reads, made once per step graph and shared by every
    layer: the row index [N] int64 (row j where cache row j is live, N where it is stale; from
    live's first N entries) and the zero row [B, H, 1, dh] that index N names once appended.
    Why a Gather and not Where(live, V, 0): ONNX Runtime's broadcasting Where over the whole V
    cache costs several times the MatMul it feeds (docs/export_runtime.md, "Regression found on
    2026-12-04"); a Concat and a Gather move the same rows for a fraction of that."""
    cache_live = g.split(live, [n_rows, 1], axis=0)[0]  # [N] bool
    rows = np.arange(n_rows, dtype=np.int64)
    index = g.op("Where", cache_live, g.const(rows), g.const(np.array([n_rows], np.int64)))  # [N]
    b, h, _, dh = v_cache_shape
    # expanded from a scalar: a numbered constant must be structural (export/consistency.py), and a
    # named one would be a tensor that artifacts exported before this change do not hold
    zero_row = g.op("Expand", g.scalar(0.0), g.ints([b, h, 1, dh]))  # [B, H, 1, dh]
    return index, zero_row


def attend_step(
    g: GraphBuilder,
    q: str,
    k_cache: str,
    v_cache: str,
    k_own: str,
    v_own: str,
    live: str,
    v_rows: tuple[str, str],
    n_rows: int,
    bias: tuple[str, str] | None = None,
) -> str:
    """One position's attention over its layer's static cache and its own key.

    bias (windowed models): the relative-position score terms (cache rows [1, H, 1, N], own key
    [1, H, 1, 1]), added before the selection.

    q (pre-scaled), k_own, v_own [B, H, 1, dh]; k_cache [B, H, dh, N] (transposed: q K^T without
    moving the cache), v_cache [B, H, N, dh]; live bool [N + 1]:
    cache rows 0..pos-1 and, last, the own key (always live, so no row is empty and Softmax never
    sees an all -inf row). One Softmax over the N + 1 scores with the stale rows selected to -inf
    (weight exactly 0), then the weights split back into the cache's N and the own key's 1:
    P_cache V_cache' + p_own v_own, where V_cache' = Gather(Concat(V_cache, zero row), index) selects
    the V rows too (v_rows = (index [N], zero row [B, H, 1, dh]) from `cache_rows_live`, made once
    per graph by the caller and shared by every layer, like live: a stale row's index names the
    zero row): a stale row's weight is exactly 0, but 0 * inf and 0 * NaN are NaN, so without the
    selection a stale row holding inf or NaN would leak (with it, 0 * 0 = 0 whatever the row
    holds; `tickformer prove ART` proves it on the exported graph). The scores read the cache in
    place; the selection copies the V cache once per layer (constant size, the same at every
    position). Timing: exp(-inf) and every exp argument below -87.3 pass through subnormal
    floats, an order of magnitude slower on x86 unless the thread flushes them to zero; ControlLoop and certify do
    (runtime/denormals.py), and then the step's time does not depend on the position.
    """
    s_cache = g.op("MatMul", q, k_cache)  # [B, H, 1, dh] @ [B, H, dh, N] -> [B, H, 1, N], constant work
    s_own = g.op("MatMul", q, g.op("Transpose", k_own, perm=[0, 1, 3, 2]))  # [B, H, 1, 1]
    if bias is not None:
        s_cache, s_own = g.op("Add", s_cache, bias[0]), g.op("Add", s_own, bias[1])
    s = select(g, live, g.op("Concat", s_cache, s_own, axis=-1))  # [B, H, 1, N + 1]
    p_cache, p_own = g.split(g.op("Softmax", s, axis=-1), [n_rows, 1], axis=-1)  # [B, H, 1, N], [B, H, 1, 1]
    index, zero_row = v_rows
    v_padded = g.op("Concat", v_cache, zero_row, axis=2)  # [B, H, N + 1, dh]: row N is zero
    v_live = g.op("Gather", v_padded, index, axis=2)  # [B, H, N, dh]: stale rows exactly 0
    return g.op("Add", g.op("MatMul", p_cache, v_live), g.op("Mul", p_own, v_own))  # [B, H, 1, dh]


def out_proj(g: GraphBuilder, params: Params, heads: str, attn: Group, batch: int, d_model: int) -> str:
    return linear(g, params, merge_heads(g, heads, batch, d_model), attn, "w_o", "b_o")  # [B, T, D]
