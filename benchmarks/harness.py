"""Measurement primitives shared by the benchmark suites: per-call timing, tail statistics,
Python-allocation and resident-memory probes, and the results files `report.py` reads.

Timing follows cyclictest (rt-tests) and the house style: everything is allocated and warmed
before the loop, every call is timed individually with `time.perf_counter_ns()` into a
preallocated int64 array, the garbage collector is frozen and disabled while sampling, and we
report min/p50/p90/p99/p99.9/max (means hide the tail). pytest-benchmark wraps each *block*
of individually timed calls as one round, so its own JSON carries the block times while our
per-call samples go to `benchmark.extra_info` and to `benchmarks/results/samples/NAME.npy`.

Python allocations are counted with `tracemalloc` (which also traces numpy's data buffers,
domain 389047): net blocks alive after N calls versus before, and the transient peak above
the starting point during a call (an allocation that is freed again before the call returns
still shows in the peak). Allocations inside onnxruntime's or torch's C++ code are not visible
to tracemalloc; they are not Python allocations and are reported as such.

Resident memory is VmRSS from /proc/self/status (Linux).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import time
import tracemalloc
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
SAMPLES = RESULTS / "samples"
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9}


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect once, freeze the survivors into the permanent generation and disable the
    collector for the measurement (a real-time loop does the same); restore afterwards."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def timed_calls(fn: Callable[[], object], out: np.ndarray) -> None:
    """Call fn() len(out) times, writing each call's duration in ns into out (int64, preallocated).

    Real-time safe in itself: no allocation in the loop beyond what fn does (perf_counter_ns
    returns small ints, which CPython caches or recycles from its freelist).
    """
    clock = time.perf_counter_ns
    for i in range(out.shape[0]):
        t0 = clock()
        fn()
        out[i] = clock() - t0


def timed_sequence(reset: Callable[[], object], step: Callable[[], object], out: np.ndarray) -> None:
    """Prime (reset, one untimed step, reset), then len(out) steps, each timed into out (one
    sample per position). The priming step puts the step's code and data back in the CPU caches
    after the harness's own between-sequence work, as they are in a loop that steps every tick;
    without it position 1 would measure the benchmark's bookkeeping, not the position."""
    reset()
    step()
    reset()
    timed_calls(step, out)


def summarize(samples_ns: np.ndarray) -> dict[str, float]:
    """n, min, mean, std, p50, p90, p99, p99.9, max in microseconds, and the tail ratio p99.9/p50.

    Percentiles use numpy's default linear interpolation; with n samples the p99.9 estimate
    rests on about n/1000 samples above it, so it is reported together with n.
    """
    x = np.asarray(samples_ns, dtype=np.float64).ravel() / 1e3  # [n] us
    stats = {"n": int(x.size), "min": float(x.min()), "mean": float(x.mean()), "std": float(x.std())}
    for name, q in PERCENTILES.items():
        stats[name] = float(np.percentile(x, q))
    stats["max"] = float(x.max())
    stats["tail_ratio"] = stats["p99.9"] / stats["p50"] if stats["p50"] > 0 else float("inf")
    return stats


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def save_samples(name: str, samples_ns: np.ndarray) -> Path:
    """Raw per-call samples (ns) for the plots; overwritten on every run."""
    SAMPLES.mkdir(parents=True, exist_ok=True)
    path = SAMPLES / f"{safe_name(name)}.npy"
    np.save(path, np.asarray(samples_ns, dtype=np.int64))
    return path


class _RowCounter:
    """Hands out row indices to pytest-benchmark rounds and remembers how many ran."""

    def __init__(self) -> None:
        self.count = 0

    def next(self) -> int:
        self.count += 1
        return self.count - 1


def interleaved_sequences(
    subjects: dict, length: int, rounds: int, *, warmup_rounds: int, benchmark=None
) -> dict[str, np.ndarray]:
    """Every step of `rounds` sequences of each subject (objects with .reset and .step), one whole
    sequence of each in turn per round, so that a slow spell of the shared machine lands on all
    alike; `warmup_rounds` rounds first, discarded. The rounds run under quiet_gc, as
    pytest-benchmark rounds when `benchmark` is given. Returns {name: ns [rounds run, length]}."""
    out = {name: np.zeros((rounds, length), dtype=np.int64) for name in subjects}
    for _ in range(warmup_rounds):
        for name, subject in subjects.items():
            timed_sequence(subject.reset, subject.step, out[name][0])
    done = _RowCounter()

    def one_round() -> None:
        i = done.next()
        for name, subject in subjects.items():
            timed_sequence(subject.reset, subject.step, out[name][i])

    with quiet_gc():
        if benchmark is None:
            for _ in range(rounds):
                one_round()
        else:
            benchmark.pedantic(one_round, rounds=rounds, iterations=1)
    return {name: samples[: done.count] for name, samples in out.items()}  # fewer if pytest-benchmark is off


def measure_calls(
    benchmark, name: str, fn: Callable[[], object], *, samples: int, warmup: int, blocks: int = 10, **extra
) -> dict:
    """Time `samples` individual calls of fn (after `warmup` untimed ones) in `blocks` rounds of
    pytest-benchmark; store the per-call statistics in benchmark.extra_info and the raw samples
    on disk. Returns the statistics (us)."""
    per_block = max(1, samples // blocks)
    out = np.zeros((blocks, per_block), dtype=np.int64)  # [rounds, calls] ns
    for _ in range(warmup):
        fn()
    done = _RowCounter()
    with quiet_gc():
        benchmark.pedantic(lambda: timed_calls(fn, out[done.next()]), rounds=blocks, iterations=1)
    out = out[: done.count]  # fewer rows if pytest-benchmark is disabled (one round only)
    stats = summarize(out)
    save_samples(name, out.ravel())
    benchmark.extra_info.update(
        {"case": name, "unit": "us", "stats": stats, "flush_to_zero": flush_to_zero(), **extra}
    )
    return stats


def measure_sequences(
    benchmark,
    name: str,
    reset: Callable[[], object],
    step: Callable[[], object],
    *,
    length: int,
    reps: int,
    positions: dict[str, tuple[int, int]],
    warmup_reps: int = 2,
    **extra,
) -> dict:
    """Time every step of `reps` sequences of `length` steps (primed and reset before each,
    untimed: see timed_sequence);
    one pytest-benchmark round per sequence. `positions` maps a label to a 0-based half-open
    window [lo, hi) of step indices whose samples are pooled for that label's statistics.
    Also records the per-position p50 curve. Returns {label: stats}."""
    out = np.zeros((reps, length), dtype=np.int64)  # [sequence, position] ns
    scratch = np.zeros(length, dtype=np.int64)
    for _ in range(warmup_reps):
        timed_sequence(reset, step, scratch)
    done = _RowCounter()
    with quiet_gc():
        benchmark.pedantic(lambda: timed_sequence(reset, step, out[done.next()]), rounds=reps, iterations=1)
    out = out[: done.count]  # fewer rows if pytest-benchmark is disabled (one round only)
    by_position = {label: summarize(out[:, lo:hi]) for label, (lo, hi) in positions.items()}
    pooled = summarize(out)  # every step of every sequence
    for label, (lo, hi) in positions.items():
        save_samples(f"{name}@{label}", out[:, lo:hi].ravel())
    save_samples(f"{name}@all", out.ravel())
    p50_curve = np.percentile(out, 50, axis=0) / 1e3  # [length] us
    benchmark.extra_info.update(
        {
            "case": name,
            "unit": "us",
            "positions": {
                label: {"window": [lo + 1, hi], **by_position[label]} for label, (lo, hi) in positions.items()
            },
            "all_positions": pooled,
            "p50_by_position": [round(float(v), 3) for v in p50_curve],
            "flush_to_zero": flush_to_zero(),
            **extra,
        }
    )
    return by_position


def flush_to_zero() -> bool:
    """Whether this thread flushed subnormals to zero while measuring (runtime/denormals.py)."""
    from tickformer.runtime.denormals import denormals_flushed

    return denormals_flushed()


def _peak_rises(fn: Callable[[], object], calls: int) -> tuple[int, int]:
    """(max rise of traced memory within one call, number of calls with any rise).

    Every loop variable is bound before the loop, so in steady state rebinding one frees the
    int it held as the new one is made: the loop itself shows zero (checked on a no-op).
    """
    peak_max = 0
    with_alloc = 0
    start, _unused = tracemalloc.get_traced_memory()
    _cur, peak = tracemalloc.get_traced_memory()
    rise = 0
    for _ in range(calls):
        start, _unused = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        fn()
        _cur, peak = tracemalloc.get_traced_memory()
        rise = peak - start
        if rise > 0:
            with_alloc += 1
            if rise > peak_max:
                peak_max = rise
    return peak_max, with_alloc


def python_allocations(fn: Callable[[], object], *, calls: int, warmup: int) -> dict[str, object]:
    """Python-visible allocations of fn() in steady state, measured with tracemalloc.

    net_blocks / net_bytes: blocks and bytes alive after `calls` calls that were not alive
    before (a leak or a growing structure). peak_bytes_per_call: the largest transient rise of
    traced memory within one call (any allocation, even one freed before return, shows here);
    calls_with_alloc: how many calls rose at all. loop_check: the same loop around a no-op,
    which must read (0, 0) or the numbers are not trusted.
    """
    for _ in range(warmup):
        fn()
    with quiet_gc():
        tracemalloc.start(1)
        try:
            loop_check = _peak_rises(_noop, 200)
            for _ in range(warmup):
                fn()
            before = tracemalloc.take_snapshot()
            peak_max, with_alloc = _peak_rises(fn, calls)
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    diff = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "filename")
    return {
        "calls": calls,
        "net_blocks": int(sum(d.count_diff for d in diff)),
        "net_bytes": int(sum(d.size_diff for d in diff)),
        "peak_bytes_per_call": int(peak_max),
        "calls_with_alloc": int(with_alloc),
        "loop_check": list(loop_check),
    }


def _noop() -> None:
    return None


def rss_bytes() -> int:
    """Resident set size of this process (VmRSS), in bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS not found in /proc/self/status (Linux only)")


def write_json(name: str, data: dict) -> Path:
    """Extra results beside pytest-benchmark's JSON (atomic: temp file + rename)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{safe_name(name)}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path


def fp32_tolerance(config, t: int) -> float:
    """Absolute bound for |comparator - numpy reference| on outputs of a `config` model over t positions.

    Both compute in fp32 (unit roundoff u = 2^-24 ~ 6e-8) with different summation orders
    (BLAS blocking, SDPA's fused softmax). A dot product of length K carries relative error
    <= K u in the worst case and ~ sqrt(K) u typically (Higham, "Accuracy and Stability of
    Numerical Algorithms", sec. 3.1); the longest reductions are over d_ff and over t keys.
    Post-LN renormalises activations to unit scale after every sublayer, so errors do not
    compound multiplicatively across layers; 1/sigma of LayerNorm can amplify them by the
    ratio of the pre-norm scale, bounded by a small constant for Xavier-initialised weights.
    We take 16 * sqrt(max(d_ff, t, d_model)) * u per layer, times n_layers + 2 (in/out
    projections): ~6e-5 for the control preset (measured: ~1.5e-6), far below any behavioural difference.
    """
    u = 2.0**-24
    k = max(config.d_ff, t, config.d_model)
    return 16.0 * math.sqrt(k) * u * (config.n_layers + 2)


def compile_c(compiler, flags, sources, out, cwd) -> None:
    """Compile C `sources` (in `cwd`) into the program `out` with `compiler` (codegen's Compiler)
    and `flags`; a failure raises with the compiler's output."""
    import subprocess

    subprocess.run(
        [compiler.path, *flags, *sources, "-o", str(out)], cwd=cwd, check=True, capture_output=True, text=True
    )


# The head every timing program shares: the includes and ns(), CLOCK_MONOTONIC in nanoseconds.
TIMING_HEAD_C = r"""#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static long long ns(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
"""

# The memory-bandwidth floor's program (benchmarks/test_c_step.py, test_c_formats.py): sums a
# buffer of argv[1] bytes argv[2] times, each pass timed, samples written to argv[3].
FLOOR_C = (
    TIMING_HEAD_C
    + r"""int main(int argc, char **argv) {
    size_t bytes = (size_t)atol(argv[1]), n = bytes / 4 / 64 * 64, i;
    int passes = atoi(argv[2]), r, j;
    float *a = malloc(n * 4), acc[64] = {0}, total = 0.0f;
    long long *d = malloc(sizeof(long long) * (size_t)passes);
    FILE *f;
    for (i = 0; i < n; i++) { a[i] = (float)(i % 7); }
    for (r = -200; r < passes; r++) {
        long long t0 = ns();
        for (i = 0; i < n; i += 64) { for (j = 0; j < 64; j++) { acc[j] += a[i + j]; } }
        if (r >= 0) { d[r] = ns() - t0; }
    }
    for (j = 0; j < 64; j++) { total += acc[j]; }
    f = fopen(argv[3], "wb"); fwrite(d, sizeof(long long), (size_t)passes, f); fclose(f);
    printf("%g\n", (double)total);
    return 0;
}
"""
)


def sequences_bench_c(x_value: str, begin: str, timed: str, after: str = "") -> str:
    """A timing program of the generated C (tf_model.h): argv[1] whole max_len sequences, each
    begun by `begin`; at every position p the statements `timed` (they return nonzero on an
    error) are timed alone, then `after` runs untimed; samples to argv[2]. WARMUP sequences come
    first, not kept (-DWARMUP=N, default 5: each suite keeps the count it was measured with).
    Every input element is `x_value` (a C expression of i). The pieces are C lines indented for
    their place: `begin` 8 spaces, `timed` and `after` 12."""
    return (
        TIMING_HEAD_C
        + r"""#include "tf_model.h"
#ifndef WARMUP
#define WARMUP 5
#endif
static tf_state s;
int main(int argc, char **argv) {
    int reps = atoi(argv[1]), r, p, i;
    long long *d = malloc(sizeof(long long) * (size_t)reps * TF_MAX_LEN);
    tf_input x[TF_BATCH * TF_D_IN];
    float y[TF_BATCH * TF_D_OUT];
    FILE *f;
    for (i = 0; i < TF_BATCH * TF_D_IN; i++) { x[i] = (tf_input)("""
        + x_value
        + """); }
    for (r = -WARMUP; r < reps; r++) {
"""
        + begin
        + """
        for (p = 0; p < TF_MAX_LEN; p++) {
            long long t0 = ns();
"""
        + timed
        + """
            if (r >= 0) { d[(size_t)r * TF_MAX_LEN + p] = ns() - t0; }
"""
        + (after + "\n" if after else "")
        + """        }
    }
    f = fopen(argv[2], "wb"); fwrite(d, sizeof(long long), (size_t)reps * TF_MAX_LEN, f); fclose(f);
    return 0;
}
"""
    )


def build_bench(plan, directory, program: str, compiler, flags, out: str = "bench") -> None:
    """The generated C of `plan` (codegen.model_sources) and the timing `program` (bench.c) written
    to `directory` and compiled into directory/out with `compiler` and `flags`."""
    from tickformer.codegen import model_sources

    for name, data in model_sources(plan).items():
        (directory / name).write_bytes(data)
    (directory / "bench.c").write_text(program)
    compile_c(compiler, flags, ["bench.c", "tf_model.c"], directory / out, directory)


# The generated step's timing program (benchmarks/test_c_step.py, test_c_formats.py): whole
# sequences of tf_step from a primed reset, each step timed.
STEP_BENCH_C = sequences_bench_c(
    "TF_TOKENS ? 1 : 0.25",
    "        tf_reset(&s); (void)tf_step(&s, x, y); tf_reset(&s);  /* prime, as timed_sequence */",
    "            if (tf_step(&s, x, y) != TF_OK) { return 1; }",
)
