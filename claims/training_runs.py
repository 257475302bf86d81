"""The training results of docs/training.md, measured: `tickformer train` per task and seed (minutes).

    python claims/training_runs.py --out claims/results/training.json [--runs reverse:0,pendulum:0]

Runs `tickformer train --task TASK --seed SEED --quiet --out TMP` (the task's defaults: 2000 steps,
weights averaged) one run at a time, with one BLAS thread (OPENBLAS_NUM_THREADS=1,
OMP_NUM_THREADS=1), and records each run's metrics.json (held-out metrics, final loss, training
wall and CPU seconds) under runs["TASK:SEED"], with the commit, the load average before the run,
the CPU model and BLAS build (training outcomes follow the BLAS kernels: docs/training.md) and the
date. The file is rewritten after every run, and runs already in it that are not named
again are kept (each with its own utc), so a long series can be measured in parts. About 70 s of
CPU per reverse run and 160 s per pendulum run on the 2-core development VM.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUNS = "reverse:0,reverse:1,reverse:2,pendulum:0,pendulum:1,pendulum:2"


def _utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def _machine() -> dict:
    """The CPU model and the BLAS library numpy uses (its kernels decide the last bits)."""
    import numpy  # noqa: F401  (loads the BLAS library threadpoolctl then reports)
    from threadpoolctl import threadpool_info

    names = [ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")]
    blas = [
        f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    return {"cpu_model": names[0] if names else "unknown", "cpus": os.cpu_count(), "blas": blas}


def run_one(task: str, seed: int) -> dict:
    tick = str(Path(sys.executable).with_name("tickformer"))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{task}-{seed}"
        cmd = [tick, "train", "--task", task, "--seed", str(seed), "--quiet", "--out", str(out)]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        metrics = json.loads((out / "metrics.json").read_text())
    return {
        "utc": _utc(),
        "commit": _commit(),
        "command": f"tickformer train --task {task} --seed {seed} --quiet --out DIR",
        "load_average_before": [round(x, 2) for x in load],
        "machine": _machine(),
        "process_wall_s": round(wall, 1),
        "stdout": proc.stdout.strip().splitlines()[-5:],
        "metrics": metrics,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", default=DEFAULT_RUNS, help=f"TASK:SEED,... (default {DEFAULT_RUNS})")
    args = parser.parse_args()
    import numpy as np

    data = json.loads(args.out.read_text()) if args.out.exists() else {"runs": {}}
    for spec in args.runs.split(","):
        task, seed = spec.split(":")
        print(f"+ tickformer train --task {task} --seed {seed}", flush=True)
        data["runs"][spec] = run_one(task, int(seed))
        data.update(
            utc=_utc(),
            command="python claims/training_runs.py --out claims/results/training.json [--runs TASK:SEED,...]",
            versions={"python": sys.version.split()[0], "numpy": np.__version__},
        )
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(args.out)
        m = data["runs"][spec]["metrics"]
        print(f"  {m['held_out']}  train {m['train_seconds']} s / {m['train_cpu_seconds']} s CPU", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
