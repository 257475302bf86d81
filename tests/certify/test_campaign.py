"""The certification campaign (certify/campaign.py): measurement, statistics, verdict, report."""

from __future__ import annotations

import gc
import json
import math
import os

import numpy as np
import pytest

from tickformer.certify import campaign as C
from tickformer.certify.report import summary, write_report
from tickformer.errors import ConfigError, InputError


class FakeSession:
    """A session with the runtime's shape: step(x) -> preallocated y, reset(), position, max_len."""

    def __init__(self, max_len: int = 16, d: int = 8, growing: bool = False) -> None:
        self.max_len = max_len
        self.w = np.random.default_rng(0).normal(size=(d, d)).astype(np.float32)
        self.y = np.zeros((1, 1, d), np.float32)
        self._position = 0
        self.growing = growing
        self.visited: list[int] = []
        self.resets = 0

    @property
    def position(self) -> int:
        return self._position

    def step(self, x: np.ndarray) -> np.ndarray:
        if self._position >= self.max_len:
            raise AssertionError("stepped past max_len: the campaign must reset first")
        reps = 1 + (self._position if self.growing else 0)
        for _ in range(reps):
            np.dot(x[0], self.w, out=self.y[0])
        self.visited.append(self._position)
        self._position += 1
        return self.y

    def reset(self) -> None:
        self._position = 0
        self.resets += 1


def _inputs(n: int = 4, d: int = 8) -> np.ndarray:
    return C.make_inputs((1, 1, d), np.float32, (-1.0, 1.0), n, seed=0)


# ----------------------------------------------------------------------------- measurement


def test_measure_times_every_position_and_resets_outside_timing() -> None:
    s = FakeSession(max_len=16)
    d, pos = C.measure(s, _inputs(), samples=1000, warmup=50, max_len=16)
    assert d.shape == (1000,) and d.dtype == np.int64 and np.all(d > 0)
    assert set(pos.tolist()) == set(range(16))  # constant-time step: every position is sampled
    assert np.bincount(pos).min() >= 1000 // 16 - 1


def test_measure_growing_cache_times_only_the_last_positions() -> None:
    s = FakeSession(max_len=32, growing=True)
    d, pos = C.measure(s, _inputs(), samples=1000, warmup=10, max_len=32, start_position=28)
    assert pos.min() == 28 and pos.max() == 31
    assert len(s.visited) > 1000 * 8 - 100  # the 28 untimed fill steps per sequence did run


def test_measure_duty_cycle_idles_between_chunks() -> None:
    import time

    s = FakeSession(max_len=16)
    t0 = time.perf_counter_ns()
    d, _ = C.measure(s, _inputs(), samples=2000, warmup=0, max_len=16, chunk=500, duty_cycle=0.25)
    wall = time.perf_counter_ns() - t0
    # busy at most 25% of the time: the wall clock covers at least 4x the timed steps (a lower bound,
    # so machine noise can only make it hold more easily)
    assert wall >= 3 * int(d.sum())
    with pytest.raises(ConfigError, match="duty_cycle"):
        C.measure(s, _inputs(), samples=10, warmup=0, max_len=16, duty_cycle=0.0)
    with pytest.raises(ConfigError, match="duty_cycle"):
        C.CampaignConfig(duty_cycle=1.5)


def test_measure_rejects_bad_start_position() -> None:
    with pytest.raises(ConfigError, match="start_position"):
        C.measure(FakeSession(), _inputs(), samples=10, warmup=0, max_len=16, start_position=16)


def test_make_inputs_respects_domain_and_dtype() -> None:
    f = C.make_inputs((1, 1, 3), np.float32, (-2.0, 5.0), 100, seed=1)
    assert f.shape == (100, 1, 1, 3) and f.dtype == np.float32 and f.min() >= -2.0 and f.max() <= 5.0
    t = C.make_inputs((1, 1), np.int64, (0, 12), 100, seed=1)
    assert t.dtype == np.int64 and t.min() >= 0 and t.max() <= 12


def test_isolation_records_and_restores() -> None:
    before_aff = os.sched_getaffinity(0)
    before_sched = os.sched_getscheduler(0)
    cpu = min(before_aff)
    with C.Isolation(cpu=cpu, realtime=True, rt_priority=10) as iso:
        assert not gc.isenabled()
        flushed_inside = __import__("tickformer.runtime.denormals", fromlist=["x"]).denormals_flushed()
        assert os.sched_getaffinity(0) == {cpu}
    assert gc.isenabled()
    assert os.sched_getaffinity(0) == before_aff
    assert os.sched_getscheduler(0) == before_sched
    from tickformer.runtime.denormals import denormals_flushed

    assert not denormals_flushed()  # restored on exit
    assert iso.granted["flush_to_zero"]["requested"] is True
    assert flushed_inside == iso.granted["flush_to_zero"]["granted"]
    for key in ("flush_to_zero", "gc_disabled", "cpu_affinity", "sched_fifo", "mlockall"):
        assert set(iso.granted[key]) == {"requested", "granted", "detail"}
    assert iso.granted["cpu_affinity"]["granted"] is True
    assert iso.granted["sched_fifo"]["requested"] is True  # granted or refused, never silent


def test_isolation_records_a_refused_cpu() -> None:
    with C.Isolation(cpu=10_000) as iso:
        pass
    assert iso.granted["cpu_affinity"] == {
        "requested": True,
        "granted": False,
        "detail": iso.granted["cpu_affinity"]["detail"],
    }
    assert "refused" in iso.granted["cpu_affinity"]["detail"]


def test_campaign_config_validates() -> None:
    with pytest.raises(ConfigError, match="samples"):
        C.CampaignConfig(samples=10)
    with pytest.raises(ConfigError, match="cpu"):
        C.CampaignConfig(cpu=-1)
    with pytest.raises(ConfigError, match="exceedance"):
        C.EvtConfig(exceedance=0.5)
    with pytest.raises(ConfigError, match="method"):
        C.EvtConfig(method="x")
    with pytest.raises(ConfigError, match="n-boot"):  # p >= 1/(n_boot+1) could never reject
        C.EvtConfig(n_boot=19)
    C.EvtConfig(n_boot=20)


# ----------------------------------------------------------------------------- statistics


def test_latency_stats_on_known_data() -> None:
    x = np.arange(1, 100_001)
    st = C.latency_stats(x)
    assert st["min"] == 1 and st["max"] == 100_000 and st["n"] == 100_000
    # "higher": the sample at index ceil(q (n - 1)), never an interpolation below it
    assert st["p50"] == 50_001 and st["p99"] == 99_001 and st["p99.99"] == 99_991
    assert st["mean"] == pytest.approx(50_000.5)
    assert st["std"] == pytest.approx(np.std(x, ddof=1))
    for a, b in zip(C.PERCENTILES, C.PERCENTILES[1:]):
        assert st[a[0]] <= st[b[0]]


def test_histogram_has_explicit_overflow_and_counts_everything() -> None:
    x = np.r_[np.full(90, 100), np.full(9, 150), [10_000]]
    h = C.histogram(x, bins=10, hi_ns=200)
    assert h["overflow"] == 1
    assert sum(h["counts"]) + h["overflow"] == 100
    assert len(h["edges_ns"]) == 11 and h["edges_ns"][-1] == 200


def test_worst_indices_in_order() -> None:
    x = np.array([5, 1, 9, 3, 7])
    assert C.worst_indices(x, 3) == [{"index": 2, "ns": 9}, {"index": 4, "ns": 7}, {"index": 0, "ns": 5}]


# ----------------------------------------------------------------------------- verdict


def _exp_samples(n: int = 50_000, seed: int = 11) -> np.ndarray:
    """i.i.d. 40 us + Exp(2 us): the tail above any threshold is exactly GPD(xi = 0)."""
    rng = np.random.default_rng(seed)
    return np.round(40_000 + rng.exponential(2_000, size=n))


EVT_FAST = C.EvtConfig(n_boot=60)


def test_verdict_pass_on_iid_samples_well_within_budget() -> None:
    r = C.analyze(_exp_samples(), budget_ns=200_000, evt_config=EVT_FAST)
    assert r["evt"]["admissible"], r["evt"]["tests"]
    assert r["verdict"] == C.PASS and r["exit_code"] == 0
    assert r["evt"]["pwcet_ns"]["1e-09"] <= 200_000
    assert abs(r["evt"]["fit"]["xi"]) < 0.1  # exponential tail found
    cross = r["evt_cross_check"]  # block maxima, for information: agrees within 10% here
    assert cross["method"] == "bm" and not cross["used_for_verdict"]
    assert cross["pwcet_ns"]["1e-09"] == pytest.approx(r["evt"]["pwcet_ns"]["1e-09"], rel=0.1)


def test_verdict_fail_when_observed_max_exceeds_budget() -> None:
    x = _exp_samples()
    r = C.analyze(x, budget_ns=float(np.max(x)) - 1, evt_config=EVT_FAST)
    assert r["verdict"] == C.FAIL and r["exit_code"] == 1
    assert "observed max" in r["reasons"][0]
    assert r["over_budget"] == 1


def test_verdict_fail_when_admissible_pwcet_exceeds_budget() -> None:
    x = _exp_samples()
    # between the observed max (~62 us) and the pWCET at 1e-9 (~40 + 2 ln(0.01/1e-9) ~ 72 us)
    budget = float(np.max(x)) + 2_000
    r = C.analyze(x, budget_ns=budget, evt_config=EVT_FAST)
    assert r["evt"]["admissible"]
    assert r["evt"]["pwcet_ns"]["1e-09"] > budget
    assert r["verdict"] == C.FAIL and "pWCET" in r["reasons"][0]


def test_verdict_inconclusive_on_non_stationary_samples() -> None:
    x = _exp_samples()
    x[len(x) // 2 :] += 5_000  # a level shift half-way: not identically distributed
    r = C.analyze(x, budget_ns=10_000_000, evt_config=EVT_FAST)
    assert r["verdict"] == C.INCONCLUSIVE and r["exit_code"] == 2
    assert any("stationary rate" in reason for reason in r["reasons"])  # 40 of 479 peaks in the first half
    assert r["advice"] and "idle" in r["advice"]


def test_verdict_inconclusive_with_too_few_extremes() -> None:
    r = C.analyze(
        _exp_samples(n=5000), budget_ns=10_000_000, evt_config=C.EvtConfig(n_boot=20, min_extremes=500)
    )
    assert r["verdict"] == C.INCONCLUSIVE
    assert any("enough tail samples" in reason for reason in r["reasons"])


def test_verdict_inconclusive_when_no_fit_possible() -> None:
    r = C.analyze(np.full(5000, 30_000.0), budget_ns=1e6, evt_config=EVT_FAST)
    assert r["verdict"] == C.INCONCLUSIVE and r["evt"] is None
    assert r["reasons"][0].startswith("pWCET not estimated (no EVT fit: ")
    assert r["pwcet"]["estimated"] is False and r["pwcet"]["text"].startswith("not estimated (no EVT fit")


# --- an inadmissible fit never shows an extrapolation: certificate, verdict, summary, plots, demo
def _inadmissible() -> tuple[dict, np.ndarray, float]:
    """A report whose tail fit fails admissibility (a level shift half-way), and what the fit
    would have extrapolated at 1e-9 had it been shown."""
    from tickformer.certify.evt import fit_tail

    x = _exp_samples()
    x[len(x) // 2 :] += 5_000
    r = C.analyze(x, budget_ns=10_000_000, evt_config=EVT_FAST)
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
    assert r["verdict"] == C.INCONCLUSIVE and r["reasons"][0] == f"pWCET {pw['text']}"
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
    ok = C.analyze(_exp_samples(), budget_ns=200_000, evt_config=EVT_FAST)
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
        (40.0, _evt(), C.PASS),
        (101.0, _evt(), C.FAIL),  # observed max over budget
        (101.0, _evt(passed=False), C.FAIL),  # ... wins over a failed test
        (40.0, _evt(pwcet=150.0, upper=200.0), C.FAIL),  # admissible pWCET over budget
        (40.0, _evt(pwcet=math.inf, upper=math.inf), C.FAIL),  # unbounded admissible estimate
        (40.0, _evt(pwcet=None, upper=None), C.FAIL),
        (40.0, _evt(passed=False, pwcet=150.0), C.INCONCLUSIVE),  # inadmissible estimate cannot FAIL
        (40.0, _evt(passed=False), C.INCONCLUSIVE),  # ... nor PASS
        (40.0, _evt(pwcet=90.0, upper=120.0), C.INCONCLUSIVE),  # upper bound straddles the budget
        (40.0, None, C.INCONCLUSIVE),
    ],
)
def test_decide_table(observed: float, evt: dict | None, expected: str) -> None:
    verdict, reasons = C.decide(
        observed_max_ns=observed, budget_ns=100.0, evt=evt, exceedance=1e-9, fit_error="x"
    )
    assert verdict == expected and reasons


# ----------------------------------------------------------------------------- end to end


def test_certify_session_writes_a_complete_report(tmp_path, capsys) -> None:
    s = FakeSession(max_len=16)
    cfg = C.CampaignConfig(samples=5000, warmup=100, cpu=min(os.sched_getaffinity(0)))
    seen: list[int] = []
    report, durations = C.certify_session(
        s,
        budget_ns=50_000_000,
        inputs=_inputs(),
        max_len=16,
        static_cache=True,
        backend="fake",
        campaign=cfg,
        evt_config=C.EvtConfig(n_boot=20),
        progress=seen.append,
    )
    assert seen == list(range(1000, 5001, 1000))
    assert report["campaign"]["timed_positions"] == [0, 15]
    assert report["conditions"]["isolation"]["cpu_affinity"]["granted"]
    assert report["conditions"]["clock"]["overhead_ns"] >= 0
    assert report["verdict"] in (C.PASS, C.FAIL, C.INCONCLUSIVE)
    cert = write_report(tmp_path / "rep", report, durations)
    data = json.loads(cert.read_text())
    for key in ("conditions", "stats", "evt", "verdict", "histogram", "worst", "campaign", "reasons"):
        assert key in data
    assert data["stats"]["n"] == 5000
    for name in ("latency_hist.png", "exceedance.png", "samples_ns.npy"):
        assert (tmp_path / "rep" / name).stat().st_size > 1000
    assert np.array_equal(np.load(tmp_path / "rep" / "samples_ns.npy"), durations)
    summary(report)
    assert report["verdict"] in capsys.readouterr().out


def test_artifact_hash_is_the_manifest_hash(tmp_path) -> None:
    (tmp_path / "manifest.json").write_text('{"a": 1}')
    import hashlib

    assert C.artifact_hash(tmp_path) == hashlib.sha256(b'{"a": 1}').hexdigest()


def test_analyze_rejects_bad_budget() -> None:
    with pytest.raises(ConfigError, match="budget"):
        C.analyze(_exp_samples(2000), budget_ns=0)
    with pytest.raises(InputError):
        C.latency_stats([1.0])


# ----------------------------------------------------------------------------- sliding streams


def _pass_report(durations, *, budget_ns, evt_config):  # analyze() stand-in: a PASS whatever the tail
    return {
        "verdict": C.PASS,
        "exit_code": 0,
        "reasons": ["observed max and pWCET within budget"],
        "advice": None,
    }


@pytest.mark.parametrize(
    ("window", "samples", "verdict", "said"),
    [
        (4, 1000, C.PASS, "the ring cache wraps (249 times) and every slot is timed"),
        (2000, 1000, C.INCONCLUSIVE, "only 1000 of the 2000 slots of the ring are timed"),
        (1000, 1000, C.INCONCLUSIVE, "every slot is timed but the ring never wraps"),
    ],
)
def test_ring_claim_follows_the_coverage(monkeypatch, window, samples, verdict, said) -> None:
    """The certificate's ring claim says what was timed; a campaign that missed a slot (or never
    wrapped) cannot PASS (it said "every slot is timed" whatever the coverage)."""
    monkeypatch.setattr(C, "analyze", _pass_report)
    report, _ = C.certify_session(
        FakeSession(max_len=10**9),  # a sliding stream: never full
        budget_ns=1e9,
        inputs=_inputs(),
        max_len=10**9,
        static_cache=True,
        backend="fake",
        campaign=C.CampaignConfig(samples=samples, warmup=0),
        window=window,
    )
    ring = report["campaign"]["ring"]
    assert said in ring["claim"] and report["verdict"] == verdict
    assert ring["covered"] == (verdict == C.PASS) and report["exit_code"] == C.EXIT_CODES[verdict]
    if verdict != C.PASS:
        assert report["reasons"][0].startswith("the campaign does not cover the ring: ")
        assert report["advice"] == C.ADVICE


# ----------------------------------------------------------------------------- writing the report


def _written(out) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_write_report_on_a_full_disk_keeps_the_previous_certificate(tmp_path, monkeypatch) -> None:
    """Regression (issue 19 audit, /tmp/audit-1920/cert_full.py): the old certificate was unlinked
    before the new files were written, so ENOSPC left no certificate while the error said the
    previous version was intact. Now every file is staged first."""
    import errno

    from tickformer.errors import WriteError

    x = 30_000 + np.random.default_rng(0).exponential(2000, 3000)
    r = C.analyze(x, budget_ns=10_000_000, evt_config=C.EvtConfig(n_boot=20))
    out = tmp_path / "cert"
    write_report(out, r, x)
    before = _written(out)
    assert set(before) == {"certificate.json", "latency_hist.png", "exceedance.png", "samples_ns.npy"}
    calls = []

    def full(fd):
        calls.append(fd)
        if len(calls) == 3:  # the third staged file: two are already on disk beside the old report
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteError, match="No space left on device.*intact"):
        write_report(out, dict(r, verdict="FAIL"), x[:2000])
    assert _written(out) == before  # the previous report, certificate included, byte for byte; no temp files
    monkeypatch.undo()
    cert = write_report(out, dict(r, verdict="FAIL"), x[:2000])  # and a write that succeeds replaces it all
    assert json.loads(cert.read_text())["verdict"] == "FAIL"
    assert np.load(out / "samples_ns.npy").shape == (2000,) and set(_written(out)) == set(before)


def test_write_report_failing_rename_leaves_no_stale_certificate(tmp_path, monkeypatch) -> None:
    """If a rename fails after staging, the old certificate (describing old plots) is gone, never
    left beside new files, and the message says so."""
    from tickformer.errors import TickformerError

    x = 30_000 + np.random.default_rng(0).exponential(2000, 3000)
    r = C.analyze(x, budget_ns=10_000_000, evt_config=C.EvtConfig(n_boot=20))
    out = tmp_path / "cert"
    write_report(out, r, x)
    real = os.replace

    def flaky(src, dst):
        if str(dst).endswith("exceedance.png"):
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(TickformerError, match="previous certificate was removed"):
        write_report(out, r, x)
    names = {p.name for p in out.iterdir()}
    assert "certificate.json" not in names and not [n for n in names if n.startswith(".")]


def test_certificate_hashes_the_manifest_bytes_that_were_loaded(tmp_path, monkeypatch) -> None:
    """TOCTOU: manifest.json replaced on disk after the loader verified it must not change the
    hash the certificate records (it used to re-open the file by path)."""
    import hashlib

    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    cfg = preset("tiny")
    art = tmp_path / "art"
    export_params(cfg, init_params(cfg, 0), art, lengths=[1, 4])
    loaded = (art / "manifest.json").read_bytes()
    real_open = C.open_session

    def open_then_swap(*args, **kwargs):
        session = real_open(*args, **kwargs)
        (art / "manifest.json").write_bytes(loaded + b" ")  # the file changes after the load
        return session

    monkeypatch.setattr(C, "open_session", open_then_swap)
    report, _ = C.certify_artifact(
        str(art),
        backend="numpy",
        budget_ns=1e9,
        campaign=C.CampaignConfig(samples=1000, warmup=10, n_inputs=2),
        evt_config=C.EvtConfig(n_boot=20),
    )
    assert report["conditions"]["artifact_sha256"] == hashlib.sha256(loaded).hexdigest()
    assert C.artifact_hash(art) != hashlib.sha256(loaded).hexdigest()  # a re-read would have seen the swap
