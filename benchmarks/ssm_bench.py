"""Attention (full KV cache, and windowed when this tree has windows) vs the SSM block, side by side
in one run: held-out one-step RMSE, training time, ORT step p50/p99, state bytes per stream, and
step cost at stream lengths 1e2..1e6. Writes one JSON (docs/ssm.md reads its numbers from it).

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ssm_bench.py \\
        --task pendulum --steps 300 --out benchmarks/results/ssm_bench.json

Models (matched parameter counts): the `control` preset (decoder, d_model 64, 4 heads, 2 layers,
max_len 256) with full attention; the same with window W (if Config has `window`); the same with
block "ssm" (d_state 16) and d_ff chosen so its parameter count is the closest to attention's.
Every model trains with the same trainer, task, steps, batch and seed (model/train.py), is
exported (export/writer.py, the full export checks) and stepped on ORT (CPU, 1 thread, IOBinding)
through `tickformer.runtime.Session`.

Step cost at stream length n (one process, same machine, one model after another):
  * ssm and windowed: one stream of max(lengths) steps through Session.step; the cost at n is the
    median of the (up to) 1,000 step times just before step n (nothing is sized by n).
  * full attention: a static cache must hold n rows (max_len >= n), and every step reads all of
    them: its step graph rebuilt with max_len = n (export/graphs.py build_step, the trained
    weights; positions past 256 were never trained: a cost measurement, not an accuracy one), run
    by onnxruntime over zero caches bound once (IOBinding), median of `attn_steps` steps. Skipped
    where the cache would exceed --cache-cap-mb (reported as such, never extrapolated).
Times are perf_counter_ns; p50/p99 over --timing-steps steps after a warm-up. Not a pytest file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _ns_stats(ns: np.ndarray) -> dict[str, float]:
    us = ns.astype(np.float64) / 1e3
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)), "n": int(us.size)}


def configs(window: int, d_state: int) -> dict[str, Any]:
    from tickformer.model.config import Config, parameter_count, preset

    base = preset("control")
    out = {"attention": base}
    if "window" in {f.name for f in dataclasses.fields(Config)}:
        out["windowed"] = base.replace(window=window)
    target = parameter_count(base)
    ssm = min(
        (base.replace(block="ssm", d_state=d_state, d_ff=f) for f in range(base.d_ff, 2 * base.d_ff)),
        key=lambda c: abs(parameter_count(c) - target),
    )
    out["ssm"] = ssm
    return out


def state_bytes(config: Any, n: int) -> int:
    """Bytes of per-stream state that a step reads, at stream length n (float32)."""
    if config.block == "ssm":
        return 4 * config.n_layers * config.d_model * config.d_state
    rows = getattr(config, "window", None) or n
    return 4 * 2 * config.n_layers * config.d_model * rows


def time_session(session: Any, xs: np.ndarray, steps: int, warm: int = 200) -> np.ndarray:
    """Step times (ns) of `steps` steps after `warm` warm-up steps; resets where the cache is full."""
    times = np.empty(steps, dtype=np.int64)
    n = xs.shape[0]
    full = session.config.block != "ssm" and getattr(session.config, "window", None) is None
    for i in range(warm + steps):
        if full and session.position >= session.max_len:
            session.reset()
        x = xs[i % n]
        t0 = time.perf_counter_ns()
        session.step(x)
        t1 = time.perf_counter_ns()
        if i >= warm:
            times[i - warm] = t1 - t0
    return times


def stream_costs(session: Any, xs: np.ndarray, lengths: list[int]) -> dict[str, Any]:
    """One stream of max(lengths) steps; median of the up to 1,000 step times before each n."""
    total = max(lengths)
    times = np.empty(total, dtype=np.int64)
    session.reset()
    n = xs.shape[0]
    for i in range(total):
        x = xs[i % n]
        t0 = time.perf_counter_ns()
        session.step(x)
        times[i] = time.perf_counter_ns() - t0
    out = {}
    for length in lengths:
        window = times[max(0, length - 1000) : length]
        out[str(length)] = {"median_us": float(np.median(window) / 1e3), "steps_in_window": int(window.size)}
    out["position_after"] = int(session.position)
    return out


def attention_costs(
    params: dict, config: Any, lengths: list[int], cap_mb: float, steps: int
) -> dict[str, Any]:
    import onnxruntime as ort

    from tickformer.artifact import format as fmt
    from tickformer.export.graphs import build_step
    from tickformer.export.ort_session import session_options

    out: dict[str, Any] = {}
    for n in lengths:
        cfg = config.replace(max_len=n)
        mb = state_bytes(cfg, n) / 2**20
        if mb > cap_mb:
            out[str(n)] = {"skipped": f"KV cache of {mb:.0f} MiB exceeds the bench cap of {cap_mb:.0f} MiB"}
            continue
        graph = build_step(params, cfg, 1, 17)
        sess = ort.InferenceSession(graph.SerializeToString(), sess_options=session_options(1))
        sig = fmt.step_signature(cfg, 1)
        buffers = {name: np.zeros(shape, dtype=np.dtype(dt)) for name, (dt, shape) in sig["inputs"].items()}
        buffers["pos"][0] = n - 1  # the last position: a static cache costs the same at every position
        outs = {name: np.zeros(shape, dtype=np.dtype(dt)) for name, (dt, shape) in sig["outputs"].items()}
        io = sess.io_binding()
        for name, arr in buffers.items():
            io.bind_input(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        for name, arr in outs.items():
            io.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        options = ort.RunOptions()
        for _ in range(5):
            sess.run_with_iobinding(io, options)
        times = np.empty(steps, dtype=np.int64)
        for i in range(steps):
            t0 = time.perf_counter_ns()
            sess.run_with_iobinding(io, options)
            times[i] = time.perf_counter_ns() - t0
        out[str(n)] = {"median_us": float(np.median(times) / 1e3), "steps": steps, "cache_mib": round(mb, 3)}
        del sess, io, buffers, graph
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="pendulum")
    p.add_argument("--steps", type=int, default=300, help="training steps per model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--d-state", type=int, default=16)
    p.add_argument("--timing-steps", type=int, default=3000)
    p.add_argument("--lengths", default="100,1000,10000,100000,1000000")
    p.add_argument("--attn-steps", type=int, default=30)
    p.add_argument("--cache-cap-mb", type=float, default=128.0)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/ssm_bench.json"))
    args = p.parse_args(argv)

    from tickformer import runtime
    from tickformer.export.writer import export_params
    from tickformer.model.config import parameter_count
    from tickformer.model.tasks import get_task
    from tickformer.model.train import TrainSettings, train

    lengths = [int(float(v)) for v in args.lengths.split(",")]
    task = get_task(args.task)
    settings = TrainSettings.for_task(task, steps=args.steps, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    report: dict[str, Any] = {
        "command": "benchmarks/ssm_bench.py "
        + " ".join(argv if argv is not None else __import__("sys").argv[1:]),
        "task": args.task,
        "train_steps": args.steps,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor(),
            "node": platform.node(),
        },
        "models": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in configs(args.window, args.d_state).items():
            print(f"[{name}] train {args.steps} steps", flush=True)
            result = train(task, cfg, settings)
            held = result.metrics["held_out"]
            art = Path(tmp) / name
            t0 = time.perf_counter()
            export_params(cfg, result.params, art)
            export_s = time.perf_counter() - t0
            slide = {"on_full": "slide"} if getattr(cfg, "window", None) else {}  # a window streams on
            session = runtime.load(art, backend="ort", **slide)
            xs = rng.uniform(-2, 2, size=(997, 1, 1, cfg.d_in)).astype(np.float32)
            print(f"[{name}] time {args.timing_steps} steps", flush=True)
            step = _ns_stats(time_session(session, xs, args.timing_steps))
            entry: dict[str, Any] = {
                "config": cfg.to_dict(),
                "parameters": parameter_count(cfg),
                "held_out_rmse": held["model_rmse"],
                "baseline_rmse": held["baseline_rmse"],
                "train_seconds": result.metrics["train_seconds"],
                "train_seconds_per_step": result.metrics["train_seconds"] / args.steps,
                "export_seconds": round(export_s, 2),
                "ort_step": step,
                "state_bytes": {str(n): state_bytes(cfg, n) for n in lengths},
            }
            if name == "attention":
                print(f"[{name}] step cost at lengths {lengths}", flush=True)
                entry["step_cost"] = attention_costs(
                    result.params, cfg, lengths, args.cache_cap_mb, args.attn_steps
                )
            else:
                print(f"[{name}] one stream of {max(lengths)} steps", flush=True)
                entry["step_cost"] = stream_costs(session, xs, lengths)
            session.close()
            report["models"][name] = entry
            print(
                json.dumps(
                    {k: entry[k] for k in ("parameters", "held_out_rmse", "train_seconds", "ort_step")}
                )
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
