"""What a property run gives back (PropertyResult) and what a plan asks the runner to run
(Property). Not real-time code."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable

STATUSES = ("pass", "fail", "skip", "error")  # error: a bug inside the check, not in the model
SKIP_REQUESTED = "skipped on request (--skip or the spec's skip)"


@dataclass
class PropertyResult:
    name: str
    status: str  # "pass" | "fail" | "skip" | "error" (the check itself raised: a bug in verify)
    examples: int  # examples run (including shrinking replays), or trials of a sweep
    message: str = ""
    counterexample: str | None = None  # path of the .npz
    details: dict[str, Any] = field(default_factory=dict)  # tolerance, margin, worst value, rejected, ...

    def to_dict(self) -> dict[str, Any]:
        """Every field, in their order; `details` is the result's own dict, not a copy."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Property:
    """A property for the runner: Hypothesis draws from `strategy`, `check` judges each example.

    engine: what an engine error (tickformer.runtime.foreign.EngineError) on an example means:
    "fail" (the property is about running at all: runs_in_domain), "reject" (the example is not
    evaluable for this property; counted in details["rejected"], reported by runs_in_domain).
    state: a dict the check fills (worst value, margin); `summary(state, result)` is called after
    the run (any status) to add the message and details (and may turn a pass into a skip).
    refine: called when every example held; returns None or (message, arrays): a violation
    found past the examples (output_bound's targeted search, search.py)."""

    name: str
    strategy: Any
    check: Callable[[Any], Any]
    engine: str = "reject"
    state: dict[str, Any] | None = None
    summary: Callable[[dict[str, Any], PropertyResult], None] | None = None
    refine: Callable[[], Any] | None = None
