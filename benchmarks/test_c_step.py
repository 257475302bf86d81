"""The generated C step (backend "c", docs/codegen.md) beside the ORT step, in one run.

Model: preset `control` (the other suites' model), batch 1, one thread, flush-to-zero
(conftest.py). Measurements, all in the same process and minutes:

1. `test_c_vs_ort_interleaved`: Session.step on backend "c" (its default: tf_stage and
   tf_commit, two C calls per tick), on backend "c" with deferred_commit=True (one C call per
   tick: the commit applied by the next step's tf_stage_pending) and on backend "ort"
   (its defaults), one whole sequence of max_len steps of each in turn for ROUNDS rounds, so a
   slow spell of this shared machine lands on all alike; every step timed alone
   (perf_counter_ns). Stats at positions 1, N/2, N (windows of 4 steps, as test_step_latency).
   Also the Session's own validation of the input (`_validate_step_input`) timed alone.
2. `test_c_step_without_python`: the same code's tf_step timed in C (clock_gettime around
   each call, CLOCK_MONOTONIC), no Python at all -- what the step costs on a real-time core;
   built with the backend's flags, once with -O2 instead of -O3 and once with 256-bit vectors
   instead of 512 (GCC_FLAGS' -mprefer-vector-width=512): the backend's two choices, checked.
3. `test_bandwidth_floor`: the memory-bandwidth floor of one step on this machine: a buffer of
   exactly the step's bytes (codegen.evidence.bytes_per_step: weights + the whole K/V cache)
   read end to end with 64 float accumulators, each pass timed in C, built with 256-bit and
   with 512-bit vectors (8 or 4 vectors of accumulators); the floor is the lower of the two p50
   pass times (bytes / measured read bandwidth at that working-set size).

4. `test_windowed_c_vs_ort`: the same model with window 32 (a ring cache of 32 rows; sliding
   sessions, max_len steps per round cross the ring's wrap 8 times), c and ort interleaved,
   and its tf_step timed in C.

Targets (judged in docs/codegen.md from the JSON this writes, results/c_step.json): the C
step's p50 >= 5x faster than the ORT step's at max_len; its p99.9/p50 no worse than ORT's;
its p50 within 2x of the floor.
Run: python -m pytest benchmarks/test_c_step.py -q --benchmark-json=benchmarks/results/c_step_bench.json
"""

from __future__ import annotations

import subprocess

import harness
import numpy as np
import pytest
import subjects

import tickformer.codegen  # noqa: F401  (registers backend "c"'s library builder: runtime/backends/c.py)

ROUNDS = 150
WINDOW = 4
C_REPS = 400
FLOOR_PASSES = 20_000


RESULTS: dict = {}
# The backend's two build choices, each timed against its alternative: key -> (its flag, the other)
ALTERNATIVES = {"o2": ("-O3", "-O2"), "w256": ("-mprefer-vector-width=512", "-mprefer-vector-width=256")}


def windows(n: int) -> dict[str, tuple[int, int]]:
    half = n // 2
    return {"1": (0, WINDOW), "N/2": (half - WINDOW // 2, half + WINDOW // 2), "N": (n - WINDOW, n)}


@pytest.fixture(scope="module", autouse=True)
def write_results():
    yield
    if RESULTS:
        harness.write_json("c_step", RESULTS)


@pytest.fixture(scope="module")
def x_step(control):
    config, _ = control
    return np.random.default_rng(7).standard_normal((1, 1, config.d_in)).astype(np.float32)  # [1, 1, d_in]


def interleaved(subjects_: dict, n: int, rounds: int, benchmark) -> tuple[dict, int, dict]:
    """Per-step samples [rounds, n] of every subject, one whole sequence of each in turn per
    round (3 warm-up rounds discarded; harness.interleaved_sequences); (stats at 1, N/2, N per
    subject, rounds done, the samples)."""
    out = harness.interleaved_sequences(subjects_, n, rounds, warmup_rounds=3, benchmark=benchmark)
    stats = {
        name: {label: harness.summarize(samples[:, lo:hi]) for label, (lo, hi) in windows(n).items()}
        for name, samples in out.items()
    }
    return stats, len(next(iter(out.values()))), out


def test_c_vs_ort_interleaved(benchmark, artifact, compiler, x_step):
    from tickformer import runtime

    c_session = runtime.load(artifact, backend="c")
    subjects_ = {
        "c": subjects.session_subject("c", c_session, x_step),
        "c-deferred": subjects.session_subject(
            "c-deferred", runtime.load(artifact, backend="c", deferred_commit=True), x_step
        ),
        "ort": subjects.session_subject("ort", subjects.open_session(artifact, "ort"), x_step),
    }
    n = c_session.max_len
    try:
        stats, done, out = interleaved(subjects_, n, ROUNDS, benchmark)
        validation = np.zeros(20_000, np.int64)
        with harness.quiet_gc():
            harness.timed_calls(lambda: c_session._validate_step_input(x_step), validation)
    finally:
        for subject in subjects_.values():
            subject.close()
    for name, samples in out.items():
        harness.save_samples(f"c_step/session-{name}@N", samples[:done, n - WINDOW :].ravel())
    at_n = {name: s["N"] for name, s in stats.items()}
    RESULTS["session"] = {
        "rounds": done,
        "window": WINDOW,
        "stats": stats,
        "ratio_p50_at_N": at_n["ort"]["p50"] / at_n["c"]["p50"],
        "ratio_p50_at_N_deferred": at_n["ort"]["p50"] / at_n["c-deferred"]["p50"],
        "deferred_saves_us_at_N": at_n["c"]["p50"] - at_n["c-deferred"]["p50"],
        "tail_ratio_at_N": {name: s["tail_ratio"] for name, s in at_n.items()},
        "session_validation_us": harness.summarize(validation),
        "c_library": c_session.backend.library_path,
        "flush_to_zero": harness.flush_to_zero(),
    }
    benchmark.extra_info.update({"case": "ratio/c-vs-ort", "unit": "us", **RESULTS["session"]})


def test_c_step_without_python(benchmark, artifact, compiler, tmp_path):
    from tickformer.codegen import plan_for
    from tickformer.codegen.toolchain import deployment_flags
    from tickformer.runtime import open_artifact

    plan = plan_for(open_artifact(artifact))
    flags = list(deployment_flags(compiler))
    harness.build_bench(plan, tmp_path, harness.STEP_BENCH_C, compiler, flags)
    variants = {}
    for key, (ours, other) in ALTERNATIVES.items():
        if ours in flags:  # GCC_FLAGS' width is not given to other compilers
            variants[key] = [other if f == ours else f for f in flags]
            harness.compile_c(
                compiler, variants[key], ["bench.c", "tf_model.c"], tmp_path / f"bench_{key}", tmp_path
            )
    n = plan.config.max_len

    def measure(program: str, reps: int) -> np.ndarray:
        path = tmp_path / f"{program}.bin"
        subprocess.run([str(tmp_path / program), str(reps), str(path)], check=True)
        return np.fromfile(path, dtype=np.int64).reshape(reps, n)

    out = {}
    benchmark.pedantic(lambda: out.update(samples=measure("bench", C_REPS)), rounds=1, iterations=1)
    samples = out["samples"]
    stats = {label: harness.summarize(samples[:, lo:hi]) for label, (lo, hi) in windows(n).items()}
    harness.save_samples("c_step/in-c@N", samples[:, n - WINDOW :].ravel())
    RESULTS["in_c"] = {
        "reps": C_REPS,
        "flags": flags,
        "stats": stats,
        "all_positions": harness.summarize(samples),
        **{
            key: {
                "flags": other_flags,
                "reps": C_REPS // 4,
                "stats_at_N": harness.summarize(measure(f"bench_{key}", C_REPS // 4)[:, n - WINDOW :]),
            }
            for key, other_flags in variants.items()
        },
    }
    benchmark.extra_info.update({"case": "c-step/in-c", "unit": "us", **RESULTS["in_c"]})


def test_bandwidth_floor(benchmark, artifact, compiler, tmp_path):
    from tickformer.codegen import plan_for
    from tickformer.codegen.evidence import bytes_per_step
    from tickformer.runtime import open_artifact

    step_bytes = bytes_per_step(plan_for(open_artifact(artifact)))
    (tmp_path / "floor.c").write_text(harness.FLOOR_C)
    widths = {}
    for bits in (256, 512):  # 512: no-op without AVX-512; the step is built with it (GCC_FLAGS)
        harness.compile_c(
            compiler,
            ["-std=c99", "-O3", "-march=native", f"-mprefer-vector-width={bits}", "-Wall", "-Werror"],
            ["floor.c"],
            tmp_path / f"floor{bits}",
            tmp_path,
        )
    samples_path = tmp_path / "floor.bin"

    def run() -> None:
        for bits in (256, 512):
            subprocess.run(
                [
                    str(tmp_path / f"floor{bits}"),
                    str(step_bytes["total"]),
                    str(FLOOR_PASSES),
                    str(samples_path),
                ],
                check=True,
                capture_output=True,
            )
            widths[bits] = harness.summarize(np.fromfile(samples_path, dtype=np.int64))

    benchmark.pedantic(run, rounds=1, iterations=1)
    best = min(widths, key=lambda bits: widths[bits]["p50"])
    stats = widths[best]
    floor = {
        "bytes_per_step": step_bytes,
        "passes": FLOOR_PASSES,
        "pass_us": stats,
        "vector_bits": best,
        "pass_us_by_vector_bits": {str(bits): s for bits, s in widths.items()},
        "read_GBps_at_p50": step_bytes["total"] / (stats["p50"] * 1e-6) / 1e9,
    }
    for key, label in (("in_c", "in_c_p50_over_floor"), ("session", "session_p50_over_floor")):
        if key in RESULTS:
            subject = RESULTS[key]["stats"]["N"] if key == "in_c" else RESULTS[key]["stats"]["c"]["N"]
            floor[label] = subject["p50"] / stats["p50"]
    RESULTS["floor"] = floor
    benchmark.extra_info.update({"case": "c-step/bandwidth-floor", "unit": "us", **floor})


WINDOWED = 32  # the windowed subject's W (preset control-hidden's window)
W_ROUNDS = 60


def test_windowed_c_vs_ort(benchmark, control, artifact_for, compiler, x_step, tmp_path):
    """The control model with window 32: sliding sessions on the ring cache, c and ort interleaved;
    its tf_step timed in C; its bytes per step (W rows)."""
    from tickformer import runtime
    from tickformer.codegen import plan_for
    from tickformer.codegen.evidence import bytes_per_step
    from tickformer.codegen.toolchain import deployment_flags
    from tickformer.runtime import open_artifact

    config, _ = control
    art = artifact_for(config.replace(window=WINDOWED))[0]
    c_session = runtime.load(art, backend="c")
    subjects_ = {
        "c": subjects.session_subject("c", c_session, x_step),
        "ort": subjects.session_subject("ort", subjects.open_session(art, "ort"), x_step),
    }
    n = c_session.max_len
    try:
        stats, done, _ = interleaved(subjects_, n, W_ROUNDS, benchmark)
    finally:
        for subject in subjects_.values():
            subject.close()
    plan = plan_for(open_artifact(art))
    flags = list(deployment_flags(compiler))
    harness.build_bench(plan, tmp_path, harness.STEP_BENCH_C, compiler, flags)
    reps = C_REPS // 4
    subprocess.run([str(tmp_path / "bench"), str(reps), str(tmp_path / "w.bin")], check=True)
    in_c = np.fromfile(tmp_path / "w.bin", dtype=np.int64).reshape(reps, n)
    at_n = {name: s["N"] for name, s in stats.items()}
    RESULTS["windowed"] = {
        "window": WINDOWED,
        "rounds": done,
        "stats": stats,
        "ratio_p50_at_N": at_n["ort"]["p50"] / at_n["c"]["p50"],
        "tail_ratio_at_N": {name: s["tail_ratio"] for name, s in at_n.items()},
        "in_c": {"reps": reps, "stats_at_N": harness.summarize(in_c[:, n - WINDOW :])},
        "bytes_per_step": bytes_per_step(plan),
    }
    benchmark.extra_info.update({"case": "ratio/c-vs-ort-windowed", "unit": "us", **RESULTS["windowed"]})
