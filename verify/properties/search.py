"""The targeted search that ends `output_bound` when Hypothesis's examples did not break the bound:
from the example with the largest |y| / bound they found, a pattern search along the input
elements the score is most sensitive to climbs to the poles and cusps no constant of the graph
names (a pole of (x @ w - p)^-1, learned weights), then the counterexample is shrunk towards the
boundary of the interval where the bound breaks.

    zoom(score, feeds, signals, budget)   (feeds, score, evaluations): every float element probed
                                          at +-span/64 (at most MAX_PROBES of them, those where the
                                          largest output was first), then, for the TOP whose probes
                                          move the score most, a (1+1) pattern search whose step
                                          doubles on success and halves on failure, from span/8
                                          down to a few ulps; stops at a score > 1 or the budget
    simplify(violates, feeds, signals, key)  every other element set to 0 (or the domain's low end
                                          when 0 is outside) where the violation stays
    edges(violates, feeds, key)           the interval around the key element's value on which the
                                          violation holds, by bisection to one ulp
    refine_output_bound(model, state, budget)   the three above after output_bound's examples:
                                          None, or the violation (message, arrays) to report

A score is max over the bounded outputs of |y| / bound (a non-finite output counts as infinite).
Hill climbing is Hypothesis's own `target()` idea (Loscher and Sagonas, "Targeted property-based
testing", ISSTA 2017) carried on past the example budget with a step size that reaches float32
resolution; it finds what has a slope (poles, cusps), not a flat threshold no draw came near.
Not real-time code.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tickformer.runtime.foreign import EngineError

MAX_PROBES = 128  # elements probed for sensitivity
TOP = 4  # elements pattern-searched, most sensitive first
Feeds = dict[str, np.ndarray]
Element = tuple[Any, tuple[int, ...]]  # (InputSig, index)


def _bounds(i: Any, idx: tuple[int, ...]) -> tuple[float, float]:
    k = idx[-1] if len(i.lo) > 1 else 0
    return float(i.lo[k]), float(i.hi[k])


def _moved(feeds: Feeds, e: Element, value: float) -> Feeds:
    i, idx = e
    out = dict(feeds)
    x = np.array(feeds[i.name], copy=True)
    x[idx] = value
    out[i.name] = x
    return out


def elements(feeds: Feeds, signals: list[Any], limit: int = MAX_PROBES) -> list[Element]:
    """The float elements of the signal inputs (at most `limit`, spread evenly)."""
    found = [(i, idx) for i in signals for idx in np.ndindex(feeds[i.name].shape)]
    if len(found) > limit:
        pick = np.linspace(0, len(found) - 1, limit).round().astype(int)
        found = [found[k] for k in sorted(set(pick.tolist()))]
    return found


def zoom(
    score: Callable[[Feeds], float],
    feeds: Feeds,
    signals: list[Any],
    budget: int,
    near: tuple[int | None, int | None] = (None, None),
) -> tuple[Feeds, float, int]:
    """Climb from `feeds` towards a larger score (module docstring); the probes take at most half
    the budget, the elements at `near` (batch, time: where the largest output was) first."""
    best, best_score, used = feeds, score(feeds), 1
    if best_score > 1 or not signals:
        return best, best_score, used
    gains: list[tuple[float, int, Element]] = []
    b, t = near

    def close(e: Element) -> bool:
        i, idx = e
        return (b is None or i.batch_axis is None or idx[i.batch_axis] == b) and (
            t is None or i.time_axis is None or idx[i.time_axis] == t
        )

    found = elements(best, signals, limit=10**9)
    candidates = [e for e in found if close(e)] + [e for e in found if not close(e)]
    candidates = candidates[: max(1, min(MAX_PROBES, budget // 4))]
    for n, e in enumerate(candidates):
        lo, hi = _bounds(*e)
        x = float(best[e[0].name][e[1]])
        gain = 0.0  # how much the score moves when this element does (either way: a peak may sit between)
        for value in (x + (hi - lo) / 64, x - (hi - lo) / 64):
            if used >= budget:
                break
            s = score(_moved(best, e, min(max(value, lo), hi)))
            used += 1
            if np.isfinite(s):
                gain = max(gain, abs(s - best_score))
            elif s > 0:
                gain = np.inf
        gains.append((gain, n, e))
    for _, _, e in sorted(gains, key=lambda g: (-g[0], g[1]))[:TOP]:
        lo, hi = _bounds(*e)
        dtype = best[e[0].name].dtype
        step = (hi - lo) / 8
        while used < budget and best_score <= 1:
            x = float(best[e[0].name][e[1]])
            if step < float(np.spacing(np.asarray(max(abs(x), abs(lo), abs(hi)), dtype))):
                break
            moved = False
            for value in (x + step, x - step):
                value = float(np.asarray(min(max(value, lo), hi), dtype))
                if value == x:
                    continue
                cand = _moved(best, e, value)
                s = score(cand)
                used += 1
                if s > best_score:
                    best, best_score, moved = cand, s, True
                    break
            step = step * 2 if moved else step / 2
        if best_score > 1:
            break
    return best, best_score, used


def simplify(violates: Callable[[Feeds], bool], feeds: Feeds, signals: list[Any], keep: Element) -> Feeds:
    """Every element but `keep` set to 0 (the domain's low end if 0 is outside) where the
    violation stays: the counterexample shows the one value that breaks the bound."""
    out = feeds
    for e in elements(feeds, signals):
        if e[0].name == keep[0].name and e[1] == keep[1]:
            continue
        lo, hi = _bounds(*e)
        simple = 0.0 if lo <= 0.0 <= hi else lo
        if float(out[e[0].name][e[1]]) == simple:
            continue
        cand = _moved(out, e, simple)
        if violates(cand):
            out = cand
    return out


def edges(violates: Callable[[Feeds], bool], feeds: Feeds, key: Element) -> tuple[float, float]:
    """[a, b] around the key element's value where the violation holds (bisection to one ulp on
    each side; the domain's end where it holds up to there)."""
    lo, hi = _bounds(*key)
    dtype = feeds[key[0].name].dtype
    x = float(feeds[key[0].name][key[1]])

    def edge(far: float) -> float:
        inside, outside = x, far
        if violates(_moved(feeds, key, far)):
            return far
        for _ in range(64):
            mid = float(np.asarray((inside + outside) / 2, dtype))
            if mid in (inside, outside):
                break
            if violates(_moved(feeds, key, mid)):
                inside = mid
            else:
                outside = mid
        return inside

    return edge(lo), edge(hi)


def key_element(
    score: Callable[[Feeds], float], before: Feeds, after: Feeds, signals: list[Any]
) -> Element | None:
    """The element the search moved that matters most (the one whose undoing lowers the score most)."""
    moved = [
        e for e in elements(after, signals, limit=10**9) if after[e[0].name][e[1]] != before[e[0].name][e[1]]
    ]
    if not moved:
        return None
    full = score(after)
    drops = [(full - score(_moved(after, e, float(before[e[0].name][e[1]]))), n) for n, e in enumerate(moved)]
    return moved[max(drops)[1]]


def bounded_outputs(model: Any) -> list[Any]:
    """The outputs output_bound watches: those with a declared bound, else every float output but
    a cache's."""
    floats = [o for o in model.sig.outputs if np.dtype(o.dtype).kind == "f"]
    return [o for o in floats if o.bound is not None] or [o for o in floats if not o.cache]


def output_score(model: Any, outs: Feeds) -> float:
    """max over the bounded outputs of |y| / bound (inf for an infinite output; NaN ignored)."""
    best = 0.0
    for o in bounded_outputs(model):
        if o.bound is None:
            continue
        y = np.asarray(outs[o.name], np.float64)
        if y.size:
            best = max(best, float(np.max(np.where(np.isnan(y), 0.0, np.abs(y)))) / o.bound)
    return best


def _largest(model: Any, outs: Feeds) -> tuple[str, list[int], float]:
    name, index, worst = "", [], -1.0
    for o in bounded_outputs(model):
        if o.bound is None or not np.asarray(outs[o.name]).size:
            continue
        mag = np.where(np.isnan(outs[o.name]), 0.0, np.abs(np.asarray(outs[o.name], np.float64)))
        idx = np.unravel_index(int(np.argmax(mag)), mag.shape)
        if float(mag[idx]) / o.bound > worst:
            name, index, worst = o.name, [int(v) for v in idx], float(mag[idx]) / o.bound
    return name, index, worst


def refine_output_bound(model: Any, state: dict[str, Any], budget: int) -> Callable[[], Any]:
    """After output_bound's examples held: zoom from the worst of them (module docstring); the
    violation found, simplified and with the interval it holds on, or None."""

    def score(feeds: Feeds) -> float:
        try:
            return output_score(model, model.full(feeds))
        except EngineError:  # not evaluable here (runs_in_domain reports engine errors)
            return -np.inf

    def refine() -> tuple[str, dict[str, np.ndarray]] | None:
        start = state.get("feeds")
        if start is None or state.get("bound") is None:
            return None
        signals = [i for i in model.sig.inputs if i.role == "signal" and i.lo is not None]
        o = next((o for o in model.sig.outputs if o.name == state.get("output")), None)
        index = state.get("index") or []
        near = (
            index[o.batch_axis] if o is not None and o.batch_axis is not None and index else None,
            index[o.time_axis] if o is not None and o.time_axis is not None and index else None,
        )
        best, s, used = zoom(score, start, signals, budget, near)
        state["evaluations"] = used
        if s <= 1:
            return None
        violates = lambda feeds: score(feeds) > 1  # noqa: E731
        key = key_element(score, start, best, signals)
        where = ""
        if key is not None:
            best = simplify(violates, best, signals, key)
            a, b = edges(violates, best, key)
            name = f"{key[0].name}{list(key[1])}"
            where = (
                f" at {name} = {float(best[key[0].name][key[1]])!r}: the bound breaks for {name} in "
                f"[{a!r}, {b!r}] ({b - a:.3g} wide) with the other inputs as saved"
            )
        outs = model.full(best)
        name, index, worst = _largest(model, outs)
        bound = next(o.bound for o in model.sig.outputs if o.name == name)
        arrays = {
            **{k: np.asarray(v) for k, v in best.items()},
            **{f"output.{k}": np.asarray(v) for k, v in outs.items()},
        }
        return (
            f"|{name}{index}| = {worst * bound:.7g} exceeds the declared bound {bound:g}{where} (found by the "
            f"targeted search from the largest |y| of the examples, {used} evaluations)",
            arrays,
        )

    return refine
