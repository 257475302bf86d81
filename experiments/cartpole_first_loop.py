"""First closed loops of the learned cart-pole controller (2026-12-07): LQG, the oracle and ForecastMPC
(control/forecast_mpc.py) with the one-step LQR-value cost, on 6 held-out plant draws, 1500 ticks each.

    tickformer log cartpole --out cp.parquet --runs 40 --rows 2000 --seed 0
    tickformer train --data cp.parquet --inputs command --outputs x,theta --episode run --time time \\
        --horizon 3 --steps 6000 --out ckpt
    tickformer export ckpt --out art --batch 17
    python experiments/cartpole_first_loop.py ckpt art

Prints per draw: cost (mean of (x - ref)^2 + theta^2 per tick), falls, saturations, time per tick.
experiments/notes/2026-12-07-cartpole.md has the run and what it says.
"""

import sys
import time

import numpy as np

from tickformer import runtime
from tickformer.control import cartpole as C
from tickformer.control.forecast_mpc import ForecastMPC
from tickformer.model.checkpoint import load_checkpoint

design = C.NominalDesign.make()
ckpt = load_checkpoint(sys.argv[1] if len(sys.argv) > 1 else "ckpt")
art = sys.argv[2] if len(sys.argv) > 2 else "art"
signals = ckpt.meta["signals"]
rng = np.random.default_rng(5)
draws = [C.draw_params(rng, "held_out") for _ in range(6)]


def model_ctl(plant, session):
    dt, d = plant.dt, plant.params.delay

    def cost(pred, t):  # pred [K, H, 2]: x, theta at t+1..t+H
        ref = C.reference((t + d + 1) * dt)
        p1, p0 = pred[:, d, :], pred[:, d - 1, :]
        v = (p1 - p0) / dt
        out = np.empty(pred.shape[0])
        for k in range(pred.shape[0]):
            out[k] = C.cost_to_go(
                design.s, np.array([p1[k, 0], p1[k, 1], v[k, 0], v[k, 1]]), ref, float(ctl.cand[k])
            )
        return out

    ctl = ForecastMPC(session, signals, command="command", candidates=np.linspace(-3, 3, 17), cost=cost)
    return ctl


def loop(params, kind, ticks=1500):
    plant = C.HiddenCartPole(params, seed=0)
    y = plant.measure()
    last = 0.0
    t0 = time.perf_counter()
    if kind == "model":
        with runtime.load(art, backend="ort") as s:
            ctl = model_ctl(plant, s)
            for _ in range(ticks):
                u = ctl.step(np.array([y[0], y[1], last]))
                last = u
                y, _ = plant.step(u)
    else:
        ctl = {
            "lqg": lambda: C.LQG(design, plant.dt),
            "oracle": lambda: C.PhysicsMPC(design, params, plant.dt, plant=plant),
        }[kind]()
        for _ in range(ticks):
            y, _ = plant.step(ctl.step(y))
    s = plant.summary()
    s["us"] = (time.perf_counter() - t0) / ticks * 1e6
    return s


for p in draws:
    print(
        f"m {p.pole_mass:.1f} b {p.hinge_damping:.2f} g {p.gear:.0f} | "
        + " | ".join(
            f"{k}: {s['cost']:.4f} f{s['falls']} s{s['saturations']} {s['us']:.0f}us"
            for k in ("lqg", "oracle", "model")
            for s in [loop(p, k)]
        )
    )
