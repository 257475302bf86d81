"""Your plant, run for the numbers of docs/your_plant.md: the whole chain on MuJoCo's cart-pole
(`tickformer plant cartpole`: log, train --data, relog under the learned controller, export,
verify, certify, closed loops) once per seed, then the table over the held-out draws and seeds.

    python benchmarks/your_plant.py [--out benchmarks/results/your_plant.json] [--seeds 0,1]
        [--figure docs/figures/your_plant_episode.png] [--keep DIR] [--quick]

Each seed runs the whole chain (its logs, training, relogging and training seeds are that seed);
the held-out draws, reference and measurement noise are the same for every controller and seed
(tickformer.commands.plant DRAW_SEED). The JSON keeps each seed's summary (the commands, verify,
certify, every controller's per-draw costs, the wall-clock run, the tick time on one core) and the
table: per controller, the mean cost over the draws of each seed and over all, falls, saturations,
deadline misses, fallbacks. The figure is seed 0's first held-out draw. Run it alone on the
machine (it trains twelve models): about 25 minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--figure", type=Path, default=FIGURE)
    ap.add_argument("--keep", type=Path, default=None, help="run the chains in DIR and keep them")
    ap.add_argument(
        "--quick", action="store_true", help="the chain's --quick budgets (a test of this script)"
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from tickformer.cli import main as cli

    record: dict = {"seeds": {}}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        for seed in [int(s) for s in args.seeds.split(",")]:
            folder = base / f"seed{seed}"
            argv = ["plant", "cartpole", "--out", str(folder), "--seed", str(seed)] + (
                ["--quick"] if args.quick else []
            )
            code = cli(argv)
            if code:
                print(f"tickformer {' '.join(argv)} exited {code}", file=sys.stderr)
                return 1
            summary = json.loads((folder / "plant_summary.json").read_text())
            summary["command"] = "tickformer " + " ".join(argv)
            if record["seeds"]:
                summary["loop"].pop("episode", None)  # the figure is seed 0's; one episode kept
            else:
                args.figure.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / "episode.png", args.figure)
            record["seeds"][str(seed)] = summary
    record["table"] = table(record["seeds"])
    record["seconds"] = round(time.perf_counter() - t0, 1)
    record["utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record["command"] = "python benchmarks/your_plant.py" + (" --quick" if args.quick else "")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out} and {args.figure}")
    for k, r in record["table"]["controllers"].items():
        print(
            f"  {k:12s} mean cost {r['mean_cost']:.4f} per seed {[round(c, 4) for c in r['mean_cost_per_seed']]} "
            f"falls {r['falls']} saturations {r['saturations']} misses {r['deadline_misses']} "
            f"fallbacks {r['fallbacks']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
