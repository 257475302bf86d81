"""Contract: a sound bound on attention scores, computed from the trained weights.

Statement
    For every attention layer and every input in the declared domain (continuous models: each
    input feature in [lo, hi]; token models: any token), every score |q . k| / sqrt(d_head)
    the layer computes is at most the layer's recorded score bound (manifest `score_bounds`).
Bound (Cauchy-Schwarz and operator norms; || ||_2 on matrices is the spectral norm)
    |q . k| / sqrt(dh) <= |q|_2 |k|_2 / sqrt(dh),  per head h:
    |q_h|_2 <= ||W_q[:, h]||_2 X_q + |b_q[h]|_2,  |k_h|_2 <= ||W_k[:, h]||_2 X_k + |b_k[h]|_2,
    where X is a bound on the layer's input norm:
      first layer, continuous:  ||W_in||_2 sqrt(d_in) max(|lo|, |hi|) + |b_in|_2 + max_t |PE_t|_2
      first layer, tokens:      sqrt(D) max_v |E_v|_2 + max_t |PE_t|_2
      after a LayerNorm (post-LN: every later layer, the encoder memory, cross-attention
      queries): |g * z + b|_2 <= max|g| sqrt(D) + |b|_2, since z = (x - mean)/sqrt(var + eps)
      has |z|_2^2 = D var / (var + eps) < D.
    The product is then inflated by (1 + gamma_{4 D}) of fp32 to cover the rounding of the
    computed (not exact) projections and dot product (`inflated_score`).
Reason
    fp16 holds magnitudes up to 65504. If every |q|, |k| and score bound (partial dot-product
    sums are bounded by the same Cauchy-Schwarz argument, the query being scaled first) is
    below 65504 with margin, fp16 scores cannot overflow (`fp16_safe`). Otherwise the exporter
    must keep scores in fp32. The bound is recorded in the manifest at export; the norms are
    computed from the weights by `tickformer.export.score_bounds` (SVDs, export time only).

What is *not* claimed: tightness (a worst case over the box, not a typical value); accuracy of
fp16 scores (ulp(1000) = 0.5 in fp16, so large scores lose resolution even without overflow).
"""

from __future__ import annotations

import math
from typing import Sequence

from .softmax_stability import gamma

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = (
    "|q.k|/sqrt(dh) <= max_h (||W_q,h|| X_q + |b_q,h|)(||W_k,h|| X_k + |b_k,h|) / sqrt(dh) (1 + "
    "gamma_4D); fp16 safe when q, k, score bounds <= 65504/2"
)

FP16_MAX = 65504.0
FP16_MARGIN = 2.0  # require bounds <= FP16_MAX / FP16_MARGIN (room for the softmax's s - m and rounding)


def rounding_inflation(d_model: int) -> float:
    """1 + gamma_{4 D} of fp32: covers the rounding of the computed projections and dot product."""
    return 1.0 + gamma(4 * d_model, 2.0**-24)


def inflated_score(q_norms: Sequence[float], k_norms: Sequence[float], d_head: int, d_model: int) -> float:
    """The layer's score bound from per-head bounds on |q_h| and |k_h|: max_h q_h k_h / sqrt(dh),
    inflated by `rounding_inflation`."""
    return max(q * k for q, k in zip(q_norms, k_norms)) / math.sqrt(d_head) * rounding_inflation(d_model)


def fp16_safe(q_norm: float, k_norm: float, score: float) -> bool:
    """True when q, k and score bounds all fit fp16 with FP16_MARGIN."""
    return max(q_norm, k_norm, score) <= FP16_MAX / FP16_MARGIN
