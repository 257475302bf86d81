"""Side runs behind docs/control.md's "tried" list and its period choice: short experiments on the
demo's task, one variant of the training recipe or one loop setting at a time.

    python experiments/control_side_runs.py recipe NAME '{"cfg": {"d_in": 4}, "hw": [0.2, 1, 2]}'
    python experiments/control_side_runs.py deadlines CHECKPOINT 1m1,2m2,1m1,2m2,1m1,2m2
    python experiments/control_side_runs.py ensemble NAME '{"seeds": [0, 1, 2, 3], "snapshots": [10000, 20000, 30000]}'
    python experiments/control_side_runs.py physics NAME FIRST N

`recipe`: trains the windowed model only (the demo's recipe before IdentifiedMPC, horizons only: the
control-hidden preset; seed 0 unless `seed` is given, with the variant's changes),
then on its held-out episodes the one-step and (delay + 1)-step RMSE and the in-context
identification measure of control_diagnosis.py (correlation across episodes of the predicted
d theta_{t+3} / d c_t with the actuator coefficient), then the closed loop of
control_diagnosis.diagnose (no wall clock) on 5 held-out plants x 1000 ticks (the demo's plant
first), with the ratio of each plant's tracking RMS to the oracle controller's on the same plant,
and the ORT batch-K peek time (3000 peeks, p50 / p99); each plant's tracking RMS over SEGMENTS of
the stream too (`tracking_by_segment`, runs after 2026-12-05 only). Variant keys:

    cfg      Config overrides of the control-hidden preset (d_in: the token's lag columns,
             control.task hidden_io_widths; window, max_len, d_model, d_ff, n_layers)
    hw       control.task.HIDDEN_HORIZON_WEIGHTS (default here: 1, 1, 1, an unweighted loss)
    ylags    control.task.HIDDEN_Y_LAGS
    start    (control.plant.START_THETA, START_OMEGA): the training episodes' starting ranges
    loop_share  control.plant.LOOP_SHARE, the closed-loop episodes' share (0: the data before
             2026-12-05, which every recipe run recorded before that date trained on)
    steps, batch, warmup, lr, ema   TrainSettings (default: the task's 10,000 x 16, warmup 400)
    seed     the training seed (default 0, the demo's): the data stream, the initial weights and
             the batches all follow it
    sched    ["lin" | "cos", f]: the last fraction f of the steps decays the learning rate to 0

`deadlines`: the model loop of the demo before IdentifiedMPC (HistoryMPC on the checkpoint's batch-K artifact, ORT,
contracts in monitor mode, the demo's LoopConfig, `Isolation(realtime=True)`) for 20,000 ticks
per arm, the arms run one after another in the order given (interleave them): `PmM[bB]` = period
P ms, catch_up_max M, tick budget B ms (default: half the period). Per arm: deadline misses,
those covered by the fallback, fallbacks, overruns, late outputs, skipped and deferred ticks,
step p50 / p99 / max, the worst wake-up lateness, the ticks that missed.

`ensemble`: the horizons-only recipe (the windowed model of `control.demo.train_models`' settings,
the control-hidden preset: the demo's before IdentifiedMPC; `cfg` {"d_out": 8} for the demo's now) trained
once per seed for the largest snapshot's steps, two seeds at a time, each run's weights kept at
every snapshot step (`model.train.train_steps(on_step=...)`: a snapshot at step k is what a k-step
run returns). Optional spec keys change the recipe: `batch` (the batch size), `cfg` (Config
overrides, as the recipe's), `sched` (as the recipe's, over the largest snapshot's steps: then
only that snapshot is what a run of its length returns), `transitions`
(control.task.HIDDEN_TRAIN_TRANSITIONS: the training episodes' ticks in all); `hybrids` (a list of
control_diagnosis.HybridMPC modes) adds, per seed and mode, the loop of that seed's model with that
part of its prediction replaced by the oracle's (`hybrid_ratio_mean`, `hybrid_reference_split`);
`plants` ([first, n]) judges on n other held-out plants instead of the 5, those
`control.demo.loop_plants` draws from seed `first` on (fresh plants: the demo's recipe and seed
were chosen on the default 5; the splits' `demo_plant` is then the first of them);
`identified` (a smoothing in (0, 1], with `cfg` {"d_out": delay + 6}: identifying models) adds,
per seed, the loop of control.IdentifiedMPC on the same models (`identified_ratio`, its mean,
median and plants within 1.5, `identified_reference_split`); `long` (a tick count, with
`identified`) adds, per seed, IdentifiedMPC's loop on the demo's plant for that many ticks against
the oracle's (`identified_demo_plant_long`: the ratio over the whole loop after the settling
ticks, up to the side runs' 1000 ticks, and after them); `loop_share` sets
control.plant.LOOP_SHARE, the closed-loop episodes' share of the training data (0: the recipe
before 2026-12-05; runs before that date had no closed-loop episodes).
Per snapshot, on the 5 plants x
1000 ticks (`control_sensitivity.tracking`, no wall clock): each seed's tracking / oracle, and that
of `AveragedMPC` over all the seeds (the decision rule on the mean of their predictions: what
averaging removes is the part of the ratio that varies from seed to seed). And along the oracle's
own loop (the same trajectory for every model), each model's error in predicting theta_{t+d},
theta_{t+d+1} and their difference, split by least squares into c * n_t + residual, n_t = y_t -
theta_t the newest measurement's noise (`noise_coefficient`: 1 = the prediction carries that noise
whole, as y_t + a learned increment that does not filter would); the same split of the oracle's
own prediction for the command it chose (`oracle_error_split`). Per model, the increment's error
regressed jointly on n_t and the true velocity about t + d (`increment_velocity_coefficient_s`, mean
over the plants: c / dt is the fraction by which the predicted increment over- (c > 0) or
under-states (c < 0) the motion). Per loop, the tracking error split against the reference
(`control_sensitivity.reference_split`: e = a r + b r' + c, the systematic and the residual RMS),
as means over the plants and on the demo's plant; per model, the in-context identification of
`control_diagnosis.identification` on held-out episodes (correlation, shrinkage).

`physics`: what a window holds, on the plants `ensemble`'s `plants` key names ([FIRST, N]; 0 5:
the default 5): control_diagnosis.JointMPC (the decision rule on a joint EKF that identifies the
constants itself, from the nominal ones) over the last W measurements (the demo's window) and
over the whole stream,
tracking / oracle per plant, no training (about a minute for 20 plants).

Appends to experiments/results/control_side_runs.json (`recipe[NAME]`, `deadlines` list,
`ensemble[NAME]`, `physics[NAME]`). Not part
of the package; a recipe run is 1.5-3 minutes on 2 cores, a deadline arm its ticks x period, the
ensemble run of 4 seeds x 30,000 steps some 7 minutes (its training 6.5 of them).
Training is deterministic, so a recipe run's numbers are reproduced bit for bit on one machine
(its timings are not; another CPU's floating point trains a different model of the same recipe).
Every run recorded before 2026-12-05 trained without closed-loop episodes: reproduce one with
control.plant.LOOP_SHARE = 0 (the ensemble's `loop_share` key).
"""

from __future__ import annotations

import dataclasses
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
ENSEMBLE_KEYS = {
    "seeds",
    "snapshots",
    "batch",
    "cfg",
    "sched",
    "transitions",
    "hybrids",
    "plants",
    "identified",
    "loop_share",
    "long",
}


def _load() -> dict[str, Any]:
    return json.loads(OUT.read_text()) if OUT.exists() else {"recipe": {}, "deadlines": []}


def _save(data: dict[str, Any]) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1) + "\n")


def _held_out(params: Any, config: Any, data: Any) -> dict[str, float]:
    """One-step and (delay + 1)-step RMSE at positions >= window - 1, and in-context identification."""
    from tickformer.control import task as T
    from tickformer.model.transformer import forward

    d, start = data.plant.delay, (config.window or 16) - 1
    truth = np.stack([data.test_theta[:, j : j + data.steps] for j in range(1, d + 2)], axis=-1)[:, start:]
    err = T.hidden_model_angles(params, config, data)[:, start:] - truth
    x = T.hidden_test_features(data)
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


def _over(tracking: list[float], oracle: list[float]) -> list[float]:
    """Tracking / oracle, plant by plant."""
    return [a / b for a, b in zip(tracking, oracle, strict=True)]


def _scheduled_lr(steps: int, sched: list[Any]) -> Any:
    """The trainer's learning rate (model.optim.noam_lr) with its last fraction f of `steps`
    decayed to 0: sched = ["lin" | "cos", f]. Assigned to model.train.noam_lr by the caller."""
    from tickformer.model.optim import noam_lr

    kind, frac = sched
    if kind not in ("lin", "cos") or not 0 < frac <= 1:
        raise SystemExit(f'sched is ["lin" | "cos", f] with 0 < f <= 1 (got {sched})')

    def lr_fn(step: int, *, d_model: int, warmup: int, scale: float = 1.0) -> float:
        base = noam_lr(step, d_model=d_model, warmup=warmup, scale=scale)
        first = steps * (1 - frac)
        if step > first:
            f = (step - first) / (steps - first)
            base *= max(0.0, 1 - f) if kind == "lin" else 0.5 * (1 + math.cos(math.pi * f))
        return base

    return lr_fn


def recipe(name: str, variant: dict[str, Any]) -> dict[str, Any]:
    from control_diagnosis import diagnose

    import tickformer.model.train as TR
    from tickformer.artifact import open_artifact
    from tickformer.control import HiddenPlantSim, HistoryMPC, OracleMPC
    from tickformer.control import plant as P
    from tickformer.control import task as T
    from tickformer.control.demo import DemoConfig, reference
    from tickformer.export.writer import export_artifact
    from tickformer.model import preset
    from tickformer.model.checkpoint import load_checkpoint
    from tickformer.runtime import load

    v = dict(variant)
    T.HIDDEN_HORIZON_WEIGHTS = tuple(v.pop("hw", (1.0, 1.0, 1.0)))
    if "ylags" in v:
        T.HIDDEN_Y_LAGS = v.pop("ylags")
    if "start" in v:
        P.START_THETA, P.START_OMEGA = v.pop("start")
    if "loop_share" in v:
        P.LOOP_SHARE = float(v.pop("loop_share"))
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
        TR.noam_lr = _scheduled_lr(steps, sched)
    config = preset("control-hidden").replace(**v.pop("cfg", {}))
    if v:
        raise SystemExit(f"unknown variant keys {sorted(v)}")
    task = T.HIDDEN_TASK
    task = type(task)(**{**task.__dict__, "evaluate": _held_out})  # no memoryless twin: one model
    plants = _held_out_plants(DemoConfig().seed, PLANTS)  # the demo's plant first
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
    res["ratio"] = _over(res["tracking"], oracle)
    res["ratio_mean"] = float(np.mean(res["ratio"]))
    res["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    res["command"] = f"python experiments/control_side_runs.py recipe {name} '{json.dumps(variant)}'"
    return res


def _train_snapshots(
    seed: int, snapshots: list[int], where: str, spec: dict[str, Any]
) -> tuple[dict[int, str], float]:
    """The demo's windowed model, seed `seed`, trained for max(snapshots) steps with the
    ensemble spec's changes (module docstring); a checkpoint of the weights at each snapshot
    step under `where` (a worker process: one core, so the patches stay in it)."""
    import tickformer.control.task as T
    import tickformer.model.train as TR
    from tickformer.control.demo import DemoConfig
    from tickformer.model import preset
    from tickformer.model.checkpoint import save_checkpoint

    cfg = DemoConfig(seed=seed)
    task = T.HIDDEN_TASK
    settings = TR.TrainSettings.for_task(task, steps=max(snapshots), seed=seed)
    if "batch" in spec:
        settings = dataclasses.replace(settings, batch_size=spec["batch"])
    if "sched" in spec:
        TR.noam_lr = _scheduled_lr(settings.steps, spec["sched"])
    if "transitions" in spec:
        T.HIDDEN_TRAIN_TRANSITIONS = int(spec["transitions"])
    if "loop_share" in spec:
        import tickformer.control.plant as P

        P.LOOP_SHARE = float(spec["loop_share"])
    config = preset(task.preset).replace(**{"window": cfg.window, **spec.get("cfg", {})})
    kept: dict[int, dict[str, np.ndarray]] = {}

    def keep(step: int, weights: Any) -> None:
        if step in snapshots:
            kept[step] = {n: v.astype(np.float32) for n, v in weights.items()}

    _, _, data, seconds, _ = TR.train_steps(task, config, settings, on_step=keep)
    paths = {
        step: str(
            save_checkpoint(
                Path(where) / f"seed{seed}-step{step}",
                config,
                kept[step],
                TR.checkpoint_meta(task, data, task.preset, seed, step, {}),
            )
        )
        for step in snapshots
    }
    return paths, seconds


def _noise_split(err: np.ndarray, noise: np.ndarray) -> dict[str, float]:
    """err = c * noise + residual by least squares (no intercept)."""
    c = float(err @ noise / (noise @ noise))
    return {
        "rms": float(np.sqrt(np.mean(err**2))),
        "noise_coefficient": c,
        "residual_rms": float(np.std(err - c * noise)),
    }


def _error_split(
    th_d: np.ndarray, th_d1: np.ndarray, ys: np.ndarray, theta: np.ndarray, d: int, dt: float
) -> tuple[dict[str, dict[str, float]], float]:
    """Predicted theta_{t+d}, theta_{t+d+1} [T] along a stream (measured ys [T], true theta [T + 1])
    against the truth, from tick SETTLE on: `_noise_split` of each and of their difference, and the
    difference's coefficient on the true velocity about t + d, fitted jointly with the noise (an
    error in proportion to the motion: a wrong velocity scale, of either sign; a lag would give a
    negative one)."""
    at = np.arange(SETTLE, ys.size - d)  # ticks whose targets lie inside the stream
    noise = ys[at] - theta[at]
    e_d, e_d1 = th_d[at] - theta[at + d], th_d1[at] - theta[at + d + 1]
    omega = (theta[at + d + 1] - theta[at + d - 1]) / (2 * dt)  # [n] true, about t + d
    coef = np.linalg.lstsq(np.stack([noise, omega], 1), e_d1 - e_d, rcond=None)[0]
    split = {
        "theta_t+d": _noise_split(e_d, noise),
        "theta_t+d+1": _noise_split(e_d1, noise),
        "increment": _noise_split(e_d1 - e_d, noise),
    }
    return split, float(coef[1])


def _mean_split(rows: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """`_error_split` splits averaged over their rows (models x plants), field by field."""
    return {key: {f: float(np.mean([r[key][f] for r in rows])) for f in rows[0][key]} for key in rows[0]}


def _reference_summary(rows: list[list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """control_sensitivity.reference_split rows [model][plant] -> each field's mean over models
    and plants (`mean`) and over the models on the first plant, the demo's (`demo_plant`)."""
    fields = rows[0][0]
    return {
        "mean": {f: float(np.mean([r[f] for m in rows for r in m])) for f in fields},
        "demo_plant": {f: float(np.mean([m[0][f] for m in rows])) for f in fields},
    }


def ensemble(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    from concurrent.futures import ProcessPoolExecutor

    from control_diagnosis import HybridMPC, identification
    from control_sensitivity import reference_split, tracking

    from tickformer.artifact import open_artifact
    from tickformer.control import HiddenPlantSim, HistoryMPC, IdentifiedMPC, OracleMPC
    from tickformer.control.delayed import DelayedMPC
    from tickformer.control.demo import TRACKING_RATIO_TARGET, DemoConfig, loop_plant, reference
    from tickformer.control.task import hidden_features, hidden_predictions
    from tickformer.export.writer import export_artifact
    from tickformer.model.checkpoint import load_checkpoint
    from tickformer.runtime import load

    class AveragedMPC(DelayedMPC):
        """The decision rule on the mean of the members' predictions (each member a HistoryMPC
        on its own session, all fed the same ticks and told the same choice)."""

        def __init__(self, members: list[Any]) -> None:
            super().__init__(len(members[0].cand), members[0].dt, kp=members[0].kp, w_omega=members[0].w)
            self.members = members

        def catch_up(self, obs: np.ndarray) -> None:
            for m in self.members:
                m.catch_up(obs)

        def predict(self, obs: np.ndarray) -> bool:
            ok = [m.predict(obs) for m in self.members]  # every member takes in this tick
            if not all(ok):
                return False
            self.pred[...] = np.mean([m.pred for m in self.members], axis=0)
            return True

        def chosen(self, j: int) -> None:
            for m in self.members:
                m.chosen(j)

    if set(spec) - ENSEMBLE_KEYS or not {"seeds", "snapshots"} <= set(spec):
        raise SystemExit(
            f"an ensemble spec has seeds, snapshots and optionally "
            f"{sorted(ENSEMBLE_KEYS - {'seeds', 'snapshots'})} (got {sorted(spec)})"
        )
    seeds, snapshots = list(spec["seeds"]), sorted(spec["snapshots"])
    modes = list(spec.get("hybrids", []))
    if set(modes) - set(HybridMPC.MODES):
        raise SystemExit(
            f"hybrids: {sorted(set(modes) - set(HybridMPC.MODES))} not among {list(HybridMPC.MODES)}"
        )
    smoothing = spec.get("identified")
    if smoothing is not None:
        from tickformer.control.delayed import smoothing_weight
        from tickformer.control.plant import NOMINAL
        from tickformer.control.task import hidden_io_widths
        from tickformer.errors import ConfigError

        d_out = hidden_io_widths(NOMINAL, identify=True)[1]
        try:
            smoothing = smoothing_weight(smoothing)
        except ConfigError as e:
            raise SystemExit(f"identified: the IdentifiedMPC {e}") from None
        if spec.get("cfg", {}).get("d_out") != d_out:
            raise SystemExit(f"identified: IdentifiedMPC needs identifying models (cfg d_out {d_out})")
    if spec.get("long") and smoothing is None:
        raise SystemExit("long: IdentifiedMPC's long loop needs `identified` (and identifying models)")
    cfg = DemoConfig()
    k, w = cfg.candidates, {"kp": cfg.kp, "w_omega": cfg.w_omega}
    plants = _held_out_plants(*spec.get("plants", (cfg.seed, PLANTS)))
    res: dict[str, Any] = {"spec": spec, "load_average_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=2) as pool:
            n = len(seeds)
            runs = list(pool.map(_train_snapshots, seeds, [snapshots] * n, [tmp] * n, [spec] * n))
        res["train_wall_s"] = round(time.perf_counter() - t0, 1)
        res["train_s_per_seed"] = [round(r[1], 1) for r in runs]
        # the oracle's loop per plant: its tracking, its stream -- measured y [T], actuated commands
        # [T], true theta [T + 1] -- on which every model is read, and its own prediction for the
        # command it chose, split like theirs
        oracle, streams, oracle_rows, oracle_ref = [], [], [], []
        for p in plants:
            sim = HiddenPlantSim(p, reference(cfg), TICKS + 1, seed=cfg.seed)
            ctl, ys, cs = OracleMPC(k, sim, **w), np.empty(TICKS), np.empty(TICKS)
            chosen = np.empty((TICKS, 2))  # [T, 2] (theta_{t+d}, theta_{t+d+1}) of the chosen command
            for t in range(TICKS):
                obs = sim.observe(t)
                ys[t] = obs.item(0)
                sim.actuate(ctl.step(obs))
                cs[t] = sim.last
                chosen[t] = ctl.pred[int(np.argmin(np.abs(ctl.cand - ctl.last)))]
            oracle.append(sim.tracking(skip=cfg.settle_ticks)["rms_rad"])  # as control_sensitivity.tracking
            oracle_ref.append(reference_split(sim, cfg.settle_ticks))
            streams.append((ys, cs, sim.theta[: TICKS + 1].copy()))
            oracle_rows.append(_error_split(chosen[:, 0], chosen[:, 1], ys, streams[-1][2], p.delay, p.dt)[0])
        res["oracle_tracking"] = oracle
        res["oracle_error_split"] = _mean_split(oracle_rows)
        res["oracle_reference_split"] = _reference_summary([oracle_ref])
        res["snapshots"] = {}
        for step in snapshots:
            members = []
            for i, (paths, _) in enumerate(runs):
                art = export_artifact(paths[step], Path(tmp) / f"art{i}-{step}", batch=k)
                members.append(
                    (
                        art,
                        load_checkpoint(paths[step]).meta["norm"],
                        open_artifact(art).manifest.get("output_bound"),
                    )
                )

            def history(p: Any, m: tuple[Any, ...]) -> Any:
                return HistoryMPC(load(m[0], backend="ort", contracts="off"), m[1], p, m[2], **w)

            def identified(p: Any, m: tuple[Any, ...]) -> Any:
                session = load(m[0], backend="ort", contracts="off")
                return IdentifiedMPC(session, m[1], p, m[2], smoothing=smoothing, **w)

            single_ref: list[list[dict[str, float]]] = [[] for _ in members]  # [model][plant]
            singles = [
                tracking(lambda p, sim, m=m: history(p, m), plants, cfg, TICKS, splits=single_ref[i])
                for i, m in enumerate(members)
            ]
            both_ref: list[dict[str, float]] = []
            both = tracking(
                lambda p, sim: AveragedMPC([history(p, m) for m in members]),
                plants,
                cfg,
                TICKS,
                splits=both_ref,
            )
            rows, velocity = [], []  # per model and plant; per model, its velocity coefficient (s)
            for art, norm, _ in members:
                per_plant = []
                for (ys, cs, theta), p in zip(streams, plants):
                    s = load(art, backend="ort", contracts="off")
                    x = np.repeat(
                        hidden_features(ys, cs, norm)[:, None, None, :], k, axis=1
                    )  # [T, K, 1, d_in]
                    out = np.empty((TICKS, len(norm["dy_mean"])))  # [T, d_out]
                    for t in range(TICKS):  # copied out: step returns the session's reused buffer
                        out[t] = s.step(x[t])[0, 0]
                    s.close()
                    pred = hidden_predictions(ys[:, None], out, norm)  # [T, d + 1] the horizons
                    split, c = _error_split(pred[:, p.delay - 1], pred[:, p.delay], ys, theta, p.delay, p.dt)
                    rows.append(split)
                    per_plant.append(c)
                velocity.append(float(np.mean(per_plant)))
            ident = [identification(runs[i][0][step], DemoConfig(seed=seed)) for i, seed in enumerate(seeds)]
            hybrid_ratio: dict[str, list[float]] = {}  # mode -> per seed, mean over the plants
            hybrid_ref = {}
            for mode in modes:
                refs: list[list[dict[str, float]]] = [[] for _ in members]  # [model][plant]
                hybrid_ratio[mode] = []
                for i, m in enumerate(members):

                    def hybrid(p: Any, sim: Any, m: tuple[Any, ...] = m, mode: str = mode) -> Any:
                        session = load(m[0], backend="ort", contracts="off")
                        return HybridMPC(mode, sim, session, m[1], p, m[2], **w)

                    t = tracking(hybrid, plants, cfg, TICKS, splits=refs[i])
                    hybrid_ratio[mode].append(float(np.mean(_over(t, oracle))))
                hybrid_ref[mode] = _reference_summary(refs)
            single_ratio = [_over(t, oracle) for t in singles]
            averaged_ratio = _over(both, oracle)
            res["snapshots"][str(step)] = {
                "single_tracking": singles,
                "single_ratio": single_ratio,
                "single_ratio_mean": [float(np.mean(r)) for r in single_ratio],
                "averaged_tracking": both,
                "averaged_ratio": averaged_ratio,
                "averaged_ratio_mean": float(np.mean(averaged_ratio)),
                "error_split": _mean_split(rows),
                "increment_velocity_coefficient_s": velocity,
                "single_reference_split": _reference_summary(single_ref),
                "identification": [
                    {kk: v for kk, v in r.items() if not kk.startswith("noise_")} for r in ident
                ],
                "averaged_reference_split": _reference_summary([both_ref]),
            }
            if smoothing is not None:  # the same models under IdentifiedMPC: their constants in a filter
                id_ref: list[list[dict[str, float]]] = [[] for _ in members]  # [model][plant]
                id_tracking = [
                    tracking(
                        lambda p, sim, m=m: identified(p, m),
                        plants,
                        cfg,
                        TICKS,
                        splits=id_ref[i],
                    )
                    for i, m in enumerate(members)
                ]
                id_ratio = [_over(t, oracle) for t in id_tracking]
                res["snapshots"][str(step)].update(
                    identified_tracking=id_tracking,
                    identified_ratio=id_ratio,
                    identified_ratio_mean=[float(np.mean(r)) for r in id_ratio],
                    identified_ratio_median=[float(np.median(r)) for r in id_ratio],
                    identified_within_target=[
                        int(np.sum(np.array(r) <= TRACKING_RATIO_TARGET)) for r in id_ratio
                    ],
                    identified_reference_split=_reference_summary(id_ref),
                )
            if spec.get("long"):  # the demo's plant for as many ticks as the demo: early and late
                n_long, demo_plant = int(spec["long"]), [loop_plant(cfg)]
                cut, settle = TICKS, cfg.settle_ticks  # the side runs' loop length
                o_sims: list[Any] = []
                tracking(lambda p, sim: OracleMPC(k, sim, **w), demo_plant, cfg, n_long, sims=o_sims)
                long: dict[str, Any] = {"ticks": n_long, "whole": [], "to_side_run_length": [], "after": []}
                for m in members:
                    sims: list[Any] = []
                    tracking(lambda p, sim, m=m: identified(p, m), demo_plant, cfg, n_long, sims=sims)
                    for key, a, b in (
                        ("whole", settle, None),
                        ("to_side_run_length", settle, cut),
                        ("after", cut, None),
                    ):
                        ratio = (
                            sims[0].tracking(skip=a, until=b)["rms_rad"]
                            / o_sims[0].tracking(skip=a, until=b)["rms_rad"]
                        )
                        long[key].append(float(ratio))
                res["snapshots"][str(step)]["identified_demo_plant_long"] = long
            if modes:
                res["snapshots"][str(step)]["hybrid_ratio_mean"] = hybrid_ratio
                res["snapshots"][str(step)]["hybrid_reference_split"] = hybrid_ref
            print(
                step,
                json.dumps(
                    {
                        kk: res["snapshots"][str(step)][kk]
                        for kk in ("single_ratio_mean", "averaged_ratio_mean")
                    }
                ),
                flush=True,
            )
    res["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    res["command"] = f"python experiments/control_side_runs.py ensemble {name} '{json.dumps(spec)}'"
    return res


def _held_out_plants(first: int, n: int) -> list[Any]:
    """n held-out plants as `control.demo.loop_plants` draws them, from seed `first` on (the
    demo's seed: the demo's plant and the side runs' default 5)."""
    from tickformer.control.demo import DemoConfig, loop_plants

    return loop_plants(dataclasses.replace(DemoConfig(), seed=int(first)), int(n))


def physics(name: str, first: int, n: int) -> dict[str, Any]:
    from control_diagnosis import JointMPC
    from control_sensitivity import tracking

    from tickformer.control import OracleMPC
    from tickformer.control.demo import DemoConfig

    cfg = DemoConfig()
    w = {"kp": cfg.kp, "w_omega": cfg.w_omega}
    plants = _held_out_plants(first, n)
    oracle = tracking(lambda p, sim: OracleMPC(cfg.candidates, sim, **w), plants, cfg, TICKS)
    res: dict[str, Any] = {"plants": [first, n], "window": cfg.window, "oracle_tracking": oracle}
    for window, key in ((cfg.window, "joint_window"), (0, "joint_stream")):
        t = tracking(lambda p, sim: JointMPC(cfg.candidates, window, **w), plants, cfg, TICKS)
        res[key] = _over(t, oracle)
    res["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    res["command"] = f"python experiments/control_side_runs.py physics {name} {first} {n}"
    return res


def deadlines(checkpoint: str, arms: list[str], ticks: int = 20_000) -> list[dict[str, Any]]:
    from tickformer.artifact import open_artifact
    from tickformer.certify.isolation import Isolation
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
                "command": f"python experiments/control_side_runs.py deadlines CHECKPOINT {','.join(arms)}",
            }
            print(json.dumps({k: v for k, v in row.items() if k != "missed_ticks"}), flush=True)
            out.append(row)
    return out


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[1] not in ("recipe", "deadlines", "ensemble", "physics"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "recipe":
        name, variant = sys.argv[2], json.loads(sys.argv[3])
        res = recipe(name, variant)
        data = _load()
        data["recipe"][name] = res
        print(name, json.dumps({k: res[k] for k in ("model_rmse", "slope_corr", "ratio", "ratio_mean")}))
    elif sys.argv[1] == "ensemble":
        name, spec = sys.argv[2], json.loads(sys.argv[3])
        res = ensemble(name, spec)
        data = _load()
        data.setdefault("ensemble", {})[name] = res
    elif sys.argv[1] == "physics":
        if len(sys.argv) != 5:
            raise SystemExit("usage: control_side_runs.py physics NAME FIRST N")
        name = sys.argv[2]
        res = physics(name, int(sys.argv[3]), int(sys.argv[4]))
        data = _load()
        data.setdefault("physics", {})[name] = res
    else:
        rows = deadlines(sys.argv[2], sys.argv[3].split(","))
        data = _load()
        data["deadlines"] += rows
    _save(data)


if __name__ == "__main__":
    main()
