"""Why a controller tracks as it does: the demo's plant, reference and controllers stepped back to
back (no wall clock, no skipped ticks), and per tick, for the candidates of the decision rule
(control/delayed.py), the predicted against the true theta_{t+d+1} (the horizon the cost uses).

    python experiments/control_diagnosis.py [--steps N] [--ticks 600] [--plants 3] [--windows 32 ...]

Trains the demo's two models (tickformer.control.demo.train_models: its recipe, the memoryless
model and the windowed one; `--windows` adds windowed models of other widths, same recipe),
exports each with batch K, and runs HistoryMPC on each, then NominalMPC and OracleMPC, on the
demo's plant and `--plants - 1` more held-out draws. Per controller and plant, over the ticks
after the settling prefix (the demo's `settle_ticks`):

    tracking_rms          RMS of theta - r (rad), as the demo computes it
    pred_err_rms          RMS over ticks of the mean over candidates of predicted - true theta_{t+d+1}
    slope_pred/slope_true the command sensitivity d theta_{t+d+1} / d c (rad per unit command):
                          least-squares slope over the K candidates, predicted and true
    same_choice           share of ticks whose chosen candidate is the one the decision rule
                          picks on the true predictions

and per model, on the held-out episodes of its training run (in-context identification): the
correlation across episodes between the model's d theta_{t+3} / d c_t at the last position and
the episode's actuator coefficient k / (m L^2), and the ratio of that slope to its
first-order value k / (m L^2) dt^2 / 2 (its mean, and its mean over the weakest and the
strongest quarter of the actuators), and the slope's elasticity to the coefficient (the
least-squares slope of log slope on log k / (m L^2): 1 = in proportion, below 1 = shrunk toward
the training mean); and how much of the model's prediction error is the
measurement noise of y_t, beside the oracle's filter on the same episodes (`noise_following`).

What a window can know (`--joint-windows`, default 32 and 0): the same decision rule on a
physics estimator that identifies the constants itself, `JointEKF` (an extended Kalman filter
over (theta, omega, g/L, b/(mL^2), k/(mL^2)), the prior at the nominal constants, no true
constant anywhere), run from its prior over only the last W measurements every tick
(`joint_ekf_window_W`; W = 0: over the whole stream, `joint_ekf_stream`). Its tracking is what a
W-tick history holds for this decision rule (an EKF: not optimal, so a lower bound on it).

Which part of the model's prediction costs the tracking (`hybrids`, the windowed model only): the
model's controller with part of each tick's prediction replaced by the oracle's, on the same
plants. A prediction per candidate j is (theta_{t+d}, theta_{t+d+1}(j)); its *common part* is
theta_{t+d} and the mean over candidates of theta_{t+d+1} (what the history says the plant does
anyway: the state estimate), its *command part* theta_{t+d+1}(j) minus that mean (what each
candidate adds: the identified actuator). `HybridMPC` modes:

    oracle_common      the oracle's common part, the model's command part
    oracle_command     the model's common part, the oracle's command part
    oracle_level       the oracle's theta_{t+d}, the model's increments theta_{t+d+1}(j) - theta_{t+d}
    oracle_increment   the model's theta_{t+d}, the oracle's increments

Writes experiments/results/control_diagnosis.json (docs/control.md cites it). Not part of the
package; minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import functools
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.artifact import open_artifact
from tickformer.control import HiddenPlantSim, HistoryMPC, NominalMPC, OracleMPC
from tickformer.control.demo import DemoConfig, loop_plants, reference, train_models
from tickformer.control.estimation import HiddenEKF
from tickformer.control.plant import NOMINAL, HiddenStepper, hidden_step, rk4_scalar
from tickformer.export.writer import export_artifact
from tickformer.model.checkpoint import load_checkpoint
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


class JointEKF:
    """Extended Kalman filter over x = (theta, omega, a = g/L, b = b/(mL^2), u = k/(mL^2)) of the
    hidden pendulum: the constants as random walks (process noise q_const), the prior at the
    nominal constants with a standard deviation of a range's worth, Jacobians by central
    differences. Python floats and small numpy arrays: a benchmark, not real-time code."""

    def __init__(self, plant: Any = NOMINAL, q_const: float = 1e-7) -> None:
        self.h, self.n, self.r = plant.dt / plant.substeps, plant.substeps, plant.noise**2
        self.prior = np.array(plant.coefficients)  # [3]
        self.p0 = np.diag([self.r, 1.0, 2.5**2, 0.5**2, 3.0**2])  # [5, 5]
        self.q = np.diag([1e-6, 1e-3, q_const, q_const, q_const])  # [5, 5]
        self.x: np.ndarray | None = None

    def f(self, x: np.ndarray, c: float) -> np.ndarray:
        th, om = rk4_scalar(x[0], x[1], x[2], x[3], x[4] * c, self.h, self.n)
        return np.array([th, om, x[2], x[3], x[4]])

    def update(self, y: float, c: float) -> np.ndarray:
        """Take in measurement y, the command c having acted over the last tick; returns x [5]."""
        if self.x is None:
            self.x, self.p = np.array([y, 0.0, *self.prior]), self.p0.copy()
            return self.x
        c = min(1.0, max(-1.0, c))
        fx, jac = self.f(self.x, c), np.empty((5, 5))
        for i in range(5):
            e = np.zeros(5)
            e[i] = 1e-5 * max(1.0, abs(self.x[i]))
            jac[:, i] = (self.f(self.x + e, c) - self.f(self.x - e, c)) / (2 * e[i])
        p = jac @ self.p @ jac.T + self.q
        gain = p[:, 0] / (p[0, 0] + self.r)
        self.x = fx + gain * (y - fx[0])
        self.p = p - np.outer(gain, p[0, :])
        self.x[2], self.x[3], self.x[4] = max(self.x[2], 1.0), max(self.x[3], 0.0), max(self.x[4], 0.1)
        return self.x


class JointMPC(NominalMPC):
    """The decision rule on JointEKF's state and constants; window W > 0: the filter is run from
    its prior over the last W measurements every tick, W = 0: once over the whole stream."""

    def __init__(self, candidates: int, window: int, **weights: float) -> None:
        super().__init__(candidates, **weights)
        self.window, self.history = window, []
        self.stream = JointEKF()

    def catch_up(self, obs: np.ndarray) -> None:
        self.issued[-1] = obs.item(3)

    def predict(self, obs: np.ndarray) -> bool:
        self.history.append((obs.item(0), self.issued[0]))  # y_t, the command that acted over t-1..t
        ekf = JointEKF() if self.window else self.stream
        for y, c in self.history[-self.window :] if self.window else self.history[-1:]:
            x = ekf.update(y, c)
        a, b, u, (h, n) = x[2], x[3], x[4], (ekf.h, ekf.n)
        th, om = x[0], x[1]
        for j in range(self.plant.delay):
            th, om = rk4_scalar(th, om, a, b, u * min(1.0, max(-1.0, self.issued[1 + j])), h, n)
        for j, c in enumerate(self._cand):
            self.pred[j, 0] = th
            self.pred[j, 1] = rk4_scalar(th, om, a, b, u * c, h, n)[0]
        return True


def blend(mode: str, m: np.ndarray, o: np.ndarray) -> None:
    """Replace in the model's prediction m [K, 2] (theta_{t+d}, theta_{t+d+1}(j)) the part `mode`
    names by the oracle's o [K, 2] (module docstring, `hybrids`); in place."""
    if mode == "oracle_common":
        m[:, 1] += o[:, 1].mean() - m[:, 1].mean()
        m[:, 0] = o[:, 0]
    elif mode == "oracle_command":
        m[:, 1] = m[:, 1].mean() + (o[:, 1] - o[:, 1].mean())
    elif mode == "oracle_level":
        m[:, 1] += o[:, 0] - m[:, 0]
        m[:, 0] = o[:, 0]
    elif mode == "oracle_increment":
        m[:, 1] = m[:, 0] + (o[:, 1] - o[:, 0])
    else:
        raise ValueError(f"mode {mode!r} is not one of {HybridMPC.MODES}")


class HybridMPC(HistoryMPC):
    """The model's controller (HistoryMPC) with part of its prediction replaced by the oracle's
    (module docstring, `hybrids`); the oracle (OracleMPC on the same plant) sees the same
    observations and the same chosen commands."""

    MODES = ("oracle_common", "oracle_command", "oracle_level", "oracle_increment")

    def __init__(self, mode: str, sim: HiddenPlantSim, *args: Any, **weights: float) -> None:
        super().__init__(*args, **weights)
        blend(mode, np.zeros((2, 2)), np.zeros((2, 2)))  # an unknown mode fails here, not mid-loop
        self.mode, self.oracle = mode, OracleMPC(len(self.cand), sim, **weights)

    def catch_up(self, obs: np.ndarray) -> None:
        super().catch_up(obs)
        self.oracle.catch_up(obs)

    def predict(self, obs: np.ndarray) -> bool:
        usable = super().predict(obs)
        self.oracle.predict(obs)
        if not usable:
            return False
        blend(self.mode, self.pred, self.oracle.pred)
        return True

    def chosen(self, j: int) -> None:
        super().chosen(j)
        self.oracle.chosen(j)


@functools.lru_cache(maxsize=8)
def _held_out_episodes(config: Any, seed: int) -> Any:
    """The `pendulum-hidden` task's data for `config` from training seed `seed`'s data stream."""
    from tickformer.control.task import HIDDEN_TASK
    from tickformer.model.train import seeded_generators

    return HIDDEN_TASK.hooks.prepare(config, seeded_generators(seed)["data"])


def identification(checkpoint: str, cfg: DemoConfig) -> dict[str, float]:
    """In-context identification on the run's held-out episodes (module docstring)."""
    from tickformer.control.task import hidden_model_angles, hidden_test_features
    from tickformer.model.checkpoint import load_checkpoint as _load
    from tickformer.model.transformer import forward

    ck = _load(checkpoint)
    # the episodes of the seed's data stream (made once per config and seed: the snapshots of
    # one run share them), standardised as the model was trained: the checkpoint's norm, which a
    # run with other training episodes (control_side_runs' `transitions`) computed from those
    data = dataclasses.replace(_held_out_episodes(ck.config, cfg.seed), norm=ck.meta["norm"])
    d = data.plant.delay
    x = hidden_test_features(data)
    outs = []
    for c in (-1.0, 1.0):
        xc = x.copy()
        xc[:, -1, 1] = (c - data.norm["x_mean"][1]) / data.norm["x_std"][1]
        outs.append(forward(ck.params, ck.config, xc)[:, -1, d] * data.norm["dy_std"][d])
    slope = (outs[1] - outs[0]) / 2  # [N] rad per unit command
    gain = np.array([p.coefficients[2] for p in data.test_plants])  # [N]
    return {
        **slope_statistics(slope, gain, data.plant.dt),
        "noise_following": noise_following(
            hidden_model_angles(ck.params, ck.config, data), data, cfg.window - 1
        ),
        "noise_following_oracle_filter": noise_following(oracle_filter_angles(data), data, cfg.window - 1),
    }


def slope_statistics(slope: np.ndarray, gain: np.ndarray, dt: float) -> dict[str, float]:
    """A model's d theta_{t+3} / d c_t per episode (`slope` [N], rad per unit command) against the
    episodes' actuator coefficients k / (m L^2) (`gain` [N]): their correlation; the slope over
    its first-order value gain dt^2 / 2 (mean, std, and mean over the weakest and the strongest
    quarter of the actuators); and the elasticity, the least-squares slope of log slope on log
    gain (1: in proportion; 0: the same slope for every episode; in between: shrunk toward the
    training mean), fitted over the episodes whose slope is positive (`slope_fit_episodes` of
    them: the log needs it; every episode of the runs episodes31k and w64_len128 has a positive one)."""
    ratio = slope / (gain * dt**2 / 2)  # [N]
    weak, strong = gain <= np.quantile(gain, 0.25), gain >= np.quantile(gain, 0.75)
    pos = slope > 0
    return {
        "slope_gain_correlation": float(np.corrcoef(slope, gain)[0, 1]),
        "slope_to_first_order_mean": float(np.mean(ratio)),
        "slope_to_first_order_std": float(np.std(ratio)),
        "slope_gain_elasticity": float(np.polyfit(np.log(gain[pos]), np.log(slope[pos]), 1)[0]),
        "slope_fit_episodes": int(pos.sum()),
        "slope_to_first_order_weakest_quarter": float(np.mean(ratio[weak])),
        "slope_to_first_order_strongest_quarter": float(np.mean(ratio[strong])),
    }


def noise_following(pred: np.ndarray, data: Any, start: int) -> list[dict[str, float]]:
    """How much of a predictor's error is the measurement noise of y_t, per horizon j: the
    least-squares slope k of its error (predicted - true theta_{t+j}) on the noise y_t - theta_t
    over the held-out episodes at positions >= start (the caller's: the demo's window full), its
    RMSE, and the RMSE of error - k * noise. A predictor that passes y_t through unfiltered has
    k = 1; a Kalman filter weighs the new measurement by its gain, k < 1. pred: [N, T, d + 1]
    angles (rad)."""
    t = data.steps
    noise = data.test_y[:, start:t] - data.test_theta[:, start:t]  # [N, T - start]
    out = []
    for j in range(pred.shape[-1]):
        err = pred[:, start:t, j] - data.test_theta[:, start + j + 1 : t + j + 1]  # [N, T - start]
        k = float(np.sum(err * noise) / np.sum(noise * noise))
        out.append(
            {
                "horizon": j + 1,
                "rmse": float(np.sqrt(np.mean(err**2))),
                "noise_slope": k,
                "rmse_without_noise_part": float(np.sqrt(np.mean((err - k * noise) ** 2))),
            }
        )
    return out


def oracle_filter_angles(data: Any) -> np.ndarray:
    """theta_{t+1..t+d+1} of the held-out episodes [N, T, d + 1] as the oracle controller predicts
    them: control.estimation.HiddenEKF with each episode's true constants over its measurements, then
    forward through the commands (a command issued at tick k acts over [k + d, k + d + 1))."""
    d, t = data.plant.delay, data.steps
    cmds = data.test_cmds
    pred = np.zeros((cmds.shape[0], t, d + 1))
    for n, plant in enumerate(data.test_plants):
        ekf, f = HiddenEKF(plant), HiddenStepper(plant)

        def issued(k: int, n: int = n) -> float:
            return float(cmds[n, k]) if k >= 0 else 0.0

        for i in range(t):
            th, om = ekf.update(float(data.test_y[n, i]), issued(i - 1 - d))
            for j in range(d + 1):
                th, om = f.step(th, om, issued(i + j - d))
                pred[n, i, j] = th
    return pred


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the demo's)")
    ap.add_argument("--ticks", type=int, default=600)
    ap.add_argument("--plants", type=int, default=3, help="the demo's plant and this many - 1 more draws")
    ap.add_argument("--windows", type=int, nargs="*", default=[], help="more windowed models to compare")
    ap.add_argument(
        "--joint-windows", type=int, nargs="*", default=[32, 0], help="JointEKF windows (0: the whole stream)"
    )
    ap.add_argument(
        "--loop-share",
        type=float,
        default=None,
        help="control.plant.LOOP_SHARE for the training data (default: the package's; 0: the recipe "
        "before 2026-12-05, without closed-loop episodes, which the committed diagnosis ran on)",
    )
    args = ap.parse_args()
    if args.loop_share is not None:
        import tickformer.control.plant as plant

        plant.LOOP_SHARE = args.loop_share
    cfg = DemoConfig(quick=True)
    if args.steps is not None:
        cfg = dataclasses.replace(cfg, train_steps=args.steps)
    plants = loop_plants(cfg, args.plants)
    weights = {"kp": cfg.kp, "w_omega": cfg.w_omega}
    result: dict[str, Any] = {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python experiments/control_diagnosis.py "
        + " ".join(
            f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
            if v is not None and v != []
        ),
        "load_average_before": list(os.getloadavg()),
        "train_steps": cfg.train_steps,
        "ticks": args.ticks,
        "settle_ticks": cfg.settle_ticks,
        "candidates": cfg.candidates,
        "plants": [p.to_dict() for p in plants],
        "models": {},
        "controllers": {},
    }

    def run(name: str, make: Any, into: str = "controllers") -> None:
        rows = []
        for plant in plants:
            sim = HiddenPlantSim(plant, reference(cfg), args.ticks + 1, seed=cfg.seed)
            rows.append(diagnose(make(plant, sim), sim, args.ticks, cfg.settle_ticks))
        result.setdefault(into, {})[name] = rows
        print(f"{name}: tracking {[round(r['tracking_rms'], 4) for r in rows]}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tr = train_models(Path(tmp), cfg)
        result["train_seconds"] = round(time.perf_counter() - t0, 1)
        ckpts = {"model": tr["checkpoint"], "memoryless": tr["checkpoint_memoryless"]}
        for w in args.windows:
            extra = train_models(Path(tmp) / f"w{w}", dataclasses.replace(cfg, window=w))
            ckpts[f"window_{w}"] = extra["checkpoint"]
        for name, ckpt in ckpts.items():
            art = export_artifact(ckpt, Path(tmp) / f"art-{name}", batch=cfg.candidates)
            bound = open_artifact(art).manifest.get("output_bound")
            meta = load_checkpoint(ckpt).meta
            h = meta["metrics"]
            result["models"][name] = {
                "window": load_checkpoint(ckpt).config.window,
                "held_out_rmse": h["model_rmse"],
                "held_out_rmse_3_step": h["model_rmse_3_step"],
                **identification(ckpt, cfg),
            }
            session = load(art, backend="ort")

            def fresh(
                plant: Any, sim: Any, session: Any = session, meta: Any = meta, bound: Any = bound
            ) -> Any:
                session.reset()  # a new plant: a new history
                return HistoryMPC(session, meta["norm"], plant, bound, **weights)

            try:
                run(name, fresh)
                if name == "model":
                    for mode in HybridMPC.MODES:

                        def hybrid(
                            plant: Any,
                            sim: Any,
                            session: Any = session,
                            meta: Any = meta,
                            bound: Any = bound,
                            mode: str = mode,
                        ) -> Any:
                            session.reset()
                            return HybridMPC(mode, sim, session, meta["norm"], plant, bound, **weights)

                        run(f"model_{mode}", hybrid, "hybrids")
            finally:
                session.close()
    run("nominal", lambda plant, sim: NominalMPC(cfg.candidates, **weights))
    run("oracle", lambda plant, sim: OracleMPC(cfg.candidates, sim, **weights))
    for w in args.joint_windows:
        run(
            f"joint_ekf_window_{w}" if w else "joint_ekf_stream",
            lambda p, s, w=w: JointMPC(cfg.candidates, w, **weights),
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
