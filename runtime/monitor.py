"""Run-time contract monitor: one object per session, modes `off`, `check`, `monitor`.

    off      nothing is checked; `check_step` returns at its first line (production).
    check    a violated contract raises `tickformer.errors.ContractViolation` naming it.
    monitor  violations are counted per contract and the worst case is kept; never raises.

The contracts checked per step are the ones stated in this package, referenced not
re-implemented:

    input_domain   contracts.input_domain.domain_excess      (x finite, in [lo, hi])
    output_bound   contracts.output_bound.output_excess      (y finite, |y| <= bound if declared)
    latency        contracts.latency.over_budget_ns          (elapsed_ns <= budget_ns if declared)
    state_bound    contracts.state_bound.state_excess        (ssm artifacts: every layer's state finite and
                                                              within its BIBO bound; `check_state`)

All state (counts, worst excesses, the step index of the worst case) is allocated at construction
in fixed-size numpy arrays; `check_input`, `check_output` and `check_step` are real-time safe on
the success path (a few bounded reductions, in-place updates of those arrays, no array
allocation). Only building a violation message allocates, and in `check` mode that happens on
the path that raises anyway. Overhead of each mode: benchmarks/test_contract_overhead.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tickformer.contracts.input_domain import (
    Columns,
    check_columns,
    check_domain,
    column_excess,
    describe_column_violation,
    describe_violation,
    domain_excess,
)
from tickformer.contracts.latency import check_budget, over_budget_ns
from tickformer.contracts.output_bound import describe_output_violation, output_excess
from tickformer.contracts.state_bound import describe_state_violation, state_excess
from tickformer.errors import ConfigError, ContractViolation

MODES = ("off", "check", "monitor")
CONTRACTS = ("input_domain", "output_bound", "latency", "state_bound")
_INPUT, _OUTPUT, _LATENCY, _STATE = 0, 1, 2, 3


class ContractMonitor:
    """Checks the per-step contracts of one session according to `mode`.

    input_domain=(lo, hi) finite; input_columns=(lows, highs), one per input column, inside it;
    output_bound: max |y| allowed (None = finiteness only);
    budget_ns: latency budget per step (None = not monitored).
    """

    __slots__ = (
        "mode",
        "lo",
        "hi",
        "columns",
        "output_bound",
        "budget_ns",
        "state_bound",
        "_on",
        "_raise",
        "_steps",
        "_counts",
        "_worst",
        "_worst_step",
    )

    def __init__(
        self,
        mode: str = "off",
        *,
        input_domain: tuple[float, float],
        input_columns: Columns | None = None,
        output_bound: float | None = None,
        budget_ns: int | None = None,
        state_bound: Any = None,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(
                f"contract mode {mode!r} is not one of {MODES}; use 'off' in production, 'check' to "
                "raise, 'monitor' to count"
            )
        self.mode = mode
        self.lo, self.hi = check_domain(*input_domain)
        self.columns = None
        if input_columns is not None:
            pairs = list(zip(*input_columns))  # (lows, highs) -> [(lo, hi), ...]
            self.columns = check_columns(pairs, (self.lo, self.hi), len(pairs))
        if output_bound is not None and not (isinstance(output_bound, (int, float)) and output_bound > 0):
            raise ConfigError(f"output_bound={output_bound!r} must be a positive number or None")
        self.output_bound = None if output_bound is None else float(output_bound)
        self.budget_ns = check_budget(budget_ns)
        self.state_bound = None if state_bound is None else np.array(state_bound, dtype=np.float64)  # [L]
        if self.state_bound is not None and not (self.state_bound.ndim == 1 and np.all(self.state_bound > 0)):
            raise ConfigError(f"state_bound={state_bound!r} must be one positive bound per layer")
        self._on = mode != "off"
        self._raise = mode == "check"
        self._steps = np.zeros(1, dtype=np.int64)  # steps checked
        self._counts = np.zeros(len(CONTRACTS), dtype=np.int64)  # violations per contract
        self._worst = np.zeros(
            len(CONTRACTS), dtype=np.float64
        )  # worst excess per contract (inf = non-finite)
        self._worst_step = np.full(len(CONTRACTS), -1, dtype=np.int64)  # step index of the worst case

    def _record(self, which: int, excess: float, step: int) -> None:
        self._counts[which] += 1
        if excess > self._worst[which]:
            self._worst[which] = excess
            self._worst_step[which] = step

    def check_input(self, x: np.ndarray) -> None:
        """Input-domain contract, to call *before* the step runs (a rejected input leaves the
        session untouched). Real-time safe on the success path."""
        if not self._on:
            return
        excess = domain_excess(x, self.lo, self.hi)
        if excess > 0.0:
            self._record(_INPUT, excess, self._steps[0])  # index of the step about to run
            if self._raise:
                raise ContractViolation("input_domain: " + describe_violation(x, self.lo, self.hi))
        elif self.columns is not None:
            excess = column_excess(x, self.columns)
            if excess > 0.0:
                self._record(_INPUT, excess, self._steps[0])
                if self._raise:
                    raise ContractViolation("input_domain: " + describe_column_violation(x, self.columns))

    def check_output(self, y: np.ndarray, elapsed_ns: int | None) -> None:
        """Output and latency contracts, to call after the step. Counts the step.
        Real-time safe on the success path."""
        if not self._on:
            return
        step = self._steps[0]  # 0-based index of the step just run
        self._steps[0] += 1
        excess = output_excess(y, self.output_bound)
        if excess > 0.0:
            self._record(_OUTPUT, excess, step)
            if self._raise:
                raise ContractViolation("output_bound: " + describe_output_violation(y, self.output_bound))
        if self.budget_ns is not None and elapsed_ns is not None:
            late = over_budget_ns(elapsed_ns, self.budget_ns)
            if late > 0:
                self._record(_LATENCY, float(late), step)
                if self._raise:
                    raise ContractViolation(
                        f"latency: step took {elapsed_ns} ns, over the budget of {self.budget_ns} ns by {late} ns"
                    )

    def check_state(self, state: np.ndarray) -> None:
        """State contract of an ssm artifact (state [B, L, ...], the state the step wrote), to call
        after check_output and before the commit: a violation in `check` mode raises and the step
        does not commit. Real-time safe on the success path. A no-op without a state bound."""
        if not self._on or self.state_bound is None:
            return
        excess = state_excess(state, self.state_bound)
        if excess > 0.0:
            self._record(_STATE, excess, self._steps[0] - 1)  # the step check_output just counted
            if self._raise:
                raise ContractViolation("state_bound: " + describe_state_violation(state, self.state_bound))

    def check_step(self, x: np.ndarray, y: np.ndarray, elapsed_ns: int | None) -> None:
        """All three contracts for one finished step. `off`: returns immediately."""
        if not self._on:
            return
        self.check_input(x)
        self.check_output(y, elapsed_ns)

    def reset(self) -> None:
        """Zero the counters in place (no allocation)."""
        self._steps[:] = 0
        self._counts[:] = 0
        self._worst[:] = 0.0
        self._worst_step[:] = -1

    def summary(self) -> dict[str, Any]:
        """Counts and worst cases per contract, JSON-ready (allocates; not for the hot path).
        worst: input_domain = distance outside [lo, hi]; output_bound = max|y| - bound
        (inf = non-finite output); latency = ns over budget."""
        contracts: dict[str, Any] = {}
        for i, name in enumerate(CONTRACTS):
            worst = float(self._worst[i])
            contracts[name] = {
                "violations": int(self._counts[i]),
                "worst_excess": worst if np.isfinite(worst) else "inf",
                "worst_step": int(self._worst_step[i]),
            }
        return {
            "mode": self.mode,
            "steps": int(self._steps[0]),
            "input_domain": [self.lo, self.hi],
            "input_domain_columns": None if self.columns is None else [list(p) for p in zip(*self.columns)],
            "output_bound": self.output_bound,
            "budget_ns": self.budget_ns,
            "state_bound": None if self.state_bound is None else self.state_bound.tolist(),
            "contracts": contracts,
        }
