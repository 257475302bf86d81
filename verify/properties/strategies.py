"""Hypothesis strategies for model inputs inside (and just outside) a declared domain.

Built from public strategies only, so shrinking works. A float array is drawn by one of:

    hypothesis   st.floats(lo, hi): Hypothesis's own distribution (bounded floats, its "weird"
                 values where they fall inside: +-0, the bounds, tiny and huge magnitudes)
    uniform      lo + (hi - lo) k / 2^24, k uniform: evenly over the domain
    edges        only lo, hi, 0 and the midpoint
    fractions    (twice the weight of the others) values where models typically break, mixed
                 with Hypothesis floats: simple
                 fractions p/q (q <= 12: 1/2, 1/3, 2/3, 1/4, ...) and their negatives, the
                 same fractions of the way across the domain (lo + (hi - lo) p/q), and
                 Hypothesis's "nasty" constants (0.5, 1.1, 1.5, 1.9, 1/3, 1e-5, 1 - 1e-5,
                 2 + 1e-5, machine epsilons, the smallest normal and subnormal numbers), each
                 rounded to the input's dtype and kept if inside the domain. Hypothesis's own
                 bounded float32 floats rarely draw float32(1/3) (its constant 1/3 is not a
                 float32 number) or 0.5, which is why this branch exists.
    tiny         a few ulps around an edge or a fraction (spreads too small for uniform draws)
    graph        (a bare model's inputs) the break points its graph names: where an elementwise
                 chain of constants from the input meets a pole, a cusp or a threshold
                 (tickformer.artifact.foreign.breakpoints), each exactly, a few ulps off, or
                 nearby at every scale from span/2 down to 2^-30 of it
    near         an edge or a fraction moved by +-span 2^-k, k drawn in 1..30: every scale at once

A box domain (one interval per feature, the last axis) draws each feature's column from its own
interval. Integer ids: uniform in the vocabulary or its edges (0, 1, V-2, V-1). Padding masks:
right-, left- or arbitrarily padded rows with at least one real position each. Outside the
domain: the nearest values, far ones, NaN and +-inf (out-of-vocabulary ids for tokens). Score
rows for the softmax operator (wide, tiny spreads, ties) and selection masks. Not real-time code.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Literal, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.runtime.foreign import input_shape, mask_values, positions

FRACTION_DENOMINATORS = tuple(range(2, 13))
NASTY = (
    0.5,
    1.1,
    1.5,
    1.9,
    1.0 / 3,
    10e-6,
    1 - 10e-6,
    2 + 10e-6,
    2.0**-23,
    2.0**-24,
    2.0**-14,
    2.0**-126,
    2.0**-149,
)
UNIFORM_STEPS = 1 << 24


def _inward(value: float, dtype: type, up: bool) -> float:
    """The dtype value nearest `value` that stays inside the domain."""
    v: np.ndarray = np.asarray(value, dtype=dtype)
    if up and float(v) < value:
        v = np.nextafter(v, np.asarray(np.inf, dtype))
    if not up and float(v) > value:
        v = np.nextafter(v, np.asarray(-np.inf, dtype))
    return float(v)


def _width(dtype: type) -> Literal[16, 32, 64]:
    return 16 if dtype is np.float16 else 64 if dtype is np.float64 else 32


def fractions_in(lo: float, hi: float, dtype: type = np.float32, *, limit: int = 160) -> list[float]:
    """The 'break points' of the fractions branch inside [lo, hi] (module docstring), simplest
    first (Hypothesis shrinks a sampled value towards the start of the list), rounded to dtype."""
    return _break_points(lo, hi, dtype, FRACTION_DENOMINATORS)[:limit]


def _break_points(
    lo: float, hi: float, dtype: type, denominators: Sequence[int], nasty: bool = True
) -> list[float]:
    found: dict[float, None] = {}

    def add(v: float) -> None:
        if math.isfinite(v):
            r = float(np.asarray(v, dtype=dtype))
            if lo <= r <= hi:
                found.setdefault(r, None)

    for v in (0.0, 1.0, -1.0):
        add(v)
    simple = sorted(
        {Fraction(p, q) for q in denominators for p in range(1, 3 * q) if Fraction(p, q).denominator == q},
        key=lambda f: (f.denominator, f.numerator),
    )
    for f in simple:
        add(float(f))
        add(-float(f))
    for f in simple:
        if f < 1:
            add(lo + (hi - lo) * float(f))
    if nasty:
        for v in NASTY:
            add(v)
            add(-v)
    return list(found)


def _tiny(base: float, steps: np.ndarray, lo: float, hi: float, dtype: type) -> np.ndarray:
    x: np.ndarray = np.full(steps.shape, base, dtype=dtype)
    up = np.asarray(np.inf, dtype)
    for _ in range(int(np.abs(steps).max(initial=0))):
        x = np.where(steps > 0, np.nextafter(x, up), np.where(steps < 0, np.nextafter(x, -up), x))
        steps = steps - np.sign(steps)
    return np.clip(x, lo, hi).astype(dtype)


def _near(base: float, k: int, sign: int, lo: float, hi: float, dtype: type) -> float:
    """base moved by sign * (hi - lo) * 2^-k, clipped into [lo, hi], rounded to dtype."""
    v = float(np.asarray(base + sign * (hi - lo) * 2.0**-k, dtype=dtype))
    return min(max(v, lo), hi)


def interval_arrays(
    shape: tuple[int, ...],
    lo_in: float,
    hi_in: float,
    dtype: type = np.float32,
    points: Sequence[float] = (),
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `shape` with every value in [lo, hi], by one of the branches of the docstring;
    `points`: the graph's break points for this input (kept where inside)."""
    lo, hi = _inward(lo_in, dtype, up=True), _inward(hi_in, dtype, up=False)
    if lo > hi:  # an interval narrower than one dtype step
        lo = hi = float(np.asarray((lo_in + hi_in) / 2, dtype=dtype))
    edges = sorted({lo, hi, _inward((lo + hi) / 2, dtype, up=True)} | ({0.0} if lo <= 0.0 <= hi else set()))
    simplest = _break_points(lo, hi, dtype, (2, 3, 4), nasty=False) or edges  # 1/2, 1/3, 2/3, 1/4, 3/4, ...
    breaks = fractions_in(lo, hi, dtype) or edges
    graph = list(dict.fromkeys(float(np.asarray(v, dtype=dtype)) for v in points if lo <= v <= hi))
    floats = st.floats(lo, hi, width=_width(dtype))
    # Mostly the simplest fractions (where poles sit most often), then the rest, then any float.
    fractions = st.one_of(
        st.sampled_from(simplest), st.sampled_from(simplest), st.sampled_from(breaks), floats
    )
    span = hi - lo

    def uniform(k: np.ndarray) -> np.ndarray:
        return np.clip(lo + span * (k / UNIFORM_STEPS), lo, hi).astype(dtype)

    bases = st.sampled_from(graph + sorted(set(edges) | set(breaks[:24])))
    near = st.builds(
        lambda base, k, sign: _near(base, k, sign, lo, hi, dtype),
        bases,
        st.integers(1, 30),
        st.sampled_from([1, -1]),
    )
    branches = [
        hnp.arrays(dtype, shape, elements=floats),
        st.builds(  # every element its own draw (no fill value): uniform coverage
            uniform, hnp.arrays(np.int64, shape, elements=st.integers(0, UNIFORM_STEPS), fill=st.nothing())
        ),
        hnp.arrays(dtype, shape, elements=st.sampled_from(edges)),
        hnp.arrays(dtype, shape, elements=fractions),
        hnp.arrays(dtype, shape, elements=fractions),
        st.builds(
            lambda base, steps: _tiny(base, steps, lo, hi, dtype),
            bases,
            hnp.arrays(np.int64, shape, elements=st.integers(-3, 3)),
        ),
        hnp.arrays(dtype, shape, elements=st.one_of(near, floats), fill=st.nothing()),
    ]
    if graph:  # the graph's own break points: as often as the fractions
        exact = st.sampled_from(graph)
        branches += [
            hnp.arrays(dtype, shape, elements=st.one_of(exact, near, floats)),
            hnp.arrays(dtype, shape, elements=st.one_of(exact, exact, near)),
        ]
    return st.one_of(*branches)


def box_arrays(
    shape: tuple[int, ...],
    lo: Sequence[float],
    hi: Sequence[float],
    dtype: type = np.float32,
    points: Sequence[float] = (),
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `shape` in a box: one interval for all (len 1) or one per feature (last axis)."""
    if len(lo) == 1:
        return interval_arrays(shape, lo[0], hi[0], dtype, points)
    if not shape or shape[-1] != len(lo):
        raise ValueError(
            f"a box of {len(lo)} intervals needs a last axis of {len(lo)} features, not shape {shape}"
        )
    column = (*shape[:-1], 1)
    cols = [interval_arrays(column, a, b, dtype, points) for a, b in zip(lo, hi)]
    return st.tuples(*cols).map(lambda parts: np.concatenate(parts, axis=-1))


def domain_arrays(
    domain: tuple[float, float],
    shape_t: Callable[[int], tuple[int, ...]],
    t_range: tuple[int, int],
    dtype: type = np.float32,
) -> st.SearchStrategy[np.ndarray]:
    """Inputs of shape shape_t(T) with T in t_range and every value in the domain (branches of
    the module docstring). Built from public strategies, so it shrinks."""
    return st.integers(*t_range).flatmap(lambda t: interval_arrays(shape_t(t), domain[0], domain[1], dtype))


def id_arrays(
    shape: tuple[int, ...], lo: int, hi: int, dtype: Any = np.int64
) -> st.SearchStrategy[np.ndarray]:
    """Integer ids in [lo, hi]: uniform, or only the vocabulary's edges."""
    edges = sorted({lo, min(lo + 1, hi), max(hi - 1, lo), hi})
    return st.one_of(
        hnp.arrays(dtype, shape, elements=st.integers(lo, hi)),
        hnp.arrays(dtype, shape, elements=st.sampled_from(edges)),
    )


def token_arrays(
    vocab: int, shape_t: Callable[[int], tuple[int, ...]], t_range: tuple[int, int]
) -> st.SearchStrategy[np.ndarray]:
    return st.integers(*t_range).flatmap(lambda t: id_arrays(shape_t(t), 0, vocab - 1))


def valid_rows(batch: int, length: int, pattern: str = "any") -> st.SearchStrategy[np.ndarray]:
    """valid [B, T] bool, at least one True per row: right padding (a prefix is real), left
    padding (a suffix is real) or any pattern."""
    if pattern in ("right", "left"):

        def build(lengths: list[int]) -> np.ndarray:
            t = np.arange(length)[None, :]  # [1, T]
            n = np.asarray(lengths)[:, None]  # [B, 1]
            return t < n if pattern == "right" else t >= length - n

        return st.lists(st.integers(1, length), min_size=batch, max_size=batch).map(build)

    def force(rows: np.ndarray, keep: list[int]) -> np.ndarray:
        rows = rows.copy()
        rows[np.arange(batch), keep] = True  # one real position per row at least
        return rows

    return st.builds(
        force,
        hnp.arrays(np.bool_, (batch, length)),
        st.lists(st.integers(0, length - 1), min_size=batch, max_size=batch),
    )


def into_columns(
    domain: tuple[float, float], columns: tuple[tuple[float, ...], tuple[float, ...]]
) -> Callable[[np.ndarray], np.ndarray]:
    """A map of arrays drawn in `domain` [lo, hi] (last axis: the input columns) onto the per-column
    domains (lows, highs) intersected with it: affine per column, so lo and hi -- the edges the
    drawing favours -- land on each column's edges, which are then rounded inward to float32.
    ConfigError when `domain` misses a column's interval entirely."""
    from tickformer.errors import ConfigError

    lo, hi = domain
    lows = np.maximum(np.asarray(columns[0], np.float64), lo)  # [d_in]
    highs = np.minimum(np.asarray(columns[1], np.float64), hi)  # [d_in]
    if np.any(lows > highs):
        j = int(np.argmax(lows > highs))
        raise ConfigError(
            f"--domain [{lo}, {hi}] misses input column {j}'s declared domain [{columns[0][j]}, {columns[1][j]}]; "
            "omit --domain to use the artifact's"
        )
    f32 = np.float32
    low32 = np.array(
        [v if float(v) >= a else np.nextafter(v, f32(np.inf)) for v, a in zip(lows.astype(f32), lows)]
    )
    high32 = np.array(
        [v if float(v) <= b else np.nextafter(v, f32(-np.inf)) for v, b in zip(highs.astype(f32), highs)]
    )
    scale = (highs - lows) / (hi - lo) if hi > lo else np.zeros_like(lows)  # [d_in]

    def mapped(x: np.ndarray) -> np.ndarray:
        y = lows + (np.asarray(x, np.float64) - lo) * scale  # [..., d_in]
        return np.clip(y.astype(f32), low32, high32)

    return mapped


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
    far_above, far_below = (
        float(np.float32(float(above) + 10 * span)),
        float(np.float32(float(below) - 10 * span)),
    )
    return st.one_of(
        st.sampled_from([math.nan, math.inf, -math.inf, float(above), float(below)]),
        st.floats(float(above), far_above, width=32),
        st.floats(far_below, float(below), width=32),
    )


def out_of_vocab_ids(vocab: int) -> st.SearchStrategy[int]:
    """int64 ids outside [0, vocab - 1]: the nearest ones, far ones, the int64 extremes."""
    big = 2**63 - 1
    return st.one_of(
        st.sampled_from([-1, vocab, vocab + 1, -big - 1, big]),
        st.integers(vocab, big),
        st.integers(-big - 1, -1),
    )


FP32_BIG = 1e30


def score_rows(
    *, dtype: type = np.float32, min_size: int = 1, max_size: int = 64
) -> st.SearchStrategy[np.ndarray]:
    """Finite score rows [n]: wide values up to +-1e30 (fp32; +-65504 for fp16), tiny spreads
    around a large base, ties, and length-1 rows."""
    big = float(np.float32(FP32_BIG)) if dtype is np.float32 else 65504.0
    width: Literal[16, 32] = 32 if dtype is np.float32 else 16
    wide = hnp.arrays(dtype, st.integers(min_size, max_size), elements=st.floats(-big, big, width=width))

    @st.composite
    def tiny_spread(draw: st.DrawFn) -> np.ndarray:
        n = draw(st.integers(min_size, max_size))
        base = draw(
            st.sampled_from(
                [0.0, 1.0, -3.0e4, 1.0e4, 6.0e4] if dtype is np.float16 else [0.0, 1.0, 1e20, -1e30, 3e38]
            )
        )
        steps = draw(hnp.arrays(np.int64, n, elements=st.integers(0, 4)))
        row: np.ndarray = np.asarray(base, dtype=dtype) + np.zeros(n, dtype=dtype)  # [n]
        return _ulp_steps(row, steps)  # [n] within 4 ulps of base

    return st.one_of(wide, tiny_spread())


def _ulp_steps(row: np.ndarray, steps: np.ndarray) -> np.ndarray:
    out = row.copy()  # [n]
    for _ in range(int(steps.max(initial=0))):
        bump = steps > 0
        out = np.where(bump, np.nextafter(out, np.asarray(np.inf, out.dtype)), out)
        steps = steps - 1
    return out


def masks_for(n: int) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.bool_, n)


# ----------------------------------------------------------------------------- bare models


def input_arrays(
    i: Any, shape: tuple[int, ...], points: Sequence[float] = ()
) -> st.SearchStrategy[np.ndarray]:
    """One input of a foreign model (tickformer.artifact.foreign.InputSig) at `shape`; `points`:
    its graph's break points (a signal)."""
    dtype = np.dtype(i.dtype).type
    if i.role == "signal":
        return box_arrays(shape, i.lo, i.hi, dtype, points)
    if i.role == "ids":
        return id_arrays(shape, i.vocab[0], i.vocab[1], dtype)
    if i.role == "mask":
        if i.batch_axis is None or i.time_axis is None:
            return st.just(mask_values(i, np.ones(shape, bool)))
        b, t = shape[i.batch_axis], shape[i.time_axis]

        def place(valid: np.ndarray) -> np.ndarray:  # [B, T] -> the mask's own shape
            view = [1] * len(shape)
            view[i.batch_axis], view[i.time_axis] = b, t
            order = sorted([i.batch_axis, i.time_axis])
            v = valid if order == [i.batch_axis, i.time_axis] else valid.T
            return mask_values(i, np.broadcast_to(v.reshape(view), shape))

        return valid_rows(b, t, i.pattern).map(place)
    if i.role == "state":  # the reset state: zeros (a cache of length 0), never drawn
        return st.just(np.zeros(shape, dtype=i.dtype))
    return st.just(positions(i, shape))


def feed_dicts(
    sig: Any, sizes: st.SearchStrategy[dict[str, int]], points: dict[str, Sequence[float]] | None = None
) -> st.SearchStrategy[dict[str, np.ndarray]]:
    """Feeds {input: array} of a foreign model, every group at a size drawn from `sizes`;
    `points`: {input: the graph's break points} (breakpoints.break_points)."""
    points = points or {}

    def at(s: dict[str, int]) -> st.SearchStrategy[dict[str, np.ndarray]]:
        return st.fixed_dictionaries(
            {i.name: input_arrays(i, input_shape(i, s), points.get(i.name, ())) for i in sig.inputs}
        )

    return sizes.flatmap(at)


def size_dicts(
    accepted: dict[str, Sequence[int]], **fixed: Sequence[int]
) -> st.SearchStrategy[dict[str, int]]:
    """{group: size}, each size drawn from its accepted list (smallest first: shrinks to it);
    `fixed` replaces a group's list."""
    choices = {**{g: list(v) for g, v in accepted.items()}, **{g: list(v) for g, v in fixed.items()}}
    return st.fixed_dictionaries({g: st.sampled_from(sorted(v)) for g, v in choices.items()})
