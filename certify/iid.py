"""The admissibility tests an EVT fit must pass on the data it was fitted on (MBPTA practice: the
i.i.d. checks of Cucu-Grosjean et al., ECRTS 2012, and Abella et al., ACM TODAES 2017):
independence (Ljung-Box, Biometrika 1978: Q = n(n+2) sum_k r_k^2 / (n-k) ~ chi2(h); the
Wald-Wolfowitz runs test), identical distribution (two-sample Kolmogorov-Smirnov between the
first and the second half of the run; a stationary exceedance rate, exact binomial), and enough
extremes. Each returns a `TestResult`; certify/evt.py's `assess` runs them.

Not real-time code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class TestResult:
    """One admissibility test: its statistic, p-value (None for count checks), and verdict."""

    __test__ = False  # not a pytest class

    name: str
    statistic: float
    p_value: float | None
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "statistic": finite_or_none(self.statistic),
            "p_value": finite_or_none(self.p_value),
            "passed": bool(self.passed),
            "detail": self.detail,
        }


def finite_or_none(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def ljung_box(x: np.ndarray, lags: int | None = None, alpha: float = 0.05) -> TestResult:
    """Ljung-Box portmanteau test of independence on a time-ordered series.

    Q = n(n+2) sum_{k=1..h} r_k^2/(n-k), p = P(chi2_h > Q); h = min(20, n//5) by default.
    """
    x = np.asarray(x, dtype=np.float64)  # [n]
    n = x.size
    h = min(20, n // 5) if lags is None else int(lags)
    if n < 10 or h < 1:
        return TestResult("independence (Ljung-Box)", math.nan, None, False, f"too few values ({n}) to test")
    d = x - x.mean()  # [n]
    denom = float(d @ d)
    if denom == 0.0:
        return TestResult(
            "independence (Ljung-Box)", math.nan, None, False, "all values equal: no variability to test"
        )
    r = np.array([float(d[k:] @ d[:-k]) / denom for k in range(1, h + 1)])  # [h] autocorrelations
    q = float(n * (n + 2) * np.sum(r * r / (n - np.arange(1, h + 1))))
    p = float(stats.chi2.sf(q, h))
    return TestResult(
        "independence (Ljung-Box)",
        q,
        p,
        p >= alpha,
        f"{h} lags on {n} values; max |r_k| = {np.abs(r).max():.3f}",
    )


def runs_test(x: np.ndarray, alpha: float = 0.05) -> TestResult:
    """Wald-Wolfowitz runs test above/below the median (two-sided, normal approximation)."""
    x = np.asarray(x, dtype=np.float64)  # [n]
    med = np.median(x)
    s = x[x != med] > med  # [m] bool, ties with the median dropped
    n1, n2 = int(s.sum()), int((~s).sum())
    if n1 < 5 or n2 < 5:
        return TestResult(
            "independence (runs)",
            math.nan,
            None,
            False,
            f"too few values above ({n1}) / below ({n2}) the median",
        )
    runs = 1 + int(np.count_nonzero(s[1:] != s[:-1]))
    n = n1 + n2
    mean = 2.0 * n1 * n2 / n + 1.0
    var = 2.0 * n1 * n2 * (2.0 * n1 * n2 - n) / (n * n * (n - 1.0))
    z = (runs - mean) / math.sqrt(var)
    p = float(2.0 * stats.norm.sf(abs(z)))
    return TestResult("independence (runs)", z, p, p >= alpha, f"{runs} runs, {mean:.1f} expected")


def ks_halves(
    x: np.ndarray, alpha: float = 0.05, *, at: np.ndarray | None = None, n: int | None = None
) -> TestResult:
    """Identical distribution: two-sample Kolmogorov-Smirnov between the extremes of the first and
    the second half of the campaign in time (`at`: sample index of each extreme, `n`: campaign
    length; without them the series is split in the middle)."""
    x = np.asarray(x, dtype=np.float64)  # [k]
    first = (
        (np.asarray(at) < n // 2) if at is not None and n is not None else (np.arange(x.size) < x.size // 2)
    )  # [k]
    a, b = x[first], x[~first]
    if min(a.size, b.size) < 10:
        return TestResult(
            "identical distribution (KS halves)",
            math.nan,
            None,
            False,
            f"{a.size} extremes in the first half of the run vs {b.size} in the second: too few to compare",
        )
    res = stats.ks_2samp(a, b)
    p = float(res.pvalue)
    return TestResult(
        "identical distribution (KS halves)",
        float(res.statistic),
        p,
        p >= alpha,
        f"{a.size} vs {b.size} extremes (first vs second half of the run)",
    )


def rate_halves(at: np.ndarray, n: int, alpha: float = 0.05) -> TestResult:
    """Stationary exceedance rate: the number of extremes in the first half of the run is
    Binomial(k, 1/2) under identical distribution (two-sided exact binomial test)."""
    at = np.asarray(at)
    k = int(at.size)
    k1 = int(np.count_nonzero(at < n // 2))
    if k < 10:
        return TestResult(
            "stationary rate (binomial halves)", float(k1), None, False, f"too few extremes ({k})"
        )
    p = float(stats.binomtest(k1, k, (n // 2) / n).pvalue)
    return TestResult(
        "stationary rate (binomial halves)",
        float(k1),
        p,
        p >= alpha,
        f"{k1} of {k} extremes in the first half of the run",
    )


def enough_extremes(n_extremes: int, min_extremes: int) -> TestResult:
    """At least `min_extremes` extremes were fitted (a count check: no p-value)."""
    return TestResult(
        "enough tail samples",
        float(n_extremes),
        None,
        n_extremes >= min_extremes,
        f"{n_extremes} extremes fitted, at least {min_extremes} required",
    )
