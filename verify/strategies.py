"""Small composable Hypothesis strategies for score rows and input sequences (public strategies
only, so shrinking works)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FP32_BIG = 1e30


def score_rows(*, dtype: type = np.float32, min_size: int = 1, max_size: int = 64) -> st.SearchStrategy[np.ndarray]:
    """Finite score rows [n]: wide values up to +-1e30 (fp32; +-65504 for fp16), tiny spreads
    around a large base, ties, and length-1 rows."""
    big = float(np.float32(FP32_BIG)) if dtype is np.float32 else 65504.0
    width: Literal[16, 32] = 32 if dtype is np.float32 else 16
    wide = hnp.arrays(dtype, st.integers(min_size, max_size), elements=st.floats(-big, big, width=width))

    @st.composite
    def tiny_spread(draw: st.DrawFn) -> np.ndarray:
        n = draw(st.integers(min_size, max_size))
        base = draw(st.sampled_from([0.0, 1.0, -3.0e4, 1.0e4, 6.0e4] if dtype is np.float16 else [0.0, 1.0, 1e20, -1e30, 3e38]))
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
