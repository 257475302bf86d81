"""Your plant, run for the numbers of docs/your_plant.md: the whole chain on MuJoCo's cart-pole
(`tickformer plant cartpole`: log, train --data, relog under the learned controller, export,
verify, certify, closed loops) once per seed, then the table over the held-out draws and seeds.

    python benchmarks/your_plant.py [--out benchmarks/results/your_plant.json] [--seeds 0,1]
        [--figure docs/figures/your_plant_episode.png] [--keep DIR] [--quick] [--render DOC]
    python benchmarks/your_plant.py --from benchmarks/results/your_plant.json --render docs/your_plant.md

Each seed runs the whole chain (its logs, training, relogging and training seeds are that seed);
the held-out draws, reference and measurement noise are the same for every controller and seed
(tickformer.commands.plant DRAW_SEED). The JSON keeps each seed's summary (the commands, verify,
certify, every controller's per-draw costs, the wall-clock run, the tick time on one core) and the
table: per controller, the mean cost over the draws of each seed and over all, falls, saturations,
deadline misses, fallbacks. The figure is seed 0's first held-out draw. --render DOC rewrites the
block between `<!-- your_plant: results -->` and `<!-- /your_plant -->` in DOC from the JSON (the
documented numbers are rendered, never typed); --from JSON renders an earlier run without running.
`cells(record)` gives every number of that block as (name, value, text) in its order and
`figures(record)` the prose's figures (the low-gear draws, ratios to the oracle, falls): the claims
check of docs/your_plant.md reads both (claims/computed.py your_plant_cells, your_plant_figure). Run it alone on the
machine (it trains twelve models): about 25 minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "your_plant.json"
FIGURE = ROOT / "docs" / "figures" / "your_plant_episode.png"


def table(seeds: dict[str, dict]) -> dict:
    """Per controller: the mean cost of each seed, their mean, and the counts summed over seeds."""
    kinds = list(next(iter(seeds.values()))["loop"]["controllers"])
    out = {}
    for k in kinds:
        rows = [s["loop"]["controllers"][k] for s in seeds.values()]
        out[k] = {
            "mean_cost_per_seed": [r["mean_cost"] for r in rows],
            "mean_cost": float(np.mean([r["mean_cost"] for r in rows])),
            "median_cost": float(np.median([c for r in rows for c in r["per_draw_cost"]])),
            "falls": sum(r["falls"] for r in rows),
            "draws_with_falls": sum(r["draws_with_falls"] for r in rows),
            "saturations": sum(r["saturations"] for r in rows),
            "deadline_misses": sum(r["deadline_misses"] for r in rows),
            "fallbacks": sum(r["fallbacks"] for r in rows),
            "ticks": sum(r["ticks"] for r in rows),
        }
    model = out["model"]["mean_cost"]
    ratios = {k: model / out[k]["mean_cost"] for k in kinds if k != "model"}
    return {"controllers": out, "model_over": ratios}


BEGIN, END = "<!-- your_plant: results -->", "<!-- /your_plant -->"
LABELS = {
    "lqg": "LQG (nominal LQR + Kalman filter)",
    "nominal_mpc": "MPC, MuJoCo with nominal physics",
    "oracle_mpc": "MPC, MuJoCo with true physics and state (oracle)",
    "memoryless": "memoryless model (`--window 1`)",
    "model_nominal_filter": "windowed model, nominal Kalman filter (the controller before the gear bank)",
    "model": "windowed model (`--window 32`, the default) with the gear bank",
}
Cell = tuple  # (name, value, text): one number of the rendered block


def _rendered(record: dict) -> tuple[str, list[Cell]]:
    """The results block and, in its order, every number in it as (name, value, text): the text
    is what the block states, the value what it is rendered from (claims/check.py matches them)."""
    out: list[Cell] = []

    def c(name: str, value, fmt: str = "{}") -> str:
        text = fmt.format(value)
        out.append((name, value, text))
        return text

    t = record["table"]
    seeds = list(record["seeds"])
    first = record["seeds"][seeds[0]]
    utc = record["utc"].removesuffix("Z")
    lines = [
        f"`{record['command']}` ({c('utc', utc)}Z, {c('minutes', record['seconds'] / 60, '{:.0f}')} min): "
        f"training seeds {', '.join(c(f'seed {s}', int(s)) for s in seeds)}; "
        f"{c('draws', len(first['loop']['draws']))} held-out draws x {c('ticks', first['budget']['ticks'])} "
        "ticks per controller and seed (virtual time), the same draws, reference and noise for every controller. "
        "Counts are summed over the seeds (the physics controllers do not depend on the training seed: their "
        "runs repeat per seed); the median is over every draw of every seed.",
        "",
        "| controller | mean cost per seed | mean cost | median | falls (draws with falls) | saturations "
        "| deadline misses | fallbacks | windowed model / this |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, r in t["controllers"].items():  # each cell made in the order the row states it
        row = [
            LABELS.get(kind, kind),
            ", ".join(
                c(f"{kind} mean cost seed {s}", v, "{:.4f}") for s, v in zip(seeds, r["mean_cost_per_seed"])
            ),
            c(f"{kind} mean cost", r["mean_cost"], "{:.4f}"),
            c(f"{kind} median", r["median_cost"], "{:.4f}"),
        ]
        row.append(
            f"{c(f'{kind} falls', r['falls'])} ({c(f'{kind} draws with falls', r['draws_with_falls'])})"
        )
        row += [
            c(f"{kind} {q.replace('_', ' ')}", r[q]) for q in ("saturations", "deadline_misses", "fallbacks")
        ]
        row.append("" if kind == "model" else c(f"{kind} ratio", t["model_over"][kind], "{:.2f}"))
        lines.append("| " + " | ".join(row) + " |")
    over = t["model_over"]
    target = first["loop"]["verdict"]["within_oracle"]["target"]

    def verdict(met: bool, kind: str) -> str:
        return ("**met**" if met else "**not met**") + f" ({c(f'target {kind}', over[kind], '{:.2f}')}x)"

    lines += [
        "",
        "Targets (mean cost over draws and seeds): the windowed model beats LQG "
        + verdict(over["lqg"] < 1, "lqg")
        + "; beats nominal MPC "
        + verdict(over["nominal_mpc"] < 1, "nominal_mpc")
        + "; beats the memoryless model "
        + verdict(over["memoryless"] < 1, "memoryless")
        + f"; within {c('oracle target', target, '{:g}')}x of the oracle "
        + verdict(over["oracle_mpc"] <= target, "oracle_mpc")
        + ".",
        "",
        "| seed | controller tick, one core: p50 / p99 / max [us] | control period [us] | wall-clock run "
        "at the period: ticks, misses, fallbacks | certify (batch-17 step): verdict, p50 / max [us] | verify |",
        "|---|---|---|---|---|---|",
    ]
    for seed, s in record["seeds"].items():  # each cell made in the order the row states it
        tt, w, cert = s["loop"]["tick_time"], s["loop"]["wall_clock"], s["certify"]
        row = [c(f"seed {seed}", int(seed))]
        row.append(
            " / ".join(c(f"seed {seed} tick {q}", tt[f"{q}_us"], "{:.0f}") for q in ("p50", "p99", "max"))
        )
        row.append(c(f"seed {seed} period", tt["period_us"], "{:.0f}"))
        row.append(
            ", ".join(
                c(f"seed {seed} wall {q.replace('_', ' ')}", w[q])
                for q in ("loop_ticks", "deadline_misses", "fallbacks")
            )
        )
        if "verdict" in cert:
            p50 = c(f"seed {seed} certify p50", cert["p50_us"], "{:.0f}")
            row.append(
                f"{cert['verdict']}, {p50} / {c(f'seed {seed} certify max', cert['max_us'], '{:.0f}')}"
            )
        else:
            row.append(f"exit {c(f'seed {seed} certify exit', cert['exit'])}")
        ver = s["verify"]["exit"]
        row.append("passed" if ver == 0 else f"exit {c(f'seed {seed} verify exit', ver)}")
        lines.append("| " + " | ".join(row) + " |")
    w = record.get("wall_clock_long")
    if w is not None:
        seed = next((k for k, v in record["seeds"].items() if v["artifact"] == w["artifact"]), None)
        st = w["step_us"]

        def whose() -> str:  # called where the text states it: the cells stay in the text's order
            return f"seed {c('wall long seed', int(seed))}'s artifact" if seed is not None else "the artifact"

        def virtual() -> str:  # the same artifact, draws and ticks in the chain's virtual-time run
            same = seed is not None and w["ticks_per_draw"] == record["seeds"][seed]["budget"]["ticks"]
            if not same or len(record["seeds"][seed]["loop"]["draws"]) < w["draws"]:
                return ""
            model = record["seeds"][seed]["loop"]["controllers"]["model"]
            cost = float(np.mean(model["per_draw_cost"][: w["draws"]]))
            return f" (in virtual time, the same artifact, draws and ticks: {c('wall long virtual', cost, '{:.4f}')})"

        def step() -> str:
            return " / ".join(
                c(f"wall long step {q}", st[q], "{:.0f}") for q in ("p50", "p99", "p99.9", "max")
            )

        lines += [
            "",
            f"Wall clock (`{w['command']}`, {c('wall long utc', w['utc'].removesuffix('Z'))}Z): "
            f"{c('wall long ticks', w['loop_ticks'], '{:,}')} ticks ({c('wall long draws', w['draws'])} held-out "
            f"draws x {c('wall long ticks per draw', w['ticks_per_draw'])}) of the windowed model on {whose()} at the "
            f"{c('wall long period', w['period_us'] / 1e3, '{:.0f}')} ms control period: "
            f"{c('wall long misses', w['deadline_misses'])} deadline misses, "
            f"{c('wall long fallbacks', w['fallbacks'])} fallbacks, "
            f"{c('wall long skipped', w['skipped_periods'])} skipped periods; the step (one peek of the candidates, "
            f"the gear bank, the costs) p50 / p99 / p99.9 / max {step()} us; mean cost "
            f"{c('wall long cost', w['mean_cost'], '{:.4f}')} and {c('wall long falls', w['falls'])} falls on these "
            f"draws{virtual()} (load average {c('wall long load', w['load_average_before'][0], '{:.1f}')} before, "
            f"{c('wall long load after', w['load_average_after'][0], '{:.1f}')} after).",
        ]
    return "\n".join(lines), out


def render(record: dict) -> str:
    """The results block of docs/your_plant.md from a record of this script."""
    return _rendered(record)[0]


def cells(record: dict) -> list[Cell]:
    """(name, value, text) of every number `render` puts in the block, in its order
    (claims/computed.py your_plant_cells: the claims span around the block states these)."""
    return _rendered(record)[1]


def figures(record: dict) -> dict:
    """The figures docs/your_plant.md's prose states about the held-out draws, from the record:
    the low-gear draws (gear in the held-out band just below the nominal, control.cartpole RANGES
    and BANDS) and, per seed, the model's and the oracle's mean cost on them and on the others
    (the model with the gear bank: plain keys; with the nominal filter: keys prefixed nf_), the
    nominal controllers' and the memoryless model's falls. Keys are dotted ("ratio_low.0")."""
    from tickformer.control.cartpole import BANDS, NOMINAL, RANGES

    seeds = list(record["seeds"])
    draws = record["seeds"][seeds[0]]["loop"]["draws"]
    if any(record["seeds"][s]["loop"]["draws"] != draws for s in seeds):
        raise ValueError("the seeds' held-out draws differ: their runs are not comparable")
    lo, hi = RANGES["gear"]
    width = (hi - lo) / BANDS
    band = (lo + width, lo + 2 * width)  # held-out band 1: the one just below the nominal gear
    gear = np.array([d["gear"] for d in draws])
    low = (gear >= band[0]) & (gear < band[1])  # [draws]
    out: dict = {
        "band_lo": band[0],
        "band_hi": band[1],
        "n_draws": len(draws),
        "n_low": int(low.sum()),
        "n_other": int((~low).sum()),
        "gear_min": float(gear[low].min()),
        "gear_max": float(gear[low].max()),
        "below_min_pct": 100 * (1 - float(gear[low].max()) / NOMINAL.gear),
        "below_max_pct": 100 * (1 - float(gear[low].min()) / NOMINAL.gear),
        "heaviest_mass": max(d["pole_mass"] for d in draws),
    }
    nominal = [
        f
        for s in seeds
        for k in ("lqg", "nominal_mpc")
        for f, is_low in zip(record["seeds"][s]["loop"]["controllers"][k]["per_draw_falls"], low)
        if is_low
    ]
    elsewhere = sum(
        f
        for s in seeds
        for k in ("lqg", "nominal_mpc")
        for f, is_low in zip(record["seeds"][s]["loop"]["controllers"][k]["per_draw_falls"], low)
        if not is_low
    )
    memoryless = [
        f for s in seeds for f in record["seeds"][s]["loop"]["controllers"]["memoryless"]["per_draw_falls"]
    ]
    out.update(
        {
            "nominal_falls_min": min(nominal),
            "nominal_falls_max": max(nominal),
            "nominal_falls_elsewhere": elsewhere,
            "memoryless_falls_min": min(memoryless),
            "memoryless_falls_max": max(memoryless),
            "memoryless_draws_without_falls": sum(f == 0 for f in memoryless),
        }
    )
    # per seed, for the model with the gear bank ("model": plain keys) and with the nominal filter
    # ("model_nominal_filter": keys prefixed nf_, the controller before the bank)
    for kind, pre in (("model", ""), ("model_nominal_filter", "nf_")):
        for s in seeds:
            ctl = record["seeds"][s]["loop"]["controllers"]
            model, oracle = np.array(ctl[kind]["per_draw_cost"]), np.array(ctl["oracle_mpc"]["per_draw_cost"])
            falls = np.array(ctl[kind]["per_draw_falls"])
            worst = int(np.argmax(falls))
            out.update(
                {
                    f"{pre}ratio.{s}": ctl[kind]["mean_cost"] / ctl["oracle_mpc"]["mean_cost"],
                    f"{pre}ratio_other.{s}": float(model[~low].mean() / oracle[~low].mean()),
                    f"{pre}ratio_low.{s}": float(model[low].mean() / oracle[low].mean()),
                    f"{pre}model_low.{s}": float(model[low].mean()),
                    f"{pre}oracle_low.{s}": float(oracle[low].mean()),
                    f"{pre}model_falls.{s}": int(falls.sum()),
                    f"{pre}model_falls_low.{s}": int(falls[low].sum()),
                    f"{pre}worst_draw.{s}": worst,
                    f"{pre}worst_draw_falls.{s}": int(falls[worst]),
                    f"{pre}worst_draw_mass.{s}": draws[worst]["pole_mass"],
                    f"{pre}worst_draw_gear.{s}": draws[worst]["gear"],
                }
            )
    return out


def wall_clock(artifact: Path, ticks: int, draws: int = 20) -> dict:
    """The learned controller on `artifact` on the wall clock at the plant's control period:
    `ticks` ticks in all, spread evenly over the first `draws` held-out draws (the chain's
    DRAW_SEED; each draw its own run_episode, the plant's noise seed its index), under
    ControlLoop with its deadline accounting. Returns the sums, the step times pooled over every
    tick, and the draws' cost and falls (to set beside the same draws' virtual-time runs)."""
    from tickformer import runtime
    from tickformer.commands.plant import DRAW_SEED
    from tickformer.control import cartpole as C
    from tickformer.control import cartpole_loop as L

    per = ticks // draws
    if per < 1 or per * draws != ticks:
        raise SystemExit(f"--wall-clock {ticks}: give a multiple of {draws} (the draws it is spread over)")
    params = L.held_out_draws(draws, DRAW_SEED)
    design = C.NominalDesign.make()
    rows, steps = [], []
    load_before = list(os.getloadavg())
    t0 = time.perf_counter()
    with runtime.load(str(artifact), backend="ort", threads=1) as s:
        for i, p in enumerate(params):
            plant = C.HiddenCartPole(p, seed=i)
            period_ns = int(round(plant.dt * 1e9))
            r = L.run_episode(
                L.make_controller("model", plant, design, s), plant, per, wall_period_ns=period_ns
            )
            r.pop("_sim")
            steps.append(r.pop("_step_us"))
            rows.append(r)
    step_us = np.concatenate(steps)  # [ticks]
    manifest = Path(artifact) / "manifest.json"
    return {
        "artifact": str(artifact),
        "manifest_sha256": hashlib.sha256(manifest.read_bytes()).hexdigest() if manifest.is_file() else None,
        "draws": draws,
        "ticks_per_draw": per,
        "loop_ticks": sum(r["loop_ticks"] for r in rows),
        "period_us": rows[0]["period_us"],
        "deadline_misses": sum(r["deadline_misses"] for r in rows),
        "fallbacks": sum(r["fallbacks"] for r in rows),
        "skipped_periods": sum(r["skipped_periods"] for r in rows),
        "faults": sum(r["faults"] for r in rows),
        "step_us": {
            "p50": float(np.percentile(step_us, 50)),
            "p99": float(np.percentile(step_us, 99)),
            "p99.9": float(np.percentile(step_us, 99.9)),
            "max": float(step_us.max()),
        },
        "mean_cost": float(np.mean([r["cost"] for r in rows])),
        "falls": sum(r["falls"] for r in rows),
        "per_draw_cost": [round(r["cost"], 6) for r in rows],
        "per_draw_falls": [int(r["falls"]) for r in rows],
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
        "seconds": round(time.perf_counter() - t0, 1),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def render_into(doc: Path, record: dict) -> None:
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: no {BEGIN} ... {END} block to render into")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{render(record)}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--figure", type=Path, default=FIGURE)
    ap.add_argument("--keep", type=Path, default=None, help="run the chains in DIR and keep them")
    ap.add_argument(
        "--quick", action="store_true", help="the chain's --quick budgets (a test of this script)"
    )
    ap.add_argument("--render", type=Path, default=None, help="rewrite the results block of this doc")
    ap.add_argument("--from", dest="source", type=Path, default=None, help="render this record, run nothing")
    ap.add_argument(
        "--wall-clock",
        type=int,
        default=None,
        metavar="N",
        help="only the long wall-clock run: N ticks of the learned controller on --artifact at the control "
        "period, over the 20 held-out draws, added to the record --from (default --out) as wall_clock_long",
    )
    ap.add_argument("--artifact", type=Path, default=None, help="with --wall-clock: the trained artifact")
    args = ap.parse_args(argv)
    if args.wall_clock is not None:
        if args.artifact is None:
            ap.error("--wall-clock needs --artifact ART (a chain's art{R}, e.g. --keep DIR's seed0/art4)")
        record = json.loads((args.source or args.out).read_text())
        record["wall_clock_long"] = wall_clock(args.artifact, args.wall_clock)
        record["wall_clock_long"]["command"] = "python benchmarks/your_plant.py " + shlex.join(
            sys.argv[1:] if argv is None else argv
        )
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        w = record["wall_clock_long"]
        print(
            f"wall clock: {w['loop_ticks']} ticks at {w['period_us'] / 1e3:.0f} ms, misses {w['deadline_misses']}, "
            f"fallbacks {w['fallbacks']}, step p50 {w['step_us']['p50']:.0f} us, max {w['step_us']['max']:.0f} us; "
            f"wrote {args.out}"
        )
        if args.render is not None:
            render_into(args.render, record)
        return 0
    if args.source is not None:
        if args.render is None:
            ap.error("--from needs --render DOC")
        render_into(args.render, json.loads(args.source.read_text()))
        print(f"rendered {args.source} into {args.render}")
        return 0
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from tickformer.cli import main as cli

    record: dict = {"seeds": {}}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        for seed in [int(s) for s in args.seeds.split(",")]:
            folder = base / f"seed{seed}"
            chain = ["plant", "cartpole", "--out", str(folder), "--seed", str(seed)] + (
                ["--quick"] if args.quick else []
            )
            code = cli(chain)
            if code:
                print(f"tickformer {' '.join(chain)} exited {code}", file=sys.stderr)
                return 1
            summary = json.loads((folder / "plant_summary.json").read_text())
            summary["command"] = "tickformer " + " ".join(chain)
            if record["seeds"]:
                summary["loop"].pop("episode", None)  # the figure is seed 0's; one episode kept
            else:
                args.figure.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / "episode.png", args.figure)
            record["seeds"][str(seed)] = summary
    record["table"] = table(record["seeds"])
    record["seconds"] = round(time.perf_counter() - t0, 1)
    record["utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record["command"] = "python benchmarks/your_plant.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out} and {args.figure}")
    if args.render is not None:
        render_into(args.render, record)
    for k, r in record["table"]["controllers"].items():
        print(
            f"  {k:12s} mean cost {r['mean_cost']:.4f} per seed {[round(c, 4) for c in r['mean_cost_per_seed']]} "
            f"falls {r['falls']} saturations {r['saturations']} misses {r['deadline_misses']} "
            f"fallbacks {r['fallbacks']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
