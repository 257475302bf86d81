"""The certification campaign (certify/campaign.py): configuration, a session certified end to end,
sliding streams, writing the report, the hash of what was loaded."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from fakes import FakeSession, inputs

from tickformer.certify import campaign as C
from tickformer.certify import decision as D
from tickformer.certify import measurement as M
from tickformer.certify.report import summary, write_report
from tickformer.errors import ConfigError


def test_campaign_config_validates() -> None:
    with pytest.raises(ConfigError, match="samples"):
        C.CampaignConfig(samples=10)
    with pytest.raises(ConfigError, match="cpu"):
        C.CampaignConfig(cpu=-1)
    with pytest.raises(ConfigError, match="exceedance"):
        D.EvtConfig(exceedance=0.5)
    with pytest.raises(ConfigError, match="method"):
        D.EvtConfig(method="x")
    with pytest.raises(ConfigError, match="n-boot"):  # p >= 1/(n_boot+1) could never reject
        D.EvtConfig(n_boot=19)
    D.EvtConfig(n_boot=20)


def test_certify_session_writes_a_complete_report(tmp_path, capsys) -> None:
    s = FakeSession(max_len=16)
    cfg = C.CampaignConfig(samples=5000, warmup=100, cpu=min(os.sched_getaffinity(0)))
    seen: list[int] = []
    report, durations = C.certify_session(
        s,
        budget_ns=50_000_000,
        inputs=inputs(),
        max_len=16,
        static_cache=True,
        backend="fake",
        campaign=cfg,
        evt_config=D.EvtConfig(n_boot=20),
        progress=seen.append,
    )
    assert seen == list(range(1000, 5001, 1000))
    assert report["campaign"]["timed_positions"] == [0, 15]
    assert report["conditions"]["isolation"]["cpu_affinity"]["granted"]
    assert report["conditions"]["clock"]["overhead_ns"] >= 0
    assert report["verdict"] in (D.PASS, D.FAIL, D.INCONCLUSIVE)
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


def _pass_report(durations, *, budget_ns, evt_config):  # analyze() stand-in: a PASS whatever the tail
    return {
        "verdict": D.PASS,
        "exit_code": 0,
        "reasons": ["observed max and pWCET within budget"],
        "advice": None,
    }


@pytest.mark.parametrize(
    ("window", "samples", "verdict", "said"),
    [
        (4, 1000, D.PASS, "the ring cache wraps (249 times) and every slot is timed"),
        (2000, 1000, D.INCONCLUSIVE, "only 1000 of the 2000 slots of the ring are timed"),
        (1000, 1000, D.INCONCLUSIVE, "every slot is timed but the ring never wraps"),
    ],
)
def test_ring_claim_follows_the_coverage(monkeypatch, window, samples, verdict, said) -> None:
    """The certificate's ring claim says what was timed; a campaign that missed a slot (or never
    wrapped) cannot PASS (it said "every slot is timed" whatever the coverage)."""
    monkeypatch.setattr(C, "analyze", _pass_report)
    report, _ = C.certify_session(
        FakeSession(max_len=10**9),  # a sliding stream: never full
        budget_ns=1e9,
        inputs=inputs(),
        max_len=10**9,
        static_cache=True,
        backend="fake",
        campaign=C.CampaignConfig(samples=samples, warmup=0),
        window=window,
    )
    ring = report["campaign"]["ring"]
    assert said in ring["claim"] and report["verdict"] == verdict
    assert ring["covered"] == (verdict == D.PASS) and report["exit_code"] == D.EXIT_CODES[verdict]
    if verdict != D.PASS:
        assert report["reasons"][0].startswith("the campaign does not cover the ring: ")
        assert report["advice"] == D.ADVICE


def _written(out) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_write_report_on_a_full_disk_keeps_the_previous_certificate(tmp_path, monkeypatch) -> None:
    """Regression (issue 19 audit, /tmp/audit-1920/cert_full.py): the old certificate was unlinked
    before the new files were written, so ENOSPC left no certificate while the error said the
    previous version was intact. Now every file is staged first."""
    import errno

    from tickformer.errors import WriteError

    x = 30_000 + np.random.default_rng(0).exponential(2000, 3000)
    r = D.analyze(x, budget_ns=10_000_000, evt_config=D.EvtConfig(n_boot=20))
    out = tmp_path / "cert"
    write_report(out, r, x)
    before = _written(out)
    assert set(before) == {
        "certificate.json",
        "latency_hist.png",
        "exceedance.png",
        "samples_ns.npy",
        "report.html",
    }
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
    r = D.analyze(x, budget_ns=10_000_000, evt_config=D.EvtConfig(n_boot=20))
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
        evt_config=D.EvtConfig(n_boot=20),
    )
    assert report["conditions"]["manifest_file_sha256"] == hashlib.sha256(loaded).hexdigest()
    assert report["conditions"]["artifact_id"] == json.loads(loaded)["manifest_sha256"]
    assert M.artifact_hash(art) != hashlib.sha256(loaded).hexdigest()  # a re-read would have seen the swap
