"""Transformer layers as small pure functions over activations, weights as keyword arguments.

picoGPT style: `layer_norm(x, *, g, b, eps)`; a shape comment on every array line. Each layer
with a backward pass comes as a pair, side by side (llm.c's train_gpt2.c pairs its layers the
same way):

    *_forward(x, *, weights)  -> (y, cache)      the one implementation of the layer
    *_backward(dy, cache)     -> (dx, weight gradients)

and the inference name (`linear`, `layer_norm`, `feed_forward`, `multi_head_attention`) is the
same function with the cache dropped. Inference and training therefore run the same floating
point operations in the same order, and their outputs are equal bit for bit.

Speed (numpy has no fused kernels, so every elementwise pass over an activation is a full trip
through memory): products over [..., n] activations are one 2-D BLAS call (`matmul`), layer
norm reuses its temporaries, relu' and dropout are single multiplications by a mask, and the
attention weights live in the operator's one scores array (`model.attention.attention`).

Sources: Vaswani et al. 2017 (sections 3.1-3.5); Ba et al. 2016 (layer normalization);
Srivastava et al. 2014 (dropout, inverted here). Backward formulas are checked against float64
central finite differences for every parameter tensor (tests/model/test_grad.py).
Not real-time safe: every function allocates its outputs. This file imports numpy and the
attention operator, nothing else.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .attention import attention, attention_parts


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1])  # [..., n] -> [N, n]


def _add(y: np.ndarray, b: np.ndarray) -> np.ndarray:
    """y + b, in place in y (a new array the caller owns) unless that would narrow the dtype."""
    return np.add(y, b, out=y) if b.dtype == y.dtype or np.result_type(y, b) == y.dtype else y + b


def matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x [..., n] @ w [n, m] as one 2-D product -> [..., m].

    `x @ w` on a 3-D x calls BLAS once per leading index; one call over all rows is faster for
    the small matrices here. The two differ in roundoff (the BLAS kernel a row goes through
    depends on the matrix shape), so every path of the model uses this one.
    """
    return (_flat(x) @ w).reshape(x.shape[:-1] + (w.shape[-1],))


# ---------------------------------------------------------------------------------------------
# Linear
# ---------------------------------------------------------------------------------------------


class LinearCache(NamedTuple):
    x: np.ndarray  # [..., n_in]
    w: np.ndarray  # [n_in, n_out]


def linear_forward(x: np.ndarray, *, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, LinearCache]:
    y = _add(matmul(x, w), b)  # [..., n_in] @ [n_in, n_out] -> [..., n_out]
    return y, LinearCache(x, w)


def linear(x: np.ndarray, *, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return linear_forward(x, w=w, b=b)[0]  # [..., n_in] -> [..., n_out]


def linear_backward(dy: np.ndarray, cache: LinearCache) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """-> dx [..., n_in], {"w": dw [n_in, n_out], "b": db [n_out]}."""
    x, w = cache
    dx = matmul(dy, w.T)  # [..., n_out] -> [..., n_in]
    dw = _flat(x).T @ _flat(dy)  # [n_in, N] @ [N, n_out]
    db = _flat(dy).sum(axis=0)  # [n_out]
    return dx, {"w": dw, "b": db}


# ---------------------------------------------------------------------------------------------
# Layer norm
# ---------------------------------------------------------------------------------------------


class LayerNormCache(NamedTuple):
    xhat: np.ndarray  # [..., D] (x - mean) / sqrt(var + eps)
    rstd: np.ndarray  # [..., 1] 1 / sqrt(var + eps)
    g: np.ndarray  # [D]


def layer_norm_forward(
    x: np.ndarray, *, g: np.ndarray, b: np.ndarray, eps: float
) -> tuple[np.ndarray, LayerNormCache]:
    """y = g (x - mean) / sqrt(var + eps) + b over the last axis (biased variance, as in Ba et al.)."""
    mean = x.mean(axis=-1, keepdims=True)  # [..., 1]
    xhat = x - mean  # [..., D], centred now, normalised below
    sq = xhat * xhat  # [..., D], scratch
    var = sq.mean(axis=-1, keepdims=True)  # [..., 1]
    rstd = 1.0 / np.sqrt(var + eps)  # [..., 1]
    xhat *= rstd
    y = (
        np.multiply(g, xhat, out=sq)
        if g.dtype == sq.dtype or np.result_type(g, xhat) == sq.dtype
        else g * xhat
    )  # [..., D]
    return _add(y, b), LayerNormCache(xhat, rstd, g)


def layer_norm(x: np.ndarray, *, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    return layer_norm_forward(x, g=g, b=b, eps=eps)[0]  # [..., D]


def layer_norm_backward(dy: np.ndarray, cache: LayerNormCache) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """-> dx, {"g": dg, "b": db}. dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))."""
    xhat, rstd, g = cache
    t = dy * xhat  # [..., D], scratch
    dg = _flat(t).sum(axis=0)  # [D]
    db = _flat(dy).sum(axis=0)  # [D]
    dx = dy * g  # [..., D], dxhat now, dx below
    np.multiply(dx, xhat, out=t)
    c = t.mean(axis=-1, keepdims=True)  # [..., 1] mean(dxhat xhat)
    np.multiply(xhat, c, out=t)
    dx -= dx.mean(axis=-1, keepdims=True)
    dx -= t
    dx *= rstd
    return dx, {"g": dg, "b": db}


# ---------------------------------------------------------------------------------------------
# Dropout (training only: the inference path never calls it)
# ---------------------------------------------------------------------------------------------


def dropout_forward(
    x: np.ndarray, *, rate: float, rng: np.random.Generator | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Inverted dropout: keep with probability 1-rate and scale by 1/(1-rate). Draws nothing
    and returns x itself (cache None) when rate is 0 or rng is None."""
    if rate <= 0.0 or rng is None:
        return x, None
    gain = (rng.random(x.shape, dtype=np.float64) >= rate).astype(x.dtype)  # [...] 1 = keep, 0 = drop
    gain *= x.dtype.type(1.0 / (1.0 - rate))  # [...] 1/(1-rate) or 0
    return x * gain, gain


def dropout_backward(dy: np.ndarray, gain: np.ndarray | None) -> np.ndarray:
    if gain is None:
        return dy
    return dy * gain  # the same gains: 1/(1-rate) where kept, 0 where dropped


# ---------------------------------------------------------------------------------------------
# Position-wise feed-forward: relu(x W1 + b1) W2 + b2
# ---------------------------------------------------------------------------------------------


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


class FeedForwardCache(NamedTuple):
    first: LinearCache
    active: np.ndarray  # [..., F] bool, relu' (h > 0)
    second: LinearCache


def ffn_forward(
    x: np.ndarray, *, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> tuple[np.ndarray, FeedForwardCache]:
    h, c1 = linear_forward(x, w=w1, b=b1)  # [..., D] -> [..., F]
    active = h > 0  # [..., F] bool
    r = np.maximum(h, 0, out=h)  # [..., F], h is not needed again
    y, c2 = linear_forward(r, w=w2, b=b2)  # [..., F] -> [..., D]
    return y, FeedForwardCache(c1, active, c2)


def feed_forward(
    x: np.ndarray, *, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> np.ndarray:
    return ffn_forward(x, w1=w1, b1=b1, w2=w2, b2=b2)[0]  # [..., D] -> [..., F] -> [..., D]


def ffn_backward(dy: np.ndarray, cache: FeedForwardCache) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """-> dx [..., D], {"w1", "b1", "w2", "b2"}."""
    dr, g2 = linear_backward(dy, cache.second)  # [..., F]
    # relu' by multiplying with the bool mask, in place: one pass and no new array, unlike
    # np.where(active, dr, 0) (benchmarks/ANALYSIS.md, section 5); equal to it except that 0 * dr
    # is -0 for negative dr (and NaN for non-finite dr).
    dh = np.multiply(dr, cache.active, out=dr)
    dx, g1 = linear_backward(dh, cache.first)  # [..., D]
    return dx, {"w1": g1["w"], "b1": g1["b"], "w2": g2["w"], "b2": g2["b"]}


# ---------------------------------------------------------------------------------------------
# Multi-head attention
# ---------------------------------------------------------------------------------------------


def positional_encoding(max_len: int, d_model: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).

    Computed in float64 and rounded once, so every backend that loads the table agrees exactly.
    """
    pos = np.arange(max_len, dtype=np.float64)[:, None]  # [T, 1]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]  # [1, ceil(D/2)]
    angle = pos / np.power(10000.0, two_i / d_model)  # [T, ceil(D/2)]
    pe = np.zeros((max_len, d_model), dtype=np.float64)  # [T, D]
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return pe.astype(np.float32)


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads).transpose(0, 2, 1, 3)  # [B, T, D] -> [B, H, T, dh]


def merge_heads(x: np.ndarray) -> np.ndarray:
    b, h, t, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dh)  # [B, H, T, dh] -> [B, T, D]


class AttentionCache(NamedTuple):
    q_in: LinearCache
    k_in: LinearCache
    v_in: LinearCache
    q: np.ndarray  # [B, H, Tq, dh]
    k: np.ndarray  # [B, H, Tk, dh]
    v: np.ndarray  # [B, H, Tk, dh]
    p: np.ndarray  # [B, H, Tq, Tk] unnormalised weights exp(s - m)
    l: np.ndarray  # [B, H, Tq]     their row sums
    heads: np.ndarray  # [B, H, Tq, dh] the operator's output O
    out: LinearCache
    biased: bool = False  # a score term was added (windowed): the backward also returns its gradient


def mha_forward(
    x_q: np.ndarray,
    x_kv: np.ndarray,
    *,
    w_q: np.ndarray,
    b_q: np.ndarray,
    w_k: np.ndarray,
    b_k: np.ndarray,
    w_v: np.ndarray,
    b_v: np.ndarray,
    w_o: np.ndarray,
    b_o: np.ndarray,
    n_heads: int,
    mask: np.ndarray | None = None,
    bias: np.ndarray | None = None,
) -> tuple[np.ndarray, AttentionCache]:
    """Concat(head_1..head_h) W^O with head_i = Attention(x_q W_i^Q, x_kv W_i^K, x_kv W_i^V),
    the attention through the one online-softmax operator (all keys as one piece, with its
    weights). x_q [B, Tq, D], x_kv [B, Tk, D]; mask bool broadcastable to [B, H, Tq, Tk]; bias
    float broadcastable to [B, H, Tq, Tk], added to the scores before the selection."""
    ql, cq = linear_forward(x_q, w=w_q, b=b_q)  # [B, Tq, D]
    kl, ck = linear_forward(x_kv, w=w_k, b=b_k)  # [B, Tk, D]
    vl, cv = linear_forward(x_kv, w=w_v, b=b_v)  # [B, Tk, D]
    q, k, v = split_heads(ql, n_heads), split_heads(kl, n_heads), split_heads(vl, n_heads)  # [B, H, T, dh]
    heads, p, l = attention_parts(q, k, v, mask=mask, bias=bias)  # [B, H, Tq, dh], [B, H, Tq, Tk], [B, H, Tq]
    y, co = linear_forward(merge_heads(heads).astype(x_q.dtype, copy=False), w=w_o, b=b_o)  # [B, Tq, D]
    return y, AttentionCache(cq, ck, cv, q, k, v, p, l, heads, co, bias is not None)


def multi_head_attention(
    x_q: np.ndarray,
    x_kv: np.ndarray,
    *,
    n_heads: int,
    mask: np.ndarray | None = None,
    chunk: int | None = None,
    **weights: np.ndarray,
) -> np.ndarray:
    """`mha_forward` (its weights: w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o) without its cache;
    chunk=c folds keys c at a time through the operator's merge instead (the same result to
    within roundoff, see `attention`).

    x_q [B, Tq, D], x_kv [B, Tk, D]; mask bool broadcastable to [B, H, Tq, Tk] -> [B, Tq, D].
    """
    if chunk is None:
        return mha_forward(x_q, x_kv, **weights, n_heads=n_heads, mask=mask)[0]
    w = weights
    q = split_heads(linear(x_q, w=w["w_q"], b=w["b_q"]), n_heads)  # [B, H, Tq, dh]
    k = split_heads(linear(x_kv, w=w["w_k"], b=w["b_k"]), n_heads)  # [B, H, Tk, dh]
    v = split_heads(linear(x_kv, w=w["w_v"], b=w["b_v"]), n_heads)  # [B, H, Tk, dh]
    heads = attention(q, k, v, mask=mask, chunk=chunk)  # [B, H, Tq, dh]
    return linear(merge_heads(heads).astype(x_q.dtype, copy=False), w=w["w_o"], b=w["b_o"])  # [B, Tq, D]


def mha_backward(
    dy: np.ndarray, cache: AttentionCache
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """-> dx_q [B, Tq, D], dx_kv [B, Tk, D], gradients of the eight projections (and, when the
    forward added a score term, "bias": its gradient dS [B, H, Tq, Tk], the score gradient).

    Softmax backward dS = P * (dP - rowsum(dP * P)) with P = p / l, computed without forming P
    (FlashAttention-2's backward, Dao 2023): rowsum(dP * P) = dO . O per query row, and the
    1/l of P is applied to the [Tq, dh] gradient dO instead of to the [Tq, Tk] weights. That
    leaves two elementwise passes over the [B, H, Tq, Tk] array (where forming P and the rowsum
    took five); equal to the plain formula in exact arithmetic, not bit for bit. dS is exactly
    zero at keys not selected (p = 0) and on rows with no selected key (p all 0).
    """
    dmerged, g_o = linear_backward(dy, cache.out)  # [B, Tq, D]
    q, k, v, p = cache.q, cache.k, cache.v, cache.p
    l = np.where(cache.l > 0, cache.l, np.ones_like(cache.l))[
        ..., None
    ]  # [B, H, Tq, 1]; 1 where no key (p = 0 there)
    dheads = split_heads(dmerged, q.shape[1]) / l  # [B, H, Tq, dh] dO / l
    dv = np.swapaxes(p, -1, -2) @ dheads  # [B, H, Tk, dh] = P^T dO
    rowsum = (dheads * cache.heads).sum(axis=-1, keepdims=True)  # [B, H, Tq, 1] = rowsum(dP * P) / l
    dscores = dheads @ np.swapaxes(v, -1, -2)  # [B, H, Tq, Tk] dP / l
    dscores -= rowsum
    dscores *= p  # [B, H, Tq, Tk] = P * (dP - rowsum(dP * P))
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    d_bias = dscores if cache.biased else None  # d score / d bias = 1 (dscores is not written again)
    dq = dscores @ k  # [B, H, Tq, dh]
    dq *= scale
    dk = np.swapaxes(dscores, -1, -2) @ q  # [B, H, Tk, dh]
    dk *= scale
    dx_q, g_q = linear_backward(merge_heads(dq), cache.q_in)
    dx_k, g_k = linear_backward(merge_heads(dk), cache.k_in)
    dx_v, g_v = linear_backward(merge_heads(dv), cache.v_in)
    grads = {}
    for leaf, g in (("q", g_q), ("k", g_k), ("v", g_v), ("o", g_o)):
        grads["w_" + leaf], grads["b_" + leaf] = g["w"], g["b"]
    if d_bias is not None:
        grads["bias"] = d_bias
    dx_k += dx_v
    return dx_q, dx_k, grads
