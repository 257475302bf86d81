"""Which properties apply to which model, in which order: one plan per model kind.

A plan is a generator of `Property` (run by the runner with Hypothesis) and finished
`PropertyResult`s (a sweep, or a skip with its reason); it may look at the results so far
(`ctx.results`). PLANS maps a model's `kind` to its plan:

    "onnx"             bare ONNX models (foreign_plan): dynamic_axes, runs_in_domain,
                       finite_outputs, output_bound, causality, padding_mask (per mask input),
                       step_equals_full, state_bounded and state_reset (recurrent models: KV
                       caches, fixed-size states), optimizations_agree, onnx_reference
    "decoder"          our decoder-only artifacts, continuous or token inputs (decoder_plan):
                       finite_outputs, causality, step_equals_full, stale_cache_isolation,
                       numpy_vs_backend, rejected_step_is_harmless
    "encoder-decoder"  our encoder-decoder artifacts (seq2seq_plan): finite_outputs,
                       causality (skipped: no full-pass graph, see its reason), padding_mask
                       (source padding), step_equals_full (vs the numpy teacher-forced pass),
                       stale_cache_isolation, numpy_vs_backend, rejected_step_is_harmless
    "ssm"              our state-space artifacts (ssm_plan): decoder_plan with the stale-cache
                       property read as state isolation after reset(), plus state_bounded (every
                       layer's state within the manifest's BIBO bound after every step, random and
                       constant corner inputs) and no_context_full (a stream of max_len + 1..max_len
                       + 8 steps never raises ContextFull and equals the full pass)
    "windowed"         our sliding-window artifacts (windowed_plan): decoder_plan (its
                       step_equals_full against the windowed full pass, across wrap-around),
                       window_isolation, slides_past_max_len

Not real-time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from hypothesis import strategies as st

from tickformer.artifact.foreign.spec import FOREIGN_PROPERTIES
from tickformer.contracts.input_domain import check_domain
from tickformer.errors import ConfigError
from tickformer.runtime.foreign import EngineError, fixed_feeds, input_shape

from . import foreign_checks as fc
from . import state_checks as sc
from .checks import (
    check_causal,
    check_finite,
    check_no_context_full,
    check_numpy_vs_backend,
    check_rejected_step,
    check_slides_past_max_len,
    check_source_padding,
    check_stale_cache,
    check_state_bounded,
    check_step_full,
    check_window_isolation,
)
from .counterexamples import save_counterexample
from .results import SKIP_REQUESTED, Property, PropertyResult
from .search import refine_output_bound
from .strategies import feed_dicts, id_arrays, size_dicts
from .tolerance import profile, tolerance

Plan = Iterator["Property | PropertyResult"]
SEARCH_BUDGET = 4  # output_bound's targeted search: this many model runs per example

_DECODER = (
    "finite_outputs",
    "causality",
    "step_equals_full",
    "stale_cache_isolation",
    "numpy_vs_backend",
    "rejected_step_is_harmless",
)
# Every property each plan yields, in order (tests/verify check each plan against its line): what
# --skip and a spec's skip may name. A bare model with several mask inputs has one padding_mask
# per mask, padding_mask[INPUT].
PROPERTY_NAMES: dict[str, tuple[str, ...]] = {
    "onnx": FOREIGN_PROPERTIES,
    "decoder": _DECODER,
    "encoder-decoder": (*_DECODER[:2], "padding_mask", *_DECODER[2:]),
    "ssm": (
        *_DECODER[:3],
        "state_isolation_after_reset",
        *_DECODER[4:],
        "state_bounded",
        "no_context_full",
    ),
    "windowed": (*_DECODER, "window_isolation", "slides_past_max_len"),
}


def check_skip(model: Any, names: Iterable[str]) -> frozenset[str]:
    """The property names to skip, each checked against the model's kind (PROPERTY_NAMES; for a
    bare model also padding_mask[INPUT] for each of its mask inputs). ConfigError (a usage error,
    exit 2) naming the unknown one and listing the known ones."""
    known = list(PROPERTY_NAMES[model.kind])
    sig = getattr(model, "sig", None)
    if sig is not None:
        known += [f"padding_mask[{i.name}]" for i in sig.inputs if i.role == "mask"]
    names = list(dict.fromkeys(names))
    for name in names:
        if name not in known:
            raise ConfigError(
                f"--skip {name}: no such property of a model of kind {model.kind!r} (from --skip or the spec's skip); "
                f"use one of {known}"
            )
    return frozenset(names)


def skipped(name: str, skip: frozenset[str]) -> bool:
    """Whether property `name` was asked to be skipped ("padding_mask" covers padding_mask[INPUT])."""
    return name in skip or (name.startswith("padding_mask[") and "padding_mask" in skip)


@dataclass
class Context:
    examples: int
    seed_value: int | None
    out_dir: Path | None
    domain: tuple[float, float] | None = None
    results: list[PropertyResult] = field(default_factory=list)
    skip: frozenset[str] = frozenset()

    def result(self, name: str) -> PropertyResult | None:
        return next((r for r in self.results if r.name == name), None)


# ----------------------------------------------------------------------------- our artifacts


def decoder_plan(model: Any, ctx: Context) -> Plan:
    if model.tokens:
        dom = model.domain
    else:
        dom = check_domain(*(ctx.domain if ctx.domain is not None else model.domain))
    xs = model.examples(model.t_range, dom)
    yield Property("finite_outputs", xs, check_finite(model), engine="fail")
    lo_t, hi_t = model.t_range
    if hi_t >= 2:
        pairs = st.integers(max(lo_t, 2), hi_t).flatmap(
            lambda t: st.tuples(
                model.sequences((t, t), dom), model.sequences((t, t), dom), st.integers(0, t - 2)
            )
        )
        yield Property("causality", pairs, check_causal(model), engine="fail")
    else:
        yield PropertyResult("causality", "skip", 0, "the sequence length is fixed at 1")
    yield Property("step_equals_full", xs, check_step_full(model), engine="fail")
    yield Property("stale_cache_isolation", st.tuples(xs, xs), check_stale_cache(model), engine="fail")
    yield Property("numpy_vs_backend", xs, check_numpy_vs_backend(model), engine="fail")
    rejected = st.tuples(xs, st.integers(0, hi_t - 1), model.bad_values())  # the artifact's own domain
    yield Property("rejected_step_is_harmless", rejected, check_rejected_step(model), engine="fail")


def ssm_plan(model: Any, ctx: Context) -> Plan:
    """decoder_plan (its stale_cache_isolation is state isolation after reset() here), then the
    state-space properties."""
    for item in decoder_plan(model, ctx):
        if isinstance(item, Property) and item.name == "stale_cache_isolation":
            item.name = "state_isolation_after_reset"
        yield item
    if model.tokens:
        dom = model.domain
    else:
        dom = check_domain(*(ctx.domain if ctx.domain is not None else model.domain))
    lo, hi = dom
    hi_t = model.t_range[1]
    if model.tokens:
        corners = st.sampled_from([0, model.config.vocab_size - 1])
    else:
        corners = st.sampled_from([lo, hi])
    constant = st.tuples(corners, st.integers(1, hi_t)).map(
        lambda c: np.full(
            (model.batch, c[1]) if model.tokens else (model.batch, c[1], model.features), c[0], model.dtype
        )
    )  # a constant corner input drives the state to its bound (docs/ssm.md)
    yield Property(
        "state_bounded",
        st.one_of(model.examples(model.t_range, dom), constant),
        check_state_bounded(model),
        engine="fail",
    )
    n = model.session.max_len
    longer = model.sequences((n + 1, n + 8), dom)
    yield Property("no_context_full", longer, check_no_context_full(model), engine="fail")


def windowed_plan(model: Any, ctx: Context) -> Plan:
    yield from decoder_plan(model, ctx)
    dom = (
        model.domain
        if model.tokens
        else check_domain(*(ctx.domain if ctx.domain is not None else model.domain))
    )
    r = model.receptive
    pairs = st.integers(r + 1, r + 8).flatmap(
        lambda t: st.tuples(model.sequences((t, t), dom), model.sequences((t, t), dom))
    )
    yield Property("window_isolation", pairs, check_window_isolation(model), engine="fail")
    n = 2 * model.session.max_len + model.window
    yield Property(
        "slides_past_max_len", model.sequences((n, n), dom), check_slides_past_max_len(model), engine="fail"
    )


def seq2seq_plan(model: Any, ctx: Context) -> Plan:
    ex = model.examples(model.t_range)
    yield Property("finite_outputs", ex, check_finite(model), engine="fail")
    yield PropertyResult(
        "causality",
        "skip",
        0,
        "an encoder-decoder artifact has no full-pass graph: each step sees the cache rows before its "
        "position, and rows at later positions (left by an earlier sequence) are checked by stale_cache_isolation",
    )
    n, v = model.session.max_len, model.config.vocab_size
    filler = id_arrays((model.batch, n), 0, v - 1)
    yield Property("padding_mask", st.tuples(ex, filler), check_source_padding(model), engine="fail")
    yield Property("step_equals_full", ex, check_step_full(model), engine="fail")
    yield Property("stale_cache_isolation", st.tuples(ex, ex), check_stale_cache(model), engine="fail")
    yield Property("numpy_vs_backend", ex, check_numpy_vs_backend(model), engine="fail")
    rejected = st.tuples(ex, st.integers(0, model.t_range[1] - 1), model.bad_values())
    yield Property("rejected_step_is_harmless", rejected, check_rejected_step(model), engine="fail")


# ----------------------------------------------------------------------------- bare ONNX


def _max_shapes(model: Any) -> dict[str, tuple[int, ...]]:
    top = {g: (model.accepted.get(g) or [r[1]])[-1] for g, r in model.sig.ranges.items()}
    return {i.name: input_shape(i, top) for i in model.sig.inputs}


def _step_shapes(model: Any) -> dict[str, tuple[int, ...]] | None:
    stepper = model.stepper
    top = {g: (model.accepted.get(g) or [r[1]])[-1] for g, r in model.sig.ranges.items()}
    t = top.get(stepper.time_group, 1) if stepper.time_group else 1
    k = max(t - 1, 1 if stepper.cache.prefill == "full" else 0)
    feeds = fixed_feeds(model.sig, {**top, **({stepper.time_group: k + 1} if stepper.time_group else {})})
    try:
        sf = stepper.step_feeds(feeds, k, stepper.prefill(feeds, k))
    except EngineError:
        return None
    return {name: tuple(v.shape) for name, v in sf.items()}


def tolerances(model: Any) -> dict[str, Any]:
    """{graph: Tolerance} for the full graph and a step graph (tolerance.py)."""
    dtype = next((o.dtype for o in model.sig.outputs if o.dtype.startswith("float")), "float32")
    factor = model.sig.tolerance_factor
    out = {"full": tolerance(profile(model.model_proto("full"), _max_shapes(model)), dtype, factor)}
    if model.stepper is not None:
        shapes = _step_shapes(model) or {}
        step = profile(model.model_proto("step"), shapes)
        out["step"] = tolerance(step, dtype, factor)
        out["pair"] = tolerance(step.merge(out["full"].profile), dtype, factor)
    return out


def _margin_summary(
    label: str, tols: dict[str, Any], keys: list[str]
) -> Callable[[dict[str, Any], PropertyResult], None]:
    def summary(state: dict[str, Any], result: PropertyResult) -> None:
        result.details["tolerance"] = {k: tols[k].to_dict() for k in keys}
        if "margin" in state:
            result.details.update(
                margin=state["margin"],
                worst_gap=state["gap"],
                worst_at=state["where"],
                tolerance_used=state["tol"],
            )
            if result.status == "pass":
                graph = state["where"].split(":")[0] if ":" in state["where"] else keys[0]
                formula = tols.get(graph, tols[keys[0]]).formula()
                result.message = (
                    f"{label}: worst normwise gap {state['gap']:.3g} ({state['where']}) = {state['margin']:.3g} of "
                    f"the tolerance {state['tol']:.3g} ({formula})"
                )

    return summary


def _margin_property(
    name: str,
    strategy: Any,
    check: Callable[[dict[str, Any]], Any],
    label: str,
    tols: dict[str, Any],
    keys: list[str],
) -> Property:
    """A property checked within a stated tolerance: `check(state)` is the check, tracking its
    worst margin in `state`, which `_margin_summary(label, tols, keys)` reports."""
    state: dict[str, Any] = {}
    return Property(name, strategy, check(state), state=state, summary=_margin_summary(label, tols, keys))


def _bound_summary(state: dict[str, Any], result: PropertyResult) -> None:
    if "worst" not in state:
        return
    result.details.update(
        worst=state["worst"], output=state["output"], index=state["index"], bound=state["bound"]
    )
    where = f"{state['output']}{state['index']}"
    if result.status != "pass":
        return
    if state["bound"] is None:
        result.status = "skip"
        result.message = (
            f"no bound declared (--output-bound B, or the spec's output bound); the largest |y| found by the "
            f"targeted search is {state['worst']:.7g} at {where}"
        )
    else:
        result.message = (
            f"largest |y| found by the targeted search: {state['worst']:.7g} at {where}, within the declared "
            f"bound {state['bound']:g}"
        )


def foreign_plan(model: Any, ctx: Context) -> Plan:
    sig = model.sig
    seed = ctx.seed_value or 0
    if "dynamic_axes" in ctx.skip:  # no sweep: the value properties draw every size in range
        accepted, failures, trials = dict(model.accepted), [], 0
    else:
        accepted, failures, trials = fc.sweep_axes(model, seed)
    model.accepted = accepted
    axes_text = ", ".join(f"{g} {fc._sizes_text(v)}" for g, v in accepted.items())
    if "dynamic_axes" in ctx.skip:
        yield PropertyResult("dynamic_axes", "skip", 0, SKIP_REQUESTED)
    elif failures:
        first = failures[0]
        message = fc.sweep_message(model, accepted, failures)
        path = None
        if ctx.out_dir is not None:
            path = save_counterexample(
                ctx.out_dir, "dynamic_axes", message, fixed_feeds(sig, first["sizes"], seed)
            )
        yield PropertyResult(
            "dynamic_axes", "fail", trials, message, path, {"failures": failures, "runs": accepted}
        )
    elif not sig.dynamic:
        yield PropertyResult(
            "dynamic_axes",
            "skip",
            trials,
            "the graph declares no dynamic axes (its static shape runs)"
            + (f"; {sig.fixed}" if sig.fixed else ""),
        )
    else:
        sampled = [
            f"{g}: {fc.TRIAL_LIMIT} of its {hi - lo + 1} sizes, spread evenly"
            for g, (lo, hi) in sig.ranges.items()
            if g in sig.dynamic and hi - lo + 1 > fc.TRIAL_LIMIT
        ]
        yield PropertyResult(
            "dynamic_axes",
            "pass",
            trials,
            f"every size tried runs: {axes_text}"
            + (f" ({'; '.join(sampled)})" if sampled else "")
            + (f"; {sig.fixed}" if sig.fixed else ""),
            details={"runs": accepted},
        )
    dead = [g for g, v in accepted.items() if not v]
    names = [n for n in FOREIGN_PROPERTIES if n != "dynamic_axes"]  # every property after the sweep
    if dead:
        for name in names:
            yield PropertyResult(name, "skip", 0, f"no size of {dead[0]!r} runs (see dynamic_axes)")
        return
    pts = model.breaks
    feeds = feed_dicts(sig, size_dicts(accepted), pts)
    yield Property("runs_in_domain", feeds, fc.check_runs(model), engine="fail")
    ran = ctx.results[-1]
    if ran.status == "fail" and ran.details.get("engine_error") == "shape":
        axes = ctx.result("dynamic_axes")
        if axes is not None and axes.status != "fail" and "dynamic_axes" not in ctx.skip:
            axes.status = "fail"
            axes.message = f"shape contract violated at sizes found by runs_in_domain: {ran.message}"
            axes.counterexample = ran.counterexample
    yield Property("finite_outputs", feeds, fc.check_finite(model))
    bound_state: dict[str, Any] = {}
    yield Property(
        "output_bound",
        feeds,
        fc.check_output_bound(model, bound_state),
        state=bound_state,
        summary=_bound_summary,
        refine=refine_output_bound(model, bound_state, SEARCH_BUDGET * ctx.examples)
        if model.search
        else None,
    )
    group = sig.causal_group
    if group is None:
        yield PropertyResult(
            "causality", "skip", 0, "declared non-causal (causal = false / --not-causal), or no time axis"
        )
    elif not [o for o in sig.outputs if o.time_group == group]:
        yield PropertyResult("causality", "skip", 0, f"no output has the time axis {group!r}")
    elif not [s for s in accepted.get(group, [1]) if s >= 2]:
        yield PropertyResult("causality", "skip", 0, f"the time axis {group!r} runs only at length 1")
    else:
        longer = {group: [s for s in accepted.get(group, []) if s >= 2]}
        pairs = size_dicts(accepted, **longer).flatmap(
            lambda s: st.tuples(
                feed_dicts(sig, st.just(s), pts),
                feed_dicts(sig, st.just(s), pts),
                st.integers(0, max(s[group] - 2, 0)),
            )
        )
        yield Property("causality", pairs, fc.check_causal(model, group))
    masks = [i for i in sig.inputs if i.role == "mask"]
    if not masks:
        yield PropertyResult("padding_mask", "skip", 0, "the model has no padding-mask input")
    for m in masks:
        name = "padding_mask" if len(masks) == 1 else f"padding_mask[{m.name}]"
        if m.batch_axis is None or m.time_axis is None:
            yield PropertyResult(
                name, "skip", 0, f"{m.name} has no batch and time axis (not a [B, T] padding mask)"
            )
            continue
        pairs = size_dicts(accepted).flatmap(
            lambda s: st.tuples(feed_dicts(sig, st.just(s), pts), feed_dicts(sig, st.just(s), pts))
        )
        yield Property(name, pairs, fc.check_padding(model, m))
    tols = tolerances(model)
    with_k = size_dicts(accepted).flatmap(
        lambda s: st.tuples(feed_dicts(sig, st.just(s), pts), st.integers(0, 64))
    )
    if model.stepper is None:
        yield PropertyResult(
            "step_equals_full", "skip", 0, "no step graph (a KV-cache pair needs --step STEP.onnx)"
        )
    else:
        tg = model.stepper.time_group
        need = 2 if model.stepper.cache.prefill == "full" else 1
        longer = {tg: [s for s in accepted.get(tg, []) if s >= need]} if tg else {}
        if tg and not longer[tg]:
            yield PropertyResult(
                "step_equals_full", "skip", 0, f"the time axis {tg!r} never runs at length >= {need}"
            )
        else:
            strat = size_dicts(accepted, **longer).flatmap(
                lambda s: st.tuples(
                    feed_dicts(sig, st.just(s), pts), st.integers(0, max(s.get(tg, 1) - 1, 0))
                )
            )
            yield _margin_property(
                "step_equals_full",
                strat,
                lambda state: fc.check_step_full(model, tols["pair"].rel, state),
                "step vs full",
                tols,
                ["pair"],
            )
    yield from _state_properties(model, accepted, tols)
    graphs = ["full", "step"] if model.stepper is not None and not model.stepper.cache.same else ["full"]
    rel = {g: tols[g].rel for g in graphs}
    yield _margin_property(
        "optimizations_agree",
        with_k,
        lambda state: fc.check_agree(
            model, model.unoptimized, "onnxruntime without graph optimizations", rel, state
        ),
        "all optimizations vs none",
        tols,
        graphs,
    )
    unsupported = [model.reference(g).unsupported for g in graphs if model.reference(g).unsupported]
    if unsupported:
        yield PropertyResult("onnx_reference", "skip", 0, unsupported[0])
    else:
        yield _margin_property(
            "onnx_reference",
            with_k,
            lambda state: fc.check_agree(model, model.reference, "onnx.reference", rel, state),
            "onnxruntime vs onnx.reference",
            tols,
            graphs,
        )


def _state_properties(model: Any, accepted: dict[str, list[int]], tols: dict[str, Any]) -> Plan:
    """state_bounded and state_reset of a recurrent bare model (state_checks.py)."""
    sig, stepper = model.sig, model.stepper
    if stepper is None:
        why = (
            "no recurrent state or cache (a step graph with --step STEP.onnx, or a model whose inputs and outputs "
            "pair: h -> h_n, past -> present)"
        )
        yield PropertyResult("state_bounded", "skip", 0, why)
        yield PropertyResult("state_reset", "skip", 0, why)
        return
    if not stepper.cache.states:
        yield PropertyResult(
            "state_bounded",
            "skip",
            0,
            "no fixed-size state: a KV cache grows with the positions (finite_outputs checks every step's cache)",
        )
    else:
        batches = accepted.get(sig.batch_group or "", []) or [1]
        bounded: dict[str, Any] = {}
        yield Property(
            "state_bounded",
            sc.state_sequences(model, batches, 4 * model.max_t),
            sc.check_state_bounded(model, bounded),
            engine="fail",
            state=bounded,
            summary=sc.state_summary,
        )
    tg = stepper.time_group
    steps_alone = stepper.cache.same and all(
        i.time_axis is None or i.dims[i.time_axis] == 1 for i in sig.inputs if i.role in ("signal", "ids")
    )
    if steps_alone:
        yield PropertyResult(
            "state_reset",
            "skip",
            0,
            "the model is one step with its state as an input: the reset state is what the caller feeds it",
        )
        return
    one = {tg: [1]} if tg and 1 in accepted.get(tg, []) else {}
    yield _margin_property(
        "state_reset",
        feed_dicts(sig, size_dicts(accepted, **one), model.breaks),
        lambda state: sc.check_state_reset(model, tols["pair"].rel, state),
        "the step from the reset state vs the full pass's start",
        tols,
        ["pair"],
    )


PLANS: dict[str, Callable[[Any, Context], Plan]] = {
    "onnx": foreign_plan,
    "decoder": decoder_plan,
    "encoder-decoder": seq2seq_plan,
    "ssm": ssm_plan,
    "windowed": windowed_plan,
}
