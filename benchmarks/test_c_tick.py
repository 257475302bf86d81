"""The controller's tick -- K candidates over one history, then the commit -- on the generated C
(tf_peek + tf_commit_candidate, codegen/peek.py) beside ONNX Runtime, in one run.

Model: the demo's network shape (control/demo.py: preset `control-hidden` with the identifying
outputs, window 32, max_len 64; d_model 32, 2 heads, 2 layers, d_ff 64, d_in 4) with seeded
weights (the weights' values do not change the work), exported with batch K = 17 (the demo's
candidates) and with batch 1. One thread, flush-to-zero (conftest.py), contracts off, every
tick timed alone (perf_counter_ns).

`test_tick_c_vs_ort_interleaved`: one whole sliding sequence of max_len ticks of each subject in
turn per round, ROUNDS rounds, so a slow spell of the shared machine lands on all alike:

    c-tick      Session.peek(xs) + Session.commit(i) on backend "c" (two C calls: tf_peek, tf_commit_candidate)
    ort-tick    the same on backend "ort" (its batch-17 step, then the row copies of commit_candidate)
    ort-step    Session.step(xs) on backend "ort": ORT's batch-17 step alone (the issue's baseline)
    c-step-1    Session.step on the batch-1 artifact, backend "c" (K = 1)
    ort-step-1  the same on backend "ort"

Statistics over the positions >= W (the ring full: every tick does the same work), p50, p99,
p99.9 with n. `test_tick_in_c`: tf_peek + tf_commit_candidate timed in C (clock_gettime around
each pair, the backend's flags), no Python.

Target (docs/codegen.md, "The controller's tick"): the c tick's p50 >= 4x faster than ORT's
batch-17 step (`ort-step`).
Run: python -m pytest benchmarks/test_c_tick.py -q --benchmark-json=benchmarks/results/c_tick_bench.json
Render (the table in benchmarks/README.md and docs/codegen.md): python benchmarks/test_c_tick.py
"""

from __future__ import annotations

import itertools
import subprocess

import harness
import numpy as np
import pytest
import subjects

import tickformer.codegen  # noqa: F401  (registers backend "c"'s library builder: runtime/backends/c.py)

K = 17
WINDOW = 32
ROUNDS = 150
C_REPS = 400

# The tick's timing program: whole sliding sequences from a reset, each tf_peek + tf_commit_candidate
# pair timed, the ring position advanced as next_ring_position does (untimed).
TICK_BENCH_C = harness.sequences_bench_c(
    "0.01 * (i % 17)",
    """        int32_t pos = 0;
        tf_reset(&s);""",
    """            if (tf_peek(&s, x, pos, y) != TF_OK) { return 1; }
            if (tf_commit_candidate(&s, pos, p % TF_BATCH) != TF_OK) { return 2; }""",
    """#if TF_RING
            pos = pos + 1 < TF_POSITIONS ? pos + 1 : TF_WINDOW; /* next_ring_position */
#else
            pos = pos + 1;
#endif""",
)

RESULTS: dict = {}


def demo_config():
    """The demo's network (control/demo.py train_models): control-hidden, identifying outputs, W 32."""
    from tickformer.control.task import HIDDEN_IDENTIFY_OUTPUTS
    from tickformer.model import preset

    base = preset("control-hidden")
    return base.replace(d_out=base.d_out + len(HIDDEN_IDENTIFY_OUTPUTS), window=WINDOW)


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    from tickformer.export.writer import export_params
    from tickformer.model import init_params

    config = demo_config()
    params = init_params(config, seed=0)
    out = {}
    for batch in (K, 1):
        where = tmp_path_factory.mktemp(f"tick_b{batch}") / "art"
        export_params(config, params, where, batch=batch, lengths=[1, 2])
        out[batch] = where
    return config, out


@pytest.fixture(scope="module", autouse=True)
def write_results():
    yield
    if RESULTS:
        harness.write_json("c_tick", RESULTS)


def tick_subject(name: str, session, xs: np.ndarray) -> subjects.Stateful:
    """peek(xs) then commit(i), i cycling over the candidates (ints made beforehand)."""
    peek, commit = session.peek, session.commit
    choices = itertools.cycle(list(range(session.batch)))

    def tick():
        y = peek(xs)
        commit(next(choices))
        return y

    return subjects.Stateful(name, session.reset, tick, getattr(session, "close", lambda: None))


def test_tick_c_vs_ort_interleaved(benchmark, arts, compiler):
    from tickformer import runtime

    config, art = arts
    rng = np.random.default_rng(7)
    xs = rng.uniform(-0.5, 0.5, (K, 1, config.d_in)).astype(np.float32)  # [K, 1, d_in], inside the domain
    x1 = np.ascontiguousarray(xs[:1])  # [1, 1, d_in]
    c_tick = runtime.load(art[K], backend="c")
    subjects_ = {
        "c-tick": tick_subject("c-tick", c_tick, xs),
        "ort-tick": tick_subject("ort-tick", subjects.open_session(art[K], "ort"), xs),
        "ort-step": subjects.session_subject("ort-step", subjects.open_session(art[K], "ort"), xs),
        "c-step-1": subjects.session_subject("c-step-1", runtime.load(art[1], backend="c"), x1),
        "ort-step-1": subjects.session_subject("ort-step-1", subjects.open_session(art[1], "ort"), x1),
    }
    n = c_tick.max_len
    try:
        out = harness.interleaved_sequences(subjects_, n, ROUNDS, warmup_rounds=3, benchmark=benchmark)
    finally:
        for subject in subjects_.values():
            subject.close()
    done = len(out["c-tick"])
    stats = {name: harness.summarize(samples[:, WINDOW:]) for name, samples in out.items()}
    for name, samples in out.items():
        harness.save_samples(f"c_tick/{name}", samples[:, WINDOW:].ravel())
    p50 = {name: s["p50"] for name, s in stats.items()}
    RESULTS["session"] = {
        "candidates": K,
        "window": WINDOW,
        "max_len": n,
        "rounds": done,
        "positions": f"{WINDOW}..{n - 1} (the ring full)",
        "config": {
            k: getattr(config, k) for k in ("d_model", "n_heads", "n_layers", "d_ff", "d_in", "d_out")
        },
        "stats": stats,
        "ratio_ort_step_over_c_tick_p50": p50["ort-step"] / p50["c-tick"],
        "ratio_ort_tick_over_c_tick_p50": p50["ort-tick"] / p50["c-tick"],
        "ratio_ort_step_over_c_tick_p99_9": stats["ort-step"]["p99.9"] / stats["c-tick"]["p99.9"],
        "c_tick_over_c_step_1_p50": p50["c-tick"] / p50["c-step-1"],
        "target_ratio": 4.0,
        "c_library": c_tick.backend.library_path,
        "flush_to_zero": harness.flush_to_zero(),
    }
    benchmark.extra_info.update({"case": "ratio/c-tick-vs-ort", "unit": "us", **RESULTS["session"]})


def test_tick_in_c(benchmark, arts, compiler, tmp_path):
    from tickformer.codegen import plan_for
    from tickformer.codegen.toolchain import deployment_flags
    from tickformer.runtime import open_artifact

    _, art = arts
    plan = plan_for(open_artifact(art[K]))
    flags = list(deployment_flags(compiler))
    harness.build_bench(plan, tmp_path, TICK_BENCH_C, compiler, flags)
    n = plan.config.max_len
    result = {}

    def measure() -> None:
        path = tmp_path / "tick.bin"
        subprocess.run([str(tmp_path / "bench"), str(C_REPS), str(path)], check=True)
        result["samples"] = np.fromfile(path, dtype=np.int64).reshape(C_REPS, n)

    benchmark.pedantic(measure, rounds=1, iterations=1)
    samples = result["samples"][:, WINDOW:]
    harness.save_samples("c_tick/in-c", samples.ravel())
    RESULTS["in_c"] = {"reps": C_REPS, "flags": flags, "stats": harness.summarize(samples)}
    benchmark.extra_info.update({"case": "c-tick/in-c", "unit": "us", **RESULTS["in_c"]})


FORMAT_ROUNDS = 20
FORMAT_REPS = 20


def test_tick_in_c_per_format(benchmark, arts, compiler, tmp_path):
    """The K-candidate tick (tf_peek + tf_commit_candidate) timed in C for each weight format
    (codegen/weights.py), the four programs in turn for FORMAT_ROUNDS rounds of FORMAT_REPS
    sequences each. Written to results/c_tick_formats.json (its own file, so this test can run
    alone: -k per_format)."""
    from tickformer.codegen import plan_for, weight_bytes
    from tickformer.codegen import weights as W
    from tickformer.codegen.toolchain import deployment_flags
    from tickformer.runtime import open_artifact

    _, art = arts
    artifact = open_artifact(art[K])
    flags = list(deployment_flags(compiler))
    plans = {}
    for fmt in W.FORMATS:
        d = tmp_path / fmt
        d.mkdir()
        plans[fmt] = plan_for(artifact, fmt)
        harness.build_bench(plans[fmt], d, TICK_BENCH_C, compiler, flags)
    n = artifact.config.max_len
    samples: dict[str, list[np.ndarray]] = {fmt: [] for fmt in W.FORMATS}

    def measure() -> None:
        for r in range(FORMAT_ROUNDS):
            for k in range(len(W.FORMATS)):
                fmt = W.FORMATS[(r + k) % len(W.FORMATS)]
                path = tmp_path / fmt / "tick.bin"
                subprocess.run([str(tmp_path / fmt / "bench"), str(FORMAT_REPS), str(path)], check=True)
                samples[fmt].append(np.fromfile(path, dtype=np.int64).reshape(FORMAT_REPS, n)[:, WINDOW:])

    benchmark.pedantic(measure, rounds=1, iterations=1)
    per = {
        fmt: {
            "stats": harness.summarize(np.concatenate(samples[fmt]).ravel()),
            "weight_bytes": weight_bytes(plans[fmt], fmt)["total"],  # read once for all K by tf_peek
        }
        for fmt in W.FORMATS
    }
    out = {"candidates": K, "rounds": FORMAT_ROUNDS, "reps": FORMAT_REPS, "flags": flags, "per_format": per}
    harness.write_json("c_tick_formats", out)
    benchmark.extra_info.update({"case": "c-tick/in-c-formats", "unit": "us", **out})


LABELS = {
    "c-tick": 'peek + commit, backend "c" (tf_peek + tf_commit_candidate)',
    "ort-tick": 'peek + commit, backend "ort" (batch-17 step + row copies)',
    "ort-step": 'Session.step, backend "ort", batch 17 (the baseline)',
    "c-step-1": 'Session.step, backend "c", batch 1',
    "ort-step-1": 'Session.step, backend "ort", batch 1',
}


def render(path=None) -> str:
    """The markdown table of results/c_tick.json (numbers as data: rendered, not re-typed)."""
    import json
    from pathlib import Path

    path = Path(path) if path is not None else Path(__file__).parent / "results" / "c_tick.json"
    data = json.loads(path.read_text())
    session = data["session"]
    rows = [
        "| subject | p50 | p99 | p99.9 | p99.9/p50 | n |",
        "|---|---|---|---|---|---|",
    ]

    def row(label: str, s: dict) -> str:
        times = " | ".join(f"{s[q]:.1f} us" for q in ("p50", "p99", "p99.9"))
        return f"| {label} | {times} | {s['tail_ratio']:.2f} | {s['n']} |"

    for name, label in LABELS.items():
        rows.append(row(label, session["stats"][name]))
    if "in_c" in data:
        flags = " ".join(data["in_c"]["flags"])
        rows.append(
            row(f"tf_peek + tf_commit_candidate timed in C (no Python), `{flags}`", data["in_c"]["stats"])
        )
    met = session["ratio_ort_step_over_c_tick_p50"] >= session["target_ratio"]
    rows += [
        "",
        f"ORT batch-{session['candidates']} step p50 / c tick p50: {session['ratio_ort_step_over_c_tick_p50']:.2f}x "
        f"(target >= {session['target_ratio']:.0f}x: {'met' if met else 'NOT met'}); at p99.9: "
        f"{session['ratio_ort_step_over_c_tick_p99_9']:.2f}x; ORT's own tick (peek + commit) / c tick at p50: "
        f"{session['ratio_ort_tick_over_c_tick_p50']:.2f}x; c tick / c batch-1 step at p50: "
        f"{session['c_tick_over_c_step_1_p50']:.2f}x. Positions {session['positions']}, {session['rounds']} "
        f"interleaved rounds, flush-to-zero {session['flush_to_zero']}.",
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    print(render())
