"""Why a controller tracks as it does: the demo's plant, reference and controllers stepped back to
back (no wall clock, no skipped ticks), and per tick, for the candidates of the decision rule
(control/delayed.py), the predicted against the true theta_{t+d+1} (the horizon the cost uses).

    python benchmarks/control_diagnosis.py [--windows 1 16 32 64] [--steps 1500] [--ticks 600]

Trains one model per window on `pendulum-hidden` (the demo's settings; window 1 is the
memoryless model), exports each with batch K, and runs HistoryMPC on each, then NominalMPC and
OracleMPC. Per controller, over ticks after the settling prefix (the demo's `settle_ticks`):

    tracking_rms          RMS of theta - r (rad), as the demo computes it
    pred_err_rms          RMS over ticks of the mean over candidates of predicted - true theta_{t+d+1}
    slope_pred/slope_true the command sensitivity d theta_{t+d+1} / d c (rad per unit command):
                          least-squares slope over the K candidates, predicted and true
    same_choice           share of ticks whose chosen candidate is the one the decision rule
                          picks on the true predictions

Writes benchmarks/results/control_diagnosis.json (docs/control.md cites it). Not part of the
package; minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.artifact import open_artifact
from tickformer.control import HiddenPlantSim, HistoryMPC, NominalMPC, OracleMPC
from tickformer.control.demo import DemoConfig, loop_plant, reference
from tickformer.export.writer import export_artifact
from tickformer.model import preset
from tickformer.model.checkpoint import load_checkpoint
from tickformer.model.plant import hidden_step
from tickformer.model.tasks import get_task
from tickformer.model.train import TrainSettings, train
from tickformer.runtime import load

OUT = Path(__file__).resolve().parent / "results" / "control_diagnosis.json"


def true_future(sim: HiddenPlantSim, cands: np.ndarray) -> np.ndarray:
    """[K, 2] true (theta_{t+d}, theta_{t+d+1}) per candidate from the plant's true state."""
    s = sim.state.copy()
    for c0 in sim.in_flight.tolist():
        s = hidden_step(s, c0, sim.plant)
    nxt = np.array([hidden_step(s, c, sim.plant)[0] for c in cands])  # [K]
    return np.stack([np.full(len(cands), s[0]), nxt], axis=-1)


def rule_cost(ctl: Any, obs: np.ndarray, th: np.ndarray) -> float:
    r, rd = obs[1], obs[2]
    om = (th[1] - th[0]) / ctl.dt
    return float((th[1] - r) ** 2 + ctl.w * (om - (rd + ctl.kp * (r - th[1]))) ** 2)


def diagnose(ctl: Any, sim: HiddenPlantSim, ticks: int, settle: int) -> dict[str, float]:
    err, sp, st, same = [], [], [], []
    for k in range(ticks):
        obs = sim.observe(k)
        tf = true_future(sim, ctl.cand)
        u = ctl.step(obs)
        if k >= settle and np.isfinite(u[0]):
            err.append(float(np.mean(ctl.pred[:, 1] - tf[:, 1])))
            sp.append(float(np.polyfit(ctl.cand, ctl.pred[:, 1], 1)[0]))
            st.append(float(np.polyfit(ctl.cand, tf[:, 1], 1)[0]))
            best = min(range(len(ctl.cand)), key=lambda j: rule_cost(ctl, obs, tf[j]))
            same.append(int(np.argmin(np.abs(ctl.cand - u[0]))) == best)
        sim.actuate(u)
    return {
        "tracking_rms": sim.tracking(skip=settle)["rms_rad"],
        "pred_err_rms": float(np.sqrt(np.mean(np.square(err)))),
        "slope_pred": float(np.mean(sp)),
        "slope_true": float(np.mean(st)),
        "same_choice": float(np.mean(same)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, nargs="+", default=[1, 16, 32, 64])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--ticks", type=int, default=600)
    args = ap.parse_args()
    cfg = DemoConfig()
    plant = loop_plant(cfg)
    weights = {"kp": cfg.kp, "w_omega": cfg.w_omega}
    task = get_task("pendulum-hidden")
    settings = TrainSettings.for_task(task, steps=args.steps, seed=cfg.seed)

    def sim() -> HiddenPlantSim:
        return HiddenPlantSim(plant, reference(cfg), args.ticks + 1, seed=cfg.seed)

    result: dict[str, Any] = {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/control_diagnosis.py "
        + " ".join(
            f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items()
        ),
        "ticks": args.ticks,
        "settle_ticks": cfg.settle_ticks,
        "candidates": cfg.candidates,
        "controllers": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for w in args.windows:
            run = train(
                task,
                preset(task.preset).replace(window=w),
                settings,
                out=Path(tmp) / f"ck{w}",
                preset_name=task.preset,
                progress=False,
            )
            art = export_artifact(run.checkpoint, Path(tmp) / f"art{w}", batch=cfg.candidates)
            bound = open_artifact(art).manifest.get("output_bound")
            session = load(art, backend="ort", contracts="off")
            try:
                ctl = HistoryMPC(
                    session, load_checkpoint(run.checkpoint).meta["norm"], plant, bound, **weights
                )
                row = diagnose(ctl, sim(), args.ticks, cfg.settle_ticks)
            finally:
                session.close()
            h = run.metrics["held_out"]
            row["held_out_rmse_3_step"] = h["model_rmse_3_step"]
            result["controllers"][f"window_{w}"] = row
            print(f"window {w}: {row}", flush=True)
    result["controllers"]["nominal"] = diagnose(
        NominalMPC(cfg.candidates, **weights), sim(), args.ticks, cfg.settle_ticks
    )
    s = sim()
    result["controllers"]["oracle"] = diagnose(
        OracleMPC(cfg.candidates, s, **weights), s, args.ticks, cfg.settle_ticks
    )
    for name in ("nominal", "oracle"):
        print(f"{name}: {result['controllers'][name]}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
