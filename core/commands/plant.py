"""`tickformer plant cartpole --out DIR [--quick] [--seed S] [--draws N] [--ticks N] [--rounds R]`:
the whole chain on a plant nobody here wrote -- MuJoCo's cart-pole behind the gymnasium API
(tickformer.control.cartpole) -- as the commands a user runs, from its logs to a certified
controller in a closed loop, beside the baselines.

Each stage is the subcommand a user would type (printed with a `$` and recorded in the summary,
so any stage can be rerun by hand):

    1. tickformer log cartpole --out DIR/log0.parquet          runs under each rig's own LQG + noise
    2. tickformer train --data DIR/log0.parquet --inputs command --outputs x,theta
           --episode run --time time --horizon 3 --out DIR/ckpt0
    3. tickformer export DIR/ckpt0 --out DIR/art0 --batch 17 --domain=-3.5:3.5,-2:2,-1:1
    4. R rounds: tickformer log cartpole --policy DIR/art{r-1} --extend DIR/log{r-1}.parquet
           --out DIR/log{r}.parquet (runs under the learned controller: the loop's own regime),
           then train and export on it (DIR/ckpt{r}, DIR/art{r})
    5. the memoryless twin: the same training on the last log with --window 1 (DIR/art-memoryless)
    6. tickformer verify DIR/art{R} --out DIR/verify
    7. tickformer certify DIR/art{R} --budget-us 1000 --out DIR/certify   (the batch-17 step)
    8. the closed loops (tickformer.control.cartpole_loop.evaluate): --draws held-out plant draws
       x --ticks ticks, each controller (nominal LQG, MPC with nominal physics, MPC with the true
       physics and state, the memoryless model, the windowed model) under ControlLoop in virtual
       time, on the same draws, reference and noise; one wall-clock run of the model at the
       plant's control period (deadline misses, fallbacks, step times); the controller's tick
       timed on one core; DIR/episode.png (one held-out episode, every controller)

`tickformer plant gym:ID --out DIR [--quick] [--target V,V,..] [--weights W,W,..]`: the chain
on any gymnasium environment with a one-dimensional Box action (tickformer.control.gym_plant):
log (random held actions), train --data (--inputs act0 --outputs obs0,..), export --batch 17,
then --draws episodes (env seeds 0..) x --ticks ticks under ControlLoop in virtual time for the
learned controller (17 candidates over the action bounds, each scored by the predicted
observations' weighted squared distance to --target over the horizon) and for the baseline that
holds the middle of the action bounds; the env's own reward is what they are compared on.

Writes DIR/plant_summary.json. --quick: small budgets everywhere (a couple of minutes on 2 cores;
its numbers mean little). The export's --domain covers the command's whole range (the K
candidates span [-3, 3]; the logs do not reach it) and the positions' with a margin. This module
parses, calls the stages and prints; the library code is in tickformer.control.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

from tickformer.commands import args as shared

PLANTS = ("cartpole", "gym:ID")
DOMAIN = "-3.5:3.5,-2:2,-1:1"  # command, x [m], theta [rad]
TRAIN = [
    "--inputs",
    "command",
    "--outputs",
    "x,theta",
    "--episode",
    "run",
    "--time",
    "time",
    "--horizon",
    "3",
]
BUDGETS: dict[str, dict[str, int]] = {
    "full": {
        "runs": 60,
        "rows": 2000,
        "steps": 4000,
        "rounds": 4,
        "relog_runs": 40,
        "relog_rows": 1000,
        "examples": 50,
        "samples": 20000,
        "draws": 20,
        "ticks": 1000,
        "wall_ticks": 1000,
        "timed_ticks": 2000,
    },
    "quick": {
        "runs": 8,
        "rows": 1000,
        "steps": 400,
        "rounds": 1,
        "relog_runs": 4,
        "relog_rows": 500,
        "examples": 5,
        "samples": 2000,
        "draws": 2,
        "ticks": 200,
        "wall_ticks": 50,
        "timed_ticks": 200,
    },
}
DRAW_SEED = 100  # the held-out draws: not the ones the controller's settings were chosen on (seed 5)


HELP = "the whole chain on MuJoCo's cart-pole (or any gym:ID): log, train --data, export, ..., closed loop"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plant", help=f"the plant: {', '.join(PLANTS)}")
    shared.out(p, help="the folder to write every stage's output and plant_summary.json into")
    p.add_argument("--quick", action="store_true", help="small budgets (minutes; the numbers mean little)")
    shared.seed(p, help="seed of the logs, the training and the relogging (the held-out draws are fixed)")
    p.add_argument("--draws", type=int, default=None, help="held-out plant draws (default 20; quick 2)")
    p.add_argument("--ticks", type=int, default=None, help="ticks per draw and controller (default 1000)")
    p.add_argument("--rounds", type=int, default=None, help="relogging rounds (default 4; quick 1)")
    p.add_argument("--steps", type=int, default=None, help="training steps per round (default 4000)")
    p.add_argument("--budget-us", type=float, default=1000.0, help="certify's budget for the step (1000 us)")
    p.add_argument(
        "--target", default=None, metavar="V,..", help="gym:ID: the observation target (default 0s)"
    )
    p.add_argument(
        "--weights", default=None, metavar="W,..", help="gym:ID: the cost's weight per observation"
    )
    p.add_argument(
        "--cpu", type=int, default=None, help="the CPU the tick timing is pinned to (default: the last)"
    )


def _parser() -> argparse.ArgumentParser:
    from tickformer.commands import certify, export, log, train, verify

    parser = argparse.ArgumentParser(prog="tickformer")
    parser.add_argument("--debug", action="store_true")
    sub = parser.add_subparsers(dest="command")
    for module in (log, train, export, verify, certify):
        shared.register(sub, module)
    return parser


def _call(parser: argparse.ArgumentParser, argv: list[str], record: list[dict[str, Any]]) -> int:
    """One stage: the subcommand `argv` through its own parser and checks, timed and recorded."""
    from tickformer.commands.args import glued_values, refuse_writes_into_artifacts, trust_policy

    line = "tickformer " + shlex.join(argv)
    print(f"$ {line}", flush=True)
    args = parser.parse_args(glued_values(argv))
    trust_policy(args)
    refuse_writes_into_artifacts(args)
    t0 = time.perf_counter()
    code = int(args.func(args) or 0)
    record.append({"command": line, "exit": code, "seconds": round(time.perf_counter() - t0, 1)})
    return code


def _budget(args: argparse.Namespace) -> dict[str, int]:
    from tickformer import validation

    b = dict(BUDGETS["quick" if args.quick else "full"])
    for name in ("draws", "ticks", "rounds", "steps"):
        value = getattr(args, name)
        if value is not None:
            if name == "rounds":
                validation.integer(value, "--rounds", min_value=0, max_value=20, hint="e.g. --rounds 4")
            else:
                validation.positive_int(value, f"--{name}")
            b[name] = value
    return b


def run(args: argparse.Namespace) -> int:
    from tickformer.errors import ConfigError

    if args.plant.startswith("gym:"):
        return _gym_chain(args)
    if args.plant not in PLANTS:
        raise ConfigError(f"unknown plant {args.plant!r}; choose one of {', '.join(PLANTS)}")
    if args.target is not None or args.weights is not None:
        raise ConfigError("--target and --weights are for a gym:ID plant; remove them for cartpole")
    b = _budget(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parser = _parser()
    steps: list[dict[str, Any]] = []
    seed = str(args.seed)
    t_start = time.perf_counter()

    from tickformer.control.cartpole import CANDIDATES  # the export's batch: one peek evaluates them all

    def train_export(log: str, name: str, extra: tuple[str, ...] = ()) -> None:
        _call(parser, ["train", "--data", log, *TRAIN, "--steps", str(b["steps"]), "--seed", seed, "--quiet",
                       *extra, "--out", str(out / f"ckpt{name}")], steps)  # fmt: skip
        _call(parser, ["export", str(out / f"ckpt{name}"), "--out", str(out / f"art{name}"), "--batch", str(CANDIDATES),
                       f"--domain={DOMAIN}"], steps)  # fmt: skip

    log = str(out / "log0.parquet")
    _call(parser, ["log", "cartpole", "--out", log, "--runs", str(b["runs"]), "--rows", str(b["rows"]),
                   "--seed", seed], steps)  # fmt: skip
    train_export(log, "0")
    for r in range(1, b["rounds"] + 1):
        prev, log = log, str(out / f"log{r}.parquet")
        _call(parser, ["log", "cartpole", "--policy", str(out / f"art{r - 1}"), "--extend", prev, "--out", log,
                       "--runs", str(b["relog_runs"]), "--rows", str(b["relog_rows"]),
                       "--seed", str(args.seed * 100 + r)], steps)  # fmt: skip
        train_export(log, str(r))
    final = str(out / f"art{b['rounds']}")
    train_export(log, "-memoryless", ("--window", "1"))
    verify_exit = _call(parser, ["verify", final, "--examples", str(b["examples"]), "--out", str(out / "verify")],
                        steps)  # fmt: skip
    certify_exit = _call(parser, ["certify", final, "--budget-us", f"{args.budget_us:g}", "--samples",
                                  str(b["samples"]), "--quiet", "--out", str(out / "certify")], steps)  # fmt: skip
    summary = {
        "plant": "cartpole (gymnasium InvertedPendulum-v5, MuJoCo)",
        "seed": args.seed,
        "quick": args.quick,
        "budget": b,
        "steps": steps,
        "artifact": final,
        "verify": _verify_summary(out / "verify", verify_exit),
        "certify": _certify_summary(out / "certify", certify_exit),
    }
    summary["held_out"] = {
        "model": _metrics(out / f"ckpt{b['rounds']}"),
        "memoryless": _metrics(out / "ckpt-memoryless"),
    }
    from tickformer.control.cartpole_loop import CONTROLLERS

    print(
        f"$ closed loops: {b['draws']} held-out draws x {b['ticks']} ticks, {len(CONTROLLERS)} controllers",
        flush=True,
    )
    summary["loop"] = _loops(out, final, b, args)
    summary["seconds"] = round(time.perf_counter() - t_start, 1)
    summary["utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    from tickformer.durable import atomic_write

    atomic_write(out / "plant_summary.json", (json.dumps(summary, indent=1) + "\n").encode())
    _print(summary)
    return 0


def _metrics(ckpt: Path) -> dict[str, Any]:
    held = json.loads((ckpt / "metrics.json").read_text())["held_out"]
    return {k: held[k] for k in ("rmse", "best_baseline", "target_met", "verdict") if k in held}


def _verify_summary(folder: Path, code: int) -> dict[str, Any]:
    path = folder / "verify.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    return {"exit": code, "summary": data.get("summary")}


def _certify_summary(folder: Path, code: int) -> dict[str, Any]:
    path = folder / "certificate.json"
    if not path.is_file():
        return {"exit": code}
    cert = json.loads(path.read_text())
    st = cert["stats"]
    return {
        "exit": code,
        "verdict": cert["verdict"],
        "p50_us": st["p50"] / 1e3,
        "p99_us": st["p99"] / 1e3,
        "max_us": st["max"] / 1e3,
    }


def _loops(out: Path, final: str, b: dict[str, int], args: argparse.Namespace) -> dict[str, Any]:
    from tickformer import runtime
    from tickformer.control import cartpole as C
    from tickformer.control import cartpole_loop as L
    from tickformer.control.cartpole_plots import plot_episode

    draws = L.held_out_draws(b["draws"], DRAW_SEED)
    res = L.evaluate({"model": final, "memoryless": str(out / "art-memoryless")}, draws, b["ticks"])
    plot_episode(out / "episode.png", res["episode"], res["dt_s"])
    design = C.NominalDesign.make()
    with runtime.load(final, backend="ort", threads=1) as s:
        plant = C.HiddenCartPole(draws[0], seed=0)
        period_ns = int(round(plant.dt * 1e9))
        wall = L.run_episode(L.make_controller("model", plant, design, s), plant, b["wall_ticks"],
                             wall_period_ns=period_ns)  # fmt: skip
        wall.pop("_sim")
        cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
        try:
            timed = L.tick_time(s, C.HiddenCartPole(draws[0], seed=0), b["timed_ticks"])
        finally:
            os.sched_setaffinity(0, before)
        timed["cpu"] = cpu
    res["wall_clock"] = {k: wall[k] for k in ("loop_ticks", "cost", "falls", "deadline_misses", "fallbacks",
                                             "skipped_periods", "step_us", "period_us")}  # fmt: skip
    res["tick_time"] = timed
    res["load_average"] = list(os.getloadavg())
    res["draw_seed"] = DRAW_SEED
    res["draws"] = [d.to_dict() for d in draws]
    return res


def _print(summary: dict[str, Any]) -> None:
    loop = summary["loop"]
    print(f"held-out draws {len(loop['draws'])} x {summary['budget']['ticks']} ticks (virtual time):")
    for kind, r in loop["controllers"].items():
        print(
            f"  {kind:12s} mean cost {r['mean_cost']:.4f} (median {r['median_cost']:.4f}); falls {r['falls']} "
            f"({r['draws_with_falls']} draws); saturations {r['saturations']}; misses {r['deadline_misses']}; "
            f"fallbacks {r['fallbacks']}"
        )
    v = loop["verdict"]
    parts = [f"{k} {'met' if x['met'] else 'NOT met'} (x{x['ratio']:.2f})" for k, x in v.items()]
    print("targets: " + "; ".join(parts))
    w, t = loop["wall_clock"], loop["tick_time"]
    print(
        f"wall clock at {w['period_us'] / 1e3:.0f} ms: {w['loop_ticks']} ticks, misses {w['deadline_misses']}, "
        f"fallbacks {w['fallbacks']}; controller tick on CPU {t['cpu']}: p50 {t['p50_us']:.0f} us, "
        f"p99 {t['p99_us']:.0f} us, max {t['max_us']:.0f} us (period {t['period_us']:.0f} us)"
    )
    c = summary["certify"]
    if "verdict" in c:
        print(f"certify: {c['verdict']} (p50 {c['p50_us']:.1f} us, max {c['max_us']:.1f} us)")
    print(f"wrote {summary['artifact']} and plant_summary.json in {summary['seconds']:.0f} s")


GYM_BUDGETS = {
    "full": {"runs": 40, "rows": 1000, "steps": 2000, "draws": 5, "ticks": 1000},
    "quick": {"runs": 6, "rows": 300, "steps": 200, "draws": 2, "ticks": 200},
}


def _floats(text: str | None, name: str, n: int, default: float) -> list[float]:
    import math

    from tickformer.errors import ConfigError

    if text is None:
        return [default] * n
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise ConfigError(f"{name} {text!r}: give {n} comma-separated numbers, one per observation") from None
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{name} {text!r}: give {n} finite comma-separated numbers, one per observation")
    return values


def _gym_chain(args: argparse.Namespace) -> int:
    """log, train, export, the closed loops of the model and the hold baseline (module docstring)."""
    from tickformer import runtime
    from tickformer.control import gym_plant as G
    from tickformer.durable import atomic_write
    from tickformer.errors import ConfigError

    if args.rounds is not None:
        raise ConfigError("--rounds is for the cartpole plant; remove it for a gym:ID plant")
    env = G.make_env(args.plant)
    try:  # the env is closed on every way out (a refused flag, a failed stage)
        low, high, n_obs = G.spaces(env)
        if low.size != 1:
            raise ConfigError(
                f"{args.plant}: the action space has {low.size} dimensions; the learned controller drives one: "
                "give an env of one action (wrap yours, holding the others)"
            )
        target = _floats(args.target, "--target", n_obs, 0.0)
        weights = _floats(args.weights, "--weights", n_obs, 1.0)
        b = dict(GYM_BUDGETS["quick" if args.quick else "full"])
        for name in ("draws", "ticks", "steps"):
            if getattr(args, name) is not None:
                from tickformer import validation

                validation.positive_int(getattr(args, name), f"--{name}")
                b[name] = getattr(args, name)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        parser, steps, seed = _parser(), [], str(args.seed)
        outputs = ",".join(f"{G.OBS}{i}" for i in range(n_obs))
        log, ckpt, art = str(out / "log.parquet"), str(out / "ckpt"), str(out / "art")
        t0 = time.perf_counter()
        _call(parser, ["log", args.plant, "--out", log, "--runs", str(b["runs"]), "--rows", str(b["rows"]),
                       "--seed", seed], steps)  # fmt: skip
        _call(parser, ["train", "--data", log, "--inputs", f"{G.ACT}0", "--outputs", outputs, "--episode", "run",
                       "--time", "time", "--horizon", "2", "--steps", str(b["steps"]), "--seed", seed, "--quiet",
                       "--out", ckpt], steps)  # fmt: skip
        _call(parser, ["export", ckpt, "--out", art, "--batch", str(G.CANDIDATES)], steps)
        print(
            f"$ closed loops: {b['draws']} episodes x {b['ticks']} ticks, the model and the hold baseline",
            flush=True,
        )
        loops: dict[str, list[dict[str, Any]]] = {"model": [], "hold": []}
        with runtime.load(art, backend="ort", threads=1) as s:
            _, idx = G.model_columns(G.model_signals(s))
            cost = G.QuadraticCost([target[i] for i in idx], [weights[i] for i in idx])
            for d in range(b["draws"]):
                ctl = G.GymMPC(s, float(low[0]), float(high[0]), cost)
                loops["model"].append(G.run_loop(env, ctl, b["ticks"], out_idx=idx, seed=d))
                loops["hold"].append(G.run_loop(env, G.HoldAction(), b["ticks"], out_idx=idx, seed=d))
    finally:
        env.close()
    summary = {
        "plant": args.plant,
        "seed": args.seed,
        "quick": args.quick,
        "budget": b,
        "target": target,
        "weights": weights,
        "steps": steps,
        "artifact": art,
        "held_out": _metrics(Path(ckpt)),
        "loop": {
            k: {
                "mean_reward": sum(r["reward"] for r in rows) / sum(r["ticks"] for r in rows),
                "episodes_ended": sum(r["episodes_ended"] for r in rows),
                "deadline_misses": sum(r["deadline_misses"] for r in rows),
                "fallbacks": sum(r["fallbacks"] for r in rows),
                "ticks": sum(r["loop_ticks"] for r in rows),
                "per_episode_reward": [round(r["reward"], 4) for r in rows],
            }
            for k, rows in loops.items()
        },
        "seconds": round(time.perf_counter() - t0, 1),
    }
    atomic_write(out / "plant_summary.json", (json.dumps(summary, indent=1) + "\n").encode())
    for k, r in summary["loop"].items():
        print(f"  {k:6s} mean reward per tick {r['mean_reward']:.4f}; episodes ended {r['episodes_ended']}; "
              f"misses {r['deadline_misses']}; fallbacks {r['fallbacks']}")  # fmt: skip
    print(f"wrote {art} and {out / 'plant_summary.json'} in {summary['seconds']:.0f} s")
    return 0
