"""Contract: decode equivalence — step-by-step decoding equals the full-sequence pass.

Statement
    For a causal model, running tokens one at a time through a KV cache (runtime `step`), or
    through the online-softmax operator in chunks (`attention(..., chunk=c)`), gives at every
    position t the output of the full causal pass, within `decode_tolerance`:
        |y_step[t] - y_full[t]| <= atol + rtol |y_full[t]|  elementwise.
Bound
    The step and the full pass evaluate the same real function; they differ only in floating
    point evaluation order: a matrix product of one row vs many (BLAS may block the K-term
    dot products differently: each dot product's error is <= gamma_K sum|a_i b_i|, K =
    max(D, d_ff)), the max/sum of the softmax over pieces (merge error, see
    contracts.softmax_stability.merge_rel_bound) and the order of the exp sum. Post-LN
    renormalizes each layer, so the relative error per layer is O(gamma_K) times the layer's
    conditioning, which we do not bound analytically. We state
        rtol = atol = 16 * n_layers_total * gamma_K(u)     (u = 2**-24 for fp32)
    i.e. a margin of 16 per layer over one dot product's worst case, and *test* it (the
    measured worst ratio is reported by tests/contracts/test_decode_equivalence.py). For the
    `control` preset (D = 64, d_ff = 256, 2 layers) that is about 4.9e-4.
    This tolerance is for the model, whose scores come from LayerNorm'd activations. The operator
    alone, fed raw scores of any magnitude, is held to a bound from each case's own conditioning
    (`operator_tolerance` below): a score error of one ulp at |s| ~ 2000 moves the weights by
    2.4e-4 relative, more than this tolerance allows.
    Across backends (numpy vs ONNX Runtime, fp32) the same tolerance applies; fp16 engines
    need their own (the manifest's `tolerance` of an fp16 export).
Reason
    Training and tests use the full pass; the control loop uses steps. If they disagreed, no
    offline test would say anything about the deployed behaviour.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from .softmax_stability import EXP_ULP, gamma, merge_rel_bound, unit_roundoff

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = (
    "|y_step - y_full| <= atol + rtol |y_full|, rtol = atol = 16 layers gamma_max(D, d_ff) (4.9e-4 for "
    "the control preset)"
)

PER_LAYER_MARGIN = 16.0


class Architecture(Protocol):
    """The widths and depths the bound depends on (a `tickformer.model.Config` has them; the
    contracts layer sits below the model and does not import it)."""

    d_model: int
    d_ff: int
    n_layers: int
    n_enc_layers: int


def decode_tolerance(config: Architecture, dtype: np.dtype | type = np.float32) -> tuple[float, float]:
    """(rtol, atol) for step-vs-full comparisons of this architecture in `dtype`."""
    k = max(config.d_model, config.d_ff)
    layers = config.n_layers + config.n_enc_layers
    tol = PER_LAYER_MARGIN * layers * gamma(k, unit_roundoff(dtype))
    return tol, tol


def equivalence_excess(y_step: np.ndarray, y_full: np.ndarray, rtol: float, atol: float) -> float:
    """max(|a - b| - (atol + rtol |b|)) over elements, <= 0 when the contract holds; inf if
    either side is non-finite. Allocates (test/verify helper)."""
    a = y_step.astype(np.float64)  # [...]
    b = y_full.astype(np.float64)  # [...]
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("inf")
    return float(np.max(np.abs(a - b) - (atol + rtol * np.abs(b)))) if a.size else 0.0


def operator_tolerance(q: np.ndarray, k: np.ndarray, v: np.ndarray, chunk: int) -> np.ndarray:
    """A bound on |step - full| per output column for one query q [d] over keys k [T, d] and
    values v [T, dv], two float32 evaluations of the same exact function softmax(q k^T/sqrt(d)) v
    that differ only in order (BLAS blocking of a 1-row vs a T-row product, chunked merges).

    Each side's score j is within delta_j = gamma_{d+1} |q|/sqrt(d) . |k_j| of the exact one (a
    d-term dot product after one rounding of q's scaling, Higham 3.1: any order, FMA or not), so
    the two sides' weights differ by a factor within exp(+-4 delta) (each normalised weight moves
    by the score's error minus the weighted mean error, both sides) and their outputs by
    expm1(4 delta) sum_j p_j |v_j| <= expm1(4 delta) max|v|. Each side's own evaluation adds its
    relative roundoff against max|v|: the exp (EXP_ULP u), the sums of weights and of p v
    (gamma_{T+1} each), the division (u), and a merge per piece (merge_rel_bound), first order,
    counted twice for margin. delta is the largest delta_j. Tested in
    tests/contracts/test_decode_equivalence.py. Allocates (test/verify helper)."""
    u = unit_roundoff(np.float32)
    d, t = q.shape[-1], k.shape[0]
    dots = np.abs(k.astype(np.float64)) @ np.abs(q.astype(np.float64)) / math.sqrt(d)  # [T]
    delta = gamma(d + 1, u) * float(dots.max())
    pieces = -(-t // chunk)
    own = 2.0 * ((EXP_ULP + 1.0) * u + 2.0 * gamma(t + 1, u) + pieces * merge_rel_bound(t))
    return (math.expm1(4.0 * delta) + 2.0 * own) * np.abs(v.astype(np.float64)).max(axis=0)  # [dv]
