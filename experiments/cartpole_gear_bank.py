"""The gear bank (control/gear_bank.py, a multiple-model adaptive estimator of the actuator gear)
in the learned cart-pole controller, issue 36 (2026-12-07): settings chosen on validation draws,
then one evaluation on the chain's held-out draws.

    python experiments/cartpole_gear_bank.py validation ART[,ART] [--draws 40] [--configs mix:3:1e-3:0,...]
    python experiments/cartpole_gear_bank.py held-out ART0,ART1 --config mix:3:1e-3:0 [--out JSON]
    python experiments/cartpole_gear_bank.py tick ART --config mix:3:1e-3:0
    python experiments/cartpole_gear_bank.py relog ART0,ART1 --config mix:3:1e-3:0 [--runs 20]

A config is MODE:POINTS:FLOOR:BLEND (the bank's estimate and B: "mix", GearBank's weighted mix, or
"argmax", the most likely filter's alone (ArgmaxBank here: measured, not kept); grid gears per
training band, the weights' floor, the model's velocity share).

`validation`: on `--draws` held-out-band draws of seed 5 (not the chain's seed,
tickformer.commands.plant.DRAW_SEED), the oracle and the existing learned controller once per
artifact and each config, 1000 ticks each under ControlLoop in virtual time
(control.cartpole_loop.run_episode, the plant's noise seed the draw's index, as the chain's
evaluate). "The existing controller" is the nominal filter with BLEND (kind
"model_nominal_filter" of control.cartpole_loop since the bank became kind "model").
`held-out`: per artifact, control.cartpole_loop.evaluate (the chain's own code path:
the oracle on the first artifact only, it does not depend on the model; the existing model on
each) and the bank controller on the same draws, noise seeds and ticks; the summaries to --out.
`tick`: the bank controller's and the existing controller's step timed as
control.cartpole_loop.tick_time times it (2000 ticks on held-out draw 0, after a warm-up tenth).
`relog`: both controllers in relog_runs' regime (training draws, the command perturbed), the
regime the chain's next training round would be logged in.
About 25 s per config and artifact on 40 draws; the oracle about 40 s.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from tickformer import runtime
from tickformer.control import cartpole as C
from tickformer.control import cartpole_loop as L
from tickformer.control import gear_bank as G

TICKS = 1000
NOMINAL = "model_nominal_filter"  # the existing controller: the nominal filter and BLEND
VALIDATION_SEED = 5


MODES = ("mix", "argmax")


class ArgmaxBank(G.GearBank):
    """Mode "argmax": the bank's estimate and B the most likely filter's alone (GearBank's weighted
    mix, then overwritten; no state of its own, so a GearBank's class can be swapped for it)."""

    def estimate(self, y: np.ndarray) -> np.ndarray:
        super().estimate(y)
        i = int(np.argmax(self.weights))
        self.xhat[:] = self.x[i]
        self.b_mix[:] = self.bs[i]
        return self.xhat


def parse_config(text: str) -> dict:
    mode, points, floor, blend = text.split(":")
    if mode not in MODES:
        raise SystemExit(f"mode {mode!r}: give one of {MODES}")
    return {"mode": mode, "points": int(points), "floor": float(floor), "blend": float(blend)}


def bank_controller(session, plant: C.HiddenCartPole, design: C.NominalDesign, cfg: dict) -> L.ModelFilterMPC:
    session.reset()
    ctl = L.ModelFilterMPC(
        session,
        design,
        plant.dt,
        delay=plant.params.delay,
        bank=True,
        grid=G.training_gear_grid(cfg["points"]),
        floor=cfg["floor"],
        blend=cfg["blend"],
    )
    if cfg["mode"] == "argmax":
        ctl.bank.__class__ = ArgmaxBank  # the same object: ctl.filter, ctl.b (its b_mix) stay wired
    return ctl


def bank_rows(session, draws, cfg: dict, ticks: int = TICKS) -> list[dict]:
    """The bank controller on every draw, as control.cartpole_loop.evaluate runs a controller."""
    design = C.NominalDesign.make()
    rows = []
    for i, params in enumerate(draws):
        plant = C.HiddenCartPole(params, seed=i)
        ctl = bank_controller(session, plant, design, cfg)
        r = L.run_episode(ctl, plant, ticks)
        r.pop("_sim")
        r["gear_read"] = ctl.gear
        rows.append(r)
    return rows


def _line(name: str, s: dict, oracle: dict | None = None) -> str:
    ratio = f" x{s['mean_cost'] / oracle['mean_cost']:.2f}" if oracle else ""
    per = " ".join(f"{c:.4f}/{f}" for c, f in zip(s["per_draw_cost"], s["per_draw_falls"], strict=True))
    return f"{name:28s} mean {s['mean_cost']:.4f}{ratio} falls {s['falls']} ({s['draws_with_falls']}) | {per}"


def validation(arts: list[str], n: int, configs: list[str]) -> None:
    draws = L.held_out_draws(n, VALIDATION_SEED)
    print("gears", " ".join(f"{i}:{p.gear:.0f}" for i, p in enumerate(draws)), flush=True)
    oracle = L.evaluate({}, draws, TICKS, controllers=("oracle_mpc",))["controllers"]["oracle_mpc"]
    print(_line("oracle", oracle), flush=True)
    for art in arts:
        model = L.evaluate({"model": art}, draws, TICKS, controllers=(NOMINAL,))["controllers"][NOMINAL]
        print(f"== {art}", flush=True)
        print(_line("model (existing)", model, oracle), flush=True)
        with runtime.load(art, backend="ort", threads=1) as s:
            for text in configs:
                t0 = time.perf_counter()
                s_bank = L._summary(bank_rows(s, draws, parse_config(text)))
                print(
                    _line(f"bank {text}", s_bank, oracle) + f" [{time.perf_counter() - t0:.0f} s]", flush=True
                )


def held_out(arts: list[str], text: str, out: Path | None) -> None:
    from tickformer.commands.plant import DRAW_SEED

    cfg = parse_config(text)
    draws = L.held_out_draws(20, DRAW_SEED)
    record: dict = {
        "config": cfg,
        "grid": G.training_gear_grid(cfg["points"]),
        "draw_seed": DRAW_SEED,
        "draws": [p.to_dict() for p in draws],
        "ticks": TICKS,
        "seeds": {},
    }
    oracle = None
    for art in arts:
        kinds = (NOMINAL,) if oracle else ("oracle_mpc", NOMINAL)
        res = L.evaluate({"model": art}, draws, TICKS, controllers=kinds)["controllers"]
        res["model"] = res.pop(NOMINAL)
        oracle = oracle or res["oracle_mpc"]
        with runtime.load(art, backend="ort", threads=1) as s:
            rows = bank_rows(s, draws, cfg)
        bank = L._summary(rows)
        bank["gear_read"] = [round(r["gear_read"], 2) for r in rows]
        record["seeds"][art] = {"model": res["model"], "bank": bank}
        print(f"== {art}", flush=True)
        print(_line("oracle", oracle), flush=True)
        print(_line("model (existing)", res["model"], oracle), flush=True)
        print(_line(f"bank {text}", bank, oracle), flush=True)
        print(
            "gear read "
            + " ".join(f"{i}:{g:.0f}/{p.gear:.0f}" for i, (g, p) in enumerate(zip(bank["gear_read"], draws)))
        )
    record["oracle_mpc"] = oracle
    bank_mean = float(np.mean([v["bank"]["mean_cost"] for v in record["seeds"].values()]))
    model_mean = float(np.mean([v["model"]["mean_cost"] for v in record["seeds"].values()]))
    record["verdict"] = {
        "bank_mean": bank_mean,
        "model_mean": model_mean,
        "oracle_mean": oracle["mean_cost"],
        "bank_ratio": bank_mean / oracle["mean_cost"],
        "model_ratio": model_mean / oracle["mean_cost"],
        "target": L.TARGET_ORACLE_RATIO,
        "met": bank_mean / oracle["mean_cost"] <= L.TARGET_ORACLE_RATIO,
    }
    print(json.dumps(record["verdict"]), flush=True)
    if out is not None:
        out.write_text(json.dumps(record, indent=1) + "\n")


def tick(art: str, text: str, ticks: int = 2000) -> None:
    from tickformer.commands.plant import DRAW_SEED

    cfg = parse_config(text)
    params = L.held_out_draws(1, DRAW_SEED)[0]
    design = C.NominalDesign.make()
    with runtime.load(art, backend="ort", threads=1) as s:
        base = L.tick_time(s, C.HiddenCartPole(params, seed=0), ticks, kind=NOMINAL)
        plant = C.HiddenCartPole(params, seed=0)
        ctl = bank_controller(s, plant, design, cfg)
        obs = np.zeros(L.OBS_HEAD)
        y, last = plant.measure(), 0.0
        ns = np.empty(ticks, np.int64)
        for t in range(ticks):  # as L.tick_time, with the bank controller
            obs[0], obs[1], obs[2] = y[0], y[1], last
            t0 = time.perf_counter_ns()
            last = float(ctl.step(obs)[0])
            ns[t] = time.perf_counter_ns() - t0
            y, _ = plant.step(last)
        us = ns[ticks // 10 :] / 1e3
        # the bank's own work per tick (estimate + time update), apart from the model's peek
        kind = ArgmaxBank if cfg["mode"] == "argmax" else G.GearBank
        bank = kind(G.bank_designs(G.training_gear_grid(cfg["points"])), 2)
        y2 = np.zeros(2)
        t0 = time.perf_counter_ns()
        for _ in range(ticks):
            bank.estimate(y2)
            bank._advance(0.0)
        bank_us = (time.perf_counter_ns() - t0) / ticks / 1e3
    print(
        f"existing controller: p50 {base['p50_us']:.0f} p99 {base['p99_us']:.0f} max {base['max_us']:.0f} us"
    )
    print(
        f"bank controller {text}: p50 {np.percentile(us, 50):.0f} p99 {np.percentile(us, 99):.0f} "
        f"max {us.max():.0f} us; the bank's estimate + advance alone {bank_us:.0f} us; period {plant.dt * 1e6:.0f} us"
    )


def relog_regime(arts: list[str], text: str, runs: int, rows: int = 1000, seed: int = 11) -> None:
    """The existing controller and the bank's in relog_runs' regime (training draws, a white
    perturbation of std RELOG_PERTURB added to the command, as control.cartpole_loop.relog_runs
    runs the next round's logs): falls and mean cost over `runs` runs of `rows` ticks per artifact,
    the same draws, plant seeds and perturbations for both."""
    cfg = parse_config(text)
    design = C.NominalDesign.make()
    for art in arts:
        with runtime.load(art, backend="ort", threads=1) as s:
            for name in ("existing", "bank"):
                rng = np.random.default_rng(seed)
                falls, costs, per = 0, [], []
                for _ in range(runs):
                    plant = C.HiddenCartPole(C.draw_params(rng, "train"), seed=int(rng.integers(2**31)))
                    if name == "bank":
                        ctl = bank_controller(s, plant, design, cfg)
                    else:
                        ctl = L.make_controller(NOMINAL, plant, design, s)
                    obs = np.zeros(L.OBS_HEAD)
                    y, last = plant.measure(), 0.0
                    for _ in range(rows):
                        obs[0], obs[1], obs[2] = y[0], y[1], last
                        u = float(ctl.step(obs)[0]) + float(rng.normal(0.0, L.RELOG_PERTURB))
                        last = min(C.COMMAND_LIMIT, max(-C.COMMAND_LIMIT, u))
                        y, _ = plant.step(last)
                    falls += plant.falls
                    costs.append(plant.summary()["cost"])
                    per.append(f"{plant.params.gear:.0f}:{plant.falls}")
                print(
                    f"{art} {name:8s} falls {falls} mean cost {np.mean(costs):.4f} | gear:falls "
                    + " ".join(per),
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("validation", "held-out", "tick", "relog"))
    ap.add_argument("arts", help="artifact folder(s), comma-separated")
    ap.add_argument("--draws", type=int, default=40, help="validation: draws of seed 5")
    ap.add_argument("--configs", default="mix:3:1e-3:0", help="validation: MODE:POINTS:FLOOR:BLEND,...")
    ap.add_argument("--config", default="mix:3:1e-3:0", help="held-out / tick: the one config")
    ap.add_argument("--out", type=Path, default=None, help="held-out: the JSON record")
    ap.add_argument("--runs", type=int, default=20, help="relog: runs of 1000 ticks on training draws")
    a = ap.parse_args()
    arts = a.arts.split(",")
    if a.what == "validation":
        validation(arts, a.draws, a.configs.split(","))
    elif a.what == "held-out":
        held_out(arts, a.config, a.out)
    elif a.what == "relog":
        relog_regime(arts, a.config, a.runs)
    else:
        tick(arts[0], a.config)


if __name__ == "__main__":
    main()
