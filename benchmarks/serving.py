"""Serving many streams from Triton (docs/serving.md): step latency of one stream, and throughput
at 64, 256 and 1,024 streams per-stream and tick-batched, beside the in-process batched step of
a runtime Session on the same machine (the same model, batch N), with every served output
checked against that Session.

    python benchmarks/serving.py [--out benchmarks/results/serving.json] [--ticks 30] [--latency-steps 2000]

Needs the server venv (make .venv-serve/.installed). One tritonserver (Python backend, the
bundled binary) on 127.0.0.1 serves the `control-hidden` preset's shapes (windowed, W = 32,
d_model 32, 2 layers; random weights: speed does not depend on them) with 1,024 slots; the
client (tritonclient gRPC, asyncio) runs in this process. Client and server share the machine's
cores, as they would on one host; minutes on the 2-core machine.

Per-stream: every tick sends one request per stream, all in flight at once. Tick-batched: one
request per tick carries every stream's row. Throughput = streams / the median tick's wall
time (the ticks after two warm-up ticks). In-process: Session.step on the batch-N artifact (one
call steps all N streams), ORT and numpy backends, 1 thread: streams / the median of 200 calls
after 20 warm-up calls. Medians on both sides: the machine is shared, and a mean would carry
other processes' bursts into one side only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "serving.json"
PRESET, SEED, SIZES, TARGET = "control-hidden", 0, (64, 256, 1024), 0.5


def percentiles(seconds: list[float]) -> dict:
    us = np.array(seconds) * 1e6
    return {
        "n": len(us),
        "p50_us": round(float(np.percentile(us, 50)), 1),
        "p99_us": round(float(np.percentile(us, 99)), 1),
        "max_us": round(float(us.max()), 1),
    }


def in_process(art: Path, n: int, calls: int = 200) -> dict:
    from tickformer import runtime

    out = {}
    x = np.random.default_rng(0).uniform(-1, 1, (n, 1, 4)).astype(np.float32)
    for backend in ("ort", "numpy"):
        session = runtime.load(art, backend=backend)
        for _ in range(20):
            session.step(x)
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            session.step(x)
            times.append(time.perf_counter() - t0)
        dt = float(np.median(times))
        out[backend] = {"step_p50_ms": round(dt * 1e3, 3), "steps_per_s": round(n / dt)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--latency-steps", type=int, default=2000)
    args = parser.parse_args(argv)

    from tickformer.artifact.reader import open_artifact
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset
    from tickformer.serve.client import StreamClient
    from tickformer.serve.load import drive, reference, within
    from tickformer.serve.repository import ServeConfig, write_repository
    from tickformer.serve.server import Server, free_port

    cfg = preset(PRESET)
    params = init_params(cfg, SEED)
    tmp = Path(tempfile.mkdtemp(prefix="serving-bench-"))
    export_params(cfg, params, tmp / "art", batch=1)
    tolerance = open_artifact(tmp / "art").tolerance
    serve = ServeConfig(slots=max(SIZES), idle_s=60.0, when_full="refuse")
    write_repository(tmp / "art", tmp / "repo", serve)
    result: dict = {
        "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python benchmarks/serving.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "model": {"preset": PRESET, "window": cfg.window, "d_model": cfg.d_model, "n_layers": cfg.n_layers},
        "server": {"slots": serve.slots, "form": "python", "max_queue_delay_us": serve.max_queue_delay_us},
        "ticks": args.ticks,
        "target_tick_batched_over_in_process": TARGET,
        "sizes": {},
    }
    rng = np.random.default_rng(1)
    with Server(tmp / "repo", grpc_port=free_port()) as server:
        with StreamClient(server.url) as client:  # one stream: the round trip of one step
            client.open(1)
            x = rng.uniform(-1, 1, (args.latency_steps + 50, cfg.d_in)).astype(np.float32)
            times = []
            for i in range(len(x)):
                t0 = time.perf_counter()
                client.step(1, x[i])
                times.append(time.perf_counter() - t0)
            client.close(1)
        result["one_stream"] = percentiles(times[50:])
        equal = total = 0
        for n in SIZES:
            export_params(cfg, params, tmp / f"art{n}", batch=n)
            xs = rng.uniform(-1, 1, (n, args.ticks + 2, cfg.d_in)).astype(np.float32)
            want = reference(tmp / f"art{n}", xs, backend="ort")
            row: dict = {"in_process": in_process(tmp / f"art{n}", n)}
            for mode, grouped in (("per_stream", False), ("tick_batched", True)):
                out, ticks = asyncio.run(
                    drive(server.url, xs, first_id=10_000 * n + grouped, grouped=grouped)
                )
                ok = within(out, want, tolerance)
                equal, total = equal + int(ok.sum()), total + n
                tick = float(np.median(ticks[2:]))
                row[mode] = {
                    "tick_p50_ms": round(tick * 1e3, 3),
                    "steps_per_s": round(n / tick),
                    "streams_equal": int(ok.sum()),
                }
            best = max(row["in_process"]["ort"]["steps_per_s"], row["in_process"]["numpy"]["steps_per_s"])
            row["tick_batched_over_in_process"] = round(row["tick_batched"]["steps_per_s"] / best, 3)
            result["sizes"][str(n)] = row
            print(f"{n} streams: {json.dumps(row)}", flush=True)
    result["streams_equal"], result["streams_compared"] = equal, total
    result["target_met_at"] = [
        int(n) for n, r in result["sizes"].items() if r["tick_batched_over_in_process"] >= TARGET
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if equal == total else 1


if __name__ == "__main__":
    sys.exit(main())
