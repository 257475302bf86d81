"""A fixed-rate control loop around a session: absolute deadlines, lateness, fallbacks.

Modelled on cyclictest (rt-tests): tick k is released at the absolute time start + k * period
(`contracts.deadline.release_time`, never "now + period", so the schedule cannot drift); the
lateness of every tick is measured against its *scheduled* time; when a tick finishes past its
deadline, the periods whose release already passed are skipped (`contracts.deadline.next_tick`)
instead of being burst through back-to-back; min/avg/max and a histogram with an overflow bucket
are kept in buffers allocated before the loop.

Per-tick policy (the mission's "defined fallback"): the step's output is used only if
    - the step returned (an exception counts as a *fault*),
    - it took at most `budget_ns` (`contracts.latency.over_budget_ns`; else an *overrun*),
    - it is finite and within the declared output bound (`contracts.output_bound.output_excess`;
      else a *contract violation*),
    - it is ready by the tick's deadline (`late_fallback`, the default; else a *late output*).
Otherwise the tick actuates the fallback: the last good output ("hold") or a user-supplied safe
action ("safe"), and the reason is counted. The loop itself never raises because of a step.
A Python step cannot be pre-empted: an overrunning step still completes (and advances the
session); only its late output is discarded.

Deadline misses: a tick misses its deadline when its output is handed to `actuate` after the
deadline (the release of the next tick); the lateness is measured at that hand-over. With
`late_fallback` every such output is the fallback's (the actuator holds what it has: a late
command never goes out), so every miss is covered by the fallback by construction. The next
release is chosen after `actuate` returns, so the time `actuate` takes (in a simulation: the
plant's own integration) can skip a period without making that tick's output late.

Times are integers from an injectable clock (default `time.perf_counter_ns`), and waiting goes
through an injectable `sleep(duration_ns)`, so tests drive the policy deterministically.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tickformer import validation
from tickformer.contracts.deadline import deadline_of, lateness_ns, next_tick, release_time
from tickformer.contracts.latency import check_budget, over_budget_ns
from tickformer.contracts.output_bound import output_excess
from tickformer.errors import ConfigError
from tickformer.runtime.denormals import denormals_flushed, flushed_denormals
from tickformer.runtime.steppable import Steppable

FALLBACKS = ("hold", "safe")
# per-tick outcome flags (bit mask, stored in the optional trace)
OK, OVERRUN, VIOLATION, FAULT, MISSED, LATE = 0, 1, 2, 4, 8, 16
FALLBACK_FLAGS = OVERRUN | VIOLATION | FAULT | LATE  # a tick with one of these actuated the fallback


def sleep_ns(duration_ns: int) -> None:
    """Default sleep: `time.sleep` (clock_nanosleep on Linux; its wake-up jitter is what the
    loop's lateness histogram measures)."""
    if duration_ns > 0:
        time.sleep(duration_ns / 1e9)


class VirtualClock:
    """Time that moves only when the loop sleeps: `ControlLoop(..., clock=vc.now, sleep=vc.sleep)`
    runs the same loop, controller and policy with every tick released on schedule and every
    step taking no time, so nothing is ever late. The outputs then depend only on the inputs and
    the seeds, not on the machine or its load: the control quality of a controller, measured
    deterministically (the demo's virtual-time run). Not a simulation of the step's cost."""

    def __init__(self, start_ns: int = 0) -> None:
        self._now = int(start_ns)

    def now(self) -> int:
        return self._now

    def sleep(self, duration_ns: int) -> None:
        if duration_ns > 0:
            self._now += int(duration_ns)


@dataclass(frozen=True)
class LoopConfig:
    """period_ns: tick period. budget_ns: per-step latency budget (None: the period).
    fallback: "hold" (repeat the last good output) or "safe" (always `safe_action`).
    safe_action: the output to use when no good output exists yet / for "safe" (zeros if None).
    output_bound: declared |y| bound (None: finiteness only). reset_at: reset the session before a
    step at this position (None: the session's `max_len` if it has one, else never; a sliding
    session -- a windowed artifact, on_full="slide" -- is never reset: its window slides).
    hist_bin_ns x hist_bins: wake-up lateness histogram range; larger values go to overflow.
    spin_ns: sleep until `spin_ns` before the release, then busy-wait on the clock (trades a CPU
    for lower wake-up lateness; 0 = sleep only).
    flush_denormals: run the loop with flush-to-zero in its thread (runtime/denormals.py: the
    step's time then does not depend on the position or on subnormal values), restored after;
    False leaves the thread's floating-point state as the caller set it.
    late_fallback: an output ready after its tick's deadline is not actuated; the fallback is
    (counted as a *late output*). False: a late output is still used (the miss is counted)."""

    period_ns: int
    budget_ns: int | None = None
    fallback: str = "hold"
    safe_action: tuple[float, ...] | None = None
    output_bound: float | None = None
    reset_at: int | None = None
    hist_bin_ns: int = 10_000
    hist_bins: int = 200
    spin_ns: int = 0
    flush_denormals: bool = True
    late_fallback: bool = True

    def __post_init__(self) -> None:
        validation.positive_int(self.period_ns, "period_ns", hint="e.g. 1_000_000 for 1 kHz")
        check_budget(self.budget_ns)
        validation.one_of(self.fallback, "fallback", FALLBACKS)
        if self.fallback == "safe" and self.safe_action is None:
            raise ConfigError(
                "fallback='safe' needs safe_action=(...), the output to actuate when a step is rejected"
            )
        if self.safe_action is not None and not all(math.isfinite(v) for v in self.safe_action):
            raise ConfigError(f"safe_action={self.safe_action!r} must be finite")
        if self.output_bound is not None and not (self.output_bound > 0 and math.isfinite(self.output_bound)):
            raise ConfigError(f"output_bound={self.output_bound!r} must be a positive finite number or None")
        validation.optional_positive_int(self.reset_at, "reset_at", hint="a position >= 1, or None")
        validation.boolean(self.flush_denormals, "flush_denormals")
        validation.boolean(self.late_fallback, "late_fallback")
        validation.integer(
            self.spin_ns,
            "spin_ns",
            min_value=0,
            max_value=self.period_ns - 1,
            hint="spin at most period_ns - 1",
        )
        for name in ("hist_bin_ns", "hist_bins"):
            validation.positive_int(getattr(self, name), name)

    @property
    def effective_budget_ns(self) -> int:
        return self.budget_ns if self.budget_ns is not None else self.period_ns


@dataclass(frozen=True)
class LoopStats:
    """Summary of a run (built after the loop; allocates). All times in ns."""

    ticks: int
    skipped_periods: int
    deadline_misses: int
    overruns: int
    contract_violations: int
    faults: int
    fallbacks: int
    resets: int
    wake_lateness_min: int
    wake_lateness_avg: float
    wake_lateness_max: int
    lateness_min: int
    lateness_avg: float
    lateness_max: int
    step_min: int
    step_avg: float
    step_max: int
    hist_bin_ns: int
    histogram: tuple[int, ...]
    overflow: int
    last_fault: str | None
    denormals_flushed: bool = False  # flush-to-zero was on in the loop's thread
    late_outputs: int = 0  # outputs ready after their deadline, replaced by the fallback (late_fallback)

    def counts(self) -> dict[str, Any]:
        """The run's counts as the closed-loop summaries report them (loop_ticks: the ticks run)."""
        return {
            "loop_ticks": self.ticks,
            "deadline_misses": self.deadline_misses,
            "fallbacks": self.fallbacks,
            "skipped_periods": self.skipped_periods,
            "faults": self.faults,
            "last_fault": self.last_fault,
        }

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
        d["histogram"] = list(self.histogram)
        return d


class _Running:
    """Running min, max and sum of one per-tick quantity (ns), as Python ints: made once per
    loop; `add` does constant work and no net allocation (the ints its sum makes are freed, as
    the loop's other counters': test_no_net_allocation_per_tick)."""

    __slots__ = ("min", "max", "sum")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.min, self.max, self.sum = 1 << 62, -(1 << 62), 0

    def add(self, value: int) -> None:
        self.sum += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value


class ControlLoop:
    """Runs `session.step` once per period with the fallback policy above.

    `run(n, observe, actuate)`: for each executed tick k, wait until its release, call
    `observe(k) -> x`, step, check, then `actuate(out)` with the loop's output buffer (valid until
    the next tick). Real-time safe per tick after construction: no numpy allocation by the loop
    (outputs are copied into a preallocated buffer, histogram and trace are preallocated),
    bounded work; only Python ints/floats are created. Exceptions from `observe`/`actuate`
    (user code) propagate; exceptions from the step never do.
    """

    def __init__(
        self,
        session: Steppable,
        config: LoopConfig,
        *,
        output_shape: tuple[int, ...] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
        sleep: Callable[[int], None] = sleep_ns,
        dtype: Any = np.float32,
    ) -> None:
        self.session = session
        self.config = config
        self.clock = clock
        self.sleep = sleep
        if output_shape is None:
            if config.safe_action is None:
                raise ConfigError(
                    "give output_shape=(...) (the session's step output shape) or a safe_action to size "
                    "the output buffer"
                )
            output_shape = (len(config.safe_action),)
        safe = np.zeros(output_shape, dtype=dtype)  # [*out]
        if config.safe_action is not None:
            if int(np.prod(output_shape)) != len(config.safe_action):
                raise ConfigError(
                    f"safe_action has {len(config.safe_action)} values but the output shape "
                    f"{output_shape} holds {int(np.prod(output_shape))}"
                )
            safe[...] = np.asarray(config.safe_action, dtype=dtype).reshape(output_shape)
        self._safe = safe  # [*out]
        self._last_good = safe.copy()  # [*out] held by the "hold" fallback
        self._out = safe.copy()  # [*out] what gets actuated
        self._hist = np.zeros(config.hist_bins, dtype=np.int64)  # [bins]
        self._wake, self._late, self._step = _Running(), _Running(), _Running()  # lateness, step time
        # A sliding session (windowed artifact) never fills: it slides instead of resetting.
        sliding = getattr(session, "sliding", False) is True
        default_reset = None if sliding else getattr(session, "max_len", None)
        reset_at = config.reset_at if config.reset_at is not None else default_reset
        self._reset_at = reset_at
        self._budget = config.effective_budget_ns
        self._y: Any = None  # the step's output between _step_checked and _decide
        self.trace: dict[str, np.ndarray] | None = None
        self._clear()

    @classmethod
    def virtual(cls, session: Steppable, config: LoopConfig, **kwargs: Any) -> "ControlLoop":
        """The same loop in virtual time (VirtualClock: every tick released on schedule, every step
        on time): the outputs depend on the inputs and seeds alone (not real-time: for control
        quality)."""
        clock = VirtualClock()
        return cls(session, config, clock=clock.now, sleep=clock.sleep, **kwargs)

    # ------------------------------------------------------------------ state

    def _clear(self) -> None:
        self._hist[:] = 0
        self._overflow = 0
        self._ticks = self._skipped = self._misses = 0
        self._overruns = self._violations = self._faults = self._fallbacks = self._resets = 0
        self._late_outputs = 0
        for running in (self._wake, self._late, self._step):
            running.clear()
        self._step_last = 0
        self._last_fault: str | None = None
        self._ftz = False  # flush-to-zero in the loop's thread during the last run

    @property
    def output(self) -> np.ndarray:
        """The output actuated by the last tick (the loop's own buffer)."""
        return self._out

    # ------------------------------------------------------------------ one tick
    def _step_checked(self, x: np.ndarray) -> int:
        """Run the step and check it; a good output is left in self._y for `_decide`. Returns
        the outcome flags. Real-time safe."""
        session = self.session
        t0 = self.clock()
        try:
            if self._reset_at is not None and getattr(session, "position", 0) >= self._reset_at:
                session.reset()  # type: ignore[attr-defined]  # constant time for runtime sessions
                self._resets += 1
            y = session.step(x)
            failed = False
        except Exception as exc:  # noqa: BLE001 - the loop must survive any step failure
            y = None
            failed = True
            self._last_fault = f"{type(exc).__name__}: {exc}"
        t1 = self.clock()
        dur = t1 - t0
        self._step_last = dur
        self._step.add(dur)
        flags = OK
        if failed:
            flags = FAULT
            self._faults += 1
        elif over_budget_ns(dur, self._budget) > 0:
            flags = OVERRUN
            self._overruns += 1
        elif (
            not isinstance(y, np.ndarray)
            or y.shape != self._out.shape
            or output_excess(y, self.config.output_bound) > 0.0
        ):
            flags = VIOLATION
            self._violations += 1
        self._y = y
        return flags

    def _decide(self, flags: int, ready: int, deadline: int) -> int:
        """Fill self._out with the step's output or the fallback: a good output ready after the
        deadline (`late_fallback`) is a late output. Returns the flags. Real-time safe."""
        if flags == OK and self.config.late_fallback and ready > deadline:
            flags = LATE
            self._late_outputs += 1
        y = self._y
        self._y = None
        if flags == OK and y is not None:
            np.copyto(self._out, y)
            np.copyto(self._last_good, self._out)
        else:
            self._fallbacks += 1
            np.copyto(self._out, self._last_good if self.config.fallback == "hold" else self._safe)
        return flags

    def _record_wake(self, wake: int) -> None:
        self._wake.add(wake)
        b = wake // self.config.hist_bin_ns if wake >= 0 else 0
        if b < self.config.hist_bins:
            self._hist[b] += 1
        else:
            self._overflow += 1

    def _record_late(self, late: int) -> None:
        self._late.add(late)
        if late > 0:
            self._misses += 1

    # ------------------------------------------------------------------ the loop
    def run(
        self,
        n_ticks: int,
        observe: Callable[[int], np.ndarray],
        actuate: Callable[[np.ndarray], None],
        *,
        trace: bool = False,
    ) -> LoopStats:
        """Execute `n_ticks` ticks (skipped periods do not count as executed ticks).

        trace=True preallocates per-tick arrays in `self.trace`: tick index k, wake lateness,
        step time, lateness of the output against the deadline, outcome flags
        (OVERRUN|VIOLATION|FAULT|LATE|MISSED).
        """
        validation.positive_int(n_ticks, "n_ticks")
        self._clear()
        tr = None
        if trace:
            # np.full writes every element, so the trace's pages are resident before the first
            # tick (np.zeros maps them lazily: resident memory would grow as the ticks fill it).
            tr = {
                name: np.full(n_ticks, 0, dtype=np.int64)
                for name in ("tick", "wake_ns", "step_ns", "lateness_ns", "flags")
            }
        self.trace = tr
        # flush_denormals=False leaves the thread's floating-point state exactly as the caller set it.
        with flushed_denormals() if self.config.flush_denormals else contextlib.nullcontext():
            self._ftz = denormals_flushed()
            self._ticks_loop(n_ticks, observe, actuate, tr)
        return self.stats()

    def _ticks_loop(
        self,
        n_ticks: int,
        observe: Callable[[int], np.ndarray],
        actuate: Callable[[np.ndarray], None],
        tr: dict[str, np.ndarray] | None,
    ) -> None:
        period, spin = self.config.period_ns, self.config.spin_ns
        clock, sleep = self.clock, self.sleep
        start = clock()
        k = 0
        for i in range(n_ticks):
            release = release_time(start, period, k)
            now = clock()
            if now < release - spin:
                sleep(release - spin - now)
                now = clock()
            while now < release:  # spin phase (only entered when spin_ns > 0 or sleep woke early)
                now = clock()
            wake = now - release
            self._record_wake(wake)
            x = observe(k)
            flags = self._step_checked(x)
            deadline = deadline_of(start, period, k)
            ready = clock()  # the output is handed to actuate now: the tick's lateness
            flags = self._decide(flags, ready, deadline)
            actuate(self._out)
            finish = clock()
            late = lateness_ns(ready, deadline)
            self._record_late(late)
            k_next, skipped = next_tick(start, period, k, finish)
            if skipped:
                flags |= MISSED
                self._skipped += skipped
            if tr is not None:
                tr["tick"][i] = k
                tr["wake_ns"][i] = wake
                tr["step_ns"][i] = self._step_last
                tr["lateness_ns"][i] = late
                tr["flags"][i] = flags
            self._ticks += 1
            k = k_next

    def stats(self) -> LoopStats:
        """Snapshot of the counters (allocates; call after the loop)."""
        n = max(self._ticks, 1)
        none = self._ticks == 0
        return LoopStats(
            ticks=self._ticks,
            skipped_periods=self._skipped,
            deadline_misses=self._misses,
            overruns=self._overruns,
            contract_violations=self._violations,
            faults=self._faults,
            fallbacks=self._fallbacks,
            resets=self._resets,
            wake_lateness_min=0 if none else self._wake.min,
            wake_lateness_avg=self._wake.sum / n,
            wake_lateness_max=0 if none else self._wake.max,
            lateness_min=0 if none else self._late.min,
            lateness_avg=self._late.sum / n,
            lateness_max=0 if none else self._late.max,
            step_min=0 if none else self._step.min,
            step_avg=self._step.sum / n,
            step_max=0 if none else self._step.max,
            hist_bin_ns=self.config.hist_bin_ns,
            histogram=tuple(int(v) for v in self._hist),
            overflow=self._overflow,
            last_fault=self._last_fault,
            denormals_flushed=self._ftz,
            late_outputs=self._late_outputs,
        )
