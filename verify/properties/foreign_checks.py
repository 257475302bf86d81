"""The properties `tickformer verify` checks on a bare ONNX model (a ForeignModel: the graph, its
signature from tickformer.artifact.foreign, ONNX Runtime sessions from tickformer.runtime.foreign).

Each `check_*(model, ...)` returns a check: example -> None (holds) or (message, arrays to save).
An example is a feed dict {input: array} (or a tuple of them); engine errors propagate as
`EngineError` and the runner classifies them (runs_in_domain / dynamic_axes).

    dynamic_axes            (sweep_axes, no Hypothesis) every size of every declared-dynamic axis
                            in its range runs (a range of more than TRIAL_LIMIT sizes: that many
                            spread evenly, both ends included), and every output's size along an
                            axis of that group follows it: a failure is a shape-contract violation
                            naming the axis
    runs_in_domain          no engine error on any in-domain input of a size that runs (a shape
                            error found here is a shape-contract violation too)
    finite_outputs          every float output finite; for a KV-cache pair also every output of
                            every step and the cache it hands on, on their own
    output_bound            the largest |y| searched with hypothesis.target; fails past the
                            declared bound (reported either way)
    causality               outputs at positions <= t bitwise unchanged when only inputs after t
                            change (along the causal time axis)
    padding_mask            outputs at real positions (and outputs without that time axis)
                            bitwise unchanged when the inputs at padded positions change
    step_equals_full        a KV-cache pair: prefill, then one step per position with the cache
                            fed back == the full pass, within the normwise tolerance (tolerance.py);
                            the final cache == the full pass's present outputs
    optimizations_agree     ONNX Runtime with every graph optimization vs none, within tolerance
    onnx_reference          ONNX Runtime vs onnx.reference, within tolerance

Not real-time code.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from hypothesis import assume, target

from tickformer.runtime.foreign import EngineError, fixed_feeds, take

from .search import bounded_outputs
from .tolerance import input_scale, max_abs_diff, normwise_gap

Arrays = dict[str, np.ndarray]
Problem = tuple[str, Arrays]

FLOAT_KINDS = "fc"


def _floats(model: Any) -> list[Any]:
    return [o for o in model.sig.outputs if np.dtype(o.dtype).kind in FLOAT_KINDS]


def _saved(feeds: dict[str, np.ndarray], outs: dict[str, np.ndarray] | None = None, **extra: Any) -> Arrays:
    arrays = {k: np.asarray(v) for k, v in feeds.items()}
    for k, v in (outs or {}).items():
        arrays[f"output.{k}"] = np.asarray(v)
    arrays.update({k: np.asarray(v) for k, v in extra.items()})
    return arrays


def _show(x: np.ndarray) -> str:
    return np.array2string(np.asarray(x), threshold=12, precision=6, separator=", ").replace("\n", "")


def time_size(model: Any, feeds: dict[str, np.ndarray], group: str | None) -> int:
    for i in model.sig.inputs:
        if i.time_axis is not None and i.time_group == group:
            return int(feeds[i.name].shape[i.time_axis])
    return 1


def _inputs_at(model: Any, feeds: dict[str, np.ndarray], b: int | None, t: int | None) -> str:
    """'x[0, 2] = [...]' for every input with a batch and time axis, at (b, t)."""
    parts = []
    for i in model.sig.inputs:
        x = feeds[i.name]
        if b is None or t is None or i.batch_axis is None or i.time_axis is None:
            continue
        if b >= x.shape[i.batch_axis] or t >= x.shape[i.time_axis]:
            continue
        v = np.take(np.take(x, [b], axis=i.batch_axis), [t], axis=i.time_axis)
        parts.append(f"{i.name}[b={b}, t={t}] = {_show(v.reshape(-1))}")
    return "; inputs there: " + ", ".join(parts) if parts else ""


# ----------------------------------------------------------------------------- dynamic axes


def _sizes_text(sizes: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    out, run = [], []
    for s in sorted(sizes):
        if run and s == run[-1] + 1:
            run.append(s)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [s]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


TRIAL_LIMIT = 64  # sizes tried per dynamic axis: all of a range up to this many, else this many spread evenly


def _trial_sizes(lo: int, hi: int, limit: int = TRIAL_LIMIT) -> list[int]:
    """Every size in [lo, hi] when there are at most `limit`, else `limit` of them spread evenly
    (both ends included)."""
    if hi - lo + 1 <= limit:
        return list(range(lo, hi + 1))
    return sorted({int(round(v)) for v in np.linspace(lo, hi, limit)})


def _where(model: Any, group: str) -> str:
    """'x axis 1, attention_mask axis 1' for the inputs with an axis of `group`."""
    places = [f"{i.name} axis {a}" for i in model.sig.inputs for a, g in enumerate(i.groups) if g == group]
    return ", ".join(places) or group


def _shape_problem(model: Any, outs: dict[str, np.ndarray], sizes: dict[str, int]) -> str | None:
    for o in model.sig.outputs:
        y = outs.get(o.name)
        if y is None:
            continue
        if y.ndim != len(o.dims):
            return f"output {o.name} has rank {y.ndim}, the graph declares {len(o.dims)} ({list(o.dims)})"
        for a, (dim, g) in enumerate(zip(o.dims, o.groups)):
            want = dim if isinstance(dim, int) else sizes.get(g) if g is not None else None
            if want is not None and y.shape[a] != want:
                what = f"the static size {dim}" if isinstance(dim, int) else f"{g} = {want}"
                return (
                    f"output {o.name} axis {a} has size {y.shape[a]}, not {what} (its shape {list(y.shape)})"
                )
    return None


def sweep_axes(model: Any, seed: int) -> tuple[dict[str, list[int]], list[dict[str, Any]], int]:
    """Try every size of every dynamic group with the others at a base size, and the corner with
    every group at its high end; for a KV-cache pair also one step after a cache of every length.
    The base starts at the low end of every range and moves, for a group none of whose sizes ran,
    to a size of another group that did (a graph that runs only at T = 8 still shows which batch
    sizes run at T = 8). Returns (accepted sizes per group, failures, trials run)."""
    sig = model.sig
    base = {g: r[0] for g, r in sig.ranges.items()}
    trials = 0

    def trial(sizes: dict[str, int]) -> tuple[str, str] | None:
        nonlocal trials
        trials += 1
        feeds = fixed_feeds(sig, sizes, seed)
        try:
            outs = model.full(feeds)
        except EngineError as exc:
            if exc.kind != "shape":  # not a shape contract: runs_in_domain reports it
                return None
            return exc.kind, str(exc)
        problem = _shape_problem(model, outs, sizes)
        return ("shape", problem) if problem else None

    def sweep(base: dict[str, int]) -> tuple[dict[str, list[int]], list[dict[str, Any]]]:
        accepted: dict[str, list[int]] = {g: [r[0]] for g, r in sig.ranges.items() if g not in sig.dynamic}
        accepted.update({g: [] for g in sig.dynamic})
        failures: list[dict[str, Any]] = []
        for g, (lo, hi) in sig.ranges.items():
            if g not in sig.dynamic:
                continue
            for s in _trial_sizes(lo, hi):
                sizes = {**base, g: s}
                bad = trial(sizes)
                if bad is None:
                    accepted[g].append(s)
                else:
                    failures.append({"group": g, "size": s, "sizes": sizes, "kind": bad[0], "error": bad[1]})
        return accepted, failures

    accepted, failures = sweep(base)
    if not sig.dynamic:  # a static graph: its one shape
        bad = trial(base)
        if bad is not None:
            failures.append(
                {"group": "static shape", "size": None, "sizes": base, "kind": bad[0], "error": bad[1]}
            )
    for _ in range(len(sig.ranges)):
        moved = {g: (v[0] if v else base[g]) for g, v in accepted.items()}
        if moved == base or not any(accepted.values()):
            break
        base = moved
        accepted, failures = sweep(base)
    corner = {g: r[1] for g, r in sig.ranges.items()}
    if len(sig.dynamic) > 1 and corner != base:
        bad = trial(corner)
        if bad is not None:
            failures.append(
                {
                    "group": "all at their largest",
                    "size": None,
                    "sizes": corner,
                    "kind": bad[0],
                    "error": bad[1],
                }
            )
    if model.stepper is not None:
        stepper = model.stepper
        t_group = stepper.time_group
        hi = sig.ranges.get(t_group, (1, 1))[1] if t_group is not None else 1
        start = 1 if stepper.cache.prefill == "full" else 0
        ok_lengths = []
        for k in range(start, max(hi, start + 1)):
            trials += 1
            sizes = {**base, **({t_group: k + 1} if t_group is not None else {})}
            feeds = fixed_feeds(sig, sizes, seed)
            try:
                stepper.decode(feeds, k, k + 1)
                ok_lengths.append(k)
            except EngineError as exc:
                if exc.kind != "shape":
                    ok_lengths.append(k)  # not a shape contract: runs_in_domain reports it
                    continue
                failures.append(
                    {
                        "group": "cache length",
                        "size": k,
                        "sizes": sizes,
                        "kind": exc.kind,
                        "error": str(exc),
                        "step": True,
                    }
                )
        model.cache_lengths = ok_lengths
    return accepted, failures, trials


def sweep_message(model: Any, accepted: dict[str, list[int]], failures: list[dict[str, Any]]) -> str:
    """One line per failing axis: where it is, which sizes fail, which run, the first error."""
    lines = []
    by_group: dict[str, list[dict[str, Any]]] = {}
    for f in failures:
        by_group.setdefault(str(f["group"]), []).append(f)
    for g, fs in by_group.items():
        first = fs[0]
        if g == "cache length":
            lines.append(
                f"shape contract violated: the step graph fails after a cache of length "
                f"{_sizes_text([f['size'] for f in fs])} (its past inputs' time axis is declared dynamic): "
                f"{first['error']}"
            )
        elif g == "static shape":
            lines.append(
                f"shape contract violated at the graph's static shape {first['sizes']}: {first['error']}"
            )
        elif first["size"] is None:
            lines.append(
                f"shape contract violated with every axis at its largest size {first['sizes']}: {first['error']}"
            )
        else:
            runs = accepted.get(g, [])
            lines.append(
                f"shape contract violated: {_where(model, g)} ({g!r}, declared dynamic) fails at size"
                f"{'s' if len(fs) > 1 else ''} {_sizes_text([f['size'] for f in fs])}"
                f" ({'runs at ' + _sizes_text(runs) if runs else 'no size runs'}): {first['error']}"
            )
    return "; ".join(lines)


# ----------------------------------------------------------------------------- value properties


def check_runs(model: Any) -> Callable[[dict[str, np.ndarray]], Problem | None]:
    """Run the full graph (and a KV-cache pair's steps); engine errors propagate to the runner."""

    def check(feeds: dict[str, np.ndarray]) -> Problem | None:
        model.full(feeds)
        if model.stepper is not None:
            t = time_size(model, feeds, model.stepper.time_group)
            k = 1 if model.stepper.cache.prefill == "full" else 0
            if t > k:
                model.stepper.decode(feeds, k, t)
        return None

    return check


def check_finite(model: Any) -> Callable[[dict[str, np.ndarray]], Problem | None]:
    """Every float output of the full graph finite; for a KV-cache pair also every float output
    of every step (the cache it hands on included) from its prefill to the last position, on
    their own: a step can break where the full pass does not."""
    stepper = model.stepper

    def steps(feeds: dict[str, np.ndarray]) -> Problem | None:
        t = time_size(model, feeds, stepper.time_group)
        start = 1 if stepper.cache.prefill == "full" else 0
        if t <= start:
            return None
        cache = stepper.prefill(feeds, start)
        for pos in range(start, t):
            outs = stepper.step_graph.run(stepper.step_feeds(feeds, pos, cache))
            for name, y in outs.items():
                if np.dtype(y.dtype).kind in FLOAT_KINDS and not np.isfinite(y).all():
                    idx = tuple(int(v) for v in np.argwhere(~np.isfinite(y))[0])
                    return (
                        f"step output {name}{list(idx)} = {float(y[idx])!r} at position {pos} (prefill {start}, "
                        "then one step per position) for an in-domain input",
                        _saved(feeds, position=np.array(pos), **{f"step.{name}": y}),
                    )
            cache = {past: outs[present] for past, present in stepper.cache.pairs}
        return None

    def check(feeds: dict[str, np.ndarray]) -> Problem | None:
        outs = model.full(feeds)
        for o in _floats(model):
            y = outs[o.name]
            if not np.isfinite(y).all():
                idx = tuple(int(v) for v in np.argwhere(~np.isfinite(y))[0])
                b = idx[o.batch_axis] if o.batch_axis is not None else None
                t = idx[o.time_axis] if o.time_axis is not None else None
                return (
                    f"output {o.name}{list(idx)} = {float(y[idx])!r} for an in-domain input"
                    f"{_inputs_at(model, feeds, b, t)}",
                    _saved(feeds, outs),
                )
        return steps(feeds) if stepper is not None else None

    return check


def check_output_bound(
    model: Any, state: dict[str, Any]
) -> Callable[[dict[str, np.ndarray]], Problem | None]:
    """Search the largest |y| (hypothesis.target on |y| / bound, or |y| when none is declared;
    an infinite output exceeds any bound, a NaN is finite_outputs'); `state` keeps the worst seen:
    {"worst", "output", "index", "bound", "score", "feeds"} (search.py starts there)."""
    outputs = bounded_outputs(model)

    def check(feeds: dict[str, np.ndarray]) -> Problem | None:
        outs = model.full(feeds)
        for o in outputs:
            y = np.asarray(outs[o.name], np.float64)
            mag = np.where(np.isnan(y), 0.0, np.abs(y))
            if not mag.size:
                continue
            idx = np.unravel_index(int(np.argmax(mag)), mag.shape)
            m = float(mag[idx])
            score = m / o.bound if o.bound else m
            target(min(score, 1e300), label=f"|{o.name}|" + (f" / {o.bound:g}" if o.bound else ""))
            if score > state.get("score", -1.0):
                state.update(
                    score=score,
                    worst=m,
                    output=o.name,
                    index=[int(v) for v in idx],
                    bound=o.bound,
                    feeds=feeds,
                )
            if o.bound is not None and m > o.bound:
                return (
                    f"|{o.name}{[int(v) for v in idx]}| = {m:.7g} exceeds the declared bound {o.bound:g}",
                    _saved(feeds, outs),
                )
        return None

    return check


def check_causal(model: Any, group: str) -> Callable[[tuple[Any, Any, int]], Problem | None]:
    sig = model.sig
    changed = [i for i in sig.inputs if i.time_group == group and i.role in ("signal", "ids")]
    masks = [i for i in sig.inputs if i.time_group == group and i.role == "mask" and i.pattern == "any"]
    outputs = [o for o in sig.outputs if o.time_group == group]
    pad = [i for i in sig.inputs if i.time_group == group and i.role == "mask" and i.batch_axis is not None]

    def check(example: tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]) -> Problem | None:
        a, b, cut = example
        t = time_size(model, a, group)
        cut = min(cut, t - 2)
        x2 = dict(a)
        for i in changed + masks:
            x = a[i.name].copy()
            take(x, i.time_axis, cut + 1, t)[...] = take(b[i.name], i.time_axis, cut + 1, t)
            if i.role == "mask":
                valid = np.moveaxis(x == i.valid, (i.batch_axis, i.time_axis), (0, 1))
                if not valid.reshape(valid.shape[0], -1).any(axis=1).all():
                    continue  # a row with no real position left: keep this mask as it was
            x2[i.name] = x
        ya, yb = model.full(a), model.full(x2)
        # With a padding mask, outputs at padded positions are not the model's answer (a padded
        # query may see no real key at all): compare the real positions <= cut only.
        valid = _valid_rows(pad[0], a[pad[0].name])[:, : cut + 1] if pad else None
        for o in outputs:
            pa, pb = take(ya[o.name], o.time_axis, 0, cut + 1), take(yb[o.name], o.time_axis, 0, cut + 1)
            if valid is not None and o.batch_axis is not None:
                keep = np.moveaxis(np.zeros(pa.shape, bool), (o.batch_axis, o.time_axis), (0, 1))
                keep[valid] = True
                keep = np.moveaxis(keep, (0, 1), (o.batch_axis, o.time_axis))
                pa, pb = np.where(keep, pa, 0), np.where(keep, pb, 0)
            if not np.array_equal(pa, pb, equal_nan=True):
                with np.errstate(invalid="ignore"):
                    diff = np.abs(pa.astype(np.float64) - pb.astype(np.float64))
                bad = np.argwhere(
                    ~(diff == 0) & ~(np.isnan(pa) & np.isnan(pb))
                    if pa.dtype.kind in FLOAT_KINDS
                    else pa != pb
                )
                pos = int(bad[0][o.time_axis]) if len(bad) else 0
                worst = np.nanmax(diff) if np.isfinite(diff).any() else float("nan")
                return (
                    f"output {o.name} at position {pos} changed (max |diff| {worst:.3g}) when only "
                    f"{', '.join(i.name for i in changed + masks)} after position {cut} changed",
                    {
                        **_saved(a, {o.name: ya[o.name]}),
                        **{f"changed.{k}": v for k, v in x2.items()},
                        f"changed.output.{o.name}": yb[o.name],
                        "cut": np.array(cut),
                    },
                )
        return None

    return check


def _valid_rows(mask_sig: Any, m: np.ndarray) -> np.ndarray:
    """[B, T] True where the mask marks a real position."""
    v = np.moveaxis(m == mask_sig.valid, (mask_sig.batch_axis, mask_sig.time_axis), (0, 1))
    return v.reshape(v.shape[0], v.shape[1], -1).all(axis=2)


def _at_valid(y: np.ndarray, o: Any, valid: np.ndarray) -> np.ndarray:
    """The values of output y at real positions (batch, time) of valid [B, T]."""
    moved = np.moveaxis(y, (o.batch_axis, o.time_axis), (0, 1))
    return moved[valid]


def check_padding(model: Any, mask_sig: Any) -> Callable[[tuple[Any, Any]], Problem | None]:
    sig = model.sig
    group = mask_sig.time_group
    changed = [
        i
        for i in sig.inputs
        if i.time_group == group and i.role in ("signal", "ids") and i.batch_axis is not None
    ]
    outputs = _floats(model) + [o for o in sig.outputs if o not in _floats(model)]

    def check(example: tuple[dict[str, np.ndarray], dict[str, np.ndarray]]) -> Problem | None:
        feeds, other = example
        valid = _valid_rows(mask_sig, feeds[mask_sig.name])  # [B, T]
        if valid.all():
            return None
        x2 = dict(feeds)
        for i in changed:
            x = feeds[i.name].copy()
            moved = np.moveaxis(x, (i.batch_axis, i.time_axis), (0, 1))  # a view of x
            moved[~valid] = np.moveaxis(other[i.name], (i.batch_axis, i.time_axis), (0, 1))[~valid]
            x2[i.name] = x
        ya, yb = model.full(feeds), model.full(x2)
        for o in outputs:
            if o.time_group == group and o.batch_axis is not None:
                pa, pb = _at_valid(ya[o.name], o, valid), _at_valid(yb[o.name], o, valid)
                where = "at real positions"
            else:
                pa, pb = ya[o.name], yb[o.name]
                where = "(no time axis of the mask: compared whole)"
            if not np.array_equal(pa, pb, equal_nan=True):
                return (
                    f"output {o.name} {where} changed (max |diff| {max_abs_diff(pa, pb):.3g}) when only "
                    f"{', '.join(i.name for i in changed)} at positions {mask_sig.name} marks as padding changed",
                    {
                        **_saved(feeds, {o.name: ya[o.name]}),
                        **{f"changed.{k}": v for k, v in x2.items()},
                        f"changed.output.{o.name}": yb[o.name],
                    },
                )
        return None

    return check


def _track(state: dict[str, Any], gap: float, tol: float, what: str) -> None:
    ratio = gap / tol if tol > 0 else float("inf")
    if ratio > state.get("margin", -1.0):
        state.update(margin=ratio, gap=gap, tol=tol, where=what)


def _gap_over(
    state: dict[str, Any],
    got: np.ndarray,
    want: np.ndarray,
    feeds: dict[str, np.ndarray],
    tol: float,
    what: str,
) -> str | None:
    """The normwise gap of `got` vs `want` (tolerance.py), tracked in `state` as the margin the
    report shows; "normwise gap G > tolerance T" when it is over `tol`, else None."""
    gap = normwise_gap(got, want, input_scale(feeds))
    _track(state, gap, tol, what)
    return f"normwise gap {gap:.3g} > tolerance {tol:.3g}" if gap > tol else None


def check_step_full(
    model: Any, tol: float, state: dict[str, Any]
) -> Callable[[tuple[Any, int]], Problem | None]:
    stepper = model.stepper
    group = stepper.time_group
    masks = [
        i for i in model.sig.inputs if i.role == "mask" and i.time_group == group and i.batch_axis is not None
    ]
    outs_sig = {o.name: o for o in model.sig.outputs}

    def check(example: tuple[dict[str, np.ndarray], int]) -> Problem | None:
        feeds, k = example
        t = time_size(model, feeds, group)
        lengths = model.cache_lengths
        start = 1 if stepper.cache.prefill == "full" else 0
        k = min(max(k, start), t - 1)
        assume(k in lengths or not lengths)
        full = model.full(feeds)
        stepped, cache = stepper.decode(feeds, k, t)
        valid = _valid_rows(masks[0], feeds[masks[0].name])[:, k:t] if masks else None
        for name in stepper.cache.shared:
            o = outs_sig[name]
            want = take(full[name], o.time_axis, k, t) if o.time_axis is not None else full[name]
            got = stepped[name]
            if got.shape != want.shape:
                return (
                    f"stepped output {name} has shape {list(got.shape)}, the full pass's positions {k}..{t - 1} "
                    f"{list(want.shape)}",
                    _saved(feeds, full, prefill=np.array(k)),
                )
            if valid is not None and o.time_axis is not None and o.batch_axis is not None:
                got, want = _at_valid(got, o, valid), _at_valid(want, o, valid)
            over = _gap_over(state, got, want, feeds, tol, name)
            if over is not None:
                return (
                    f"step-by-step output {name} (prefill {k}, then positions {k}..{t - 1} one step each) differs "
                    f"from the full pass: {over}",
                    _saved(
                        feeds,
                        {f"full.{name}": full[name], f"stepped.{name}": stepped[name]},
                        prefill=np.array(k),
                    ),
                )
        if stepper.cache.prefill == "full":
            for past, present in stepper.cache.pairs:
                got, want = cache[past], full[present]
                over = _gap_over(state, got, want, feeds, tol, present)
                if over is not None:
                    return (
                        f"after stepping to position {t - 1}, the cache {past} differs from the full pass's {present}: "
                        f"{over}",
                        _saved(feeds, {f"full.{present}": want, f"stepped.{past}": got}, prefill=np.array(k)),
                    )
        return None

    return check


def check_agree(
    model: Any, other: Callable[[str], Any], label: str, tols: dict[str, float], state: dict[str, Any]
) -> Callable[[tuple[Any, int]], Problem | None]:
    """The default sessions vs `other(graph)` (an unoptimized session or onnx.reference) on the
    full graph, and on the step graph at a drawn position for a KV-cache pair."""
    stepper = model.stepper

    def compare(graph: str, feeds: dict[str, np.ndarray], a: dict[str, np.ndarray]) -> Problem | None:
        try:
            b = other(graph).run(feeds)
        except EngineError as exc:
            return f"the {graph} graph runs in onnxruntime but {label} raises: {exc}", _saved(feeds)
        for name, ya in a.items():
            if np.dtype(ya.dtype).kind not in FLOAT_KINDS:
                continue
            over = _gap_over(state, ya, b[name], feeds, tols[graph], f"{graph}:{name}")
            if over is not None:
                return (
                    f"{graph} graph output {name}: onnxruntime vs {label} {over}",
                    _saved(feeds, {f"ort.{name}": ya, f"other.{name}": b[name]}),
                )
        return None

    def check(example: tuple[dict[str, np.ndarray], int]) -> Problem | None:
        feeds, k = example
        problem = compare("full", feeds, model.full(feeds))
        if problem is not None or stepper is None or stepper.cache.same:
            return problem  # (a model that is its own step graph: compared above)
        t = time_size(model, feeds, stepper.time_group)
        start = 1 if stepper.cache.prefill == "full" else 0
        if t <= start:
            return None
        k = min(max(k, start), t - 1)
        sf = stepper.step_feeds(feeds, k, stepper.prefill(feeds, k))
        return compare("step", sf, model.graph("step").run(sf))

    return check
