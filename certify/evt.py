"""Extreme value theory for probabilistic worst-case execution time (pWCET).

Two estimators of the upper tail of a per-step latency distribution, and the assessment that makes
an estimate admissible (the i.i.d. tests themselves: certify/iid.py). Sources:

- S. Coles, *An Introduction to Statistical Modeling of Extreme Values*, Springer 2001:
  block maxima and the GEV (ch. 3), peaks over threshold and the GPD (ch. 4), runs declustering
  and the extremal index of dependent series (ch. 5.3.2), return levels
  x_m = u + sigma/xi * ((m zeta_u)^xi - 1) (eq. 4.12).
- F. Cucu-Grosjean et al., "Measurement-based probabilistic timing analysis for multi-path
  programs", ECRTS 2012; J. Abella et al., "Measurement-based worst-case execution time
  estimation using the coefficient of variation", ACM TODAES 2017: the i.i.d. checks (runs /
  Ljung-Box for independence, two-sample KS for identical distribution) that must hold on the
  data actually fitted before a pWCET is used.
- G. M. Ljung, G. E. P. Box, "On a measure of lack of fit in time series models", Biometrika
  1978: Q = n(n+2) sum_k r_k^2 / (n-k) ~ chi2(h) under independence.
- T. W. Anderson, D. A. Darling 1954 (A^2 statistic); with estimated parameters its null
  distribution depends on the fit, so its p-value here comes from a parametric bootstrap
  (refit on each replicate), after Choulakian & Stephens, Technometrics 2001.

Sign conventions (the usual trap): in EVT notation the shape xi > 0 is a heavy (Frechet/Pareto)
tail, xi = 0 the exponential/Gumbel tail, xi < 0 a bounded (Weibull-type) tail.
`scipy.stats.genpareto(c)` uses c = +xi, but `scipy.stats.genextreme(c)` uses c = -xi.
Everything in this module speaks xi; the conversion lives in `_gev_c` only.

Exceedance semantics: `exceedance` p is per step: the estimate x_p satisfies P(step > x_p) = p.
POT: P(X > x) = zeta_u * (1 - G(x - u)), zeta_u = (number of exceedances of u) / n, G fitted to
the cluster peaks (asymptotically the same tail as all exceedances, Coles 5.3.2, but without the
within-cluster dependence). Block maxima of size b: P(M_b > x) = 1 - (1 - p)^b for i.i.d. steps;
with clustering P(M_b > x) ~ theta * b * p (Leadbetter's extremal index theta <= 1), so the block
probability is scaled by an estimate of theta, which can only raise the estimate.

Nothing here is real-time code: fitting allocates freely.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from tickformer.errors import ConfigError, InputError

from .iid import TestResult, enough_extremes, finite_or_none, ks_halves, ljung_box, rate_halves, runs_test

METHODS = ("pot", "bm")
DEFAULT_EXCEEDANCES = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9)
MIN_EXCEEDANCES = 100  # POT: samples above the threshold, at least
MAX_TAIL_SHARE = 0.1  # POT: the threshold never below the 90th percentile (a tail, not the body)
MIN_BLOCKS = 30  # block maxima: blocks, at least


def min_samples(method: str = "pot", block_size: int = 100) -> int:
    """The one minimum sample count of a tail fit, applied by `fit_pot` / `fit_bm` and by the
    campaign before it starts (`check_sample_count`): POT needs MIN_EXCEEDANCES samples above a
    threshold no lower than the 90th percentile (1000 samples); block maxima need MIN_BLOCKS
    blocks of `block_size` steps. Pure."""
    if method == "bm":
        return MIN_BLOCKS * block_size
    return math.ceil(MIN_EXCEEDANCES / MAX_TAIL_SHARE)


def sample_count_problem(n: int, method: str = "pot", block_size: int = 100) -> str | None:
    """None when `n` samples are enough for a `method` tail fit (`min_samples`), else the one-line
    reason with the fix -- the same text at the --samples flag and in the fit. Pure."""
    need = min_samples(method, block_size)
    if n >= need:
        return None
    why = (
        f"{MIN_EXCEEDANCES} samples above a threshold no lower than the {1 - MAX_TAIL_SHARE:.0%} quantile"
        if method != "bm"
        else f"{MIN_BLOCKS} blocks of {block_size} steps"
    )
    return (
        f"{n} samples: a {method} tail fit needs at least {need} ({why}); pass --samples {need} or more "
        "(an extrapolation far beyond the data needs more: the certificate says how many)"
    )


@dataclass(frozen=True)
class TailFit:
    """A fitted tail model and what it was fitted on.

    method "pot": threshold u, GPD(xi, sigma) on cluster-peak excesses, zeta = P(X > u).
    method "bm": GEV(xi, mu, sigma) on maxima of blocks of `block_size` steps, scaled by theta.
    """

    method: str
    n: int  # samples the tail was estimated from
    xi: float
    sigma: float
    mu: float = 0.0  # GEV location (bm only)
    threshold: float = 0.0  # u (pot only)
    zeta: float = 0.0  # fraction of samples above u (pot only)
    run_length: int = 0  # runs-declustering gap (pot only)
    block_size: int = 0  # (bm only)
    theta: float = 1.0  # extremal index estimate (runs estimator), in (0, 1]
    n_exceed: int = 0  # raw exceedances of u (pot)
    extremes: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  # fitted data, time order
    extremes_at: np.ndarray | None = field(default=None, repr=False)  # sample index of each extreme

    @property
    def n_extremes(self) -> int:
        return int(self.extremes.size)

    @property
    def tail_kind(self) -> str:
        return tail_kind(self.xi)

    def quantile(self, exceedance: float) -> float:
        """x with P(step > x) = exceedance under this fit (ns). Not real-time code."""
        p = _check_exceedance(exceedance)
        if self.method == "pot":
            return pot_quantile(self.threshold, self.xi, self.sigma, self.zeta, p)
        return bm_quantile(self.mu, self.xi, self.sigma, self.block_size, self.theta, p)

    def exceedance_of(self, x_ns: float) -> float:
        """Per-step P(step > x_ns) under this fit (the inverse of `quantile`), for x_ns in the
        fitted tail (POT: above the threshold). Not real-time code."""
        if self.method == "pot":
            return self.zeta * float(
                stats.genpareto.sf(max(x_ns - self.threshold, 0.0), self.xi, scale=self.sigma)
            )
        p_block = (
            float(stats.genextreme.sf(x_ns, _gev_c(self.xi), loc=self.mu, scale=self.sigma)) / self.theta
        )
        return float(-math.expm1(math.log1p(-min(p_block, 1.0 - 1e-16)) / self.block_size))

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "n": self.n,
            "xi": self.xi,
            "sigma": self.sigma,
            "tail": self.tail_kind,
            "n_extremes": self.n_extremes,
            "theta": self.theta,
        }
        if self.method == "pot":
            out.update(
                threshold_ns=self.threshold,
                zeta=self.zeta,
                run_length=self.run_length,
                n_exceedances=self.n_exceed,
                scipy="genpareto(c=xi, loc=threshold, scale=sigma) on cluster peaks",
            )
        else:
            out.update(
                mu=self.mu,
                block_size=self.block_size,
                scipy_c=_gev_c(self.xi),
                scipy="genextreme(c=-xi, loc=mu, scale=sigma) on block maxima",
            )
        return out


# ----------------------------------------------------------------------------- small helpers


def _gev_c(xi: float) -> float:
    """scipy's genextreme shape parameter for EVT shape xi (c = -xi)."""
    return -xi


def tail_kind(xi: float, tol: float = 0.05) -> str:
    """Name the domain of attraction: heavy (xi > tol), light/exponential (|xi| <= tol), bounded."""
    if xi > tol:
        return "heavy (xi > 0, Frechet/Pareto type: no finite upper bound, slow decay)"
    if xi < -tol:
        return "bounded (xi < 0, Weibull type: finite upper endpoint)"
    return "exponential (xi ~ 0, Gumbel type)"


def _check_exceedance(p: float) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not (0.0 < float(p) < 1.0):
        raise ConfigError(f"exceedance probability {p!r} must be in (0, 1), e.g. 1e-9")
    return float(p)


def as_samples(samples_ns: Any, *, min_size: int = 2) -> np.ndarray:
    """Validate and convert latency samples to a float64 vector. Raises InputError."""
    x = np.asarray(samples_ns, dtype=np.float64).ravel()  # [n]
    if x.size < min_size:
        raise InputError(
            f"{x.size} latency samples given; at least {min_size} are needed (run a longer campaign, "
            "e.g. --samples 100000)"
        )
    if not np.all(np.isfinite(x)):
        raise InputError("latency samples contain NaN/Inf; timing must be finite nanoseconds")
    if np.any(x < 0):
        raise InputError(
            f"latency samples contain negative values (min {x.min()}); pass durations, not timestamps"
        )
    return x


# ----------------------------------------------------------------------------- POT / GPD


def decluster_runs(x: np.ndarray, threshold: float, run_length: int) -> tuple[np.ndarray, int]:
    """Runs declustering (Coles 5.3.2): exceedances of `threshold` separated by fewer than
    `run_length` non-exceedances belong to one cluster; return the cluster peaks in time order
    and the number of raw exceedances."""
    peaks, _, n_exc = decluster_runs_indexed(x, threshold, run_length)
    return peaks, n_exc


def decluster_runs_indexed(
    x: np.ndarray, threshold: float, run_length: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """`decluster_runs` plus the sample index of each cluster's start: (peaks, starts, n_exceed)."""
    idx = np.flatnonzero(x > threshold)  # [k] positions of exceedances
    if idx.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64), 0
    starts = np.concatenate(([0], np.flatnonzero(np.diff(idx) > run_length) + 1))  # [c]
    peaks = np.maximum.reduceat(x[idx], starts)  # [c]
    return peaks, idx[starts], int(idx.size)


def fit_gpd(excesses: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood GPD (xi, sigma) for positive excesses, location fixed at 0.

    The data are scaled by their mean before the optimizer sees them (scale-free fit).
    """
    e = np.asarray(excesses, dtype=np.float64)  # [k]
    scale = float(e.mean())
    if not (scale > 0):
        raise InputError("tail excesses are all zero: latency samples have no spread above the threshold")
    c, _, s = stats.genpareto.fit(e / scale, floc=0.0)
    return float(c), float(s) * scale  # genpareto c == xi


def pot_quantile(u: float, xi: float, sigma: float, zeta: float, p: float) -> float:
    """Per-step quantile from a POT fit: u + GPD.isf(p / zeta). Requires p < zeta."""
    if p >= zeta:
        raise ConfigError(
            f"exceedance {p} is not below the threshold's exceedance rate {zeta:.3g}; use the empirical quantile"
        )
    return u + float(stats.genpareto.isf(p / zeta, xi, loc=0.0, scale=sigma))


def extremal_index(x: np.ndarray, threshold: float, run_length: int) -> float:
    """Runs estimator of the extremal index: clusters / exceedances, in (0, 1]."""
    peaks, k = decluster_runs(x, threshold, run_length)
    return float(peaks.size) / k if k else 1.0


def fit_pot(samples_ns: Any, *, tail_fraction: float = 0.01, run_length: int = 3) -> TailFit:
    """Peaks over threshold: u = empirical quantile leaving max(tail_fraction*n, MIN_EXCEEDANCES)
    samples above; GPD fitted to the runs-declustered cluster peaks above u. Needs
    `min_samples("pot")` samples (InputError otherwise, `sample_count_problem`'s text)."""
    x = as_samples(samples_ns)
    problem = sample_count_problem(x.size, "pot")
    if problem is not None:
        raise InputError(problem)
    if not (0.0 < tail_fraction < 0.5):
        raise ConfigError(f"tail_fraction={tail_fraction!r} must be in (0, 0.5), e.g. 0.01")
    if run_length < 1:
        raise ConfigError(f"run_length={run_length!r} must be >= 1 step")
    n = x.size
    k = max(int(round(tail_fraction * n)), MIN_EXCEEDANCES)
    k = min(k, int(MAX_TAIL_SHARE * n))
    u = float(np.sort(x)[n - k - 1])  # the (k+1)-th largest: k values lie strictly above (ties aside)
    peaks, where, n_exc = decluster_runs_indexed(x, u, run_length)
    if peaks.size < 3:
        raise InputError(
            f"only {peaks.size} cluster peaks above the threshold {u:.0f} ns; collect more samples"
        )
    xi, sigma = fit_gpd(peaks - u)
    return TailFit(
        method="pot",
        n=n,
        xi=xi,
        sigma=sigma,
        threshold=u,
        zeta=n_exc / n,
        run_length=run_length,
        theta=peaks.size / n_exc,
        n_exceed=n_exc,
        extremes=peaks,
        extremes_at=where,
    )


# ----------------------------------------------------------------------------- block maxima / GEV


def block_maxima(x: np.ndarray, block_size: int) -> np.ndarray:
    """Maxima of consecutive blocks of `block_size` samples (a partial last block is dropped)."""
    m = x.size // block_size
    return x[: m * block_size].reshape(m, block_size).max(axis=1)  # [n] -> [m, b] -> [m]


def fit_gev(maxima: np.ndarray) -> tuple[float, float, float]:
    """Maximum-likelihood GEV (xi, mu, sigma); data standardized before fitting. Note c = -xi."""
    m = np.asarray(maxima, dtype=np.float64)  # [k]
    loc0, sc0 = float(m.mean()), float(m.std())
    if not (sc0 > 0):
        raise InputError("block maxima are all equal: latency samples have no spread in their maxima")
    z = (m - loc0) / sc0  # [k]
    # scipy's default start can stall at loc = 0 on standardized data; start from the Gumbel fit
    # too and keep the better likelihood.
    g_loc, g_scale = stats.gumbel_r.fit(z)
    candidates = [stats.genextreme.fit(z, 0.0, loc=g_loc, scale=g_scale), stats.genextreme.fit(z)]
    c, loc, scale = min(candidates, key=lambda th: stats.genextreme.nnlf(th, z))
    return -float(c), loc0 + float(loc) * sc0, float(scale) * sc0


def bm_quantile(mu: float, xi: float, sigma: float, block_size: int, theta: float, p: float) -> float:
    """Per-step quantile from a block-maxima fit: the x with P(M_b > x) = theta (1 - (1-p)^b)."""
    p_block = theta * -math.expm1(block_size * math.log1p(-p))
    return float(stats.genextreme.isf(p_block, _gev_c(xi), loc=mu, scale=sigma))


def fit_bm(
    samples_ns: Any,
    *,
    block_size: int = 100,
    run_length: int = 3,
    tail_fraction: float = 0.01,
) -> TailFit:
    """Block maxima: GEV fitted to maxima of consecutive blocks; theta from runs declustering at
    the (1 - tail_fraction) quantile."""
    if block_size < 2:
        raise ConfigError(f"block_size={block_size!r} must be >= 2 steps")
    x = as_samples(samples_ns)
    problem = sample_count_problem(x.size, "bm", block_size)
    if problem is not None:
        raise InputError(problem)
    maxima = block_maxima(x, block_size)
    xi, mu, sigma = fit_gev(maxima)
    u = float(np.quantile(x, 1.0 - tail_fraction))
    theta = extremal_index(x, u, run_length)
    return TailFit(
        method="bm",
        n=x.size,
        xi=xi,
        sigma=sigma,
        mu=mu,
        block_size=block_size,
        run_length=run_length,
        theta=theta,
        extremes=maxima,
        extremes_at=np.arange(maxima.size, dtype=np.int64) * block_size,
    )


# ----------------------------------------------------------------------------- goodness of fit


def _anderson_darling(cdf: np.ndarray) -> float:
    """A^2 from the fitted CDF evaluated at the sorted sample."""
    f = np.clip(np.sort(cdf), 1e-300, 1.0 - 1e-16)  # [k]
    k = f.size
    i = np.arange(1, k + 1)  # [k]
    return float(-k - np.mean((2 * i - 1) * (np.log(f) + np.log1p(-f[::-1]))))


def _fit_cdf(fit_method: str, data: np.ndarray) -> tuple[tuple[float, ...], np.ndarray]:
    if fit_method == "pot":
        xi, sigma = fit_gpd(data)
        return (xi, sigma), stats.genpareto.cdf(data, xi, scale=sigma)
    xi, mu, sigma = fit_gev(data)
    return (xi, mu, sigma), stats.genextreme.cdf(data, _gev_c(xi), loc=mu, scale=sigma)


def bootstrap(
    fit: TailFit,
    exceedances: tuple[float, ...],
    *,
    n_boot: int = 200,
    seed: int = 0,
    alpha: float = 0.05,
    level: float = 0.95,
) -> tuple[TestResult, dict[str, Any]]:
    """Parametric bootstrap from the fitted tail: refit `n_boot` synthetic samples of the same size.

    Gives (1) an Anderson-Darling goodness-of-fit p-value that accounts for estimated parameters,
    and (2) one-sided `level` upper confidence bounds for xi and for the pWCET at each exceedance
    (threshold/zeta/theta held fixed: conditional on the tail fraction).
    """
    rng = np.random.default_rng(seed)
    if fit.method == "pot":
        data = fit.extremes - fit.threshold  # [k]
        _, cdf = _fit_cdf("pot", data)
        draw = lambda: stats.genpareto.rvs(fit.xi, scale=fit.sigma, size=data.size, random_state=rng)
    else:
        data = fit.extremes
        _, cdf = _fit_cdf("bm", data)
        draw = lambda: stats.genextreme.rvs(
            _gev_c(fit.xi), loc=fit.mu, scale=fit.sigma, size=data.size, random_state=rng
        )
    a2 = _anderson_darling(cdf)
    a2_boot, xi_boot, q_boot = [], [], []
    for _ in range(n_boot):
        sim = draw()  # [k]
        try:
            params, sim_cdf = _fit_cdf(fit.method, sim)
        except (InputError, ValueError, RuntimeError, FloatingPointError):
            continue
        a2_boot.append(_anderson_darling(sim_cdf))
        xi_boot.append(params[0])
        refit = _refit(fit, params)
        q_boot.append([_safe_quantile(refit, p) for p in exceedances])
    nb = len(a2_boot)
    if nb == 0:
        gof = TestResult(
            "goodness of fit (Anderson-Darling, bootstrap)", a2, None, False, "every bootstrap refit failed"
        )
        return gof, {"n_boot": 0}
    p = (1 + sum(b >= a2 for b in a2_boot)) / (nb + 1)
    resolvable = 1.0 / (nb + 1) < alpha  # with fewer replicates even the worst fit gets p >= alpha
    gof = TestResult(
        "goodness of fit (Anderson-Darling, bootstrap)",
        a2,
        p,
        resolvable and p >= alpha,
        f"A^2 = {a2:.3f} vs {nb} parametric-bootstrap refits"
        + (
            ""
            if resolvable
            else f"; too few refits to reject at alpha = {alpha} (need > {1 / alpha - 1:.0f})"
        ),
    )
    qb = np.asarray(q_boot)  # [nb, len(exceedances)]
    upper = np.quantile(qb, level, axis=0)  # [len(exceedances)]
    lower = np.quantile(qb, 1 - level, axis=0)  # [len(exceedances)]
    ci = {
        "n_boot": nb,
        "level": level,
        "xi_upper": float(np.quantile(xi_boot, level)),
        "xi_lower": float(np.quantile(xi_boot, 1 - level)),
        "pwcet_upper_ns": {f"{p_:.0e}": finite_or_none(v) for p_, v in zip(exceedances, upper)},
        "pwcet_lower_ns": {f"{p_:.0e}": finite_or_none(v) for p_, v in zip(exceedances, lower)},
    }
    return gof, ci


# The parameters _fit_cdf returns, in its order, per method.
_FITTED = {"pot": ("xi", "sigma"), "bm": ("xi", "mu", "sigma")}


def _refit(fit: TailFit, params: tuple[float, ...]) -> TailFit:
    """`fit` with a bootstrap refit's parameters (threshold, zeta, theta, block size held), without
    the fitted data."""
    fitted = dict(zip(_FITTED[fit.method], params))
    return dataclasses.replace(fit, **fitted, extremes=np.zeros(0), extremes_at=None)


def _safe_quantile(fit: TailFit, p: float) -> float:
    try:
        return fit.quantile(p)
    except ConfigError:
        return math.nan


# ----------------------------------------------------------------------------- public API


def fit_tail(samples_ns: Any, *, method: str = "pot", **kwargs: Any) -> TailFit:
    """Fit the upper tail by `method` ("pot" or "bm"). Not real-time code."""
    if method == "pot":
        return fit_pot(samples_ns, **kwargs)
    if method == "bm":
        return fit_bm(samples_ns, **kwargs)
    raise ConfigError(f"EVT method {method!r} is not one of {METHODS}")


def estimate_pwcet(samples_ns: Any, exceedance: float, *, method: str = "pot", **kwargs: Any) -> float:
    """pWCET in ns: the latency x with P(step > x) = `exceedance` per step, from an EVT tail fit.

    POT by default (GPD on runs-declustered peaks above the 99th percentile, or above the
    100 largest samples when n < 10000). When `exceedance` is not below the fitted threshold's
    exceedance rate, the empirical quantile (method "higher") is returned instead: no
    extrapolation is needed there. Admissibility is NOT checked here; see `assess`.
    """
    p = _check_exceedance(exceedance)
    fit = fit_tail(samples_ns, method=method, **kwargs)
    if fit.method == "pot" and p >= fit.zeta:
        x = as_samples(samples_ns)
        return float(np.quantile(x, 1.0 - p, method="higher"))
    return fit.quantile(p)


def assess(
    fit: TailFit,
    *,
    min_extremes: int = 50,
    alpha: float = 0.05,
    n_boot: int = 200,
    exceedances: tuple[float, ...] = DEFAULT_EXCEEDANCES,
    seed: int = 0,
) -> dict[str, Any]:
    """Admissibility tests on the extremes actually fitted, the pWCET table and bootstrap bounds.

    The pWCET table and the bootstrap's pWCET upper bounds are given only when every test passes;
    otherwise `pwcet_ns` is None and `pwcet_withheld` says why: an extrapolation from a fit that
    failed its admissibility tests is not a result (the fit parameters and the tests stay, as
    evidence)."""
    ext = fit.extremes
    tests = [
        enough_extremes(ext.size, min_extremes),
        ljung_box(ext, alpha=alpha),
        runs_test(ext, alpha=alpha),
        ks_halves(ext, alpha=alpha, at=fit.extremes_at, n=fit.n),
    ]
    if fit.method == "pot" and fit.extremes_at is not None:  # block maxima are evenly spaced by construction
        tests.append(rate_halves(fit.extremes_at, fit.n, alpha=alpha))
    gof, ci = bootstrap(fit, exceedances, n_boot=n_boot, seed=seed, alpha=alpha)
    tests.append(gof)
    admissible = all(t.passed for t in tests)
    withheld = None
    if admissible:
        pwcet: dict[str, float | None] | None = {
            f"{p:.0e}": finite_or_none(_safe_quantile(fit, p)) for p in exceedances
        }
    else:
        pwcet = None
        withheld = "admissibility failed: " + ", ".join(t.name for t in tests if not t.passed)
        ci = {k: v for k, v in ci.items() if k not in ("pwcet_upper_ns", "pwcet_lower_ns")}
    return {
        "fit": fit.parameters(),
        "tests": [t.to_dict() for t in tests],
        "admissible": admissible,
        "pwcet_ns": pwcet,
        "pwcet_withheld": withheld,
        "bootstrap": ci,
        "alpha": alpha,
    }
