"""Contract: outputs are finite (and, when declared, bounded).

Statement
    Every output value of a step is finite; when the artifact declares an output bound B,
    also |y| <= B elementwise.
Bound
    isfinite(y) everywhere; max |y| <= B (B optional, from the manifest / runtime argument).
Reason
    A control loop must never act on NaN/Inf. Finiteness over the declared input domain follows
    from the softmax-stability contract (every exponent argument <= 0, normalizer >= 1 on
    non-empty rows), the score bound (no overflow in q.k) and LayerNorm's eps > 0; this contract
    is the run-time witness of that chain, checked on the actual output.

Real-time safety: `output_excess` scans y with `input_domain.value_range`; on a small plain
ndarray (size <= input_domain.SMALL, e.g. the control output [B, 1, d_out]) that is a value
loop: no array, no reduction machinery, at most a few dozen bytes of
transient Python objects (bounded in tests/contracts/test_output_bound.py), faster than the
reductions for a few values. Larger arrays take two bounded reductions (min,
max): no array allocation, ~1 KB of transient Python objects.
Referenced by: `runtime.monitor.ContractMonitor`, `tickformer verify` (finiteness property).
"""

from __future__ import annotations

import math

import numpy as np

from .input_domain import value_range

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = "y finite; max |y| <= B when B is declared"


def output_excess(y: np.ndarray, bound: float | None) -> float:
    """0.0 when y is finite (and within [-bound, bound] if bound is given); inf when any value is
    non-finite; otherwise max |y| - bound. Real-time safe (module docstring)."""
    if y.size == 0:
        return 0.0
    mn, mx = value_range(y)
    if not (math.isfinite(mn) and math.isfinite(mx)):  # NaN propagates through min/max
        return math.inf
    if bound is None:
        return 0.0
    return max(-bound - mn, mx - bound, 0.0)


def describe_output_violation(y: np.ndarray, bound: float | None) -> str:
    """Failure path only (allocates): name the first non-finite index or the largest |y|."""
    finite = np.isfinite(y)  # [*y.shape]
    if not finite.all():
        idx = tuple(int(i) for i in np.argwhere(~finite)[0])
        return f"output has a non-finite value {float(y[idx])!r} at index {idx}; use the fallback action for this tick"
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.abs(y))), y.shape))
    return f"output value {float(y[idx])!r} at index {idx} exceeds the declared output bound {bound}"
