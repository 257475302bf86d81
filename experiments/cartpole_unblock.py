"""Unblocking the learned cart-pole controller (2026-12-07, second session): closed loops of
ForecastMPC with several decision costs on held-out draws, beside LQG and the oracle.

    python experiments/cartpole_unblock.py CKPT ART [--draws 6] [--ticks 1500] [--kinds lqg,oracle,model:lqr]
    python experiments/cartpole_unblock.py CKPT ART --blends 0,0.5,1 --pick 2,11,12,14,0,5,7,15
    python experiments/cartpole_unblock.py CKPT ART --validation 12 [--blend 0] [--gain-rate 0.05]

The first form prints per controller: mean cost over the draws (seed 5), falls, saturations, time
per tick (the decision costs tried while the controller was built; those runs were lost with the
machine's restart). The second runs control.cartpole_loop's ModelFilterMPC under ControlLoop with
each share `blend` of the model's velocity correction on the chain's held-out draws
(tickformer.commands.plant.DRAW_SEED) picked by index, 1000 ticks each, printing cost/falls per
draw: the diagnosis in experiments/notes/2026-12-07-cartpole-loop.md; --true-filter gives the
controller's filter the draw's own linearisation (the ablation there). --validation N: the
oracle and the learned controller (--blend, --gain-rate) on N draws of seed 5, where the
controller's settings were chosen.
"""

import argparse
import time

import numpy as np

from tickformer import runtime
from tickformer.control import cartpole as C
from tickformer.control.forecast_mpc import ForecastMPC
from tickformer.model.checkpoint import load_checkpoint

R_POS = 0.001
FALLS = bool(__import__("os").environ.get("FALLS"))
CAND_MAX = float(__import__("os").environ.get("CAND_MAX", "3"))


def make_cost(kind, design, dt, d, cand, kf=None):
    state = {"S": np.zeros(2)}

    def cost(pred, t):  # pred [K, H, 2]: x, theta at t+1..t+H
        if kind.startswith(
            "cf"
        ):  # complementary: the common part of the model's velocity correction low-passed
            al, be = (float(v) for v in kind[2:].split("_"))
            ref = C.reference((t + d + 1) * dt)
            z = kf.zpred
            z3 = (design.a @ z)[None, :] + design.b[:, 0][None, :] * cand[:, None]  # [K, 4]
            dc = ((pred[:, d] - pred[:, d - 1]) - (z3[:, :2] - z[None, :2])) / dt  # [K, 2]
            m = dc.mean(axis=0)
            state["S"] = (1 - be) * state["S"] + be * m
            out = np.empty(pred.shape[0])
            for k in range(pred.shape[0]):
                st = np.array([pred[k, d, 0], pred[k, d, 1], *(z3[k, 2:] + al * (dc[k] - m) + state["S"])])
                out[k] = C.cost_to_go(design.s, st, ref, float(cand[k]))
            return out
        if kind.startswith("hyb"):  # positions from the model, velocities from the nominal filter
            ref = C.reference((t + d + 1) * dt)
            z = kf.zpred  # the filter's state at t + d
            out = np.empty(pred.shape[0])
            for k in range(pred.shape[0]):
                z3 = design.a @ z + design.b[:, 0] * cand[k]
                st = np.array([pred[k, d, 0], pred[k, d, 1], z3[2], z3[3]])
                if len(kind) > 3:  # blend in the model's own velocity: its positions' change vs the filter's
                    a = float(kind[4:]) * min(1.0, t / 32) if kind[3] == "r" else float(kind[3:])
                    st[2:] += a * ((pred[k, d] - pred[k, d - 1]) - (z3[:2] - z[:2])) / dt
                out[k] = C.cost_to_go(design.s, st, ref, float(cand[k]))
            return out
        if kind.startswith("pos"):  # positions only, every horizon the candidate reaches
            w = float(kind[3:] or 10.0)
            out = R_POS * cand**2
            for h in range(d, pred.shape[1]):
                r, _ = C.reference((t + h + 1) * dt)
                out = out + (pred[:, h, 0] - r) ** 2 + w * pred[:, h, 1] ** 2
            return out
        ref = C.reference((t + d + 1) * dt)
        p1 = pred[:, d, :]
        p0 = pred[:, d - 1, :]
        if kind == "lqr2":  # the position at t + d is the same for every candidate: average it
            p0 = np.broadcast_to(p0.mean(axis=0), p0.shape)
        v = (p1 - p0) / dt
        if kind == "lqr3":  # the velocity at the end of the tick: second-order backward difference
            v = (3 * p1 - 4 * p0 + pred[:, d - 2, :]) / (2 * dt)
        out = np.empty(pred.shape[0])
        extra = float(kind[4:]) if kind.startswith("lqrR") else 0.0  # more weight on the command
        for k in range(pred.shape[0]):
            out[k] = (
                C.cost_to_go(design.s, np.array([p1[k, 0], p1[k, 1], v[k, 0], v[k, 1]]), ref, float(cand[k]))
                + extra * cand[k] ** 2
            )
        return out

    return cost


def loop(params, kind, ckpt, art, design, ticks):
    plant = C.HiddenCartPole(params, seed=0)
    y = plant.measure()
    last = 0.0
    t0 = time.perf_counter()
    if kind.startswith("model"):
        cost_kind = kind.split(":")[1]
        with runtime.load(art, backend="ort") as s:
            cand = np.linspace(-CAND_MAX, CAND_MAX, 17)
            kf = C.LQG(design, plant.dt)
            ctl = ForecastMPC(
                s,
                ckpt.meta["signals"],
                command="command",
                candidates=cand,
                cost=make_cost(cost_kind, design, plant.dt, plant.params.delay, cand, kf),
            )
            for _ in range(ticks):
                kf.estimate(y)
                z = kf.xhat.copy()
                for c in kf.issued:
                    z = design.a @ z + design.b[:, 0] * c
                kf.zpred = z
                u = ctl.step(np.array([y[0], y[1], last]))
                kf._advance(u)
                last = u
                y, fell = plant.step(u)
                if fell and FALLS:
                    print("fall at", plant.t, params.gear, flush=True)
    else:
        ctl = {
            "lqg": lambda: C.LQG(design, plant.dt),
            "oracle": lambda: C.PhysicsMPC(design, params, plant.dt, plant=plant),
            "nommpc": lambda: C.PhysicsMPC(design, C.NOMINAL, plant.dt),
        }[kind]()
        for _ in range(ticks):
            y, _ = plant.step(ctl.step(y))
    s = plant.summary()
    s["us"] = (time.perf_counter() - t0) / ticks * 1e6
    return s


def _true_filter(ctl, params):
    """The ablation of --true-filter: the controller's filter and its prediction through the
    commands in flight and the candidate use the draw's own linearisation (A, B, Kalman gain);
    the cost (the nominal LQR's S) is unchanged."""
    import dataclasses

    true = C.NominalDesign.make(params)
    ctl.design = dataclasses.replace(ctl.design, a=true.a, b=true.b, l=true.l)
    ctl.filter = C.LQG(ctl.design, ctl.dt, ctl.delay)
    ctl.b = true.b[:, 0].copy()
    return ctl


def blend_sweep(art, blends, pick, ticks=1000, true_filter=False):
    """ModelFilterMPC under ControlLoop on the chain's held-out draws `pick`, per blend (with
    `true_filter`, the ablation of `_true_filter`)."""
    from tickformer.commands.plant import DRAW_SEED
    from tickformer.control import cartpole_loop as L

    draws = L.held_out_draws(max(pick) + 1, DRAW_SEED)
    design = C.NominalDesign.make()
    with runtime.load(art, backend="ort", threads=1) as sess:
        for blend in blends:
            out = []
            for i in pick:
                plant = C.HiddenCartPole(draws[i], seed=i)  # the chain's noise seed of draw i
                ctl = L.make_controller("model", plant, design, sess, blend=blend)
                if true_filter:
                    ctl = _true_filter(ctl, draws[i])
                r = L.run_episode(ctl, plant, ticks)
                out.append(f"{i}:{r['cost']:.4f}/{r['falls']}")
            print(f"blend {blend}: " + " ".join(out), flush=True)


def validation(art, n, blend, gain_rate, ticks=1000):
    """The oracle and ModelFilterMPC (`blend`, `gain_rate`) on `n` held-out-band draws of seed 5
    (the draws the controller's settings are chosen on; the chain's are seed 100)."""
    from tickformer.control import cartpole_loop as L

    draws = L.held_out_draws(n, 5)
    design = C.NominalDesign.make()
    rows = {"oracle_mpc": [], "model": []}
    with runtime.load(art, backend="ort", threads=1) as sess:
        for i, p in enumerate(draws):
            for kind in rows:
                plant = C.HiddenCartPole(p, seed=i)
                ctl = L.make_controller(kind, plant, design, sess)
                if kind == "model":
                    ctl = L.ModelFilterMPC(sess, design, plant.dt, delay=2, blend=blend, gain_rate=gain_rate)
                rows[kind].append(L.run_episode(ctl, plant, ticks))
    for kind, rs in rows.items():
        print(
            f"{kind:10s} mean cost {np.mean([r['cost'] for r in rs]):.4f} falls {sum(r['falls'] for r in rs)} | "
            + " ".join(f"{r['cost']:.4f}/{r['falls']}" for r in rs),
            flush=True,
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("art")
    ap.add_argument("--draws", type=int, default=6)
    ap.add_argument("--ticks", type=int, default=1500)
    ap.add_argument("--kinds", default="lqg,oracle,model:lqr,model:lqr2")
    ap.add_argument("--blends", default=None, help="e.g. 0,0.5,1: the blend sweep (CKPT unused)")
    ap.add_argument("--pick", default="0,1,2,3", help="the chain's held-out draws for --blends")
    ap.add_argument("--true-filter", action="store_true", help="--blends with the draw's own filter")
    ap.add_argument(
        "--validation", type=int, default=None, help="N validation draws (seed 5): oracle vs model"
    )
    ap.add_argument("--blend", type=float, default=0.0, help="--validation: the model's velocity share")
    ap.add_argument("--gain-rate", type=float, default=0.05, help="--validation: the gain's low-pass rate")
    a = ap.parse_args()
    if a.validation is not None:
        validation(a.art, a.validation, a.blend, a.gain_rate)
        return
    if a.blends is not None:
        blends, pick = [float(b) for b in a.blends.split(",")], [int(i) for i in a.pick.split(",")]
        blend_sweep(a.art, blends, pick, true_filter=a.true_filter)
        return
    design = C.NominalDesign.make()
    ckpt = load_checkpoint(a.ckpt)
    rng = np.random.default_rng(5)
    draws = [C.draw_params(rng, "held_out") for _ in range(a.draws)]
    for kind in a.kinds.split(","):
        rs = [loop(p, kind, ckpt, a.art, design, a.ticks) for p in draws]
        print(
            f"{kind:12s} cost {np.mean([r['cost'] for r in rs]):.4f} falls {sum(r['falls'] for r in rs)} "
            f"sat {sum(r['saturations'] for r in rs)} {np.mean([r['us'] for r in rs]):.0f} us | "
            + " ".join(f"{r['cost']:.4f}/{r['falls']}" for r in rs),
            flush=True,
        )


if __name__ == "__main__":
    main()
