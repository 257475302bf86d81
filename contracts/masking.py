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

The integer predicates below are the specification, each proven by CrossHair in `tickformer prove`
(PEP 316 contracts). Their post-conditions do not restate the body's inequality: each predicate is
specified by an independent definition -- `cache_row_live` by induction over the steps since the
reset (nothing is live at position 0; the step at p - 1 adds row p - 1), `causal_allowed` as
"what the step at the query's position reads" (the live rows and its own key), `window_allowed` by
induction over the width (a window of w keys is the window of w - 1 plus the next older key),
`padding_allowed` by induction over the valid count -- so a wrong body and a wrong post cannot
agree by being the same formula.

Who calls them (the code that runs): `cache_row_live` builds the static step graph's live set
(export/graphs.py, on graph expressions) and the numpy backend's static mask (on index arrays);
`causal_allowed` builds model.onnx's causal constant (export/graphs.py); `window_allowed` the
windowed model.onnx's mask and the training forward's window mask. `padding_allowed` is a
reference only: padding arrives as data (src_valid), so nothing computes it at run time; the
operator's padding mask is property-tested against it (tests/contracts/test_masking.py).
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
    """M4: query row i of a block starting at absolute position `offset` may see key j: exactly
    what the step at the query's absolute position reads, its live cache rows and its own key.
    model.onnx's causal constant is built by calling this on index arrays (export/graphs.py).

    pre: i >= 0 and j >= 0 and offset >= 0
    post: __return__ == (cache_row_live(j, i + offset) or j == i + offset)
    """
    return j - offset <= i


def window_allowed(i: int, j: int, window: int) -> bool:
    """M5: query at absolute position i may see key at absolute position j in a window of w keys
    (itself and the w - 1 before it). The training forward and model.onnx build their window
    masks by calling this on index arrays (numpy) and index tensors (export/expr.py).
    Specified by induction over the width: one key is the query's own; a window of w keys is
    the window of w - 1 keys plus the next older one.

    pre: i >= 0 and j >= 0 and window >= 1
    post: implies(window == 1, __return__ == (j == i))
    post: implies(window > 1, __return__ == (window_allowed(i, j, window - 1) or j == i - (window - 1)))
    """
    return (j <= i) & (i - j < window)  # `&`: ints, numpy arrays and graph expressions alike


def padding_allowed(j: int, n_valid: int) -> bool:
    """M6: key j is real (not padding) in a row with n_valid real keys at the front (a reference
    for tests: the runtime takes padding as data, src_valid). By induction over n_valid.

    pre: j >= 0 and n_valid >= 0
    post: implies(n_valid == 0, not __return__)
    post: implies(n_valid > 0, __return__ == (padding_allowed(j, n_valid - 1) or j == n_valid - 1))
    """
    return j < n_valid


def cache_row_live(row: int, position: int) -> bool:
    """M7 as the step reads its static cache: the step at `position` reads cache row `row` iff the
    row was written since the last reset (row `position` itself is the step's own new key, passed
    beside the cache). Specified by the history, not by an inequality: after a reset (position
    0) no row is live; the step at position p - 1 commits row p - 1, so the live rows at p are
    those at p - 1 plus row p - 1. Rows at and after `position` (stale ones from before a reset
    included) are never read. Real-time safe: one comparison.

    pre: row >= 0 and position >= 0
    post: implies(position == 0, not __return__)
    post: implies(position > 0, __return__ == (cache_row_live(row, position - 1) or row == position - 1))
    """
    return row < position


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
