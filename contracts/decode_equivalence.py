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
    (tests/contracts/test_decode_equivalence.py `operator_bound`): a score error of one ulp at
    |s| ~ 2000 moves the weights by 2.4e-4 relative, more than this tolerance allows.
    Across backends (numpy vs ONNX Runtime, fp32) the same tolerance applies; fp16 engines
    need their own (the manifest's `tolerance` of an fp16 export).
Reason
    Training and tests use the full pass; the control loop uses steps. If they disagreed, no
    offline test would say anything about the deployed behaviour.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .softmax_stability import gamma, unit_roundoff

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
