"""Side runs behind docs/control.md's "tried" list and its period choice: short experiments on the
demo's task, one variant of the training recipe or one loop setting at a time.

    python benchmarks/control_side_runs.py recipe NAME '{"cfg": {"d_in": 4}, "hw": [0.2, 1, 2]}'
    python benchmarks/control_side_runs.py deadlines CHECKPOINT 1m1,2m2,1m1,2m2,1m1,2m2

`recipe`: trains the windowed model only (the demo's recipe, seed 0 unless `seed` is given, with the variant's changes),
then on its held-out episodes the one-step and (delay + 1)-step RMSE and the in-context
identification measure of control_diagnosis.py (correlation across episodes of the predicted
d theta_{t+3} / d c_t with the actuator coefficient), then the closed loop of
control_diagnosis.diagnose (no wall clock) on 5 held-out plants x 1000 ticks (the demo's plant
first), with the ratio of each plant's tracking RMS to the oracle controller's on the same plant,
and the ORT batch-K peek time (3000 peeks, p50 / p99); each plant's tracking RMS over SEGMENTS of
the stream too (`tracking_by_segment`, runs after 2026-12-05 only). Variant keys:

    cfg      Config overrides of the control-hidden preset (d_in: the token's lag columns,
             model.tasks hidden_io_widths; window, max_len, d_model, d_ff, n_layers)
    hw       model.tasks.HIDDEN_HORIZON_WEIGHTS (default here: 1, 1, 1, an unweighted loss)
    ylags    model.tasks.HIDDEN_Y_LAGS
    start    (model.plant.START_THETA, START_OMEGA): the training episodes' starting ranges
    steps, batch, warmup, lr, ema   TrainSettings (default: the task's 10,000 x 16, warmup 400)
    seed     the training seed (default 0, the demo's): the data stream, the initial weights and
             the batches all follow it
    sched    ["lin" | "cos", f]: the last fraction f of the steps decays the learning rate to 0

`deadlines`: the demo's model loop (HistoryMPC on the checkpoint's batch-K artifact, ORT,
contracts in monitor mode, the demo's LoopConfig, `Isolation(realtime=True)`) for 20,000 ticks
per arm, the arms run one after another in the order given (interleave them): `PmM[bB]` = period
P ms, catch_up_max M, tick budget B ms (default: half the period). Per arm: deadline misses,
those covered by the fallback, fallbacks, overruns, late outputs, skipped and deferred ticks,
step p50 / p99 / max, the worst wake-up lateness, the ticks that missed.

Appends to benchmarks/results/control_side_runs.json (`recipe[NAME]`, `deadlines` list). Not part
of the package; a recipe run is 1.5-3 minutes on 2 cores, a deadline arm its ticks x period.
Training is deterministic, so a recipe run's numbers are reproduced bit for bit on one machine
(its timings are not).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

OUT = Path(__file__).resolve().parent / "results" / "control_side_runs.json"
PLANTS, TICKS, SETTLE = 5, 1000, 100
SEGMENTS = ((100, 200), (200, 400), (400, 1000))  # plant ticks, after SETTLE: `tracking_by_segment`


def _load() -> dict[str, Any]:
    return json.loads(OUT.read_text()) if OUT.exists() else {"recipe": {}, "deadlines": []}


def _save(data: dict[str, Any]) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1) + "\n")


def _held_out(params: Any, config: Any, data: Any) -> dict[str, float]:
    """One-step and (delay + 1)-step RMSE at positions >= window - 1, and in-context identification."""
    from tickformer.model import tasks as T
    from tickformer.model.transformer import forward

    d, start = data.plant.delay, (config.window or 16) - 1
    truth = np.stack([data.test_theta[:, j : j + data.steps] for j in range(1, d + 2)], axis=-1)[:, start:]
    err = T.hidden_model_angles(params, config, data)[:, start:] - truth
    x, _ = T.hidden_arrays(data.test_theta, data.test_y, data.test_cmds, data)
    outs = []
    for c in (-1.0, 1.0):
        xc = x.copy()
        xc[:, -1, 1] = (c - data.norm["x_mean"][1]) / data.norm["x_std"][1]
        o = forward(params, config, xc)[:, -1, : d + 1].astype(np.float64)
        outs.append(T.hidden_predictions(0.0, o, data.norm)[:, d])
    slope = (outs[1] - outs[0]) / 2  # [N] rad per unit command
    gain = np.array([p.coefficients[2] for p in data.test_plants])  # [N]
    return {
        "model_rmse": float(np.sqrt(np.mean(err[..., 0] ** 2))),
        "model_rmse_3_step": float(np.sqrt(np.mean(err[..., -1] ** 2))),
        "slope_corr": float(np.corrcoef(slope, gain)[0, 1]),
    }


def recipe(name: str, variant: dict[str, Any]) -> dict[str, Any]:
    from control_diagnosis import diagnose

    import tickformer.model.train as TR
    from tickformer.artifact import open_artifact
    from tickformer.control import HiddenPlantSim, HistoryMPC, OracleMPC
    from tickformer.control.demo import DemoConfig, loop_plants, reference
    from tickformer.export.writer import export_artifact
    from tickformer.model import plant as P
    from tickformer.model import preset
    from tickformer.model import tasks as T
    from tickformer.model.checkpoint import load_checkpoint
    from tickformer.model.optim import noam_lr
    from tickformer.runtime import load

    v = dict(variant)
    T.HIDDEN_HORIZON_WEIGHTS = tuple(v.pop("hw", (1.0, 1.0, 1.0)))
    if "ylags" in v:
        T.HIDDEN_Y_LAGS = v.pop("ylags")
    if "start" in v:
        P.START_THETA, P.START_OMEGA = v.pop("start")
    steps = v.pop("steps", 10_000)
    settings = TR.TrainSettings(
        steps=steps,
        batch_size=v.pop("batch", 16),
        warmup=v.pop("warmup", 400),
        lr_scale=v.pop("lr", 1.0),
        seed=v.pop("seed", 0),
        ema_decay=v.pop("ema", 0.995),
    )
    sched = v.pop("sched", None)
    if sched:
        kind, frac = sched

        def lr_fn(step: int, *, d_model: int, warmup: int, scale: float = 1.0) -> float:
            base = noam_lr(step, d_model=d_model, warmup=warmup, scale=scale)
            first = steps * (1 - frac)
            if step > first:
                f = (step - first) / (steps - first)
                base *= max(0.0, 1 - f) if kind == "lin" else 0.5 * (1 + math.cos(math.pi * f))
            return base

        TR.noam_lr = lr_fn
    config = preset("control-hidden").replace(**v.pop("cfg", {}))
    if v:
        raise SystemExit(f"unknown variant keys {sorted(v)}")
    task = T.TASKS["pendulum-hidden"]
    task = type(task)(**{**task.__dict__, "evaluate": _held_out})  # no memoryless twin: one model
    plants = loop_plants(DemoConfig(), PLANTS)  # the demo's plant first
    ref = reference(DemoConfig())  # the demo's: 0.25 rad, period 4 s
    res: dict[str, Any] = {"variant": variant, "load_average_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = TR.train(task, config, settings, out=Path(tmp) / "ck", preset_name="control-hidden")
        res["train_s"] = round(time.perf_counter() - t0, 1)
        res.update(run.metrics["held_out"])
        art = export_artifact(run.checkpoint, Path(tmp) / "art", batch=17)
        bound = open_artifact(art).manifest.get("output_bound")
        norm = load_checkpoint(run.checkpoint).meta["norm"]
        rows, oracle = [], []
        for i, plant in enumerate(plants):
            s = load(art, backend="ort", contracts="off")
            ctl = HistoryMPC(s, norm, plant, bound, kp=2.0, w_omega=0.05)
            sim = HiddenPlantSim(plant, ref, TICKS + 1, seed=0)
            rows.append(diagnose(ctl, sim, TICKS, SETTLE))
            rows[-1]["by_segment"] = [sim.tracking(skip=a, until=b)["rms_rad"] for a, b in SEGMENTS]
            if i == 0:
                ns = []
                for _ in range(3000):
                    t1 = time.perf_counter_ns()
                    s.peek(ctl.xs)
                    ns.append(time.perf_counter_ns() - t1)
                res["peek_p50_us"] = float(np.median(ns)) / 1e3
                res["peek_p99_us"] = float(np.percentile(ns, 99)) / 1e3
            s.close()
            sim = HiddenPlantSim(plant, ref, TICKS + 1, seed=0)
            oracle.append(
                diagnose(OracleMPC(17, sim, kp=2.0, w_omega=0.05), sim, TICKS, SETTLE)["tracking_rms"]
            )
    res["tracking"] = [r["tracking_rms"] for r in rows]
    res["tracking_by_segment"] = {
        f"{a}-{b}": [r["by_segment"][i] for r in rows] for i, (a, b) in enumerate(SEGMENTS)
    }
    res["pred_err"] = [r["pred_err_rms"] for r in rows]
    res["slope"] = [[r["slope_pred"], r["slope_true"]] for r in rows]
    res["oracle_tracking"] = oracle
    res["ratio"] = [a / b for a, b in zip(res["tracking"], oracle)]
    res["ratio_mean"] = float(np.mean(res["ratio"]))
    res["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    res["command"] = f"python benchmarks/control_side_runs.py recipe {name} '{json.dumps(variant)}'"
    return res


def deadlines(checkpoint: str, arms: list[str], ticks: int = 20_000) -> list[dict[str, Any]]:
    from tickformer.artifact import open_artifact
    from tickformer.certify.campaign import Isolation
    from tickformer.control import HiddenPlantSim, HistoryMPC
    from tickformer.control import demo as D
    from tickformer.export.writer import export_artifact
    from tickformer.model.checkpoint import load_checkpoint
    from tickformer.runtime import load

    D.start_runtime()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        art = export_artifact(checkpoint, Path(tmp) / "art", batch=17)
        bound = open_artifact(art).manifest.get("output_bound")
        norm = load_checkpoint(checkpoint).meta["norm"]
        for spec in arms:
            arm, budget = (spec.split("b") + [None])[:2]
            period, m = (arm.split("m") + ["2"])[:2]
            cfg = D.DemoConfig(
                period_ms=float(period),
                catch_up_max=int(m),
                ticks=ticks,
                tick_budget_ms=None if budget is None else float(budget),
            )
            plant = D.loop_plant(cfg)
            sim = HiddenPlantSim(plant, D.reference(cfg), cfg.ticks * 64, seed=cfg.seed)
            s = load(art, backend="ort", contracts="monitor", budget_ns=cfg.tick_budget_ns)
            ctl = HistoryMPC(
                s, norm, plant, bound, catch_up_max=cfg.catch_up_max, kp=cfg.kp, w_omega=cfg.w_omega
            )
            load_before = os.getloadavg()[0]
            r = D.run_loop(ctl, sim, cfg, isolation=lambda: Isolation(realtime=True))
            s.close()
            d = r["deadlines"]
            row = {
                "arm": spec,
                "period_ms": cfg.period_ms,
                "catch_up_max": cfg.catch_up_max,
                "budget_ms": cfg.tick_budget_ns / 1e6,
                "ticks": r["ticks"],
                "deadline_misses": r["deadline_misses"],
                "misses_covered_by_fallback": r["misses_covered_by_fallback"],
                "fallbacks": r["fallbacks"],
                "overruns": d["overruns"],
                "late_outputs": r["late_outputs"],
                "skipped_ticks": ctl.skipped,
                "deferred_ticks": ctl.deferred,
                "tracking_rms": r["tracking_rms"],
                "step_p50_us": r["step_p50_us"],
                "step_p99_us": r["step_p99_us"],
                "step_max_us": r["step_max_us"],
                "wake_lateness_max_us": d["wake_lateness_max"] / 1e3,
                "missed_ticks": r["_late_ticks"].tolist(),
                "sched_fifo": (r["isolation"] or {}).get("sched_fifo", {}).get("granted"),
                "load_average_before": load_before,
                "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "command": f"python benchmarks/control_side_runs.py deadlines CHECKPOINT {','.join(arms)}",
            }
            print(json.dumps({k: v for k, v in row.items() if k != "missed_ticks"}), flush=True)
            out.append(row)
    return out


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[1] not in ("recipe", "deadlines"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "recipe":
        name, variant = sys.argv[2], json.loads(sys.argv[3])
        res = recipe(name, variant)
        data = _load()
        data["recipe"][name] = res
        print(name, json.dumps({k: res[k] for k in ("model_rmse", "slope_corr", "ratio", "ratio_mean")}))
    else:
        rows = deadlines(sys.argv[2], sys.argv[3].split(","))
        data = _load()
        data["deadlines"] += rows
    _save(data)


if __name__ == "__main__":
    main()
