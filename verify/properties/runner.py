"""Running properties with Hypothesis and keeping the shrunk counterexample (`tickformer verify`).

`run_property(name, strategy, check)` runs `check` on up to `examples` draws (shrinking on,
targeting on: a check may call `hypothesis.target`); a check returns None (holds) or (message,
arrays); on a violation the *shrunk* counterexample (the last failing example Hypothesis replays)
is saved as `<property>.npz` (counterexamples.py). Engine errors of a bare model
(`EngineError`) either fail the property with their kind named (engine="fail") or reject the
example (engine="reject": not evaluable here; if no example is evaluable the property is skipped).
Any other error the model's runtime raises (a TickformerError: BackendError, ContextFull, ...) on
an in-domain input is a violation too. An exception of any other type comes from the check's own
code: the property's status is "error" (an internal error of verify, not a finding about the
model), with the exception, its traceback's last lines and the shrunk example saved.
`verify_model` runs the plan of the model's kind (plans.PLANS). A bug in the plan's own code
(outside any property) is the same kind of internal error, reported on the property it was
preparing, the rest not run. A run that hits its wall-clock or memory budget
(tickformer.runtime.budget: OverBudget, or a MemoryError) stops there: `verify_model` raises
BudgetExceeded carrying the results so far, the property it stopped in and every later one
reported as not run. Not real-time code.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
from hypothesis import HealthCheck, Phase, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable, UnsatisfiedAssumption

from tickformer.errors import ConfigError, TickformerError
from tickformer.runtime.budget import OverBudget, active, over_budget
from tickformer.runtime.foreign import EngineError

from .checks import Arrays, Problem
from .counterexamples import save_counterexample
from .plans import PLANS, PROPERTY_NAMES, Context, check_skip, skipped
from .results import SKIP_REQUESTED, PropertyResult

__all__ = ["SKIP_REQUESTED", "CheckCrashed", "run_property", "verify_model"]


class PropertyFailed(AssertionError):
    pass


class CheckCrashed(Exception):
    """A check raised something that is neither a finding nor a runtime error (a bug in verify)."""


def run_property(
    name: str,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], Problem | None],
    *,
    examples: int,
    seed_value: int | None,
    out_dir: Path | None,
    engine: str = "fail",
) -> PropertyResult:
    """Run `check` on `examples` draws; on failure keep the shrunk example and save it."""
    state: dict[str, Any] = {"n": 0, "problem": None, "rejected": 0, "kind": None, "crash": None}

    def guarded(example: Any) -> None:
        state["n"] += 1
        kind = None
        try:
            problem = check(example)
        except UnsatisfiedAssumption:
            raise
        except MemoryError:
            raise over_budget("memory", f"property {name}") from None
        except EngineError as exc:
            if engine == "reject":
                state["rejected"] += 1
                reject()
            kind = exc.kind
            what = "shape contract violated: " if exc.kind == "shape" else ""
            problem = (f"{what}engine error ({exc.kind}) on an in-domain input: {exc}", _arrays_of(example))
        except TickformerError as exc:  # the runtime refused or failed on an in-domain input: a violation
            problem = (
                f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                _arrays_of(example),
            )
        except Exception as exc:  # the check's own code broke: never reported as the model's fault
            first = str(exc).splitlines()[0] if str(exc) else ""
            state["crash"] = (
                f"internal error in the check (a bug in tickformer verify, not a property violation): "
                f"{type(exc).__name__}: {first}",
                _arrays_of(example),
                traceback.format_exc(limit=-4).strip().splitlines()[-8:],
            )
            raise CheckCrashed(first) from exc
        if problem is not None:
            state["problem"], state["kind"] = problem, kind
            raise PropertyFailed(problem[0])

    test = given(strategy)(guarded)
    test = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=seed_value is None,
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )(test)
    if seed_value is not None:
        test = seed(seed_value)(test)
    details: dict[str, Any] = {}
    try:
        test()
    except PropertyFailed:
        message, arrays = state["problem"]
        path = save_counterexample(out_dir, name, message, arrays) if out_dir is not None else None
        if state["kind"] is not None:
            details["engine_error"] = state["kind"]
        return PropertyResult(name, "fail", state["n"], message, path, details)
    except CheckCrashed:
        message, arrays, trace = state["crash"]
        path = save_counterexample(out_dir, name, message, arrays) if out_dir is not None else None
        return PropertyResult(name, "error", state["n"], message, path, {"traceback": trace})
    except Unsatisfiable:
        return PropertyResult(
            name,
            "skip",
            state["n"],
            f"no drawn example could be evaluated ({state['rejected']} raised engine errors: see runs_in_domain)",
            details={"rejected": state["rejected"]},
        )
    if state["rejected"]:
        details["rejected"] = state["rejected"]
    return PropertyResult(name, "pass", state["n"], details=details)


def _arrays_of(example: Any, prefix: str = "") -> Arrays:
    if isinstance(example, np.ndarray):
        return {prefix or "x": example}
    if isinstance(example, dict):
        return {f"{prefix}{k}": np.asarray(v) for k, v in example.items()}
    if isinstance(example, tuple):
        out: Arrays = {}
        for i, v in enumerate(example):
            out.update(
                _arrays_of(v, f"{prefix}arg{i}." if isinstance(v, (dict, tuple)) else f"{prefix}arg{i}")
            )
        return out
    if isinstance(example, (int, float)):
        return {prefix or "value": np.asarray(example)}
    return {}


def verify_model(
    model: Any,
    *,
    examples: int = 50,
    seed_value: int | None = 0,
    domain: tuple[float, float] | None = None,
    out_dir: Path | None = None,
    skip: Iterable[str] = (),
) -> list[PropertyResult]:
    """Run every property that applies to `model` (its kind's plan, plans.PLANS); `domain`
    overrides an artifact's manifest domain (bare models declare theirs in the signature);
    `skip`: property names not to run (with a bare model's spec `skip`), each checked against the
    model's kind first (ConfigError listing the known names); a skipped property is not run at
    all and is reported as skipped on request, whatever the plan would have said."""
    if model.kind not in PLANS:
        raise ConfigError(f"verify has no plan for models of kind {model.kind!r}; it knows {sorted(PLANS)}")
    skip_set = check_skip(model, [*skip, *getattr(getattr(model, "sig", None), "skip", ())])
    ctx = Context(examples=examples, seed_value=seed_value, out_dir=out_dir, domain=domain, skip=skip_set)
    budget = active()
    plan = PLANS[model.kind](model, ctx)
    try:
        for item in plan:
            if budget is not None:
                budget.doing = f"verify's property {item.name}"
            if skipped(item.name, skip_set):
                result = PropertyResult(item.name, "skip", 0, SKIP_REQUESTED)
            elif isinstance(item, PropertyResult):
                result = item
            else:
                result = run_property(
                    item.name,
                    item.strategy,
                    item.check,
                    examples=examples,
                    seed_value=seed_value,
                    out_dir=out_dir,
                    engine=item.engine,
                )
                if result.status == "pass" and item.refine is not None:
                    _refine(item, result, out_dir)
                if item.summary is not None:
                    item.summary(item.state if item.state is not None else {}, result)
            ctx.results.append(result)
    except MemoryError:
        stop = over_budget("memory", f"verify's property {_next_name(model, ctx)}")
        _stopped(model, ctx, str(stop.error), "skip")
        stop.error.results = ctx.results
        raise stop.error from None
    except OverBudget as stop:
        _stopped(model, ctx, str(stop.error), "skip")
        stop.error.results = ctx.results
        raise stop.error from None
    except TickformerError:
        raise
    except Exception as exc:  # the plan's own code broke (outside any property): a bug in verify
        first = str(exc).splitlines()[0] if str(exc) else ""
        trace = traceback.format_exc(limit=-4).strip().splitlines()[-8:]
        _stopped(
            model,
            ctx,
            f"internal error in verify while preparing this property (a bug in tickformer verify, not a property "
            f"violation): {type(exc).__name__}: {first}",
            "error",
            {"traceback": trace},
        )
    return ctx.results


def _refine(item: Any, result: PropertyResult, out_dir: Path | None) -> None:
    """A property whose examples all held, carried on by its refine hook (a targeted search)."""
    problem = item.refine()
    if item.state is not None and "evaluations" in item.state:
        result.details["search_evaluations"] = item.state["evaluations"]
    if problem is None:
        return
    message, arrays = problem
    result.status, result.message = "fail", message
    result.counterexample = (
        save_counterexample(out_dir, item.name, message, arrays) if out_dir is not None else None
    )


def _next_name(model: Any, ctx: Context) -> str:
    done = {r.name for r in ctx.results}
    return next((n for n in PROPERTY_NAMES.get(model.kind, ()) if n not in done), "?")


def _stopped(
    model: Any, ctx: Context, message: str, status: str, details: dict[str, Any] | None = None
) -> None:
    """The property the run stopped in gets `status` and `message`; every later one of the
    kind's plan is reported as not run."""
    done = {r.name for r in ctx.results}
    names = [n for n in PROPERTY_NAMES.get(model.kind, ()) if n not in done]
    if not names:
        return
    ctx.results.append(PropertyResult(names[0], status, 0, message, details=details or {}))
    for name in names[1:]:
        ctx.results.append(PropertyResult(name, "skip", 0, f"not run: the run stopped at {names[0]}"))
