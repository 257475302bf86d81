"""`tickformer demo --quick` end to end (seconds, not minutes), and its parts."""

from __future__ import annotations

import argparse
import json
import math

import pytest

from tickformer.cli import main
from tickformer.commands import demo as D
from tickformer.errors import ConfigError

LOOP_KEYS = {"ticks", "deadline_misses", "fallbacks", "tracking_rms", "step_p50_us", "step_p99_us"}


@pytest.mark.slow
def test_demo_quick_runs_every_stage_and_reports(tmp_path, capsys) -> None:
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--quick", "--ticks", "120", "--period-ms", "5", "--no-realtime"])
    assert code == 0
    s = json.loads((out / "demo_summary.json").read_text())
    assert set(s["stage_seconds"]) == {"train", "export", "verify", "certify", "loop"}
    # the backend: c where a compiler is (this checkout's tests build C), recorded with its reason,
    # and the certification and both model loops run on it; the model's tick before (ort) and after
    be = s["backend"]
    assert (
        be["requested"] == "auto"
        and be["used"] in ("c", "ort")
        and be["reason"].startswith(be["used"] + " (")
    )
    assert s["certify"]["backend"] == s["loop"]["backend"] == be["used"]
    assert s["loop"]["model"]["backend"] == s["loop"]["memoryless"]["backend"] == be["used"]
    tick = s["loop"]["tick"]
    assert tick["backend"] == be["used"] and set(tick["by_backend"]) == {be["used"], "ort"}
    for k in tick["by_backend"].values():
        assert k["ticks"] == 120 and 0 < k["model_p50_us"] < k["tick_p50_us"] <= k["tick_p99.9_us"]
        assert 0 < k["outside_model_share"] < 1 and k["period_us"] == 5000
    assert tick["by_backend"][be["used"]]["tick_p50_us"] == pytest.approx(s["loop"]["model"]["step_p50_us"])
    assert s["verify"]["status"] == "pass", s["verify"]  # the exported artifact meets its contracts
    assert s["certify"]["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE")
    assert s["certify"]["batch"] == D.DemoConfig().candidates  # the batch-K step the loop runs
    assert s["window"] == D.DemoConfig().window and s["max_len"] == 64
    for name in D.CONTROLLERS:
        r = s["loop"][name]
        assert LOOP_KEYS <= set(r), name
        assert r["ticks"] == 120
        # a late output (ready after its deadline, within the budget: a late wake-up) is the fallback's too
        assert r["fallbacks"] == sum(
            r["deadlines"][k] for k in ("overruns", "contract_violations", "faults", "late_outputs")
        )
        assert math.isfinite(r["tracking_rms"]) and r["step_p50_us"] > 0
        assert r["misses_covered_by_fallback"] == r["deadline_misses"]  # late outputs go to the fallback
        assert r["fallbacks"] + r["deadlines"]["late_outputs"] >= r["deadline_misses"]
        assert r["isolation"]["sched_fifo"] == {
            "requested": False,
            "granted": False,
            "detail": r["isolation"]["sched_fifo"]["detail"],
        }
        assert r["rss_warm_tick"] == min(D.DemoConfig().settle_ticks, 120 // 4)
        assert (
            abs(r["step_p50_change"] - (r["step_p50_last_10pct_us"] / r["step_p50_first_10pct_us"] - 1))
            < 1e-9
        )
    for name in ("model", "memoryless"):
        r = s["loop"][name]
        # no reset, past the window: one token per plant tick (skipped ticks caught up), the last
        # tick's token still waiting for the command the loop actuated
        assert r["final_position"] + r["tokens_dropped"] <= r["tracking"]["plant_ticks"] - 1
        # tokens dropped from a full catch-up queue after a long stall are not in the history
        assert r["sliding"] and (
            r["final_position"] + r["tokens_dropped"] >= r["tracking"]["plant_ticks"] - 1 - 3 * r["ticks"]
        )
        mon = r["contracts"]  # the session's contracts in monitor mode: counted, never raised
        assert mon["mode"] == "monitor" and mon["steps"] >= r["ticks"] - r["ticks_deferred_catching_up"]
        assert set(mon["contracts"]) >= {"input_domain", "output_bound", "latency"}
    assert s["loop"]["memoryless"]["window"] == 1
    # both models identify (outputs after their horizons), and both run the identifying controller
    assert s["train"]["identify"] and set(s["train"]["identification"]) >= {"omega_rmse", "theta_rmse"}
    for name in ("model", "memoryless"):
        r = s["loop"][name]
        assert r["controller"] == "IdentifiedMPC"
        assert set(r["identified_relative_error"]) == {"g/L", "b/(m L^2)", "k/(m L^2)"}
        assert all(math.isfinite(v) and v > -1 for v in r["identified_relative_error"].values())
    assert set(s["loop"]["verdict"]) == {"tracking", "deadlines", "step_p50_first_last", "rss"}
    # the quality verdict is the virtual-time run's; the wall-clock run says what lateness cost
    for name in D.CONTROLLERS:
        r = s["loop"][name]
        v = r["virtual_time"]
        assert v["ticks"] == 120 and math.isfinite(v["tracking_rms"]) and "_theta" not in v
        assert r["tracking_cost_of_real_time"] == pytest.approx(r["tracking_rms"] - v["tracking_rms"])
    m, o = (s["loop"][n]["virtual_time"]["tracking_rms"] for n in ("model", "oracle"))
    assert s["loop"]["verdict"]["tracking"]["model_to_oracle"] == pytest.approx(m / o)
    assert len(s["loop"]["load_average_before"]) == 3 and len(s["loop"]["load_average_after"]) == 3
    period = s["loop"]["period"]
    assert (
        period["period_us"] == 5000
        and 0 < period["certified_step_p50_share"] < period["certified_step_max_share"]
    )
    assert "rule_met" in period and s["certify"]["isolation"]["sched_fifo"]["requested"] is False
    # the oracle closes the loop far better than the reference's own amplitude
    assert s["loop"]["oracle"]["tracking_rms"] < 0.5 * D.DemoConfig().amplitude
    assert (out / "tracking.png").exists() and (out / "latency.png").exists()
    metrics = json.loads((out / "checkpoint" / "metrics.json").read_text())
    assert set(metrics["held_out"]["baselines"]) == {"memoryless", "linear_ar", "nominal"}
    text = capsys.readouterr().out
    assert "report directory" in text and "loop: memoryless (IdentifiedMPC)" in text
    assert "virtual time" in text and "machine load" in text
    assert "train model (window 32): step 30/30" in text  # progress lines when not on a terminal


def test_demo_config_validation() -> None:
    with pytest.raises(ConfigError, match="candidates"):
        D.DemoConfig(candidates=1)
    with pytest.raises(ConfigError, match="period"):
        D.DemoConfig(period_ms=0)
    with pytest.raises(ConfigError, match="tick-budget"):
        D.DemoConfig(period_ms=10, tick_budget_ms=20)
    with pytest.raises(ConfigError, match="20,000"):
        D.DemoConfig(ticks=1000)  # the full demo runs at least 20,000 ticks; --quick is for tests
    assert D.DemoConfig(ticks=1000, quick=True).ticks == 1000
    cfg = D.DemoConfig(period_ms=18)
    assert cfg.tick_budget_ns == 9_000_000
    assert D.DemoConfig().ticks >= max(20_000, 20 * D.DemoConfig().window)
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match="smoothing"):
            D.DemoConfig(smoothing=bad)


def test_quick_and_explicit_flags_combine() -> None:
    ns = argparse.Namespace(
        quick=True,
        train_steps=None,
        samples=None,
        n_boot=None,
        ticks=500,
        verify_examples=None,
        seed=0,
        period_ms=2.0,
        tick_budget_ms=None,
        candidates=17,
        no_realtime=False,
    )
    cfg = D.config_from_args(ns)
    assert cfg.ticks == 500 and cfg.train_steps == D.QUICK["train_steps"]
    assert cfg.realtime  # requested unless --no-realtime
    ns.quick, ns.ticks, ns.no_realtime = False, None, True
    assert D.config_from_args(ns).ticks == 20_000 and not D.config_from_args(ns).realtime
    assert D.config_from_args(ns).identify  # the default: the identifying models and controller
    ns.horizons_only = True
    assert not D.config_from_args(ns).identify
    assert D.config_from_args(ns).backend == "auto"  # the default: c where a compiler is
    ns.backend = "ort"
    assert D.config_from_args(ns).backend == "ort"


@pytest.mark.slow  # the demo end to end, trains two models
def test_demo_horizons_only_trains_the_horizons_and_runs_history_mpc(tmp_path) -> None:
    """--horizons-only: the demo before IdentifiedMPC (models with d_out = delay + 1, HistoryMPC)."""
    from tickformer.control import demo as CD

    cfg = D.DemoConfig(**{**D.QUICK, "ticks": 120}, quick=True, period_ms=5, realtime=False, identify=False)
    tr = CD.train_models(tmp_path, cfg)
    assert not tr["identify"] and tr["identification"] is None
    ex = CD.export_models(tmp_path, tr, cfg)
    loop = CD.run_loops(ex, tr, cfg, backend="ort")
    assert loop["model"]["controller"] == loop["memoryless"]["controller"] == "HistoryMPC"
    assert "identified_relative_error" not in loop["model"]


def test_demo_bad_ticks_is_one_line(capsys) -> None:
    code = main(["demo", "--out", "/tmp/never", "--ticks", "10"])
    assert code != 0
    err = capsys.readouterr().err
    assert "20,000" in err and "Traceback" not in err


def test_demo_backend_c_without_a_compiler_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    """--backend c where no C compiler is found stops before training, in one line that says
    what to do (auto falls back to ORT: tests/control/test_demo.py)."""
    from tickformer.codegen import toolchain
    from tickformer.errors import BackendUnavailable

    def none():
        raise BackendUnavailable("backend 'c' needs a C compiler and found none (tried cc)")

    monkeypatch.setattr(toolchain, "find_compiler", none)
    code = main(["demo", "--out", str(tmp_path / "d"), "--quick", "--backend", "c"])
    assert code != 0
    err = capsys.readouterr().err
    assert "--backend c" in err and "--backend auto" in err and "Traceback" not in err
    assert not (tmp_path / "d" / "checkpoint").exists()  # nothing trained
