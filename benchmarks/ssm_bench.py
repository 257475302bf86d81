"""Attention (full KV cache, and windowed) vs the ssm block on the history task, side by side in one
run: held-out one-step RMSE, training time, ORT step p50/p99, state bytes per stream, and step cost
at stream lengths 1e2..1e6. Writes one JSON (docs/ssm.md's tables are rendered from it by
benchmarks/ssm_report.py and declared as claims, claims/claims.toml "ssm-bench").

    flock /tmp/tf-heavy.lock env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python \\
        benchmarks/ssm_bench.py --out benchmarks/results/ssm_bench.json

Models (matched parameter counts): the task's preset (`pendulum-hidden`: `control-hidden`, decoder,
d_model 32, 2 heads, 2 layers, max_len 64 = the training episode length, window 32) three ways:
full attention (window unset: a static cache of max_len rows, sinusoidal positions), windowed
attention (the preset's window W: a ring of W rows, relative-position biases), and the ssm block
(d_state 16) with d_ff chosen so its parameter count is the closest to full attention's.

Accuracy and training: every model trains with the same trainer, task, step budget (the task's,
1500), batch and seed (model/train.py `train_steps`), for each of --seeds; the seed fixes the data
too, so the three see the same episodes. Held-out one-step RMSE (rad, against the true angle) is
scored on the SAME positions for all three, t >= max(W - 1, delay) (where the windowed model has a
full window; the task's own evaluation scores a window-less model from t = 15), with the baselines
on those positions: linear AR over the last W (y, command) pairs, nominal physics (EKF), and the
memoryless twin (the attention network with window 1, trained with the same settings). Training
time: wall and CPU seconds of the optimisation (single-threaded BLAS; CPU seconds move less with
the machine's load).

Latency, like for like: every model exported (export/writer.py, full checks) and stepped on ORT
(CPU, 1 thread, IOBinding) through `tickformer.runtime` `Session.step` with contracts off and
flush-to-zero on in the timing thread (as ControlLoop and certify run it). ORT step p50/p99 at the
task's shapes: the three sessions stepped round-robin (one step each, in turn), so load from
other jobs falls on all three alike; full attention resets at max_len (outside the timed call).

Step cost at stream length n (the median step time around position n):
  * ssm and windowed: one stream of max(lengths) steps each, the two stepped alternately; the
    cost at n is the median of the (up to) 1,000 step times just before step n.
  * full attention: a static cache must hold n rows (max_len >= n) and every step reads all of
    them. For n <= --session-max-len an artifact exported with max_len = n (the trained weights;
    positions past 64 were never trained: a cost measurement, not an accuracy one) streams n steps
    through Session.step, and the cost is the median of the 1,000 before n, as above. Larger n
    cannot be exported: model.onnx holds a [max_len, max_len] causal mask constant (10 GB at
    1e5). There the artifact's step graph itself (export/graphs.py build_step, max_len = n) runs
    on ORT with IOBinding over zero caches at position n - 1 (a static cache does the same work at
    every position), --attn-steps steps; at n = --session-max-len both ways are timed,
    interleaved step for step (--overhead-steps pairs), so the Session's own share is measured
    next to it. Skipped where the KV cache would exceed --cache-cap-mb (reported as such, never
    extrapolated).
  Each attention measurement is followed at once by a block of 1,000 steps of an ssm session:
  the ratio of the two medians compares them under the load of that moment. (Pairing step for
  step does not work: the ssm step right after a full-attention step over a large cache runs on
  evicted CPU caches; the block's first step, kept as `ssm_first_after_us`, shows by how much.)
Times are perf_counter_ns. Not a pytest file; heavy: run it under the shared lock.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


def _ns_stats(ns: np.ndarray) -> dict[str, float]:
    us = ns.astype(np.float64) / 1e3
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99)), "n": int(us.size)}


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "per_seed": values,
        "mean": float(np.mean(values)),
        "min": float(min(values)),
        "max": float(max(values)),
    }


def configs(preset_name: str, d_state: int, window: int | None = None) -> dict[str, Any]:
    """{"attention", "windowed", "ssm"}: the preset with a full cache, with window W (the preset's
    unless given), and with the ssm block at the closest parameter count to full attention."""
    from tickformer.model.config import parameter_count, preset

    base = preset(preset_name)
    if preset_name == "control-hidden":
        # The bench's token is (y_t, c_t), d_in 2, as measured (claims/results: 17,283 parameters
        # for full attention); the preset's default token since carries the commands in flight too
        # (d_in 4, docs/control.md), which the three models would share. Pinned so a re-run measures
        # what docs/ssm.md states.
        base = base.replace(d_in=2)
    w = window if window is not None else base.window if base.window is not None else 32
    full = base.replace(window=None)
    target = parameter_count(full)
    ssm = min(
        (full.replace(block="ssm", d_state=d_state, d_ff=f) for f in range(1, 4 * full.d_ff)),
        key=lambda c: (abs(parameter_count(c) - target), c.d_ff),
    )
    return {"attention": full, "windowed": full.replace(window=w), "ssm": ssm}


def state_bytes(config: Any, n: int) -> int:
    """Bytes of per-stream state a step reads at stream length n (float32, one stream)."""
    if config.block == "ssm":
        return 4 * config.n_layers * config.d_model * config.d_state
    rows = config.window if config.window is not None else n
    return 4 * 2 * config.n_layers * config.d_model * rows  # K and V


def _timed(step: Callable[[np.ndarray], Any], x: np.ndarray) -> int:
    t0 = time.perf_counter_ns()
    step(x)
    return time.perf_counter_ns() - t0


def round_robin(
    sessions: dict[str, Any], xs: np.ndarray, steps: int, warm: int = 200
) -> dict[str, np.ndarray]:
    """Step times (ns) of every session, one step each in turn, `steps` rounds after `warm`;
    a session with a static cache is reset (untimed) when full."""
    times = {name: np.empty(steps, dtype=np.int64) for name in sessions}
    n = xs.shape[0]
    for i in range(warm + steps):
        x = xs[i % n]
        for name, s in sessions.items():
            if not s.sliding and s.config.block != "ssm" and s.position >= s.max_len:
                s.reset()
            t = _timed(s.step, x)
            if i >= warm:
                times[name][i - warm] = t
    return times


def _medians_before(times: np.ndarray, lengths: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in lengths:
        window = times[max(0, n - 1000) : n]
        out[str(n)] = {"median_us": float(np.median(window) / 1e3), "steps_in_window": int(window.size)}
    return out


def streams(sessions: dict[str, Any], xs: np.ndarray, lengths: list[int]) -> dict[str, dict[str, Any]]:
    """One stream of max(lengths) steps per session, stepped alternately from reset()."""
    total = max(lengths)
    times = {name: np.empty(total, dtype=np.int64) for name in sessions}
    for s in sessions.values():
        s.reset()
    n = xs.shape[0]
    for i in range(total):
        x = xs[i % n]
        for name, s in sessions.items():
            times[name][i] = _timed(s.step, x)
    out = {}
    for name, s in sessions.items():
        out[name] = _medians_before(times[name], lengths)
        out[name]["position_after"] = int(s.position)
        out[name]["method"] = "one stream through Session.step, median of the up to 1000 steps before n"
    return out


def _raw_step(params: dict, config: Any) -> tuple[Callable[[], None], float]:
    """The step graph at max_len = config.max_len on ORT with IOBinding over zero caches at the
    last position, run through the same C++ binding call as the Session's backend: (run, KV
    cache MiB)."""
    import onnxruntime as ort

    from tickformer.artifact import format as fmt
    from tickformer.export.graphs import build_step
    from tickformer.runtime.ort_session import session_options

    n = config.max_len
    graph = build_step(params, config, 1, 17)
    sess = ort.InferenceSession(
        graph.SerializeToString(), sess_options=session_options(1), providers=["CPUExecutionProvider"]
    )
    sig = fmt.step_signature(config, 1)
    buffers = {name: np.zeros(shape, dtype=np.dtype(dt)) for name, (dt, shape) in sig["inputs"].items()}
    buffers["pos"][0] = n - 1
    outs = {name: np.zeros(shape, dtype=np.dtype(dt)) for name, (dt, shape) in sig["outputs"].items()}
    io = sess.io_binding()
    for name, arr in buffers.items():
        io.bind_input(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
    for name, arr in outs.items():
        io.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
    options = ort.RunOptions()
    keep = (sess, io, buffers, outs, options)
    # The C++ binding itself, as the Session's ORT backend calls it (runtime/backends/ort.py
    # `_iobinding_runner`): onnxruntime 1.32's public run_with_iobinding adds ~30 us of Python
    # bookkeeping per call on this machine, which would be charged to the graph.
    native = getattr(getattr(sess, "_sess", None), "run_with_iobinding", None)
    native_io = getattr(io, "_iobinding", None)

    def run() -> None:
        if native is not None and native_io is not None:
            native(native_io, options)
        else:
            keep[0].run_with_iobinding(keep[1], keep[4])

    return run, state_bytes(config, n) / 2**20


def _ssm_reference(ref: Any, xs: np.ndarray, steps: int) -> dict[str, float]:
    """A block of `steps` ssm steps right after a full-attention measurement: its median (the
    reference under the load of that moment) and its first step (the caches the attention step
    evicted: what the next job on the core pays)."""
    times = np.array([_timed(ref.step, xs[i % xs.shape[0]]) for i in range(steps)], dtype=np.int64)
    return {"ssm_median_us": float(np.median(times) / 1e3), "ssm_first_after_us": float(times[0] / 1e3)}


def attention_costs(
    params: dict,
    config: Any,
    ssm_art: Path,
    xs: np.ndarray,
    lengths: list[int],
    *,
    session_max_len: int,
    attn_steps: int,
    overhead_steps: int,
    cap_mb: float,
    tmp: Path,
) -> dict[str, Any]:
    """Full attention's step cost at each n (module docstring), each followed by a block of 1,000
    ssm steps (the reference timed right after it)."""
    from tickformer import runtime
    from tickformer.export.writer import export_params

    out: dict[str, Any] = {}
    ref = runtime.load(ssm_art, backend="ort")
    for n in lengths:
        cfg = config.replace(max_len=n)
        mb = state_bytes(cfg, n) / 2**20
        if mb > cap_mb:
            out[str(n)] = {"skipped": f"KV cache of {mb:.0f} MiB exceeds the bench cap of {cap_mb:.0f} MiB"}
            continue
        print(f"[attention] step cost at n = {n:,} ({mb:.1f} MiB of KV cache)", flush=True)
        entry: dict[str, Any] = {"cache_mib": round(mb, 3)}
        session = None
        if n <= session_max_len:
            art = tmp / f"attention-{n}"
            export_params(cfg, params, art, lengths=[1, 2])  # the full checks; the N^2 full pass kept short
            session = runtime.load(art, backend="ort")
            att = np.array([_timed(session.step, xs[i % xs.shape[0]]) for i in range(n)], dtype=np.int64)
            entry.update(_medians_before(att, [n])[str(n)])
            entry["method"] = (
                "one stream through Session.step (artifact max_len = n), median of the 1000 steps before n"
            )
            entry.update(_ssm_reference(ref, xs, 1000))
        if n >= session_max_len:
            run, _ = _raw_step(params, cfg)
            for _ in range(3):
                run()
            if n > session_max_len:
                raw = np.empty(attn_steps, np.int64)
                for i in range(attn_steps):
                    t0 = time.perf_counter_ns()
                    run()
                    raw[i] = time.perf_counter_ns() - t0
                entry.update(
                    {
                        "median_us": float(np.median(raw) / 1e3),
                        "steps": attn_steps,
                        "method": "the artifact's step graph at max_len = n on ORT IOBinding, position n - 1 "
                        "(model.onnx's [n, n] mask makes the artifact unexportable)",
                    }
                )
                entry.update(_ssm_reference(ref, xs, 1000))
            else:  # both ways at this n, interleaved: the Session's own share of a step
                assert session is not None
                session.reset()  # a static cache: the same work at every position
                both = np.empty((overhead_steps, 2), np.int64)
                for i in range(overhead_steps):
                    both[i, 0] = _timed(session.step, xs[i % xs.shape[0]])
                    t0 = time.perf_counter_ns()
                    run()
                    both[i, 1] = time.perf_counter_ns() - t0
                entry["interleaved"] = {
                    "steps": overhead_steps,
                    "session_median_us": float(np.median(both[:, 0]) / 1e3),
                    "raw_graph_median_us": float(np.median(both[:, 1]) / 1e3),
                }
        if session is not None:
            session.close()
        entry["ratio_to_ssm"] = entry["median_us"] / entry["ssm_median_us"]
        out[str(n)] = entry
    ref.close()
    return out


def held_out(task: Any, params: dict, config: Any, data: Any, start: int) -> dict[str, float]:
    """One-step and (delay + 1)-step RMSE (rad) of the held-out episodes at t >= start (pendulum-
    hidden), or the task's own model_rmse (other tasks)."""
    from tickformer.control import task as T

    if task.name != "pendulum-hidden":
        return {"rmse": float(task.hooks.evaluate(params, config, data)["model_rmse"])}
    d = data.plant.delay
    truth = np.stack([data.test_theta[:, j : j + data.steps] for j in range(1, d + 2)], axis=-1)[:, start:]
    err = T.hidden_model_angles(params, config, data)[:, start:] - truth
    return {
        "rmse": float(np.sqrt(np.mean(err[..., 0] ** 2))),
        "rmse_last": float(np.sqrt(np.mean(err[..., -1] ** 2))),
    }


def hidden_baselines(
    task: Any, data: Any, settings: Any, config: Any, window: int, start: int
) -> dict[str, Any]:
    """Baselines on the scored positions: linear AR over the last `window` pairs, nominal physics,
    the memoryless twin (window-1 attention, the same settings)."""
    from tickformer.control import task as T
    from tickformer.model.train import train_steps

    d = data.plant.delay
    truth = np.stack([data.test_theta[:, j : j + data.steps] for j in range(1, d + 2)], axis=-1)[:, start:]

    def rmse(pred: np.ndarray) -> float:
        return float(np.sqrt(np.mean((pred - truth)[..., 0] ** 2)))

    twin_cfg = config.replace(window=1)
    twin, *_ = train_steps(task, twin_cfg, settings)
    return {
        "linear_ar": rmse(T.hidden_ar_angles(data, window)[:, start - (window - 1) :]),
        "nominal": rmse(T.hidden_nominal_angles(data, start)),
        "memoryless": held_out(task, twin, twin_cfg, data, start)["rmse"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="pendulum-hidden")
    p.add_argument("--steps", type=int, default=None, help="training steps per model (default: the task's)")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--window", type=int, default=None, help="default: the task preset's window")
    p.add_argument("--d-state", type=int, default=16)
    p.add_argument("--timing-steps", type=int, default=3000)
    p.add_argument("--lengths", default="100,1000,10000,100000,1000000")
    p.add_argument("--session-max-len", type=int, default=10000)
    p.add_argument(
        "--attn-steps", type=int, default=20, help="full-attention steps timed past --session-max-len"
    )
    p.add_argument("--overhead-steps", type=int, default=200, help="interleaved pairs at --session-max-len")
    p.add_argument("--cache-cap-mb", type=float, default=1024.0)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/ssm_bench.json"))
    p.add_argument(
        "--loop-share",
        type=float,
        default=None,
        help="control.plant.LOOP_SHARE for the training data (default: the package's; 0: the history "
        "task's data before 2026-12-05, without closed-loop episodes)",
    )
    args = p.parse_args(argv)
    if args.loop_share is not None:
        import tickformer.control.plant as plant

        plant.LOOP_SHARE = args.loop_share

    from tickformer import runtime
    from tickformer.control.task import HIDDEN_TASK
    from tickformer.export.writer import export_params
    from tickformer.model.config import parameter_count
    from tickformer.model.tasks import get_task
    from tickformer.model.train import TrainSettings, train_steps
    from tickformer.runtime.denormals import flushed_denormals

    lengths = [int(float(v)) for v in args.lengths.split(",")]
    seeds = [int(v) for v in args.seeds.split(",")]
    task = get_task(args.task, extra=(HIDDEN_TASK,))
    models = configs(task.preset, args.d_state, args.window)
    window = models["windowed"].window
    steps = task.settings.steps if args.steps is None else args.steps
    report: dict[str, Any] = {
        "command": "benchmarks/ssm_bench.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "load_avg_start": [round(v, 2) for v in os.getloadavg()],
        "task": args.task,
        "preset": task.preset,
        "train_steps": steps,
        "loop_share": __import__("tickformer.control.plant", fromlist=["LOOP_SHARE"]).LOOP_SHARE,
        "seeds": seeds,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
        },
        "models": {
            name: {"config": cfg.to_dict(), "parameters": parameter_count(cfg)}
            for name, cfg in models.items()
        },
    }
    trained: dict[str, dict] = {}
    rmse: dict[str, list[dict[str, float]]] = {name: [] for name in models}
    train_s: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
    baselines: list[dict[str, Any]] = []
    start = None
    for seed in seeds:
        settings = TrainSettings.for_task(task, steps=steps, seed=seed)
        data = None
        for name, cfg in models.items():
            print(f"[{name}] seed {seed}: train {steps} steps", flush=True)
            params, _, data, wall, cpu = train_steps(task, cfg, settings)
            if args.task == "pendulum-hidden":
                start = max(window - 1, data.plant.delay)
            rmse[name].append(held_out(task, params, cfg, data, start or 0))
            train_s[name].append((wall, cpu))
            if seed == seeds[0]:
                trained[name] = params
        if args.task == "pendulum-hidden":
            print(f"[baselines] seed {seed}", flush=True)
            baselines.append(hidden_baselines(task, data, settings, models["attention"], window, start))
    report["scored_from_position"] = start
    if baselines:
        report["baselines"] = {k: _spread([b[k] for b in baselines]) for k in baselines[0]}
    for name in models:
        m = report["models"][name]
        m["held_out_rmse"] = _spread([r["rmse"] for r in rmse[name]])
        if "rmse_last" in rmse[name][0]:
            m["held_out_rmse_last_horizon"] = _spread([r["rmse_last"] for r in rmse[name]])
        m["train_wall_seconds"] = _spread([w for w, _ in train_s[name]])
        m["train_cpu_seconds"] = _spread([c for _, c in train_s[name]])
        m["train_cpu_ms_per_step"] = 1e3 * m["train_cpu_seconds"]["mean"] / steps
        m["state_bytes"] = {str(n): state_bytes(models[name], n) for n in lengths}

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        sessions = {}
        for name, cfg in models.items():
            t0 = time.perf_counter()
            export_params(cfg, trained[name], tmp / name)
            report["models"][name]["export_seconds"] = round(time.perf_counter() - t0, 2)
            sessions[name] = runtime.load(tmp / name, backend="ort")
        rng = np.random.default_rng(seeds[0])
        xs = rng.uniform(-2, 2, size=(997, 1, 1, models["attention"].d_in)).astype(np.float32)
        with flushed_denormals():
            print(f"[all] {args.timing_steps} steps each, round-robin", flush=True)
            for name, t in round_robin(sessions, xs, args.timing_steps).items():
                report["models"][name]["ort_step"] = _ns_stats(t)
            print(f"[ssm, windowed] one stream of {max(lengths):,} steps each, alternating", flush=True)
            for name, costs in streams({k: sessions[k] for k in ("ssm", "windowed")}, xs, lengths).items():
                report["models"][name]["step_cost"] = costs
            for s in sessions.values():
                s.close()
            report["models"]["attention"]["step_cost"] = attention_costs(
                trained["attention"],
                models["attention"],
                tmp / "ssm",
                xs,
                lengths,
                session_max_len=args.session_max_len,
                attn_steps=args.attn_steps,
                overhead_steps=args.overhead_steps,
                cap_mb=args.cache_cap_mb,
                tmp=tmp,
            )
    report["load_avg_end"] = [round(v, 2) for v in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
