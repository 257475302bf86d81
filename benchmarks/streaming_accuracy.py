"""Accuracy cost of the sliding window on `pendulum`: the same budget, seed and preset with and
without --window, held-out one-step RMSE of each (docs/streaming.md).

    python benchmarks/streaming_accuracy.py [--steps 300] [--window 32] [--seed 0] [--reuse]

runs `tickformer train --task pendulum --steps S --seed K [--window W] --out DIR` twice (one at a
time, OPENBLAS_NUM_THREADS=1) into /tmp/pend-w{W}-s{S} and /tmp/pend-full-s{S} (--reuse: read the
checkpoints' metrics.json if they exist) and writes claims/results/streaming_accuracy.json.
Not a test; minutes of CPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "claims" / "results" / "streaming_accuracy.json"


def train(out: Path, steps: int, seed: int, window: int | None, reuse: bool) -> dict:
    metrics = out / "metrics.json"
    cmd = ["tickformer", "train", "--task", "pendulum", "--steps", str(steps), "--seed", str(seed)]
    cmd += [] if window is None else ["--window", str(window)]
    cmd += ["--out", str(out), "--quiet"]
    if not (reuse and metrics.is_file()):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        exe = Path(sys.executable).with_name("tickformer")
        subprocess.run([str(exe), *cmd[1:]], check=True, env=env)
    data = json.loads(metrics.read_text())
    held = data["held_out"]
    return {
        "command": " ".join(cmd),
        "window": window,
        "model_rmse": held["model_rmse"],
        "baseline_rmse": held["baseline_rmse"],
        "ratio": held["ratio"],
        "final_loss": data["final_loss_mean_last_50"],
        "train_seconds": data["train_seconds"],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reuse", action="store_true")
    a = p.parse_args()
    windowed = train(Path(f"/tmp/pend-w{a.window}-s{a.steps}"), a.steps, a.seed, a.window, a.reuse)
    full = train(Path(f"/tmp/pend-full-s{a.steps}"), a.steps, a.seed, None, a.reuse)
    result = {
        "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "steps": a.steps,
        "seed": a.seed,
        "window": a.window,
        "windowed": windowed,
        "unwindowed": full,
        "rmse_ratio_windowed_over_unwindowed": windowed["model_rmse"] / full["model_rmse"],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
