"""The whole cart-pole chain as one command (`tickformer plant cartpole --quick`, core/commands/
plant.py): log, train --data, relog under the learned controller, export, verify, certify, the
closed loops of six controllers and the figure (slow tier: about 40 s on 2 cores); and the
relogging stage's `log --extend` (fast)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the plant extra (gymnasium[mujoco]) is not installed")
pytest.importorskip("mujoco", reason="the plant extra (gymnasium[mujoco]) is not installed")


@pytest.mark.slow
def test_the_quick_chain_runs_every_stage_and_reports_every_controller(tmp_path, capsys):
    import pyarrow.parquet as pq

    from tickformer.cli import main
    from tickformer.commands.plant import BUDGETS

    b = BUDGETS["quick"]
    out = tmp_path / "plant"
    assert main(["plant", "cartpole", "--quick", "--out", str(out)]) == 0
    s = json.loads((out / "plant_summary.json").read_text())
    heads = [c["command"].split()[1] for c in s["steps"]]
    assert heads == ["log", "train", "export"] + ["log", "train", "export"] * b["rounds"] + [
        "train",
        "export",
        "verify",
        "certify",
    ]
    assert all(c["exit"] == 0 for c in s["steps"][:-1])  # certify may FAIL on a loaded machine
    assert s["artifact"] == str(out / f"art{b['rounds']}") and s["verify"]["exit"] == 0
    assert "--window 1" in s["steps"][-4]["command"]  # the memoryless twin
    # the relog extends the first log: its rows first, then the learned controller's runs
    first = pq.read_table(out / "log0.parquet").to_pydict()
    last = pq.read_table(out / f"log{b['rounds']}.parquet").to_pydict()
    n = len(first["run"])
    assert len(last["run"]) > n and np.array_equal(last["command"][:n], first["command"])
    assert min(last["run"][n:]) > max(first["run"])
    loop = s["loop"]
    assert list(loop["controllers"]) == [
        "lqg",
        "nominal_mpc",
        "oracle_mpc",
        "memoryless",
        "model_nominal_filter",
        "model",
    ]
    for r in loop["controllers"].values():
        assert r["ticks"] == b["draws"] * b["ticks"] and len(r["per_draw_cost"]) == b["draws"]
        assert r["deadline_misses"] == 0  # virtual time: every tick on time
    assert set(loop["verdict"]) == {"beats_lqg", "beats_nominal_mpc", "beats_memoryless", "within_oracle"}
    assert loop["wall_clock"]["loop_ticks"] == b["wall_ticks"] and loop["wall_clock"]["period_us"] == 40000
    assert loop["tick_time"]["ticks"] == b["timed_ticks"] and loop["tick_time"]["p50_us"] > 0
    assert (out / "episode.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "targets:" in capsys.readouterr().out
    # the long wall-clock run of benchmarks/your_plant.py --wall-clock, short: 2 draws x 10 ticks at 40 ms
    yp, _ = _module("benchmarks/your_plant.py", "_test_your_plant")
    w = yp.wall_clock(out / f"art{b['rounds']}", 20, draws=2)
    assert w["loop_ticks"] == 20 and w["ticks_per_draw"] == 10 and w["period_us"] == 40000
    assert len(w["per_draw_cost"]) == 2 and w["step_us"]["p50"] > 0 and len(w["manifest_sha256"]) == 64


def test_log_extend_puts_the_earlier_rows_first_and_numbers_the_new_runs_after_them(tmp_path, capsys):
    """The relogging stage's file: `tickformer log cartpole --extend LOG` (fast tier)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from tickformer.cli import main

    first, both = tmp_path / "a.parquet", tmp_path / "b.csv"
    assert main(["log", "cartpole", "--out", str(first), "--runs", "2", "--rows", "150", "--seed", "1"]) == 0
    argv = ["log", "cartpole", "--out", str(both), "--runs", "1", "--rows", "150", "--seed", "2"]
    assert main([*argv, "--extend", str(first)]) == 0
    a = pq.read_table(first).to_pydict()
    b = pacsv.read_csv(both).to_pydict()
    n = len(a["run"])
    assert len(b["run"]) == n + 150
    for col in ("command", "x [m]", "theta [rad]", "run"):
        np.testing.assert_allclose(b[col][:n], a[col])
    assert set(b["run"][n:]) == {max(a["run"]) + 1}
    assert f"after the {first} rows; {n + 150} rows in all" in capsys.readouterr().out


def _module(path: str, name: str):
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location(name, root / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module, root


def test_every_number_of_the_rendered_results_block_is_a_cell_in_its_order():
    """benchmarks/your_plant.py `cells` (what the claims check of docs/your_plant.md reads) gives
    every number token the claims checker finds in `render`'s block, in the block's order."""
    yp, root = _module("benchmarks/your_plant.py", "_test_your_plant")
    check, _ = _module("claims/check.py", "_test_claims_check")
    record = json.loads((root / "benchmarks/results/your_plant.json").read_text())
    text = yp.render(record)
    assert text in (root / "docs/your_plant.md").read_text()
    long = {  # the long wall-clock run's line (benchmarks/your_plant.py --wall-clock), rendered or not
        "command": "python benchmarks/your_plant.py --wall-clock 20000 --artifact A",
        "utc": "2026-12-07T17:00:00Z",
        "artifact": record["seeds"]["0"]["artifact"],
        "loop_ticks": 20000,
        "draws": 20,
        "ticks_per_draw": 1000,
        "period_us": 40000.0,
        "deadline_misses": 3,
        "fallbacks": 2,
        "skipped_periods": 1,
        "step_us": {"p50": 210.2, "p99": 400.4, "p99.9": 1500.5, "max": 9000.9},
        "mean_cost": 0.0172,
        "falls": 5,
        "load_average_before": [1.25, 1.0, 1.0],
        "load_average_after": [2.5, 1.0, 1.0],
    }
    for rec in (record, {**record, "wall_clock_long": long}):
        text = yp.render(rec)
        tokens = [check.normalize(m.group(0)) for m in check.NUMBER.finditer(check.strip(text))]
        assert tokens == [check.normalize(t) for _, _, t in yp.cells(rec)]
        assert len(tokens) > 60
    assert "20,000 ticks" in text and "seed 0's artifact" in text


def test_the_prose_figures_hold_what_the_sentences_around_them_say():
    """docs/your_plant.md: the nominal controllers fall only on the low-gear draws, the memoryless
    model on every draw, the draw with the nominal-filter model's falls has the heaviest pole, and
    the model with the gear bank does not fall and is within the issue's target of the oracle
    (control.cartpole_loop.TARGET_ORACLE_RATIO, 1.5x) on each seed."""
    from tickformer.control.cartpole_loop import TARGET_ORACLE_RATIO

    yp, root = _module("benchmarks/your_plant.py", "_test_your_plant")
    f = yp.figures(json.loads((root / "benchmarks/results/your_plant.json").read_text()))
    assert f["nominal_falls_elsewhere"] == 0 and f["nominal_falls_min"] > 0
    assert f["memoryless_draws_without_falls"] == 0
    assert f["nf_worst_draw_mass.1"] == f["heaviest_mass"]
    assert f["n_low"] + f["n_other"] == f["n_draws"]
    # the nominal filter's falls: on the low-gear draws
    assert f["nf_model_falls_low.1"] == f["nf_model_falls.1"]
    assert f["model_falls.0"] == f["model_falls.1"] == 0  # with the gear bank: none
    # the target (the verdict's within_oracle), met on each seed
    assert max(f["ratio.0"], f["ratio.1"]) <= TARGET_ORACLE_RATIO
