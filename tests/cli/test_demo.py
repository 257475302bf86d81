"""`tickformer demo` end to end with small settings (seconds, not minutes), and its parts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tickformer.cli import main
from tickformer.commands import demo as D
from tickformer.errors import ConfigError


@pytest.mark.slow
def test_demo_runs_every_stage_and_reports(tmp_path, capsys) -> None:
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--train-steps", "30", "--samples", "2000", "--n-boot", "20",
                 "--ticks", "30", "--period-ms", "5", "--verify-examples", "5"])
    assert code == 0
    s = json.loads((out / "demo_summary.json").read_text())
    assert set(s["stage_seconds"]) == {"train", "export", "verify", "certify", "loop"}
    assert s["verify"]["status"] == "pass", s["verify"]  # the exported artifact meets its contracts
    assert s["certify"]["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE")
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


def test_true_mpc_tracks_and_plant_holds_torque_through_skipped_ticks() -> None:
    from tickformer.model.plant import DEFAULT, pendulum_step

    cfg = D.DemoConfig(ticks=80)
    ctl = D.TrueMPC(cfg, DEFAULT.u_max, DEFAULT)
    plant = D.SimulatedPlant(cfg, DEFAULT, n_ticks_max=200)
    for k in range(80):
        plant.actuate(ctl.step(plant.observe(k)))
    assert plant.tracking()["rms_rad"] < 0.02  # ~0.005 rad measured
    # skipped ticks: observe(k) advances the plant with the held torque (zero-order hold)
    p = D.SimulatedPlant(cfg, DEFAULT, n_ticks_max=10)
    p.observe(0)
    p.actuate(np.array([2.0]))
    before = p.state.copy()
    p.observe(4)  # ticks 1..3 were skipped
    expected = before
    for _ in range(3):
        expected = pendulum_step(expected, 2.0, DEFAULT)
    assert np.allclose(p.state, expected) and p.k == 4


def test_model_mpc_reports_broken_predictions_as_non_finite_action() -> None:
    class NaNSession:
        input_shape = (1, 1, 3)
        domain = (-10.0, 10.0)
        y = np.full((1, 1, 2), np.nan, np.float32)

        def reset(self) -> None:
            pass

        def step(self, x):
            return self.y

    norm = {"x_mean": [0, 0, 0], "x_std": [1, 1, 1], "dy_mean": [0, 0], "dy_std": [1, 1]}
    ctl = D.ModelMPC(D.DemoConfig(), 4.0, NaNSession(), norm, output_bound=None)
    u = ctl.step(np.array([0.1, 0.0, 0.2, 0.0]))
    assert np.isnan(u[0])  # -> the ControlLoop counts a contract violation and falls back
