"""The verdict (certify/decision.py): EVT admissibility, pWCET, PASS / FAIL / INCONCLUSIVE failing closed;
an inadmissible fit never shows an extrapolation (certificate, summary, plots, demo)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tickformer.certify import decision as D
from tickformer.certify import statistics as S
from tickformer.certify.report import fitted_exceedance, summary, write_report
from tickformer.errors import ConfigError, InputError


def _exp_samples(n: int = 50_000, seed: int = 11) -> np.ndarray:
    """i.i.d. 40 us + Exp(2 us): the tail above any threshold is exactly GPD(xi = 0)."""
    rng = np.random.default_rng(seed)
    return np.round(40_000 + rng.exponential(2_000, size=n))


EVT_FAST = D.EvtConfig(n_boot=60)


def test_verdict_pass_on_iid_samples_well_within_budget() -> None:
    r = D.analyze(_exp_samples(), budget_ns=200_000, evt_config=EVT_FAST)
    assert r["evt"]["admissible"], r["evt"]["tests"]
    assert r["verdict"] == D.PASS and r["exit_code"] == 0
    assert r["evt"]["pwcet_ns"]["1e-09"] <= 200_000
    assert abs(r["evt"]["fit"]["xi"]) < 0.1  # exponential tail found
    cross = r["evt_cross_check"]  # block maxima, for information: agrees within 10% here
    assert cross["method"] == "bm" and not cross["used_for_verdict"]
    assert cross["pwcet_ns"]["1e-09"] == pytest.approx(r["evt"]["pwcet_ns"]["1e-09"], rel=0.1)


def test_verdict_fail_when_observed_max_exceeds_budget() -> None:
    x = _exp_samples()
    r = D.analyze(x, budget_ns=float(np.max(x)) - 1, evt_config=EVT_FAST)
    assert r["verdict"] == D.FAIL and r["exit_code"] == 1
    assert "observed max" in r["reasons"][0]
    assert r["over_budget"] == 1


def test_an_admissible_pwcet_over_budget_alone_is_inconclusive_with_the_samples_needed() -> None:
    x = _exp_samples()
    # between the observed max (~62 us) and the pWCET at 1e-9 (~40 + 2 ln(0.01/1e-9) ~ 72 us)
    budget = float(np.max(x)) + 2_000
    r = D.analyze(x, budget_ns=budget, evt_config=EVT_FAST)
    assert r["evt"]["admissible"]
    assert r["evt"]["pwcet_ns"]["1e-09"] > budget and r["over_budget"] == 0
    # no step was over the budget: an extrapolation is not an observed failure
    assert r["verdict"] == D.INCONCLUSIVE and "not an observed failure" in r["reasons"][0]
    need = r["samples_needed"]
    q = r["reach"]["budget_exceedance_per_step"]  # the fit's P(step > budget)
    assert q == pytest.approx(float(fitted_exceedance(r["evt"]["fit"], np.array([budget]))[0]))
    assert 1 / x.size > q > 1e-9  # beyond the data, short of the exceedance asked for
    assert need["samples"] == math.ceil(math.log(20) / q) > x.size
    assert f"{need['samples']:.3g}" in r["reasons"][1]
    assert r["reach"]["observed_max_ns"] == x.max() and r["reach"]["extrapolation_orders"] == pytest.approx(
        math.log10(1 / (x.size * 1e-9))
    )
    assert "orders of magnitude beyond the data" in r["reach"]["text"]


def test_a_short_heavy_tailed_campaign_is_never_failed_on_its_extrapolation() -> None:
    """The issue's case: 2000 steps, none over a 1 ms budget, a heavy tail (xi ~ +0.5) that
    extrapolates to far beyond the budget at 1e-9: INCONCLUSIVE with the count it would need."""
    rng = np.random.default_rng(1)
    x = np.round(100_000 + 5_000 * rng.pareto(2.0, size=2000))  # GPD xi = +0.5 above any threshold
    assert x.max() < 1_000_000
    r = D.analyze(x, budget_ns=1_000_000, evt_config=EVT_FAST)
    assert r["evt"]["admissible"] and r["evt"]["fit"]["xi"] > 0.3
    assert r["over_budget"] == 0 and r["pwcet"]["value_ns"] > 100 * 1_000_000  # ~134 ms
    assert r["verdict"] == D.INCONCLUSIVE, r["reasons"]
    assert r["samples_needed"]["samples"] > 2000 and r["reach"]["extrapolation_orders"] > 5.5


def test_too_few_samples_for_a_fit_is_one_rule_at_the_flag_and_in_the_fit(tmp_path) -> None:
    from tickformer.certify import evt
    from tickformer.cli import main

    need = evt.min_samples("pot")
    r = D.analyze(_exp_samples(n=need - 1), budget_ns=10_000_000, evt_config=EVT_FAST)
    assert r["evt"] is None and r["verdict"] == D.INCONCLUSIVE
    assert r["samples_needed"]["samples"] == need
    with pytest.raises(InputError) as fit_error:
        evt.fit_tail(_exp_samples(n=need - 1))
    with pytest.raises(ConfigError) as flag_error:
        D.check_sample_count(need - 1, EVT_FAST)
    assert str(fit_error.value) == str(flag_error.value) == r["evt_error"]
    assert D.analyze(_exp_samples(n=need), budget_ns=10_000_000, evt_config=EVT_FAST)["evt"] is not None
    D.check_sample_count(need, EVT_FAST)
    bm = D.EvtConfig(method="bm", n_boot=20)  # block maxima: 30 blocks of 100 steps
    with pytest.raises(ConfigError, match="3000"):
        D.check_sample_count(2999, bm)
    assert (
        D.analyze(_exp_samples(n=2999), budget_ns=10_000_000, evt_config=bm)["samples_needed"]["samples"]
        == 3000
    )
    # the flag refuses before anything is opened or timed, with the fit's own sentence
    assert (
        main(
            [
                "certify",
                str(tmp_path / "none"),
                "--budget-us",
                "1",
                "--samples",
                "2000",
                "--method",
                "bm",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 1
    )
    assert not (tmp_path / "o").exists()


def test_verdict_inconclusive_on_non_stationary_samples() -> None:
    x = _exp_samples()
    x[len(x) // 2 :] += 5_000  # a level shift half-way: not identically distributed
    r = D.analyze(x, budget_ns=10_000_000, evt_config=EVT_FAST)
    assert r["verdict"] == D.INCONCLUSIVE and r["exit_code"] == 2
    assert any("stationary rate" in reason for reason in r["reasons"])  # 40 of 479 peaks in the first half
    assert r["advice"] and "idle" in r["advice"]


def test_verdict_inconclusive_with_too_few_extremes() -> None:
    r = D.analyze(
        _exp_samples(n=5000), budget_ns=10_000_000, evt_config=D.EvtConfig(n_boot=20, min_extremes=500)
    )
    assert r["verdict"] == D.INCONCLUSIVE
    assert any("enough tail samples" in reason for reason in r["reasons"])


def test_verdict_inconclusive_when_no_fit_possible() -> None:
    r = D.analyze(np.full(5000, 30_000.0), budget_ns=1e6, evt_config=EVT_FAST)
    assert r["verdict"] == D.INCONCLUSIVE and r["evt"] is None
    assert r["reasons"][0].startswith("pWCET not estimated (no EVT fit: ")
    assert r["pwcet"]["estimated"] is False and r["pwcet"]["text"].startswith("not estimated (no EVT fit")


# --- an inadmissible fit never shows an extrapolation: certificate, verdict, summary, plots, demo
def _inadmissible() -> tuple[dict, np.ndarray, float]:
    """A report whose tail fit fails admissibility (a level shift half-way), and what the fit
    would have extrapolated at 1e-9 had it been shown."""
    from tickformer.certify.evt import fit_tail

    x = _exp_samples()
    x[len(x) // 2 :] += 5_000
    r = D.analyze(x, budget_ns=10_000_000, evt_config=EVT_FAST)
    assert not r["evt"]["admissible"]
    return r, x, fit_tail(x).quantile(1e-9)


def test_inadmissible_fit_certificate_says_not_estimated(tmp_path) -> None:
    r, x, hidden = _inadmissible()
    pw = r["pwcet"]
    assert pw["estimated"] is False and "value_ns" not in pw
    assert pw["text"].startswith("not estimated (admissibility failed: ") and "stationary rate" in pw["text"]
    assert r["evt"]["pwcet_ns"] is None and r["evt"]["pwcet_withheld"].startswith("admissibility failed")
    assert "pwcet_upper_ns" not in r["evt"]["bootstrap"]
    assert r["evt_cross_check"]["pwcet_ns"] is None and "not estimated" in r["evt_cross_check"]["withheld"]
    assert r["verdict"] == D.INCONCLUSIVE and r["reasons"][0] == f"pWCET {pw['text']}"
    cert = json.loads(write_report(tmp_path / "rep", r, x).read_text())
    assert cert["pwcet"] == json.loads(json.dumps(pw))
    text = json.dumps(cert)
    assert f"{hidden:.0f}" not in text and f"{hidden / 1e3:.1f}" not in text  # the extrapolation is nowhere


def test_inadmissible_fit_summary_says_not_estimated(capsys) -> None:
    r, _, hidden = _inadmissible()
    summary(r)
    out = capsys.readouterr().out
    assert "not estimated (admissibility failed:" in " ".join(out.split())
    assert f"{hidden / 1e3:.1f}" not in out and f"{hidden / 1e3:.2e}" not in out


def test_inadmissible_fit_plots_show_no_fitted_tail(tmp_path, monkeypatch) -> None:
    from tickformer.certify import report as R

    r, x, _ = _inadmissible()
    figures = {}
    monkeypatch.setattr(R, "_savefig", lambda fig, path: figures.__setitem__(path.name, fig))
    monkeypatch.setattr(R._pyplot(), "close", lambda fig: None)
    R.plot_exceedance(r, x, tmp_path / "exceedance.png")
    R.plot_histogram(r, tmp_path / "latency_hist.png")
    ax = figures["exceedance.png"].axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert not any("fit" in label or "pWCET" in label or "upper" in label for label in labels), labels
    texts = " ".join(t.get_text() for t in ax.texts).replace("\n", " ")
    assert "pWCET(1e-09) not estimated (admissibility failed:" in texts
    assert "not estimated" in ax.get_title()
    assert "not estimated" in figures["latency_hist.png"].axes[0].get_title()
    # an admissible fit draws its tail and points, and says its value
    ok = D.analyze(_exp_samples(), budget_ns=200_000, evt_config=EVT_FAST)
    R.plot_exceedance(ok, _exp_samples(), tmp_path / "exceedance.png")
    ax = figures["exceedance.png"].axes[0]
    assert any("fit" in line.get_label() for line in ax.get_lines()) and "pWCET(1e-09) = " in ax.get_title()


def test_inadmissible_fit_demo_summary_says_not_estimated() -> None:
    import io

    from rich.console import Console

    from tickformer.commands import demo as D

    r, _, _ = _inadmissible()
    con = Console(file=io.StringIO(), width=200)
    ce = {
        "verdict": r["verdict"],
        "reasons": r["reasons"],
        "budget_us": 588.0,
        "p50_us": 40.0,
        "p99_us": 50.0,
        "max_us": 60.0,
        "pwcet_1e-9_us": None,
        "pwcet_1e-9": r["pwcet"]["text"],
    }
    D.summary_table({"certify": ce}, con)
    out = " ".join(con.file.getvalue().split())
    assert "pWCET(1e-9) not estimated (admissibility failed:" in out


def _evt(passed: bool = True, pwcet: float | None = 50.0, upper: float | None = 60.0) -> dict:
    return {
        "tests": [
            {
                "name": "independence (Ljung-Box)",
                "passed": passed,
                "p_value": 0.5 if passed else 0.001,
                "detail": "d",
            }
        ],
        "pwcet_ns": {"1e-09": pwcet},
        "bootstrap": {"level": 0.95, "pwcet_upper_ns": {"1e-09": upper}},
    }


@pytest.mark.parametrize(
    "observed,evt,expected",
    [
        (40.0, _evt(), D.PASS),
        (101.0, _evt(), D.FAIL),  # observed max over budget
        (101.0, _evt(passed=False), D.FAIL),  # ... wins over a failed test
        (40.0, _evt(pwcet=150.0, upper=200.0), D.INCONCLUSIVE),  # admissible pWCET over budget: extrapolation
        (40.0, _evt(pwcet=math.inf, upper=math.inf), D.INCONCLUSIVE),  # unbounded admissible estimate
        (40.0, _evt(pwcet=None, upper=None), D.INCONCLUSIVE),
        (40.0, _evt(passed=False, pwcet=150.0), D.INCONCLUSIVE),  # inadmissible estimate cannot FAIL
        (40.0, _evt(passed=False), D.INCONCLUSIVE),  # ... nor PASS
        (40.0, _evt(pwcet=90.0, upper=120.0), D.INCONCLUSIVE),  # upper bound straddles the budget
        (40.0, None, D.INCONCLUSIVE),
    ],
)
def test_decide_table(observed: float, evt: dict | None, expected: str) -> None:
    verdict, reasons, _ = D.decide(
        observed_max_ns=observed, budget_ns=100.0, evt=evt, exceedance=1e-9, fit_error="x"
    )
    assert verdict == expected and reasons


def test_analyze_rejects_bad_budget() -> None:
    with pytest.raises(ConfigError, match="budget"):
        D.analyze(_exp_samples(2000), budget_ns=0)
    with pytest.raises(InputError):
        S.latency_stats([1.0])
