"""The one attention operator: scaled dot-product attention as an online softmax.

softmax(QK^T / sqrt(d)) V (Vaswani et al. 2017, eq. 1), computed over pieces of the key space.
Each piece of keys is summarised by an online-softmax state (Milakov & Gimelshein 2018; the
FlashAttention recurrence, Dao et al. 2022):

    m   = max of the piece's selected scores           (-inf when no key is selected)
    l   = sum_j exp(s_j - m)                           (0 when no key is selected)
    acc = sum_j exp(s_j - m) v_j

and two states merge associatively and commutatively:

    m = max(m_a, m_b);  l = e^(m_a-m) l_a + e^(m_b-m) l_b;  acc = e^(m_a-m) acc_a + e^(m_b-m) acc_b

Full, causal, padded, chunked and KV-cached attention are all settings of this one engine.
Masks act by *selection* (np.where(allowed, s, -inf)), never by adding a large negative number
(-1e10 overflows in fp16, and 0 * -inf is NaN). Every exponent argument is <= 0, so exp never
overflows. A query row with no selected key returns exactly zeros, never NaN.

This file imports numpy and nothing else.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class SoftmaxState(NamedTuple):
    """Online-softmax summary of a set of keys, per query row."""

    m: np.ndarray  # [..., Tq]      running max of selected scores; -inf if none selected
    l: np.ndarray  # [..., Tq]      normalizer sum exp(s - m); 0 if none selected
    acc: np.ndarray  # [..., Tq, dv]  weighted sum of values, sum exp(s - m) v


def compute_dtype(*arrays: np.ndarray) -> np.dtype:
    """Scores and reductions run in at least float32 (fp16 inputs are widened: fp16 sums of
    exponentials lose the normalizer), float64 stays float64 (gradient checks)."""
    return np.result_type(*arrays, np.float32)


def scaled_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """s = (q / sqrt(d)) k^T. q [..., Tq, d], k [..., Tk, d] -> [..., Tq, Tk].

    The query is scaled before the product, as the exported graphs do, so both see the same
    rounding.
    """
    dtype = compute_dtype(q, k)
    scale = dtype.type(1.0 / np.sqrt(q.shape[-1]))
    return (q.astype(dtype, copy=False) * scale) @ np.swapaxes(k.astype(dtype, copy=False), -1, -2)


def empty_state(batch_shape: tuple[int, ...], dv: int, dtype: np.dtype) -> SoftmaxState:
    """The identity of `merge`: the state of an empty set of keys."""
    return SoftmaxState(
        m=np.full(batch_shape, -np.inf, dtype=dtype),
        l=np.zeros(batch_shape, dtype=dtype),
        acc=np.zeros(batch_shape + (dv,), dtype=dtype),
    )


def _safe_max(m: np.ndarray) -> np.ndarray:
    """Replace -inf (no key selected) by 0 so that s - m stays -inf (exp -> 0) instead of NaN."""
    return np.where(m == -np.inf, np.zeros_like(m), m)


def chunk_state(scores: np.ndarray, allowed: np.ndarray | None, v: np.ndarray) -> SoftmaxState:
    """Summarise one piece of keys.

    scores [..., Tq, c] (finite), allowed bool broadcastable to scores (None = all), v [..., c, dv].
    """
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)  # selection, never addition
    m = scores.max(axis=-1)  # [..., Tq]
    p = np.exp(scores - _safe_max(m)[..., None])  # [..., Tq, c], every argument <= 0
    l = p.sum(axis=-1)  # [..., Tq]
    acc = p @ v.astype(p.dtype, copy=False)  # [..., Tq, c] @ [..., c, dv] -> [..., Tq, dv]
    return SoftmaxState(m, l, acc)


def merge(a: SoftmaxState, b: SoftmaxState) -> SoftmaxState:
    """Combine the summaries of two disjoint sets of keys (associative, commutative; the
    merged running max is exact: it is one of the inputs' maxima, no arithmetic on it)."""
    m = np.maximum(a.m, b.m)  # [..., Tq]
    m_safe = _safe_max(m)
    alpha = np.exp(a.m - m_safe)  # in [0, 1]: a.m <= m; 0 when a is empty
    beta = np.exp(b.m - m_safe)
    l = alpha * a.l + beta * b.l
    acc = alpha[..., None] * a.acc + beta[..., None] * b.acc
    return SoftmaxState(m, l, acc)


def finalize(state: SoftmaxState) -> np.ndarray:
    """acc / l, with exactly zero output for rows where no key was selected (l == 0)."""
    has_keys = state.l > 0
    denom = np.where(has_keys, state.l, np.ones_like(state.l))
    return np.where(has_keys[..., None], state.acc / denom[..., None], np.zeros_like(state.acc))


def _check_operands(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, chunk: int | None) -> None:
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"attention needs q, k, v with at least 2 dims [..., T, d]; got {q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q width {q.shape[-1]} != k width {k.shape[-1]}: queries and keys must share d")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} keys but v has {v.shape[-2]} values: they must match")
    if mask is not None and mask.dtype != np.bool_:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}; masks select, they are not added")
    if chunk is not None and (not isinstance(chunk, (int, np.integer)) or isinstance(chunk, bool) or chunk < 1):
        raise ValueError(f"chunk={chunk!r} must be a positive integer (keys per piece) or None")


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    chunk: int | None = None,
) -> np.ndarray:
    """Scaled dot-product attention through the online-softmax operator.

    q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv]; mask bool broadcastable to [..., Tq, Tk]
    (True = may attend). Returns [..., Tq, dv] in the compute dtype (>= float32).
    chunk=c folds keys c at a time through `merge`; the result agrees with chunk=None to within
    a few units of roundoff per merge (see contracts.softmax_stability for the stated bound).
    A row with no selected key returns exactly zeros.

    Not real-time safe: allocates its temporaries (the runtime's step uses preallocated buffers).
    """
    _check_operands(q, k, v, mask, chunk)
    scores = scaled_scores(q, k)  # [..., Tq, Tk]
    tk = k.shape[-2]
    allowed = None if mask is None else np.broadcast_to(mask, scores.shape)
    if chunk is None or chunk >= tk:
        return finalize(chunk_state(scores, allowed, v))
    batch_shape = scores.shape[:-1]
    dtype = scores.dtype
    state = empty_state(batch_shape, v.shape[-1], dtype)
    for start in range(0, tk, chunk):
        stop = min(start + chunk, tk)
        piece = chunk_state(
            scores[..., start:stop],
            None if allowed is None else allowed[..., start:stop],
            v[..., start:stop, :],
        )
        state = merge(state, piece)
    return finalize(state)


def attention_weights(q: np.ndarray, k: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
    """The softmax weights P [..., Tq, Tk] that `attention` applies (rows with no selected key
    are all zero). Used by training's forward and backward pass and by tests; the same state
    arithmetic (select, safe max, exp, sum, divide), done in place in the one scores array it
    creates: training calls it on [B, H, T, T] arrays, where each full-size temporary is a trip
    through memory (model/grad.py, benchmarks/ANALYSIS.md section 5)."""
    s = scaled_scores(q, k)  # [..., Tq, Tk], a new array we own
    if mask is not None:
        np.copyto(s, -np.inf, where=~np.broadcast_to(mask, s.shape))  # selection, never addition
    m = s.max(axis=-1, keepdims=True)  # [..., Tq, 1]
    m[m == -np.inf] = 0  # _safe_max: no key selected, s - 0 stays -inf and exp gives 0, not NaN
    s -= m  # every exponent argument <= 0
    np.exp(s, out=s)
    l = s.sum(axis=-1, keepdims=True)  # [..., Tq, 1], >= 1 where a key is selected
    l[l == 0] = 1  # no key selected: the row is all zeros and stays so
    s /= l
    return s


def causal_mask(tq: int, tk: int | None = None, *, offset: int = 0) -> np.ndarray:
    """allowed[i, j] = (j <= i + offset): query i (at absolute position i + offset) sees keys
    up to its own position. [Tq, Tk] bool."""
    tk = tq if tk is None else tk
    return np.arange(tk)[None, :] <= (np.arange(tq)[:, None] + offset)


def padding_mask(valid: np.ndarray, tq: int) -> np.ndarray:
    """valid [B, Tk] bool (True = real key) -> allowed [B, 1, Tq, Tk] broadcastable over heads."""
    return np.broadcast_to(valid[:, None, None, :], (valid.shape[0], 1, tq, valid.shape[1]))
