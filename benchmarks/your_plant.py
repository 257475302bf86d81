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
documented numbers are rendered, never typed); --from JSON renders an earlier run without running. Run it alone on the
machine (it trains twelve models): about 25 minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
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
    "memoryless": "memoryless model (--window 1)",
    "model": "windowed model (window 32)",
}


def render(record: dict) -> str:
    """The results block of docs/your_plant.md from a record of this script."""
    t = record["table"]
    seeds = list(record["seeds"])
    first = record["seeds"][seeds[0]]
    draws, ticks = len(first["loop"]["draws"]), first["budget"]["ticks"]
    lines = [
        f"`{record['command']}` ({record['utc']}, {record['seconds'] / 60:.0f} min): training seeds "
        f"{', '.join(seeds)}; {draws} held-out draws x {ticks} ticks per controller and seed (virtual time), "
        "the same draws, reference and noise for every controller. Counts are summed over the seeds (the "
        "physics controllers do not depend on the training seed: their runs repeat per seed); the median is "
        "over every draw of every seed.",
        "",
        "| controller | mean cost per seed | mean cost | median | falls (draws with falls) | saturations "
        "| deadline misses | fallbacks | windowed model / this |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, r in t["controllers"].items():
        ratio = "" if kind == "model" else f"{t['model_over'][kind]:.2f}"
        per_seed = ", ".join(f"{c:.4f}" for c in r["mean_cost_per_seed"])
        lines.append(
            f"| {LABELS.get(kind, kind)} | {per_seed} | {r['mean_cost']:.4f} | {r['median_cost']:.4f} | "
            f"{r['falls']} ({r['draws_with_falls']}) | {r['saturations']} | {r['deadline_misses']} | "
            f"{r['fallbacks']} | {ratio} |"
        )
    over = t["model_over"]
    lines += [
        "",
        "Targets (mean cost over draws and seeds): the windowed model beats LQG "
        + ("**met**" if over["lqg"] < 1 else "**not met**")
        + f" (x{over['lqg']:.2f}); beats nominal MPC "
        + ("**met**" if over["nominal_mpc"] < 1 else "**not met**")
        + f" (x{over['nominal_mpc']:.2f}); beats the memoryless model "
        + ("**met**" if over["memoryless"] < 1 else "**not met**")
        + f" (x{over['memoryless']:.2f}); within 1.5x of the oracle "
        + ("**met**" if over["oracle_mpc"] <= 1.5 else "**not met**")
        + f" (x{over['oracle_mpc']:.2f}).",
        "",
        "| seed | controller tick, one core: p50 / p99 / max [us] | control period [us] | wall-clock run "
        "at the period: ticks, misses, fallbacks | certify (batch-17 step): verdict, p50 / max [us] | verify |",
        "|---|---|---|---|---|---|",
    ]
    for seed, s in record["seeds"].items():
        tt, w, c = s["loop"]["tick_time"], s["loop"]["wall_clock"], s["certify"]
        cert = (
            f"{c['verdict']}, {c['p50_us']:.0f} / {c['max_us']:.0f}"
            if "verdict" in c
            else f"exit {c['exit']}"
        )
        ver = s["verify"]["exit"]
        lines.append(
            f"| {seed} | {tt['p50_us']:.0f} / {tt['p99_us']:.0f} / {tt['max_us']:.0f} | {tt['period_us']:.0f} | "
            f"{w['loop_ticks']}, {w['deadline_misses']}, {w['fallbacks']} | {cert} | "
            f"{'passed' if ver == 0 else f'exit {ver}'} |"
        )
    return "\n".join(lines)


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
    args = ap.parse_args(argv)
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
