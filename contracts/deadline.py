"""Contract: control-loop deadline arithmetic (absolute deadlines, no drift, missed periods skipped).

Statement
    Tick k of a loop started at `start_ns` with period `period_ns` is released at
    r_k = start_ns + k * period_ns and must finish by its deadline r_{k+1}. Deadlines are computed
    from the start and the tick index, never by adding measured durations (cyclictest's
    `next += period`), so they never drift. When tick k finishes late, at now_ns > r_{k+1}, the
    loop skips the periods whose release already passed and resumes at the first tick j whose
    release is not in the past; it never bursts through missed ticks back-to-back.
Bound (proven by CrossHair on Python ints, `tickformer prove`)
    release_time(s, p, k) - s == k * p                     (no drift, exact integers)
    next_tick(s, p, k, now) == (j, skipped) with
        j == k + 1 + skipped, skipped >= 0,
        skipped == 0 when now <= r_{k+1} (on time),
        r_j >= now and r_j - now < p when late (first future release: none skipped needlessly)
Reason
    Integer nanoseconds (time.perf_counter_ns) are exact; floats would drift after 2**53 ns
    (~104 days) and make "skipped" depend on rounding.

All functions are pure integer arithmetic: real-time safe (no allocation beyond small ints,
O(1) work). Used by runtime/control_loop.py; proofs in verify/proofs/crosshair.py.
"""

from __future__ import annotations

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = (
    "release of tick k == start + k period exactly; "
    "late => resume at the first release >= now, which is < now + period"
)


def release_time(start_ns: int, period_ns: int, tick: int) -> int:
    """Absolute release time of tick `tick`: start + tick * period.

    Specified by the recurrence it must satisfy (cyclictest's next += period, without the
    accumulation): tick 0 is released at start, each later tick exactly one period after the one
    before.

    pre: period_ns > 0
    pre: tick >= 0
    post: implies(tick == 0, __return__ == start_ns)
    post: implies(tick > 0, __return__ - release_time(start_ns, period_ns, tick - 1) == period_ns)
    """
    return start_ns + tick * period_ns


def implies(a: bool, b: bool) -> bool:
    return (not a) or b


def deadline_of(start_ns: int, period_ns: int, tick: int) -> int:
    """Absolute deadline of tick `tick` (= release of the next tick).

    pre: period_ns > 0
    pre: tick >= 0
    post: __return__ == release_time(start_ns, period_ns, tick + 1)
    """
    return start_ns + (tick + 1) * period_ns


def lateness_ns(finish_ns: int, deadline_ns: int) -> int:
    """Signed lateness against the *scheduled* deadline (negative = slack). O(1)."""
    return finish_ns - deadline_ns


def next_tick(start_ns: int, period_ns: int, tick: int, now_ns: int) -> tuple[int, int]:
    """After tick `tick` finished at `now_ns`, the tick to run next and how many were skipped.

    On time (now <= deadline of `tick`): (tick + 1, 0). Late: (j, j - tick - 1) where j is the
    first tick whose release time is >= now, so missed periods are skipped, not burst through.

    pre: period_ns > 0
    pre: tick >= 0
    post: __return__[1] >= 0
    post: __return__[0] == tick + 1 + __return__[1]
    post: (now_ns <= start_ns + (tick + 1) * period_ns) == (__return__[1] == 0)
    post: __return__[1] == 0 or start_ns + __return__[0] * period_ns >= now_ns
    post: __return__[1] == 0 or start_ns + __return__[0] * period_ns - now_ns < period_ns
    """
    deadline = start_ns + (tick + 1) * period_ns
    if now_ns <= deadline:
        return tick + 1, 0
    late = now_ns - deadline  # > 0
    skipped = -(-late // period_ns)  # ceil(late / period) >= 1
    return tick + 1 + skipped, skipped
