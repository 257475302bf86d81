"""The one attention operator: scaled dot-product attention as an online softmax.

softmax(QK^T / sqrt(d)) V (Vaswani et al. 2017, eq. 1), computed over pieces of the key space.
Each piece of keys is summarised by an online-softmax state (Milakov & Gimelshein 2018; the
FlashAttention recurrence, Dao et al. 2022):

    m   = max of the piece's selected scores           (-inf when no key is selected)
    l   = sum_j exp(s_j - m)                           (0 when no key is selected)
    acc = sum_j exp(s_j - m) v_j

and two states merge associatively and commutatively:

    m = max(m_a, m_b);  l = e^(m_a-m) l_a + e^(m_b-m) l_b;  acc = e^(m_a-m) acc_a + e^(m_b-m) acc_b

Full, causal, padded, chunked and KV-cached attention are all settings of this one engine, and
so is training: `attention_parts` is one piece of it that also hands back the
unnormalised weights p and the normalizer l, from which the backward pass forms P = p / l.
Masks act by *selection* (np.where(allowed, s, -inf)), never by adding a large negative number
(-1e10 overflows in fp16, and 0 * -inf is NaN). Every exponent argument is <= 0, so exp never
overflows. A query row with no selected key returns exactly zeros, never NaN. Windowed models add
a relative-position bias b (finite, in score units) before the selection: s = q k^T / sqrt(d) + b.

This file imports numpy and, for its one argument check, tickformer.validation (pure Python).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tickformer.validation import optional_positive_int


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


def _exp_in_place(s: np.ndarray, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The arithmetic every entry point shares: select, max, safe max, subtract, exp, sum.

    In place: the scores s [..., Tq, Tk] (finite, an array the caller owns and gives up) become
    p = exp(s - m), exactly 0 at keys `allowed` does not select. Returns (m, l) [..., Tq]: the
    running max (-inf where no key is selected) and the normalizer sum(p) (0 there). Working in
    the one array matters: training runs this on [B, H, T, T] arrays, where every full-size
    temporary is a trip through memory (benchmarks/ANALYSIS.md section 5).
    """
    if allowed is not None:
        np.copyto(s, -np.inf, where=~allowed)  # selection, never addition; `where` broadcasts
    m = s.max(axis=-1, keepdims=True)  # [..., Tq, 1]
    s -= _safe_max(m)  # every exponent argument <= 0; -inf - 0 stays -inf
    np.exp(s, out=s)
    return m[..., 0], s.sum(axis=-1)  # [..., Tq], [..., Tq]


def chunk_state(scores: np.ndarray, allowed: np.ndarray | None, v: np.ndarray) -> SoftmaxState:
    """Summarise one piece of keys.

    scores [..., Tq, c] (finite; not modified), allowed bool broadcastable to scores (None = all),
    v [..., c, dv].
    """
    p = np.array(scores, copy=True)  # [..., Tq, c], ours to overwrite
    m, l = _exp_in_place(p, allowed)  # [..., Tq]
    return SoftmaxState(m, l, p @ v.astype(p.dtype, copy=False))  # acc [..., Tq, dv]


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


def _check_operands(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None,
    chunk: int | None,
    bias: np.ndarray | None = None,
) -> None:
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(
            f"attention needs q, k, v with at least 2 dims [..., T, d]; got {q.shape}, {k.shape}, {v.shape}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q width {q.shape[-1]} != k width {k.shape[-1]}: queries and keys must share d")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} keys but v has {v.shape[-2]} values: they must match")
    if mask is not None and mask.dtype != np.bool_:
        raise ValueError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; masks select, they are not added"
        )
    if bias is not None and not np.issubdtype(bias.dtype, np.floating):
        raise ValueError(f"bias must be floating point (a score term), got dtype {bias.dtype}")
    optional_positive_int(chunk, "chunk", hint="keys per piece, or None for all keys at once")


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    chunk: int | None = None,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """Scaled dot-product attention through the online-softmax operator.

    q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv]; mask bool broadcastable to [..., Tq, Tk]
    (True = may attend); bias float broadcastable to [..., Tq, Tk], added to the scaled scores
    before the selection (a relative-position term; finite). Returns [..., Tq, dv] in the compute
    dtype (>= float32).
    chunk=c folds keys c at a time through `merge`; the result agrees with chunk=None to within
    a few units of roundoff per merge (see contracts.softmax_stability for the stated bound).
    A row with no selected key returns exactly zeros.

    Training takes `attention_parts`: the same output, bit for bit, with what it was computed from.

    Not real-time safe: allocates its temporaries (the runtime's step uses preallocated buffers).
    """
    _check_operands(q, k, v, mask, chunk, bias)
    tk = k.shape[-2]
    if chunk is None or chunk >= tk:
        return _one_piece(q, k, v, mask, bias).out
    scores = scaled_scores(q, k)  # [..., Tq, Tk]
    if bias is not None:
        scores += bias  # scores is a new array; the bias broadcasts
    allowed = None if mask is None else np.broadcast_to(mask, scores.shape)
    state = empty_state(scores.shape[:-1], v.shape[-1], scores.dtype)
    for start in range(0, tk, chunk):
        stop = min(start + chunk, tk)
        piece = chunk_state(
            scores[..., start:stop],
            None if allowed is None else allowed[..., start:stop],
            v[..., start:stop, :],
        )
        state = merge(state, piece)
    return finalize(state)


class AttentionParts(NamedTuple):
    """One pass of the operator over all keys, with what its output was computed from."""

    out: np.ndarray  # [..., Tq, dv]  finalize(state): acc / l, zeros where no key is selected
    p: np.ndarray  # [..., Tq, Tk]    exp(s - m), exactly 0 at keys not selected
    l: np.ndarray  # [..., Tq]        sum of p over the keys; 0 where no key is selected


def _one_piece(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, bias: np.ndarray | None = None
) -> AttentionParts:
    p = scaled_scores(q, k)  # [..., Tq, Tk], a new array: p once exponentiated below
    if bias is not None:
        p += bias  # the relative-position term, before the selection
    m, l = _exp_in_place(p, mask)  # [..., Tq]
    out = p @ v.astype(p.dtype, copy=False)  # [..., Tq, dv] acc, a new array: the output once divided
    has_keys = l > 0  # [..., Tq]
    out /= np.where(has_keys, l, np.ones_like(l))[..., None]  # finalize's arithmetic, in place
    np.copyto(out, 0, where=~has_keys[..., None])  # exactly zero where no key is selected
    return AttentionParts(out, p, l)


def attention_parts(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    bias: np.ndarray | None = None,
) -> AttentionParts:
    """`attention` over all keys as one piece (training), returning `AttentionParts(out, p, l)`:
    the same output as `attention(q, k, v, mask=mask, bias=bias)`, bit for bit, with the
    unnormalised weights p and the normalizer l it was computed from, which the backward pass
    turns into P = p / l (`normalise_weights`). Not real-time safe: allocates."""
    _check_operands(q, k, v, mask, None, bias)
    return _one_piece(q, k, v, mask, bias)


def normalise_weights(p: np.ndarray, l: np.ndarray) -> np.ndarray:
    """P = p / l in place in p [..., Tq, Tk] (l [..., Tq]); rows with no selected key (l == 0,
    p all zeros) stay all zeros. Returns p."""
    denom = np.where(l > 0, l, np.ones_like(l))[..., None]  # [..., Tq, 1]
    p /= denom
    return p


def attention_weights(
    q: np.ndarray, k: np.ndarray, *, mask: np.ndarray | None = None, bias: np.ndarray | None = None
) -> np.ndarray:
    """The softmax weights P [..., Tq, Tk] that `attention` applies (rows with no selected key
    are all zero): the operator's select, safe max, exp and sum (`_exp_in_place`), then
    `normalise_weights`, in the one scores array it creates. For tests and analysis; training
    takes p and l from `attention_parts` instead of computing the scores twice."""
    s = scaled_scores(q, k)  # [..., Tq, Tk], a new array we own
    if bias is not None:
        s += bias
    _, l = _exp_in_place(s, mask)  # [..., Tq]
    return normalise_weights(s, l)


def causal_mask(tq: int, tk: int | None = None, *, offset: int = 0) -> np.ndarray:
    """allowed[i, j] = (j <= i + offset): query i (at absolute position i + offset) sees keys
    up to its own position. [Tq, Tk] bool."""
    tk = tq if tk is None else tk
    return np.arange(tk)[None, :] <= (np.arange(tq)[:, None] + offset)


def padding_mask(valid: np.ndarray, tq: int) -> np.ndarray:
    """valid [B, Tk] bool (True = real key) -> allowed [B, 1, Tq, Tk] broadcastable over heads."""
    return np.broadcast_to(valid[:, None, None, :], (valid.shape[0], 1, tq, valid.shape[1]))
