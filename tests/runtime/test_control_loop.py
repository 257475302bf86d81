"""ControlLoop (runtime/control_loop.py) driven by a fake clock: deterministic deadlines,
skipped periods, overruns, contract violations, faults and fallbacks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.errors import ConfigError
from tickformer.runtime import control_loop
from tickformer.runtime.control_loop import (
    FALLBACK_FLAGS,
    FAULT,
    LATE,
    MISSED,
    OK,
    OVERRUN,
    VIOLATION,
    ControlLoop,
    LoopConfig,
)


class FakeClock:
    """Integer nanoseconds; sleep advances time exactly (plus an optional oversleep)."""

    def __init__(self, oversleep: int = 0) -> None:
        self.now = 1_000_000
        self.oversleep = oversleep
        self.sleeps: list[int] = []

    def __call__(self) -> int:
        return self.now

    def sleep(self, duration_ns: int) -> None:
        assert duration_ns > 0, "the loop must not sleep for a non-positive duration"
        self.sleeps.append(duration_ns)
        self.now += duration_ns + self.oversleep


class ScriptedSession:
    """step(x) takes durations[i] ns of fake time and returns outputs[i] (or raises)."""

    def __init__(
        self,
        clock: FakeClock,
        durations: list[int],
        outputs: list[object] | None = None,
        max_len: int | None = None,
    ) -> None:
        self.clock, self.durations, self.outputs = clock, durations, outputs
        self.calls = 0
        self.y = np.zeros(2, np.float32)
        self.position = 0
        self.resets = 0
        if max_len is not None:
            self.max_len = max_len

    def step(self, x: np.ndarray) -> np.ndarray:
        i = self.calls
        self.calls += 1
        self.clock.now += self.durations[i % len(self.durations)]
        self.position += 1
        out = None if self.outputs is None else self.outputs[i % len(self.outputs)]
        if isinstance(out, Exception):
            raise out
        if out is None:
            self.y[:] = (float(i), -float(i))
        else:
            self.y[:] = out
        return self.y

    def reset(self) -> None:
        self.position = 0
        self.resets += 1


def _run(session: ScriptedSession, clock: FakeClock, cfg: LoopConfig, n: int):
    acted: list[np.ndarray] = []
    loop = ControlLoop(session, cfg, output_shape=(2,), clock=clock, sleep=clock.sleep)
    stats = loop.run(
        n, observe=lambda k: np.zeros(3, np.float32), actuate=lambda u: acted.append(u.copy()), trace=True
    )
    return loop, stats, acted


def test_on_time_loop_uses_absolute_deadlines() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [100])
    loop, stats, acted = _run(s, clock, LoopConfig(period_ns=1000), 5)
    assert (
        stats.ticks == 5
        and stats.skipped_periods == 0
        and stats.fallbacks == 0
        and stats.deadline_misses == 0
    )
    assert loop.trace["tick"].tolist() == [0, 1, 2, 3, 4]
    assert clock.sleeps == [900] * 4  # next release = start + k * period, not finish + period
    assert stats.wake_lateness_max == 0 and stats.lateness_max == -900 and stats.lateness_min == -900
    assert [a.tolist() for a in acted] == [[i, -i] for i in range(5)]
    assert stats.step_min == stats.step_max == 100


def test_no_drift_with_oversleep() -> None:
    """Each wake-up is 37 ns late; the schedule still advances by exactly one period per tick."""
    clock = FakeClock(oversleep=37)
    s = ScriptedSession(clock, [100])
    loop, stats, _ = _run(s, clock, LoopConfig(period_ns=1000, hist_bin_ns=10, hist_bins=10), 50)
    assert loop.trace["wake_ns"][1:].tolist() == [37] * 49  # lateness against the scheduled time
    assert stats.wake_lateness_max == 37 and stats.skipped_periods == 0
    assert stats.histogram[0] == 1 and stats.histogram[3] == 49 and stats.overflow == 0


def test_spin_phase_wakes_exactly_on_the_release() -> None:
    class TickingClock(FakeClock):
        def __call__(self) -> int:  # every read costs 7 ns, like a real clock
            self.now += 7
            return self.now

    clock = TickingClock()
    s = ScriptedSession(clock, [100])
    loop, stats, _ = _run(s, clock, LoopConfig(period_ns=1000, spin_ns=200), 5)
    assert all(d < 1000 - 200 for d in clock.sleeps)  # slept only up to the spin window
    assert stats.wake_lateness_max < 7 * 2  # then polled the clock up to the release
    assert stats.ticks == 5 and stats.skipped_periods == 0
    with pytest.raises(ConfigError, match="spin_ns"):
        LoopConfig(period_ns=1000, spin_ns=1000)


def test_no_net_allocation_per_tick() -> None:
    """Net memory after a run does not grow with the number of ticks (the loop's buffers are
    allocated at construction; Python ints created per tick are freed)."""
    import tracemalloc

    clock = FakeClock()
    s = ScriptedSession(clock, [100])
    x = np.zeros(3, np.float32)

    def sleep(d: int) -> None:  # FakeClock.sleep records durations in a list: not here
        clock.now += d

    loop = ControlLoop(s, LoopConfig(period_ns=1000), output_shape=(2,), clock=clock, sleep=sleep)
    loop.run(200, lambda k: x, lambda u: None)  # warm
    # Only what this thread's loop and this test allocate counts: under xdist a thread another
    # test left behind (a budget watchdog, a server's reader) allocates while the loop runs, and
    # get_traced_memory() counted it (a failure seen once in make check).
    mine = [tracemalloc.Filter(True, control_loop.__file__), tracemalloc.Filter(True, __file__)]

    def traced() -> int:
        return sum(t.size for t in tracemalloc.take_snapshot().filter_traces(mine).traces)

    tracemalloc.start()
    try:
        base = traced()
        loop.run(100, lambda k: x, lambda u: None)
        small = traced() - base
        loop.run(5000, lambda k: x, lambda u: None)
        large = traced() - base
    finally:
        tracemalloc.stop()
    assert large - small < 2048, f"{large - small} bytes more after 4900 more ticks"


def test_histogram_overflow_bucket() -> None:
    clock = FakeClock(oversleep=500)
    s = ScriptedSession(clock, [10])
    _, stats, _ = _run(s, clock, LoopConfig(period_ns=10_000, hist_bin_ns=100, hist_bins=4), 6)
    assert stats.overflow == 5 and sum(stats.histogram) + stats.overflow == 6


def test_the_virtual_loop_releases_every_tick_on_schedule_and_reports_its_counts() -> None:
    """ControlLoop.virtual: time moves only when the loop sleeps, so a step as slow as the period
    in wall time is still on time, and ticks are released at k * period; LoopStats.counts is the
    summaries' subset of the stats."""
    import time

    class Slow:
        def step(self, x):
            time.sleep(0.002)  # twice the period, in wall time
            return np.zeros(2, np.float32)

    cfg = LoopConfig(period_ns=1_000_000)
    loop = ControlLoop.virtual(Slow(), cfg, output_shape=(2,))
    stats = loop.run(4, observe=lambda k: np.zeros(3, np.float32), actuate=lambda u: None)
    assert stats.deadline_misses == 0 and stats.skipped_periods == 0 and stats.fallbacks == 0
    assert loop.clock() == 3 * cfg.period_ns  # released at 0, 1, 2, 3 periods: no time spent stepping
    assert stats.counts() == {
        "loop_ticks": 4,
        "deadline_misses": 0,
        "fallbacks": 0,
        "skipped_periods": 0,
        "faults": 0,
        "last_fault": None,
    }


def test_overrun_uses_fallback_hold_and_counts_it() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [100, 500, 100])  # tick 1 overruns the 300 ns budget
    loop, stats, acted = _run(s, clock, LoopConfig(period_ns=1000, budget_ns=300), 3)
    assert stats.overruns == 1 and stats.fallbacks == 1 and stats.deadline_misses == 0
    assert [a.tolist() for a in acted] == [[0, 0], [0, 0], [2, -2]]  # tick 1 held tick 0's output
    assert loop.trace["flags"].tolist() == [OK, OVERRUN, OK]


def test_missed_periods_are_skipped_not_burst_through() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [100, 2_500, 100, 100])
    loop, stats, _ = _run(s, clock, LoopConfig(period_ns=1000, budget_ns=3000), 4)
    # tick 1 (released at 1000) finishes at 3500 > its deadline 2000: ticks 2 and 3 are skipped
    assert loop.trace["tick"].tolist() == [0, 1, 4, 5]
    assert stats.skipped_periods == 2 and stats.deadline_misses == 1 and stats.lateness_max == 1500
    assert loop.trace["flags"][1] == LATE | MISSED  # within budget, but ready after its deadline
    assert loop.trace["wake_ns"].tolist() == [0, 0, 0, 0]  # the loop slept until release 4000
    assert stats.fallbacks == stats.late_outputs == 1


def test_a_late_output_is_replaced_by_the_fallback() -> None:
    """An output ready after its deadline never goes out: the actuator holds the last good
    output, so every deadline miss is covered by the fallback; the late output is not the
    new "last good" one either."""
    clock = FakeClock()
    s = ScriptedSession(clock, [100, 1_500, 100, 1_200, 100])
    loop, stats, acted = _run(s, clock, LoopConfig(period_ns=1000, budget_ns=2000), 5)
    flags = loop.trace["flags"]
    missed = loop.trace["lateness_ns"] > 0
    assert stats.deadline_misses == 2 == stats.late_outputs and stats.overruns == 0
    assert np.all((flags[missed] & FALLBACK_FLAGS) != 0)  # each miss covered
    assert [a.tolist() for a in acted] == [[0, 0], [0, 0], [2, -2], [2, -2], [4, -4]]
    # the same run with late_fallback=False uses the late outputs: the misses are not covered
    clock = FakeClock()
    s = ScriptedSession(clock, [100, 1_500, 100, 1_200, 100])
    loop, stats, acted = _run(s, clock, LoopConfig(period_ns=1000, budget_ns=2000, late_fallback=False), 5)
    assert stats.deadline_misses == 2 and stats.late_outputs == 0 and stats.fallbacks == 0
    assert [a.tolist() for a in acted][1] == [1, -1]


def test_lateness_is_measured_when_the_output_is_handed_over() -> None:
    """A slow actuate (here 300 ns of fake time) after an output ready in time skips no
    deadline: the output went out before it. The next release is chosen after actuate returns."""
    clock = FakeClock()
    s = ScriptedSession(clock, [800])

    def actuate(u: np.ndarray) -> None:
        clock.now += 300

    loop = ControlLoop(s, LoopConfig(period_ns=1000), output_shape=(2,), clock=clock, sleep=clock.sleep)
    stats = loop.run(3, lambda k: np.zeros(3, np.float32), actuate, trace=True)
    assert stats.deadline_misses == 0 and stats.fallbacks == 0
    assert loop.trace["lateness_ns"].tolist() == [-200, -200, -200]
    assert loop.trace["tick"].tolist() == [0, 2, 4] and stats.skipped_periods == 3


def test_non_finite_output_uses_safe_action() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [100], outputs=[(1.0, 2.0), (math.nan, 0.0), (math.inf, 1.0), (3.0, 4.0)])
    cfg = LoopConfig(period_ns=1000, fallback="safe", safe_action=(0.5, -0.5))
    loop, stats, acted = _run(s, clock, cfg, 4)
    assert stats.contract_violations == 2 and stats.fallbacks == 2
    assert [a.tolist() for a in acted] == [[1, 2], [0.5, -0.5], [0.5, -0.5], [3, 4]]
    assert loop.trace["flags"].tolist() == [OK, VIOLATION, VIOLATION, OK]


def test_output_bound_violation_holds_last_good_output() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [100], outputs=[(1.0, 2.0), (9.0, 0.0), (2.0, -2.0)])
    _, stats, acted = _run(s, clock, LoopConfig(period_ns=1000, output_bound=5.0), 3)
    assert stats.contract_violations == 1
    assert [a.tolist() for a in acted] == [[1, 2], [1, 2], [2, -2]]


def test_output_at_the_bound_is_accepted() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [100], outputs=[(5.0, -5.0)])
    _, stats, _ = _run(s, clock, LoopConfig(period_ns=1000, output_bound=5.0), 2)
    assert stats.contract_violations == 0


def test_a_raising_step_is_a_fault_and_the_loop_continues() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [100], outputs=[RuntimeError("engine lost"), (1.0, 1.0), ValueError("bad")])
    loop, stats, acted = _run(s, clock, LoopConfig(period_ns=1000, safe_action=(0.0, 0.25)), 3)
    assert stats.faults == 2 and stats.fallbacks == 2 and stats.ticks == 3
    # no good output yet on tick 0: "hold" falls back to the safe action
    assert [a.tolist() for a in acted] == [[0, 0.25], [1, 1], [1, 1]]
    assert stats.last_fault == "ValueError: bad"
    assert loop.trace["flags"].tolist() == [FAULT, OK, FAULT]


def test_fault_priority_over_overrun() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [5000], outputs=[RuntimeError("x")])
    _, stats, _ = _run(s, clock, LoopConfig(period_ns=1000, budget_ns=100), 1)
    assert stats.faults == 1 and stats.overruns == 0 and stats.fallbacks == 1


def test_wrong_output_shape_is_a_violation() -> None:
    clock = FakeClock()

    class Bad(ScriptedSession):
        def step(self, x):
            super().step(x)
            return np.zeros(3, np.float32)

    _, stats, _ = _run(Bad(clock, [10]), clock, LoopConfig(period_ns=1000), 2)
    assert stats.contract_violations == 2


def test_resets_the_session_at_max_len() -> None:
    clock = FakeClock()
    s = ScriptedSession(clock, [10], max_len=4)
    _, stats, _ = _run(s, clock, LoopConfig(period_ns=100), 10)
    assert s.resets == 2 and stats.resets == 2 and stats.faults == 0


def test_a_raising_reset_is_a_fault_too() -> None:
    clock = FakeClock()

    class BadReset(ScriptedSession):
        def reset(self) -> None:
            raise RuntimeError("session closed")

    _, stats, _ = _run(BadReset(clock, [10], max_len=2), clock, LoopConfig(period_ns=100), 4)
    assert stats.ticks == 4 and stats.faults == 2 and stats.fallbacks == 2  # ticks 2 and 3
    assert stats.last_fault == "RuntimeError: session closed"


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="period_ns"):
        LoopConfig(period_ns=0)
    with pytest.raises(ConfigError, match="budget"):
        LoopConfig(period_ns=1000, budget_ns=-1)
    with pytest.raises(ConfigError, match="safe_action"):
        LoopConfig(period_ns=1000, fallback="safe")
    with pytest.raises(ConfigError, match="fallback"):
        LoopConfig(period_ns=1000, fallback="panic")
    with pytest.raises(ConfigError, match="finite"):
        LoopConfig(period_ns=1000, safe_action=(math.nan,))
    with pytest.raises(ConfigError, match="output_shape"):
        ControlLoop(object(), LoopConfig(period_ns=1000))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="safe_action has"):
        ControlLoop(object(), LoopConfig(period_ns=1000, safe_action=(1.0,)), output_shape=(2,))  # type: ignore[arg-type]
    loop = ControlLoop(object(), LoopConfig(period_ns=1000), output_shape=(2,))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="n_ticks"):
        loop.run(0, lambda k: None, lambda u: None)


@settings(max_examples=60)
@given(
    durations=st.lists(st.integers(min_value=0, max_value=5_000), min_size=1, max_size=30),
    oversleep=st.integers(min_value=0, max_value=300),
    period=st.integers(min_value=200, max_value=2_000),
    budget=st.integers(min_value=1, max_value=3_000),
)
def test_schedule_invariants(durations: list[int], oversleep: int, period: int, budget: int) -> None:
    """For any step durations: ticks strictly increase; skipped periods are exactly the gaps;
    no tick starts before its release; a late finish never leads to a back-to-back burst;
    fallbacks = overruns + violations + faults; the histogram counts every tick."""
    clock = FakeClock(oversleep=oversleep)
    s = ScriptedSession(clock, durations)
    n = len(durations)
    loop, stats, _ = _run(
        s, clock, LoopConfig(period_ns=period, budget_ns=budget, hist_bin_ns=50, hist_bins=5), n
    )
    tr = loop.trace
    ticks = tr["tick"].tolist()
    assert ticks[0] == 0 and all(b > a for a, b in zip(ticks, ticks[1:]))
    last_late = int(tr["lateness_ns"][-1])
    last_skip = -(-last_late // period) if last_late > 0 else 0  # skipped after the last tick
    assert stats.skipped_periods == sum(b - a - 1 for a, b in zip(ticks, ticks[1:])) + last_skip
    assert (tr["wake_ns"] >= 0).all()
    assert stats.fallbacks == stats.overruns + stats.contract_violations + stats.faults + stats.late_outputs
    late = tr["lateness_ns"] > 0
    assert np.all((tr["flags"][late] & FALLBACK_FLAGS) != 0)  # every miss covered by the fallback
    assert stats.overruns == sum(1 for d in durations if d > budget)
    assert sum(stats.histogram) + stats.overflow == n
    for i in range(n - 1):
        late = tr["lateness_ns"][i]
        skipped = ticks[i + 1] - ticks[i] - 1
        assert (skipped > 0) == (late > 0)  # skip exactly when the deadline was missed
        if skipped:
            # resumed at the first release not in the past: less than one period after the finish
            assert late - (skipped - 1) * period <= period
