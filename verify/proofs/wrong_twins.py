"""Deliberately wrong twins of the proven specifications in `tickformer.contracts`.

Each twin has its spec's signature and a plausible bug. `tickformer prove` checks every twin
against its spec's *own* contract (the PEP 316 conditions are read from the spec, not restated
here), and fails unless CrossHair refutes the twin: a run where the twins survive would show
that the checker cannot fail, so its "confirmed" verdicts would mean nothing.

Never used by the runtime.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tickformer.contracts.ring_buffer import (
    counters_track,
    counters_written,
    slot_read,
    window_distance,
)
from tickformer.model.attention import SoftmaxState, _safe_max

# -- softmax stability --------------------------------------------------------------------


def merged_max_arith(ma: float, mb: float) -> float:
    """max via (a + b + |a - b|) / 2: exact over the reals, not in IEEE (rounding, inf - inf)."""
    return (ma + mb + abs(ma - mb)) / 2.0


def safe_max_identity(m: float) -> float:
    """Forgets the empty-state guard: returns -inf for an empty state."""
    return m


def rescale_exponents_unguarded(ma: float, mb: float) -> tuple[float, float]:
    """No safe max: two empty states give -inf - (-inf) = NaN."""
    m = ma if ma >= mb else mb
    return ma - m, mb - m


def rescale_factor_flush(d: float) -> float:
    """Flushes small factors to zero early (a common 'optimization'): the factor of a key 600
    below the max becomes 0 inside the range where the spec promises a positive factor."""
    return math.exp(d) if d > -600.0 else 0.0


def merge_scalar_unguarded(ma: float, la: float, mb: float, lb: float) -> tuple[float, float]:
    """Merge without the empty-state guard: two empty states give a NaN normalizer."""
    m = ma if ma >= mb else mb
    return m, math.exp(ma - m) * la + math.exp(mb - m) * lb


def merge_assoc_gap_linear_exp(ma: float, mb: float, mc: float) -> float:
    """A merge with a 'fast exp' (clamped first order, max(0, 1 + d)): not a homomorphism,
    (1 + x)(1 + y) != 1 + x + y, so the normalizer depends on the grouping. (A merge that
    rescales against *any* consistent reference point, or never rescales one operand, is still
    associative over the reals, so those would be useless twins.)"""

    def bad_merge(xa: float, la: float, xb: float, lb: float) -> tuple[float, float]:
        m = xa if xa >= xb else xb
        fa = max(0.0, 1.0 + (xa - m))
        fb = max(0.0, 1.0 + (xb - m))
        return m, fa * la + fb * lb

    mab, lab = bad_merge(ma, 1.0, mb, 1.0)
    left = bad_merge(mab, lab, mc, 1.0)
    mbc, lbc = bad_merge(mb, 1.0, mc, 1.0)
    right = bad_merge(ma, 1.0, mbc, lbc)
    return abs(left[1] - right[1]) / max(left[1], right[1])


# -- softmax on binary32 (verify/proofs/ieee754.py): twins of model.attention.merge / finalize ----------
# Same signatures as the operator's functions (SoftmaxState in, SoftmaxState / array out), so the
# solver runs them exactly where it runs the operator.


def merge_arith_max(a: Any, b: Any) -> Any:
    """The merged max computed as (a + b + |a - b|) / 2: exact over the reals, but in binary32 it
    rounds (maxima of opposite sign near zero: one ulp off, neither input), overflows to inf for
    two large finite maxima, and gives NaN for two empty states (-inf + -inf + |NaN|). The solver
    returns whichever it finds first; tests/verify/test_ieee754.py shows rounding alone refutes it."""
    m = (a.m + b.m + abs(a.m - b.m)) / 2.0
    m_safe = _safe_max(m)
    alpha, beta = np.exp(a.m - m_safe), np.exp(b.m - m_safe)
    return SoftmaxState(m, alpha * a.l + beta * b.l, alpha[..., None] * a.acc + beta[..., None] * b.acc)


def merge_unguarded(a: Any, b: Any) -> Any:
    """No safe max: two empty states give exp(-inf - (-inf)) = exp(NaN) = NaN."""
    m = np.maximum(a.m, b.m)
    alpha, beta = np.exp(a.m - m), np.exp(b.m - m)
    return SoftmaxState(m, alpha * a.l + beta * b.l, alpha[..., None] * a.acc + beta[..., None] * b.acc)


def merge_margin(a: Any, b: Any) -> Any:
    """A 'safety margin' on the exponent (m + 2^-20 instead of m): the max side's factor is no
    longer exactly exp(0) = 1, so the normalizer of a selected key can drop below 1."""
    m = np.maximum(a.m, b.m)
    ref = _safe_max(m) + 2.0**-20
    alpha, beta = np.exp(a.m - ref), np.exp(b.m - ref)
    return SoftmaxState(m, alpha * a.l + beta * b.l, alpha[..., None] * a.acc + beta[..., None] * b.acc)


def merge_rescale_b_only(a: Any, b: Any) -> Any:
    """Rescales only the incoming state (assumes the running state a holds the max, alpha = 1):
    right when it does, wrong -- and order-dependent -- when b's max is larger."""
    m = np.maximum(a.m, b.m)
    beta = np.exp(b.m - _safe_max(m))
    return SoftmaxState(m, a.l + beta * b.l, a.acc + beta[..., None] * b.acc)


def finalize_nonstrict(state: Any) -> Any:
    """Guard l >= 0 instead of l > 0: an empty row computes 0 / 0 = NaN."""
    has_keys = state.l >= 0
    denom = np.where(has_keys, state.l, np.ones_like(state.l))
    return np.where(has_keys[..., None], state.acc / denom[..., None], np.zeros_like(state.acc))


def finalize_unguarded(state: Any) -> Any:
    """acc / l without the empty-row guard: 0 / 0 = NaN for a row with no selected key."""
    return state.acc / state.l[..., None]


# -- masking ------------------------------------------------------------------------------


def causal_allowed_strict(i: int, j: int, offset: int) -> bool:
    """Off by one: a query cannot see its own key."""
    return j < i + offset


def window_allowed_off_by_one(i: int, j: int, window: int) -> bool:
    """Window of w + 1 keys."""
    return j <= i and i - j <= window


def padding_allowed_inclusive(j: int, n_valid: int) -> bool:
    """Sees the first padding key."""
    return j <= n_valid


def cache_row_live_inclusive(row: int, position: int) -> bool:
    """row <= position: also reads row `position`, which the step has not written yet (after a
    reset it holds the previous sequence's key: the stale row leaks)."""
    return row <= position


# -- ring buffer --------------------------------------------------------------------------


def ring_slot_shifted(position: int, window: int) -> int:
    """Slot p + 1 mod W: still in range, but not congruent to p."""
    return (position + 1) % window


def slots_distinct_mod_wrong(p: int, a: int, b: int, window: int) -> bool:
    """Uses a ring of W - 1 slots for W live entries (collides)."""
    w = max(window - 1, 1)
    return (p - a) % w != (p - b) % w


def evicted_position_early(position: int, window: int) -> int:
    """Evicts one step too early."""
    return position - window + 1 if position >= window - 1 else -1


def recent_slot_off_by_one(position: int, k: int, window: int) -> int:
    """Treats k == window as still live."""
    if k > window or k > position:
        return -1
    return (position - k) % window


def window_distance_reversed(i: int, j: int, window: int) -> int:
    """Counts the distance the wrong way round: (j - i) mod W."""
    return (j - i) % window


def held_position_overwritten(position: int, slot: int, window: int) -> int:
    """Forgets that the cache holds positions before the step's own: slot p mod W 'holds' p."""
    return position - (position - slot) % window


def slot_read_evicted(position: int, slot: int, window: int) -> bool:
    """Also reads the slot the step is about to overwrite (it holds position - W: out of the window)."""
    d = (position - slot) % window
    return d <= position


def slot_read_ignores_start(position: int, slot: int, window: int) -> bool:
    """Reads every slot but the overwritten one, even before anything was written there (after a
    reset, the previous sequence's keys leak)."""
    d = (position - slot) % window
    return d >= 1


def window_covered_short_ring(position: int, k: int, window: int) -> bool:
    """Looks the key up in a ring of W - 1 slots."""
    w = max(window - 1, 1)
    slot = (position - k) % w
    d = (position - slot) % window
    return 1 <= d <= position and position - 1 - (position - 1 - slot) % window == position - k


def ring_position_period_w(position: int, window: int) -> int:
    """Reduces with period W: still congruent and >= W past the start, but positions 2W.. no
    longer stand in for themselves (and the block half the session relies on is lost)."""
    if position < window:
        return position
    return window + (position - window) % window


def ring_step_wraps_to_zero(position: int, ring: int, window: int) -> bool:
    """A successor table that wraps to 0 (as if reset) instead of W."""
    following = ring + 1 if ring + 1 < 3 * window else 0
    p = position + 1
    return (
        0 <= following < 3 * window
        and (following - p) % window == 0
        and (following >= window) == (p >= window)
        and (p >= 3 * window or following == p)
    )


def ring_reads_alike_mod_w(position: int, slot: int, window: int) -> bool:
    """Claims the step could be fed p mod W (dropping the 'past the first window' half of the ring
    position): once p >= W, the slots farther back than p mod W would no longer be read."""
    r = position % window
    return (slot_read(r, slot, window) == slot_read(position, slot, window)) and (
        window_distance(r, slot, window) == window_distance(position, slot, window)
    )


def block_write_in_place(ring: int, window: int) -> tuple[int, int]:
    """Bumps the counter the current state reads, in place, before the commit (c[1] = c[1] + 1
    at the end of the ring): an interrupt before the ring store leaves a state whose position
    jumped by W, and the next state reads a counter nobody advanced."""
    if ring == window - 1:
        return 0, -1
    if ring == 2 * window - 1:
        return 1, 0
    if ring == 3 * window - 1:
        return 1, 1
    return -1, -1


def blocks_tracked_in_place(position: int, ring: int, c0: int, c1: int, window: int) -> bool:
    """contracts.ring_buffer.blocks_tracked with block_write_in_place as the session's write."""
    after = counters_written(c0, c1, *block_write_in_place(ring, window))
    return counters_track(position, ring, (c0, c1), after, window)


# -- position bookkeeping -----------------------------------------------------------------


def can_step_strict(position: int, n_tokens: int, max_len: int) -> bool:
    """Refuses the last slot."""
    return n_tokens < max_len - position


def step_position_advance_on_failure(position: int, n_tokens: int, max_len: int, succeeded: bool) -> int:
    """Advances (clamped) even when the step failed."""
    return min(position + n_tokens, max_len)


# -- deadlines ----------------------------------------------------------------------------


def release_time_float(start_ns: int, period_ns: int, tick: int) -> int:
    """Accumulates in floating point: drifts once start + tick * period passes 2**53 ns (~104 days
    of uptime). `tickformer prove` refutes it for that reason, by z3 on binary64 under realistic
    preconditions (verify/proofs/drift.release_drift: an exact start, at least one tick, a
    period of 1 us to 10 s; the witness is in claims/results/prove.json); CrossHair alone only
    reaches an OverflowError at periods near 1.8e308, which is not credited."""
    return int(float(start_ns) + float(tick) * float(period_ns))


def next_tick_overskip(start_ns: int, period_ns: int, tick: int, now_ns: int) -> tuple[int, int]:
    """floor + 1 instead of ceil: skips one period too many when lateness is a whole number of
    periods."""
    deadline = start_ns + (tick + 1) * period_ns
    if now_ns <= deadline:
        return tick + 1, 0
    skipped = (now_ns - deadline) // period_ns + 1
    return tick + 1 + skipped, skipped


def next_tick_burst(start_ns: int, period_ns: int, tick: int, now_ns: int) -> tuple[int, int]:
    """Never skips: runs every missed tick back-to-back (bursts through)."""
    return tick + 1, 0


# -- latency ------------------------------------------------------------------------------


def over_budget_ns_abs(elapsed_ns: int, budget_ns: int) -> int:
    """Reports slack as if it were lateness."""
    return abs(elapsed_ns - budget_ns)


# -- the runner itself ------------------------------------------------------------------------


def vacuous_spec(position: int) -> int:
    """A spec no input can satisfy: the runner must fail it as vacuous, after its re-run alone,
    never count it proven (tests/verify/test_prove.py).

    pre: position > 0 and position < 0
    post: __return__ == position
    """
    return position
