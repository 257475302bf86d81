"""Hypothesis strategies for model inputs inside (and just outside) a declared domain.

Built from public strategies only, so shrinking works: uniform values, edge-only values (lo, hi,
0, the midpoint), and ulp-tiny spreads around an edge; outside the domain the nearest values,
far ones, NaN and +-inf; score rows for the softmax operator (wide, tiny spreads, ties) and
selection masks. Not real-time code.
"""

from __future__ import annotations

import math
from typing import Callable, Literal

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


def _inward(value: float, dtype: type, up: bool) -> float:
    """The dtype value nearest `value` that stays inside the domain."""
    v: np.ndarray = np.asarray(value, dtype=dtype)
    if up and float(v) < value:
        v = np.nextafter(v, np.asarray(np.inf, dtype))
    if not up and float(v) > value:
        v = np.nextafter(v, np.asarray(-np.inf, dtype))
    return float(v)


def domain_arrays(
    domain: tuple[float, float],
    shape_t: Callable[[int], tuple[int, ...]],
    t_range: tuple[int, int],
    dtype: type = np.float32,
) -> st.SearchStrategy[np.ndarray]:
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
