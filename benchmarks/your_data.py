"""The walk-through of docs/your_data.md, run for its numbers: log the two-tank plant, train on the
log with `--data`, export, verify, certify, generate the C step, and step one held-out run through
a Session (ONNX Runtime) and the C step in the data's units.

    python benchmarks/your_data.py [--out benchmarks/results/your_data.json] [--seeds 0,1]

Every command is the one the document shows, run through `tickformer.cli.main` in a temporary
folder; the JSON records each command, the held-out table of each training seed, the verdicts
and the stepping comparison. Minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "your_data.json"
LOG = ["log", "tanks", "--out", "tanks.csv", "--runs", "5", "--rows", "2000", "--seed", "0"]
TRAIN = [
    "train", "--data", "tanks.csv", "--inputs", "pump", "--outputs", "level1,level2",
    "--episode", "run", "--time", "time", "--horizon", "5", "--quiet",
]  # fmt: skip


def run(argv: list[str]) -> dict:
    from tickformer.cli import main

    t0 = time.perf_counter()
    code = main(argv)
    return {
        "command": "tickformer " + " ".join(argv),
        "exit": code,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seeds", default="0,1")
    args = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import tickformer.codegen  # noqa: F401  (the c backend builds through it)
    from tickformer import runtime
    from tickformer.model import forecast as F
    from tickformer.model.checkpoint import load_checkpoint
    from tickformer.model.series import TimeSeries

    record: dict = {"steps": []}
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            record["steps"].append(run(LOG))
            for seed in [int(s) for s in args.seeds.split(",")]:
                step = run([*TRAIN, "--seed", str(seed), "--out", f"ckpt{seed}"])
                step["held_out"] = json.loads(Path(f"ckpt{seed}/metrics.json").read_text())["held_out"]
                step["train_seconds"] = json.loads(Path(f"ckpt{seed}/metrics.json").read_text())[
                    "train_seconds"
                ]
                record["steps"].append(step)
                record.setdefault("seeds", {})[str(seed)] = step["held_out"]
            for argv in (
                ["export", "ckpt0", "--out", "art"],
                ["verify", "art", "--out", "verify"],
                ["certify", "art", "--budget-us", "1000", "--samples", "20000", "--out", "cert"],
                ["codegen", "art", "--out", "c"],
            ):
                record["steps"].append(run(argv))
            record["verify"] = json.loads(Path("verify/verify.json").read_text()).get("summary")
            cert = json.loads(Path("cert/certificate.json").read_text())
            record["certify"] = {
                "verdict": cert["verdict"],
                "p50_us": cert["stats"]["p50"] / 1e3,
                "p99_us": cert["stats"]["p99"] / 1e3,
                "max_us": cert["stats"]["max"] / 1e3,
            }
            ckpt = load_checkpoint("ckpt0")
            values = np.asarray(
                TimeSeries.from_file(
                    "tanks.csv", inputs=["pump"], outputs=["level1", "level2"], episode="run", time="time"
                ).values
            )
            a, _ = ckpt.meta["data"]["held_out_runs"][0]
            b = a + 200
            want = F.predict_run(ckpt.params, ckpt.config, values, (a, b))
            stepped = {}
            for backend in ("ort", "c"):
                with runtime.load("art", backend=backend) as s:
                    got = np.stack([s.step(values[t][None, None, :])[0, 0].copy() for t in range(a, b)])
                stepped[backend] = got
            record["stepping"] = {
                "rows": [a, b],
                "max_abs_ort_vs_model_cm": float(np.max(np.abs(stepped["ort"] - want))),
                "max_abs_c_vs_ort_cm": float(np.max(np.abs(stepped["c"] - stepped["ort"]))),
                "tick_150": {
                    "input": {
                        "pump [V]": float(values[a + 150, 0]),
                        "level2 [cm]": float(values[a + 150, 2]),
                    },
                    "ort_level2_in_5_ticks_cm": float(values[a + 150, 2] + stepped["ort"][150, 9]),
                    "c_level2_in_5_ticks_cm": float(values[a + 150, 2] + stepped["c"][150, 9]),
                    "measured_level2_5_ticks_later_cm": float(values[a + 155, 2]),
                },
            }
        finally:
            os.chdir(here)
    record["utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record["command"] = "python benchmarks/your_data.py"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if all(s["exit"] in (0, 1, 2) for s in record["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
