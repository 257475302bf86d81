"""`tickformer demo` end to end with small settings (seconds, not minutes), and its parts."""

from __future__ import annotations

import json
import math

import pytest

from tickformer.cli import main
from tickformer.commands import demo as D
from tickformer.errors import ConfigError


@pytest.mark.slow
def test_demo_runs_every_stage_and_reports(tmp_path, capsys) -> None:
    out = tmp_path / "demo"
    code = main(
        [
            "demo",
            "--out",
            str(out),
            "--train-steps",
            "30",
            "--samples",
            "2000",
            "--n-boot",
            "20",
            "--ticks",
            "30",
            "--period-ms",
            "5",
            "--verify-examples",
            "5",
        ]
    )
    assert code == 0
    s = json.loads((out / "demo_summary.json").read_text())
    assert set(s["stage_seconds"]) == {"train", "export", "verify", "certify", "loop"}
    assert s["verify"]["status"] == "pass", s["verify"]  # the exported artifact meets its contracts
    assert s["certify"]["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE")
    cert = json.loads((out / "certify" / "certificate.json").read_text())
    if cert["pwcet"]["estimated"]:
        assert s["certify"]["pwcet_1e-9"] == "estimated"
    else:  # an inadmissible fit: the reason, never the extrapolation
        assert s["certify"]["pwcet_1e-9_us"] is None
        assert s["certify"]["pwcet_1e-9"] == cert["pwcet"]["text"]
    assert (out / "certify" / "certificate.json").exists() and (out / "tracking.png").exists()
    for name in ("model", "true"):
        d = s["loop"][name]["deadlines"]
        assert d["ticks"] == 30
        assert d["fallbacks"] == d["overruns"] + d["contract_violations"] + d["faults"]
        tr = s["loop"][name]["tracking"]
        assert math.isfinite(tr["rms_rad"]) and tr["plant_ticks"] >= 30
    # closing the loop with the true model beats doing nothing by a wide margin
    assert s["loop"]["true"]["tracking"]["rms_rad"] < 0.2 * s["loop"]["open_loop"]["tracking"]["rms_rad"]
    text = capsys.readouterr().out
    assert "report directory" in text and "loop: model MPC" in text


def test_demo_config_validation() -> None:
    with pytest.raises(ConfigError, match="candidates"):
        D.DemoConfig(candidates=1)
    with pytest.raises(ConfigError, match="period"):
        D.DemoConfig(period_ms=0)
    with pytest.raises(ConfigError, match="tick-budget"):
        D.DemoConfig(period_ms=10, tick_budget_ms=20)
    cfg = D.DemoConfig(period_ms=18, candidates=9)
    assert cfg.tick_budget_ns == 9_000_000 and cfg.step_budget_ns == 1_000_000
