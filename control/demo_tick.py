"""The demo's backend and what its tick costs (issue 40).

    choose_backend  which backend the demo's loop and certification run on: `auto` takes the
                    generated C (backend "c": the K candidates in one `tf_peek` call, the chosen
                    one committed by `tf_commit_candidate`; docs/codegen.md "The controller's
                    tick") where a C compiler is found, ONNX Runtime otherwise; `c` and `ort`
                    ask for one. The choice and its reason are recorded (demo_summary.json
                    `backend`), e.g. "c (cc ... 12.2.0 found at /usr/bin/cc)" or "ort (no C compiler)".
    TimedSession    a model session whose model calls (peek, commit, step) are timed, the time
                    summed per tick of the loop: the model step's share of each tick
    tick_stats      the controller's whole tick (ControlLoop's step time: the peek of the K
                    candidates, the commit, any catch-up steps and the controller's own Python)
                    against the period, p50 / p99 / p99.9 / max, and the share of it spent outside
                    the model calls

The tick is ControlLoop's per-tick step time (runtime/control_loop.py `_step_checked`: the
controller's `step`, which calls the session); the model time is measured inside it, around
each session call, so the share outside counts the controller's Python and the timing's own
calls (two clock reads per model call).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from time import perf_counter_ns
from typing import Any

import numpy as np

from tickformer.errors import BackendUnavailable, ConfigError

BACKEND_CHOICES = ("auto", "c", "ort")


@dataclass(frozen=True)
class BackendChoice:
    """The backend the demo runs its models on, what was asked for, and why this one."""

    requested: str
    used: str
    reason: str
    compiler: str | None = None  # the compiler's first --version line where one was found

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_backend(requested: str) -> str:
    if requested not in BACKEND_CHOICES:
        raise ConfigError(f"--backend {requested!r} is not one of {', '.join(BACKEND_CHOICES)}")
    return requested


def choose_backend(requested: str = "auto") -> BackendChoice:
    """`auto`: "c" where tickformer.codegen.toolchain.find_compiler finds a C compiler, else "ort";
    `c`: the C backend, refused with what to do when there is no compiler; `ort`: ONNX Runtime.
    Loading with backend "c" needs tickformer.codegen imported (it registers the library
    builder): done here when "c" is chosen."""
    check_backend(requested)
    if requested == "ort":
        return BackendChoice(requested, "ort", "ort (asked for: --backend ort)")
    from tickformer.codegen import toolchain

    try:
        cc = toolchain.find_compiler()
    except BackendUnavailable as exc:
        if requested == "c":
            raise ConfigError(
                f"--backend c: {exc}; or run with --backend auto (ORT without a compiler)"
            ) from exc
        return BackendChoice(requested, "ort", "ort (no C compiler found: backend c needs one)")
    import tickformer.codegen  # noqa: F401  (registers backend "c"'s library builder)

    how = "asked for: --backend c" if requested == "c" else "the fastest available"
    return BackendChoice(requested, "c", f"c ({cc.version} found at {cc.path}; {how})", cc.version)


class TimedSession:
    """A runtime session with its model calls timed: `peek`, `commit` and `step` add their
    wall time (perf_counter_ns) to the current tick's sum; `next_tick()` (called once at the
    start of every tick, before the controller runs) stores the previous tick's sum and starts
    a new one, `finish()` stores the last. Everything else is the session's. The per-tick array
    is allocated up front (`ticks` entries), so the loop allocates nothing for it."""

    def __init__(self, session: Any, ticks: int) -> None:
        self._session = session
        self.model_ns = np.full(ticks, 0, dtype=np.int64)  # [ticks] model time per tick
        self._tick = -1
        self._sum = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def next_tick(self) -> None:
        if 0 <= self._tick < self.model_ns.size:
            self.model_ns[self._tick] = self._sum
        self._tick += 1
        self._sum = 0

    def finish(self) -> np.ndarray:
        """The per-tick model time of the ticks run ([ticks run] int64 ns)."""
        self.next_tick()
        return self.model_ns[: min(self._tick, self.model_ns.size)]

    def peek(self, x: np.ndarray) -> np.ndarray:
        t0 = perf_counter_ns()
        y = self._session.peek(x)
        self._sum += perf_counter_ns() - t0
        return y

    def commit(self, index: int) -> Any:
        t0 = perf_counter_ns()
        r = self._session.commit(index)
        self._sum += perf_counter_ns() - t0
        return r

    def step(self, x: np.ndarray) -> np.ndarray:
        t0 = perf_counter_ns()
        y = self._session.step(x)
        self._sum += perf_counter_ns() - t0
        return y


def tick_stats(tick_ns: np.ndarray, model_ns: np.ndarray, period_ns: int) -> dict[str, Any]:
    """The tick (ControlLoop's step time of each tick: the controller's whole step) and the model
    calls inside it, per tick: percentiles in us, the tick's p50 and p99.9 as shares of the
    period, and the share outside the model calls -- of the run's summed tick time
    (`outside_model_share`) and the median tick's (`outside_model_share_p50`)."""
    tick = np.asarray(tick_ns, dtype=np.float64)  # [ticks]
    model = np.asarray(model_ns, dtype=np.float64)  # [ticks]
    if tick.shape != model.shape or tick.size == 0:
        raise ValueError(
            f"tick_stats: {tick.shape} tick times and {model.shape} model times; need the same, > 0"
        )
    outside = tick - model  # [ticks]

    def pct(a: np.ndarray, q: float) -> float:
        return float(np.percentile(a, q)) / 1e3

    out: dict[str, Any] = {"ticks": int(tick.size), "period_us": period_ns / 1e3}
    for q, name in ((50, "p50"), (99, "p99"), (99.9, "p99.9")):
        out[f"tick_{name}_us"] = pct(tick, q)
        out[f"model_{name}_us"] = pct(model, q)
        out[f"outside_{name}_us"] = pct(outside, q)
    out["tick_max_us"] = float(tick.max()) / 1e3
    out["tick_p50_period_share"] = out["tick_p50_us"] * 1e3 / period_ns
    out["tick_p99.9_period_share"] = out["tick_p99.9_us"] * 1e3 / period_ns
    total = float(tick.sum())
    out["outside_model_share"] = float(outside.sum()) / total if total > 0 else 0.0
    share = np.divide(outside, tick, out=np.zeros_like(tick), where=tick > 0)  # [ticks]
    out["outside_model_share_p50"] = float(np.median(share))
    return out
