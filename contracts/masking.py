"""Contract: masking by selection.

Statement
    M1  masks select: a masked score is replaced by -inf (np.where(allowed, s, -inf)), never
        offset by a large negative number (-1e10 overflows in fp16; 0 * -inf is NaN);
    M2  a masked key gets exactly zero weight (exp(-inf - m) == 0.0 exactly);
    M3  a fully masked row returns exactly zeros (finalize: l == 0 -> 0), never NaN;
    M4  causal: query at absolute position i sees key j iff j <= i, so outputs at positions
        <= t do not depend on inputs after t;
    M5  sliding window of width w: query i sees key j iff i - w < j <= i;
    M6  padding: a query sees key j iff j < n_valid (keys at and after n_valid are padding);
    M7  stale KV cache: after reset(), cache slots written before the reset never influence an
        output (the position restarts at 0 and only slots < position are selected).
Bound
    Exact: M2, M3 and M4-M7 are equalities, not tolerances (exp(-inf) is exactly 0 in IEEE, and
    the selected set is decided by integer predicates).
Reason
    Causality and cache isolation are what let a control loop trust a step's output; "exactly
    zero" (not "small") makes them testable bit-for-bit.

The integer predicates below are the specification (PEP 316 contracts, proven by CrossHair in
`tickformer prove`); `*_mask` builds the boolean arrays from the same predicates, and
tests/contracts/test_masking.py checks model.attention.causal_mask / padding_mask against them.
Predicates: O(1), real-time safe. Mask builders allocate (build once, at load).
"""

from __future__ import annotations

import numpy as np

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = (
    "exact: masked key weight == 0, fully masked row == 0, outputs at <= t bitwise independent of "
    "inputs after t, stale slots invisible"
)


def causal_allowed(i: int, j: int, offset: int) -> bool:
    """M4: query row i of a block starting at absolute position `offset` may see key j.

    pre: i >= 0 and j >= 0 and offset >= 0
    post: __return__ == (j <= i + offset)
    post: implies(__return__, j <= i + offset)
    """
    return j - offset <= i


def window_allowed(i: int, j: int, window: int) -> bool:
    """M5: query at absolute position i may see key at absolute position j in a window of w keys
    (itself and the w - 1 before it). The training forward and model.onnx build their window
    masks by calling this on index arrays (numpy) and index tensors (export/expr.py).

    pre: i >= 0 and j >= 0 and window >= 1
    post: __return__ == (i - window < j <= i)
    post: implies(__return__, causal_allowed(i, j, 0))
    """
    return (j <= i) & (i - j < window)  # `&`: ints, numpy arrays and graph expressions alike


def padding_allowed(j: int, n_valid: int) -> bool:
    """M6: key j is real (not padding) in a row with n_valid real keys at the front.

    pre: j >= 0 and n_valid >= 0
    post: __return__ == (j < n_valid)
    """
    return j < n_valid


def cache_slot_visible(slot: int, position: int) -> bool:
    """M7: at a step that writes position `position`, cache slot `slot` (absolute position) is
    selected iff it was written since the last reset, i.e. slot <= position. A reset sets
    position to 0, so slots 1.. (stale) are invisible until rewritten.

    pre: slot >= 0 and position >= 0
    post: __return__ == (slot <= position)
    post: implies(position == 0, __return__ == (slot == 0))
    """
    return causal_allowed(0, slot, position)


def implies(a: bool, b: bool) -> bool:
    return (not a) or b


def causal_mask_spec(tq: int, tk: int, offset: int = 0) -> np.ndarray:
    """[Tq, Tk] bool built elementwise from `causal_allowed` (reference for tests; slow)."""
    return np.array([[causal_allowed(i, j, offset) for j in range(tk)] for i in range(tq)], dtype=bool)


def window_mask_spec(t: int, window: int) -> np.ndarray:
    """[T, T] bool from `window_allowed` (reference for tests; slow)."""
    return np.array([[window_allowed(i, j, window) for j in range(t)] for i in range(t)], dtype=bool)


def padding_mask_spec(n_valid: list[int], tk: int) -> np.ndarray:
    """[B, Tk] bool 'valid' from `padding_allowed` (reference for tests; slow)."""
    return np.array([[padding_allowed(j, n) for j in range(tk)] for n in n_valid], dtype=bool)
