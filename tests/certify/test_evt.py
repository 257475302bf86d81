"""pWCET estimation (certify/evt.py) on synthetic i.i.d. data with a known tail.

Accuracy is stated relative to the *excess* of the true quantile over the median,
err = (estimate - q_true(p)) / (q_true(p) - median), because that is the part EVT extrapolates.
Tolerances are about 4 standard deviations (plus bias) of the estimator measured over 30 seeds
at n = 1e6 with the default POT settings (tail fraction 1%, run length 3):

    p       Gumbel (xi=0)        Weibull-type (xi=-1/3)     GPD (xi=+0.2, heavy)
    1e-3    bias .005 sd .003    bias .001 sd .001          bias .008 sd .007
    1e-6    bias -.01 sd .028    bias -.001 sd .002         bias -.016 sd .066
    1e-9    bias -.03 sd .061    bias -.002 sd .003         bias -.048 sd .15

The error at small p grows like (shape error) x ln(zeta/p): a heavy tail at 1e-9 is only known
to within about +-60% of its excess from a million samples, and the test says so.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tickformer.certify import evt, iid
from tickformer.certify.evt import estimate_pwcet
from tickformer.errors import ConfigError, InputError

N = 1_000_000
# distribution, {exceedance: tolerance on err}, true xi
CASES = {
    "gumbel": (stats.gumbel_r(loc=50_000, scale=2_000), {1e-3: 0.03, 1e-6: 0.15, 1e-9: 0.3}, 0.0),
    "weibull-type": (
        stats.weibull_max(c=3, loc=100_000, scale=20_000),
        {1e-3: 0.01, 1e-6: 0.02, 1e-9: 0.03},
        -1 / 3,
    ),
    "gpd-heavy": (stats.genpareto(c=0.2, loc=40_000, scale=3_000), {1e-3: 0.05, 1e-6: 0.3, 1e-9: 0.65}, 0.2),
}


@pytest.fixture(scope="module")
def samples() -> dict[str, np.ndarray]:
    return {name: d.rvs(size=N, random_state=np.random.default_rng(7)) for name, (d, _, _) in CASES.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_estimate_pwcet_matches_analytic_quantile(name: str, samples: dict[str, np.ndarray]) -> None:
    dist, tols, _ = CASES[name]
    x = samples[name]
    for p, tol in tols.items():
        est = estimate_pwcet(x, p)
        true = float(dist.isf(p))
        err = (est - true) / (true - float(dist.median()))
        assert abs(err) <= tol, (
            f"{name} p={p}: estimate {est:.0f} vs analytic {true:.0f} (err {err:+.3f} > {tol})"
        )


@pytest.mark.parametrize("name", list(CASES))
def test_fitted_shape_has_the_right_sign_and_size(name: str, samples: dict[str, np.ndarray]) -> None:
    _, _, xi_true = CASES[name]
    fit = evt.fit_tail(samples[name])
    assert abs(fit.xi - xi_true) < 0.06, f"{name}: xi {fit.xi:+.3f} vs {xi_true:+.3f}"
    expected = {"gumbel": "exponential", "weibull-type": "bounded", "gpd-heavy": "heavy"}[name]
    assert fit.tail_kind.startswith(expected)


def test_bounded_tail_estimate_respects_endpoint(samples: dict[str, np.ndarray]) -> None:
    # weibull_max(c=3, loc=1e5) never exceeds 1e5 ns; the estimate may overshoot only within tolerance
    est = estimate_pwcet(samples["weibull-type"], 1e-9)
    assert est <= 100_000 * 1.005


def test_gev_shape_sign_convention() -> None:
    """scipy's genextreme uses c = -xi: samples drawn with c = -0.2 are heavy (xi = +0.2)."""
    rng = np.random.default_rng(3)
    m = stats.genextreme.rvs(-0.2, loc=1000.0, scale=50.0, size=20_000, random_state=rng)
    xi, mu, sigma = evt.fit_gev(m)
    assert xi == pytest.approx(0.2, abs=0.03)
    assert mu == pytest.approx(1000.0, rel=0.01)
    assert sigma == pytest.approx(50.0, rel=0.05)
    # and the quantile uses the same convention: a block exceedance q maps back to the GEV isf
    q = evt.bm_quantile(mu, xi, sigma, block_size=1, theta=1.0, p=1e-4)
    assert q == pytest.approx(float(stats.genextreme.isf(1e-4, -xi, loc=mu, scale=sigma)))
    assert q > float(stats.gumbel_r.isf(1e-4, loc=mu, scale=sigma))  # heavier than Gumbel


@pytest.mark.parametrize("name,tol", [("gumbel", 0.3), ("weibull-type", 0.03)])
def test_block_maxima_estimate_is_close_too(name: str, tol: float, samples: dict[str, np.ndarray]) -> None:
    dist, _, _ = CASES[name]
    est = estimate_pwcet(samples[name], 1e-9, method="bm")
    true = float(dist.isf(1e-9))
    assert abs(est - true) / (true - float(dist.median())) <= tol


def test_gpd_quantile_formula_round_trips() -> None:
    u, xi, sigma, zeta = 1000.0, 0.15, 80.0, 0.01
    x = evt.pot_quantile(u, xi, sigma, zeta, 1e-7)
    assert zeta * stats.genpareto.sf(x - u, xi, scale=sigma) == pytest.approx(1e-7, rel=1e-9)


def test_exceedance_above_threshold_rate_uses_empirical_quantile() -> None:
    x = np.random.default_rng(0).permutation(np.arange(1, 100_001, dtype=np.float64))
    assert estimate_pwcet(x, 0.1) == np.quantile(x, 0.9, method="higher")


def test_declustering_keeps_one_peak_per_cluster() -> None:
    x = np.array([0, 5, 6, 0, 0, 0, 0, 7, 0, 9, 0, 0, 0, 0, 3], dtype=float)
    peaks, n_exc = evt.decluster_runs(x, threshold=1.0, run_length=3)
    assert n_exc == 5
    assert peaks.tolist() == [6.0, 9.0, 3.0]  # (5,6) | (7,_,9) joined: gap 2 <= 3 | 3


def test_extremal_index_detects_clustering() -> None:
    rng = np.random.default_rng(0)
    base = rng.exponential(size=50_000)
    clustered = np.repeat(base[::4], 4)  # every value appears 4 times in a row: theta = 1/4
    u = float(np.quantile(clustered, 0.99))
    assert evt.extremal_index(clustered, u, run_length=3) == pytest.approx(0.25, abs=0.03)
    assert evt.extremal_index(base, float(np.quantile(base, 0.99)), run_length=3) > 0.95


def test_independence_tests_reject_autocorrelated_series() -> None:
    rng = np.random.default_rng(1)
    e = rng.normal(size=2000)
    ar = np.empty_like(e)
    ar[0] = e[0]
    for i in range(1, e.size):
        ar[i] = 0.6 * ar[i - 1] + e[i]
    assert not iid.ljung_box(ar).passed and iid.ljung_box(ar).p_value < 1e-6
    assert not iid.runs_test(ar).passed
    assert iid.ljung_box(e).passed and iid.runs_test(e).passed


def test_ks_halves_rejects_a_shift() -> None:
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.exponential(size=500), 1.0 + rng.exponential(size=500)])
    assert not iid.ks_halves(x).passed
    assert iid.ks_halves(rng.exponential(size=1000)).passed


def test_goodness_of_fit_rejects_the_wrong_family() -> None:
    """Uniform excesses are far from a GPD with the fitted xi; the bootstrap AD test must see it."""
    rng = np.random.default_rng(4)
    e = np.concatenate([rng.uniform(0, 1, 400), rng.uniform(5, 6, 100)])  # bimodal excesses
    xi, sigma = evt.fit_gpd(e)
    fit = evt.TailFit(method="pot", n=50_000, xi=xi, sigma=sigma, zeta=0.01, n_exceed=500, extremes=e)
    gof, _ = evt.bootstrap(fit, (1e-6,), n_boot=60)
    assert not gof.passed and gof.p_value < 0.05


def test_goodness_of_fit_fails_closed_with_too_few_refits() -> None:
    rng = np.random.default_rng(6)
    e = rng.exponential(size=300)
    xi, sigma = evt.fit_gpd(e)
    fit = evt.TailFit(method="pot", n=30_000, xi=xi, sigma=sigma, zeta=0.01, n_exceed=300, extremes=e)
    gof, _ = evt.bootstrap(fit, (1e-6,), n_boot=10)  # smallest possible p = 1/11 > 0.05
    assert not gof.passed and "too few refits" in gof.detail


def test_bad_inputs_raise_clear_errors() -> None:
    with pytest.raises(InputError, match="at least"):
        estimate_pwcet([1.0, 2.0, 3.0], 1e-9)
    with pytest.raises(InputError, match="NaN"):
        estimate_pwcet(np.r_[np.ones(1000), np.nan], 1e-9)
    with pytest.raises(ConfigError, match="exceedance"):
        estimate_pwcet(np.arange(1000.0), 0.0)
    with pytest.raises(ConfigError, match="method"):
        estimate_pwcet(np.arange(1000.0), 1e-6, method="magic")
    with pytest.raises(InputError, match="no spread"):
        evt.fit_gpd(np.zeros(10))


def test_constant_samples_are_not_estimable() -> None:
    with pytest.raises(InputError):
        estimate_pwcet(np.full(10_000, 5000.0), 1e-9)


def test_anderson_darling_formula() -> None:
    f = np.array([0.1, 0.5, 0.9])  # fitted CDF at the sorted sample
    expected = -3 - np.mean([1 * 2 * math.log(0.1), 3 * 2 * math.log(0.5), 5 * 2 * math.log(0.9)])
    assert evt._anderson_darling(f) == pytest.approx(expected)
    # perfectly spread PITs give a small A^2, clumped ones a large A^2
    even = (np.arange(1, 201) - 0.5) / 200
    assert evt._anderson_darling(even) < 0.01 < 3.0 < evt._anderson_darling(np.full(200, 0.99))
