"""How exactly a controller must know the plant to track within 1.5x of the oracle: the demo's
decision rule (control/delayed.py) with a physics predictor that is right but for one thing.

    python experiments/control_sensitivity.py [--ticks 1000] [--plants 5]

On the side runs' plants (control.demo.loop_plants: the demo's held-out plant first, then
plants - 1 more draws), the demo's reference and noise seed, no wall clock:

    oracle                 OracleMPC: the true constants in its filter and its predictor
    <constant> x f         NominalMPC given the true constants but one, that one scaled by f
                           (filter and predictor both: a consistent belief, as an identified
                           model has); f in FACTORS
    unfiltered level       the oracle, but the predicted angle starts from the raw measurement
                           y_t instead of the filter's estimate (the filter's velocity kept):
                           what passing the measurement noise through costs by itself

Per variant: tracking RMS (rad) on each plant and its ratio to the oracle's on that plant. And
per plant, the largest command the reference needs from the plant's own dynamics with no
feedback (theta = r exactly: (r'' + (g/L) sin r + b/(mL^2) r') / (k/(mL^2)), max over a
period; 1 = the actuator's full range): how close the reference is to the actuator's authority.

Writes experiments/results/control_sensitivity.json (docs/control.md cites it). Seconds on one
core; no training, no runtime session.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tickformer.control import HiddenPlantSim, NominalMPC, OracleMPC
from tickformer.control.demo import DemoConfig, loop_plants, reference
from tickformer.control.plant import HiddenPendulum

OUT = Path(__file__).resolve().parent / "results" / "control_sensitivity.json"
CONSTANTS = ("gain", "mass", "length", "damping")
FACTORS = (0.85, 1.15)


class UnfilteredOracle(OracleMPC):
    """The oracle whose predictions start from the raw measurement: theta_t = y_t, omega_t the
    filter's (the level carries the measurement noise, as a model whose outputs are y_t plus a
    learned increment does when it does not filter)."""

    def predict(self, obs: np.ndarray) -> bool:
        _, om = self.ekf.update(obs.item(0), self.issued[0])
        self._simulate(obs.item(0), om, self.issued, 1, self.f)
        return True


def peak_command(plant: HiddenPendulum, cfg: DemoConfig) -> float:
    """Largest |command| the reference needs with theta = r exactly (module docstring)."""
    a, b, k = plant.coefficients
    w = 2.0 * math.pi / cfg.ref_period_s
    t = np.linspace(0.0, cfg.ref_period_s, 2001)  # [n] one period
    r, rd, rdd = (
        cfg.amplitude * np.sin(w * t),
        cfg.amplitude * w * np.cos(w * t),
        -cfg.amplitude * w * w * np.sin(w * t),
    )
    return float(np.max(np.abs((rdd + a * np.sin(r) + b * rd) / k)))


def tracking(
    make: Callable[[HiddenPendulum, HiddenPlantSim], Any],
    ps: list[HiddenPendulum],
    cfg: DemoConfig,
    ticks: int,
    splits: list[dict[str, float]] | None = None,
    sims: list[HiddenPlantSim] | None = None,
) -> list[float]:
    """Tracking RMS per plant (rad); with `splits`, each plant's `reference_split` appended to it;
    with `sims`, each plant's simulation after its loop (for other measures of the same run)."""
    out = []
    for p in ps:
        sim = HiddenPlantSim(p, reference(cfg), ticks + 1, seed=cfg.seed)
        ctl = make(p, sim)
        for k in range(ticks):
            sim.actuate(ctl.step(sim.observe(k)))
        out.append(sim.tracking(skip=cfg.settle_ticks)["rms_rad"])
        if splits is not None:
            splits.append(reference_split(sim, cfg.settle_ticks))
        if sims is not None:
            sims.append(sim)
    return out


def reference_split(sim: HiddenPlantSim, skip: int) -> dict[str, float]:
    """The tracking error e = theta - r over plant ticks skip+1..k, fitted by least squares as
    a r + b r' + c (r, r' the reference and its rate at each tick): the part of the error that
    moves with the reference -- an amplitude error (a: -0.1 = the plant swings 10% short), a phase
    error (b, in seconds: b r' is the error of a plant b seconds early, -b late, to first order)
    and an offset (c) -- and the residual, what does not. systematic_rms^2 + residual_rms^2 =
    the tracking RMS^2 (the fit's residual is orthogonal to its columns)."""
    rr, e = sim.tracking_error(skip)  # [m, 2] (r, r'), [m]
    cols = np.column_stack([rr, np.ones(e.size)])  # [m, 3]
    coef = np.linalg.lstsq(cols, e, rcond=None)[0]
    fit = cols @ coef
    return {
        "amplitude_coef": float(coef[0]),
        "phase_coef_s": float(coef[1]),
        "offset_rad": float(coef[2]),
        "systematic_rms": float(np.sqrt(np.mean(fit**2))),
        "residual_rms": float(np.sqrt(np.mean((e - fit) ** 2))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ticks", type=int, default=1000)
    ap.add_argument("--plants", type=int, default=5)
    args = ap.parse_args()
    cfg = DemoConfig()
    ps = loop_plants(cfg, args.plants)
    w = {"kp": cfg.kp, "w_omega": cfg.w_omega}
    k = cfg.candidates
    variants: dict[str, Callable[[HiddenPendulum, HiddenPlantSim], Any]] = {
        "oracle": lambda p, sim: OracleMPC(k, sim, **w),
        "unfiltered level": lambda p, sim: UnfilteredOracle(k, sim, **w),
    }
    for name in CONSTANTS:
        for f in FACTORS:
            variants[f"{name} x {f:g}"] = lambda p, sim, n=name, f=f: NominalMPC(
                k, dataclasses.replace(p, **{n: getattr(p, n) * f}), **w
            )
    rows: dict[str, Any] = {}
    for name, make in variants.items():
        rms = tracking(make, ps, cfg, args.ticks)
        rows[name] = {"tracking_rms": rms}
        print(f"{name}: {[round(x, 4) for x in rms]}", flush=True)
    oracle = rows["oracle"]["tracking_rms"]
    for row in rows.values():
        row["ratio"] = [a / b for a, b in zip(row["tracking_rms"], oracle)]
        row["ratio_mean"] = float(np.mean(row["ratio"]))
    result = {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python experiments/control_sensitivity.py --ticks {args.ticks} --plants {args.plants}",
        "ticks": args.ticks,
        "settle_ticks": cfg.settle_ticks,
        "reference": {"amplitude_rad": cfg.amplitude, "period_s": cfg.ref_period_s},
        "plants": [p.to_dict() for p in ps],
        "peak_command": [peak_command(p, cfg) for p in ps],
        "variants": rows,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
