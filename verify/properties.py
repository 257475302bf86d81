"""Hypothesis properties checked on an exported model under a real backend (`tickformer verify`).

Every property draws inputs from the declared domain [lo, hi] — uniform values, only edge
values (lo, hi, 0, midpoint), and ulp-tiny spreads around an edge — with shrinking on. On a
violation the *shrunk* counterexample (the last failing example Hypothesis replays) is saved as
`<property>.npz` and reported.

    finite_outputs          every output value finite (contracts.output_bound / softmax_stability)
    causality               outputs at positions <= t are bitwise unchanged when only inputs after t
                            change (contracts.masking M4; exact, selection masks make it exact)
  artifacts only (tickformer.runtime sessions):
    step_equals_full        stepping through the KV cache == model.onnx full pass, within the
                            manifest tolerance (contracts.decode_equivalence)
    stale_cache_isolation   after reset(), a session that ran another sequence before gives
                            bitwise the outputs of a newly loaded session (contracts.masking M7)
    numpy_vs_backend        the backend's full pass == the numpy reference, within the manifest
                            tolerance
    rejected_step_is_harmless  a step with an input outside the domain (beyond an edge, NaN, inf)
                            raises a TickformerError, leaves the position unchanged, and the
                            following steps give bitwise the outputs of a session that never saw
                            it (contracts.input_domain, contracts.position P2)

Not real-time code.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts.decode_equivalence import equivalence_excess
from tickformer.contracts.input_domain import check_domain

Arrays = dict[str, np.ndarray]
Problem = tuple[str, Arrays]  # (message, arrays to save)


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


# ---- strategies ------------------------------------------------------------------------------


def _inward(value: float, dtype: type, up: bool) -> float:
    """The dtype value nearest `value` that stays inside the domain."""
    v: np.ndarray = np.asarray(value, dtype=dtype)
    if up and float(v) < value:
        v = np.nextafter(v, np.asarray(np.inf, dtype))
    if not up and float(v) > value:
        v = np.nextafter(v, np.asarray(-np.inf, dtype))
    return float(v)


def domain_arrays(domain: tuple[float, float], shape_t: Callable[[int], tuple[int, ...]], t_range: tuple[int, int], dtype: type = np.float32) -> st.SearchStrategy[np.ndarray]:
    """Inputs [B, T, F] with T in t_range and every value in the domain: uniform, edge-only, or
    a few ulps around an edge (tiny spreads). Built from public strategies, so it shrinks."""
    lo = _inward(domain[0], dtype, up=True)
    hi = _inward(domain[1], dtype, up=False)
    edges = sorted({lo, hi, _inward((lo + hi) / 2, dtype, up=True)} | ({0.0} if lo <= 0.0 <= hi else set()))
    width: Literal[16, 32, 64] = 16 if dtype is np.float16 else 64 if dtype is np.float64 else 32
    values = st.floats(lo, hi, width=width)

    def tiny(base: float, steps: np.ndarray) -> np.ndarray:
        x: np.ndarray = np.full(steps.shape, base, dtype=dtype)  # [B, T, F]
        for _ in range(int(steps.max(initial=0))):
            x = np.where(steps > 0, np.nextafter(x, np.asarray(np.inf, dtype)), x)
            steps = steps - 1
        return np.clip(x, lo, hi).astype(dtype)

    def for_t(t: int) -> st.SearchStrategy[np.ndarray]:
        shape = shape_t(t)
        return st.one_of(
            hnp.arrays(dtype, shape, elements=values),
            hnp.arrays(dtype, shape, elements=st.sampled_from(edges)),
            st.builds(tiny, st.sampled_from(edges), hnp.arrays(np.int64, shape, elements=st.integers(0, 3))),
        )

    return st.integers(*t_range).flatmap(for_t)


# ---- running one property --------------------------------------------------------------------


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
            problem = (f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", _arrays_of(example))
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


# ---- the properties --------------------------------------------------------------------------


def _first_bad(y: np.ndarray) -> str:
    idx = tuple(int(i) for i in np.argwhere(~np.isfinite(y))[0])
    return f"output {float(y[idx])!r} at index {idx} (batch, position, feature)"


def check_finite(model: Any) -> Callable[[np.ndarray], Problem | None]:
    def check(x: np.ndarray) -> Problem | None:
        y = model.full(x)  # [B, T, G]
        if not np.isfinite(y).all():
            return f"non-finite {_first_bad(y)} for an input inside the domain", {"x": x, "y": y}
        return None

    return check


def check_causal(model: Any) -> Callable[[tuple[np.ndarray, np.ndarray, int]], Problem | None]:
    def check(example: tuple[np.ndarray, np.ndarray, int]) -> Problem | None:
        x, other, cut = example
        t = x.shape[1]
        cut = min(cut, t - 2)
        x2 = x.copy()
        x2[:, cut + 1 :] = other[:, cut + 1 :]  # change only the inputs after `cut`
        y, y2 = model.full(x), model.full(x2)  # [B, T, G]
        with np.errstate(invalid="ignore"):  # inf - inf in a non-finite model: reported as nan
            diff = np.abs(y[:, : cut + 1].astype(np.float64) - y2[:, : cut + 1].astype(np.float64))  # [B, cut+1, G]
        if not np.array_equal(y[:, : cut + 1], y2[:, : cut + 1], equal_nan=True):
            pos = int(np.argwhere(~(diff == 0) | np.isnan(diff))[0][1])
            return (
                f"output at position {pos} changed (max |diff| {np.nanmax(diff) if np.isfinite(diff).any() else 'nan'}) when only inputs after position {cut} changed",
                {"x": x, "x_changed": x2, "cut": np.array(cut), "y": y, "y_changed": y2},
            )
        return None

    return check


def _tolerance(model: Any) -> tuple[float, float]:
    tol = model.tolerance or {}
    return float(tol.get("rtol", 1e-4)), float(tol.get("atol", 1e-4))


def check_step_full(model: Any) -> Callable[[np.ndarray], Problem | None]:
    rtol, atol = _tolerance(model)

    def check(x: np.ndarray) -> Problem | None:
        full = model.full(x)  # [B, T, G]
        model.session.reset()
        stepped = model.steps(model.session, x)  # [B, T, G]
        excess = equivalence_excess(stepped, full, rtol, atol)
        if excess > 0:
            return f"step-by-step output differs from the full pass beyond atol={atol:g}, rtol={rtol:g} (excess {excess:.3g})", {"x": x, "y_step": stepped, "y_full": full}
        return None

    return check


def check_stale_cache(model: Any) -> Callable[[tuple[np.ndarray, np.ndarray]], Problem | None]:
    from tickformer import runtime

    def check(example: tuple[np.ndarray, np.ndarray]) -> Problem | None:
        before, x = example
        model.session.reset()
        model.steps(model.session, before)  # fills the cache with another sequence
        model.session.reset()
        got = model.steps(model.session, x)  # [B, T, G]
        with runtime.load(model.path, backend=model.backend) as fresh:  # a cache nobody wrote
            want = model.steps(fresh, x)
        if not np.array_equal(got, want):
            return "after reset(), outputs depend on the previous sequence's stale cache rows", {"before": before, "x": x, "y_after_reset": got, "y_fresh": want}
        return None

    return check


def check_numpy_vs_backend(model: Any) -> Callable[[np.ndarray], Problem | None]:
    rtol, atol = _tolerance(model)

    def check(x: np.ndarray) -> Problem | None:
        got = model.full(x)
        want = model.reference.run(np.ascontiguousarray(x, np.float32))
        excess = equivalence_excess(got, want, rtol, atol)
        if excess > 0:
            return f"{model.backend} differs from the numpy reference beyond atol={atol:g}, rtol={rtol:g} (excess {excess:.3g})", {"x": x, "y_backend": got, "y_numpy": want}
        return None

    return check


def check_rejected_step(model: Any) -> Callable[[tuple[np.ndarray, int, float]], Problem | None]:
    from tickformer.errors import TickformerError

    lo, hi = model.domain

    def check(example: tuple[np.ndarray, int, float]) -> Problem | None:
        x, cut, bad_value = example
        cut = min(cut, x.shape[1] - 1)
        model.session.reset()
        clean = model.steps(model.session, x)  # [B, T, G] reference, never disturbed
        model.session.reset()
        if cut:
            model.steps(model.session, x[:, :cut])
        bad = x[:, cut : cut + 1].copy()  # [B, 1, F]
        bad.flat[0] = bad_value
        try:
            model.session.step(bad)
        except TickformerError:
            pass
        else:
            return f"a step with input value {bad_value!r} outside the domain [{lo}, {hi}] was accepted", {"x": x, "cut": np.array(cut), "bad": bad}
        if model.session.position != cut:
            return f"a rejected step moved the position from {cut} to {model.session.position}", {"x": x, "cut": np.array(cut), "bad": bad}
        rest = model.steps(model.session, x[:, cut:])  # [B, T - cut, G]
        if not np.array_equal(rest, clean[:, cut:]):
            return "outputs after a rejected step differ from a session that never saw it", {"x": x, "cut": np.array(cut), "bad": bad, "y": rest, "y_clean": clean[:, cut:]}
        return None

    return check


def out_of_domain_values(domain: tuple[float, float]) -> st.SearchStrategy[float]:
    """float32 values strictly outside [lo, hi]: the nearest ones, far ones, NaN and +-inf."""
    lo, hi = domain
    span = max(hi - lo, 1.0)
    above = np.float32(hi)
    if float(above) <= hi:
        above = np.nextafter(above, np.float32(np.inf))
    below = np.float32(lo)
    if float(below) >= lo:
        below = np.nextafter(below, np.float32(-np.inf))
    far_above, far_below = float(np.float32(float(above) + 10 * span)), float(np.float32(float(below) - 10 * span))
    return st.one_of(
        st.sampled_from([math.nan, math.inf, -math.inf, float(above), float(below)]),
        st.floats(float(above), far_above, width=32),
        st.floats(far_below, float(below), width=32),
    )


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
        from tickformer.errors import ConfigError

        raise ConfigError("a bare ONNX model declares no input domain; pass --domain=LO:HI (e.g. --domain=-1:1)")
    dom = check_domain(*dom)
    b, f = model.batch, model.features
    shape = lambda t: (b, t, f)  # noqa: E731
    xs = domain_arrays(dom, shape, model.t_range, model.dtype)
    run = lambda name, strat, check: run_property(name, strat, check, examples=examples, seed_value=seed_value, out_dir=out_dir)  # noqa: E731
    results = [run("finite_outputs", xs, check_finite(model))]
    lo_t, hi_t = model.t_range
    if hi_t >= 2:
        pairs = st.integers(max(lo_t, 2), hi_t).flatmap(
            lambda t: st.tuples(domain_arrays(dom, shape, (t, t), model.dtype), domain_arrays(dom, shape, (t, t), model.dtype), st.integers(0, t - 2))
        )
        results.append(run("causality", pairs, check_causal(model)))
    else:
        results.append(PropertyResult("causality", "skip", 0, "the graph's sequence length is fixed at 1"))
    if model.kind == "artifact":
        results.append(run("step_equals_full", xs, check_step_full(model)))
        results.append(run("stale_cache_isolation", st.tuples(xs, xs), check_stale_cache(model)))
        results.append(run("numpy_vs_backend", xs, check_numpy_vs_backend(model)))
        rejected = st.tuples(xs, st.integers(0, model.t_range[1] - 1), out_of_domain_values(model.domain))  # the artifact's own domain: what the runtime enforces
        results.append(run("rejected_step_is_harmless", rejected, check_rejected_step(model)))
    return results
