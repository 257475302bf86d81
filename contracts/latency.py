"""Contract: latency per token (step) stays within a budget.

Statement
    Each runtime step, measured with time.perf_counter_ns() from just before the step's first
    input copy to just after its last output copy, takes at most `budget_ns` nanoseconds.
Bound
    elapsed_ns <= budget_ns (a per-artifact, per-target budget; the certification campaign
    (tickformer.certify) measures the distribution, p99.9/max and a pWCET estimate).
Reason
    A control loop at rate f has 1/f seconds per tick; a step whose cost does not depend on
    the position (static KV cache) makes the measured worst case meaningful. This contract is
    monitored (never proven): timing is a property of the machine, not of the code.

Real-time safety: integer arithmetic on two ints, no allocation beyond the int result.
Referenced by: `runtime.monitor.ContractMonitor`, the control loop (with `contracts.deadline`).
"""

from __future__ import annotations

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = "elapsed_ns <= budget_ns per step (monitored and measured, never proven)"


def check_budget(budget_ns: int | None) -> int | None:
    """Validate a budget (positive int nanoseconds, or None for 'no budget'). Not hot path."""
    from tickformer import validation

    return validation.optional_positive_int(
        budget_ns, "latency budget_ns", hint="nanoseconds, e.g. 1_000_000 for 1 ms"
    )


def over_budget_ns(elapsed_ns: int, budget_ns: int) -> int:
    """How many nanoseconds a step exceeded its budget (0 when within): the least non-negative
    amount that, taken off the elapsed time, brings it within the budget (the posts pin the value).

    pre: budget_ns > 0
    pre: elapsed_ns >= 0
    post: __return__ >= 0
    post: elapsed_ns - __return__ <= budget_ns
    post: __return__ == 0 or elapsed_ns - (__return__ - 1) > budget_ns
    post: (__return__ == 0) == (elapsed_ns <= budget_ns)
    """
    return elapsed_ns - budget_ns if elapsed_ns > budget_ns else 0
