"""The properties of a recurrent bare model's state (a ForeignModel whose signature has recurrent
pairs: tickformer.artifact.foreign.CacheSig), beside step_equals_full (foreign_checks.py):

    state_bounded   stepping from the reset state over sequences of up to 4 max_t positions,
                    every fixed-size state the step hands on is finite and, when a bound is
                    declared (--state-bound, the spec's cache.state_bound), within it; the
                    largest |state| is searched with hypothesis.target and reported. The steps
                    take inputs drawn from the domain, or held at a corner of it (lo or hi at
                    every position: what drives a state to its bound), drawn per position at
                    the step graph's own shapes, so a model exported as one step is checked too
    state_reset     the reset state (zeros; a cache of length 0) is the state the full graph
                    starts from: one step from it equals the full pass's first position (and
                    hands on what the full graph's presents after one position hold), within the
                    normwise tolerance; a full graph with a learned initial state fails it

`state_sequences(model, batches, length)` draws the step inputs of state_bounded. Each check
returns None (holds) or (message, arrays to save). Not real-time code.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st
from hypothesis import target

from tickformer.runtime.foreign import mask_values, positions, take

from .foreign_checks import time_size
from .strategies import input_arrays
from .tolerance import input_scale, normwise_gap

Problem = tuple[str, dict[str, np.ndarray]]
CORNERS = ("drawn", "lo", "hi")


def step_shape(i: Any, batch: int, t: int) -> tuple[int, ...]:
    """The shape of step input i at position t: static sizes, the batch, 1 (one position) or
    t + 1 (a span over past and current positions) on its time axis."""
    out = []
    for a, d in enumerate(i.dims):
        if isinstance(d, int):
            out.append(d)
        elif a == i.batch_axis:
            out.append(batch)
        elif a == i.time_axis:
            out.append(t + 1 if i.span == "total" else 1)
        else:
            out.append(1)
    return tuple(out)


def _step_input(i: Any, batch: int, t: int, points: Any = ()) -> st.SearchStrategy[np.ndarray]:
    shape = step_shape(i, batch, t)
    if i.role == "mask":
        return st.just(mask_values(i, np.ones(shape, bool)))
    if i.role == "position":
        return st.just(positions(i, shape, offset=0 if i.span == "total" else t))
    return input_arrays(i, shape, points)


def state_sequences(model: Any, batches: list[int], length: int) -> st.SearchStrategy[Any]:
    """(batch, (step feeds at position 0, 1, ...), corner): the non-state step inputs of each
    position, drawn from the domain; corner "lo"/"hi" holds every signal at that edge."""
    inputs = model.sig.cache.inputs

    def at(bt: tuple[int, int]) -> st.SearchStrategy[Any]:
        b, n = bt
        steps = [
            st.fixed_dictionaries(
                {i.name: _step_input(i, b, t, model.breaks.get(i.name, ())) for i in inputs}
            )
            for t in range(n)
        ]
        return st.tuples(st.just(b), st.tuples(*steps), st.sampled_from(CORNERS))

    return st.tuples(st.sampled_from(sorted(batches)), st.integers(1, length)).flatmap(at)


def _cornered(inputs: Any, feeds: dict[str, np.ndarray], corner: str) -> dict[str, np.ndarray]:
    if corner == "drawn":
        return feeds
    out = dict(feeds)
    for i in inputs:
        if i.role == "signal" and i.lo is not None and i.hi is not None:
            edge = np.asarray(i.lo if corner == "lo" else i.hi, dtype=i.dtype)  # [F] or [1]
            out[i.name] = np.broadcast_to(edge, feeds[i.name].shape).astype(i.dtype)
    return out


def check_state_bounded(model: Any, state: dict[str, Any]) -> Callable[[Any], Problem | None]:
    """Every state handed on finite and within the declared bound (module docstring); `state`
    keeps the largest |state| seen: {"worst", "output", "index", "position", "bound"}."""
    stepper = model.stepper
    cache = stepper.cache
    pairs = cache.states
    bound = cache.state_bound

    def check(example: tuple[int, tuple[dict[str, np.ndarray], ...], str]) -> Problem | None:
        batch, steps, corner = example
        held = stepper.empty_cache(batch)
        largest: dict[str, float] = {}
        try:
            return run(batch, steps, corner, held, largest)
        finally:
            for name, m in largest.items():  # once per example and label (hypothesis.target's rule)
                target(m / bound if bound else m, label=f"|{name}|")

    def run(
        batch: int,
        steps: tuple[dict[str, np.ndarray], ...],
        corner: str,
        held: dict[str, np.ndarray],
        largest: dict[str, float],
    ) -> Problem | None:
        for t, drawn in enumerate(steps):
            feeds = _cornered(cache.inputs, drawn, corner)
            outs = stepper.step_graph.run({**held, **feeds})
            for _, present in pairs:
                s = np.asarray(outs[present])
                saved = {**{f"step{t}.{k}": v for k, v in feeds.items()}, f"state.{present}": s}
                saved["position"] = np.array(t)
                if not np.isfinite(s).all():
                    idx = [int(v) for v in np.argwhere(~np.isfinite(s))[0]]
                    return (
                        f"the state {present}{idx} = {float(s[tuple(idx)])!r} after the step at position {t} "
                        f"(from the reset state, inputs {'held at ' + corner if corner != 'drawn' else 'drawn'} "
                        "in the domain)",
                        saved,
                    )
                mag = np.abs(s.astype(np.float64))
                idx = np.unravel_index(int(np.argmax(mag)), mag.shape) if mag.size else ()
                m = float(mag[idx]) if mag.size else 0.0
                largest[present] = max(largest.get(present, 0.0), m)
                if m > state.get("worst", -1.0):
                    state.update(
                        worst=m, output=present, index=[int(v) for v in idx], position=t, bound=bound
                    )
                if bound is not None and m > bound:
                    return (
                        f"|{present}{[int(v) for v in idx]}| = {m:.7g} after the step at position {t} exceeds the "
                        f"declared state bound {bound:g} (from the reset state, inputs "
                        f"{'held at ' + corner if corner != 'drawn' else 'drawn'} in the domain)",
                        saved,
                    )
            held = stepper.handed_on(outs)
        return None

    return check


def state_summary(state: dict[str, Any], result: Any) -> None:
    if "worst" not in state or result.status != "pass":
        return
    result.details.update({k: state[k] for k in ("worst", "output", "index", "position", "bound")})
    where = f"{state['output']}{state['index']} after position {state['position']}"
    if state["bound"] is None:
        result.message = (
            f"every state finite; the largest |state| found by the targeted search: {state['worst']:.7g} at {where} "
            "(no bound declared: --state-bound B, or the spec's cache.state_bound)"
        )
    else:
        result.message = (
            f"every state finite and within the declared bound {state['bound']:g}; the largest |state| found: "
            f"{state['worst']:.7g} at {where}"
        )


def check_state_reset(model: Any, tol: float, state: dict[str, Any]) -> Callable[[Any], Problem | None]:
    """One step from the reset state == the full pass's first position (module docstring)."""
    stepper = model.stepper
    cache = stepper.cache
    outs_sig = {o.name: o for o in model.sig.outputs}
    reset_name = "zeros" if all(cache.kind(p) == "state" for p, _ in cache.pairs) else "an empty cache"

    def compare(name: str, got: np.ndarray, want: np.ndarray, feeds: dict[str, np.ndarray]) -> Problem | None:
        gap = normwise_gap(got, want, input_scale(feeds))
        ratio = gap / tol if tol > 0 else float("inf")
        if ratio > state.get("margin", -1.0):
            state.update(margin=ratio, gap=gap, tol=tol, where=name)
        if gap > tol:
            return (
                f"the step from the reset state ({reset_name}) differs from the full pass at position 0 in {name}: "
                f"normwise gap {gap:.3g} > tolerance {tol:.3g}; the full graph does not start from the state a reset "
                "gives (a learned initial state?): export the initial state as the step's input default, or start "
                "the full graph from it",
                {
                    **{k: np.asarray(v) for k, v in feeds.items()},
                    f"output.full.{name}": want,
                    f"output.step.{name}": got,
                },
            )
        return None

    def check(feeds: dict[str, np.ndarray]) -> Problem | None:
        full = model.full(feeds)  # at T = 1 where the full graph runs at that length
        outs = stepper.step_graph.run(
            stepper.step_feeds(feeds, 0, stepper.empty_cache(stepper.batch_of(feeds)))
        )
        for name in cache.shared:
            o = outs_sig[name]
            want = take(full[name], o.time_axis, 0, 1) if o.time_axis is not None else full[name]
            got = outs[name]
            if o.time_axis is None and time_size(model, feeds, stepper.time_group) > 1:
                continue  # an output without a time axis sums up every position: not the first one's
            problem = compare(name, np.asarray(got), np.asarray(want), feeds)
            if problem is not None:
                return problem
        if cache.prefill == "full" and time_size(model, feeds, stepper.time_group) == 1:
            for _, present in cache.pairs:
                problem = compare(present, np.asarray(outs[present]), np.asarray(full[present]), feeds)
                if problem is not None:
                    return problem
        return None

    return check
