"""Running properties with Hypothesis and keeping the shrunk counterexample (`tickformer verify`).

`run_property(name, strategy, check)` runs `check` on up to `examples` draws (shrinking on);
a check returns None (holds) or (message, arrays); on a violation the *shrunk* counterexample
(the last failing example Hypothesis replays) is saved as `<property>.npz`. `verify_model`
runs every property that applies to a model (`checks` has the properties). Not real-time code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tickformer.contracts.input_domain import check_domain
from tickformer.errors import ConfigError

from .checks import (
    Arrays,
    Problem,
    check_causal,
    check_finite,
    check_numpy_vs_backend,
    check_rejected_step,
    check_stale_cache,
    check_step_full,
)
from .strategies import domain_arrays, out_of_domain_values


@dataclass
class PropertyResult:
    name: str
    status: str  # "pass" | "fail" | "skip"
    examples: int  # examples run (including shrinking replays)
    message: str = ""
    counterexample: str | None = None  # path of the .npz

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class PropertyFailed(AssertionError):
    pass


def run_property(
    name: str,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], Problem | None],
    *,
    examples: int,
    seed_value: int | None,
    out_dir: Path | None,
) -> PropertyResult:
    """Run `check` on `examples` draws; on failure keep the shrunk example and save it."""
    state: dict[str, Any] = {"n": 0, "problem": None}

    def guarded(example: Any) -> None:
        state["n"] += 1
        try:
            problem = check(example)
        except Exception as exc:  # a backend error on an in-domain input is itself a violation
            problem = (
                f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                _arrays_of(example),
            )
        if problem is not None:
            state["problem"] = problem
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
    try:
        test()
    except PropertyFailed:
        message, arrays = state["problem"]
        path = save_counterexample(out_dir, name, message, arrays) if out_dir is not None else None
        return PropertyResult(name, "fail", state["n"], message, path)
    return PropertyResult(name, "pass", state["n"])


def _arrays_of(example: Any) -> Arrays:
    if isinstance(example, np.ndarray):
        return {"x": example}
    if isinstance(example, tuple):
        return {f"arg{i}": np.asarray(v) for i, v in enumerate(example)}
    return {}


def save_counterexample(out_dir: Path, name: str, message: str, arrays: Arrays) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.npz"
    tmp = out_dir / f".{name}.tmp.npz"
    payload = {**arrays, "meta": np.array(json.dumps({"property": name, "message": message}))}
    np.savez(tmp, **payload)  # type: ignore[arg-type]
    tmp.replace(path)
    return str(path)


def verify_model(
    model: Any,
    *,
    examples: int = 50,
    seed_value: int | None = 0,
    domain: tuple[float, float] | None = None,
    out_dir: Path | None = None,
) -> list[PropertyResult]:
    """Run every property that applies to `model` (models.OnnxModel or models.ArtifactModel)."""
    dom = domain if domain is not None else model.domain
    if dom is None:
        raise ConfigError(
            "a bare ONNX model declares no input domain; pass --domain=LO:HI (e.g. --domain=-1:1)"
        )
    dom = check_domain(*dom)
    b, f = model.batch, model.features
    shape = lambda t: (b, t, f)  # noqa: E731
    xs = domain_arrays(dom, shape, model.t_range, model.dtype)
    run = lambda name, strat, check: run_property(
        name, strat, check, examples=examples, seed_value=seed_value, out_dir=out_dir
    )  # noqa: E731
    results = [run("finite_outputs", xs, check_finite(model))]
    lo_t, hi_t = model.t_range
    if hi_t >= 2:
        pairs = st.integers(max(lo_t, 2), hi_t).flatmap(
            lambda t: st.tuples(
                domain_arrays(dom, shape, (t, t), model.dtype),
                domain_arrays(dom, shape, (t, t), model.dtype),
                st.integers(0, t - 2),
            )
        )
        results.append(run("causality", pairs, check_causal(model)))
    else:
        results.append(PropertyResult("causality", "skip", 0, "the graph's sequence length is fixed at 1"))
    if model.kind == "artifact":
        results.append(run("step_equals_full", xs, check_step_full(model)))
        results.append(run("stale_cache_isolation", st.tuples(xs, xs), check_stale_cache(model)))
        results.append(run("numpy_vs_backend", xs, check_numpy_vs_backend(model)))
        rejected = st.tuples(
            xs, st.integers(0, model.t_range[1] - 1), out_of_domain_values(model.domain)
        )  # the artifact's own domain: what the runtime enforces
        results.append(run("rejected_step_is_harmless", rejected, check_rejected_step(model)))
    return results
