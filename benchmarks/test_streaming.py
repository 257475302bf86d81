"""Streaming on a ring KV cache: one stream of 10^6 steps on a windowed artifact (preset
`control` with --window 32, ORT, one thread, flush-to-zero as in ControlLoop) -- step p50 and
process RSS at steps 10^3, 10^5 and 10^6 must be equal within noise; and, in the same run, the
windowed step at W = 32 beside the static-cache step at max_len = W (same model size).

Each checkpoint times CHECK steps *of the stream itself* (no reset, no new session): the steps
before each checkpoint are the stream's own. On a shared machine the neighbours' load drifts
over the minutes the stream takes, so each checkpoint's blocks alternate with blocks of a second,
young stream of the same artifact (kept below position YOUNG by resets outside the timed calls):
`old_over_young` compares the two at the same moment, the load cancelling. RSS is VmRSS of this
process read right after each checkpoint. The comparison with the static cache interleaves
blocks of the two sessions (ABAB...) so both see the same neighbours' load; the static session
is reset every max_len steps (its sequence ends there), outside the timed calls. Results:
benchmarks/results/streaming.json (and pytest-benchmark's extra_info). Not a timed test: the
assertions are only that the stream never raised and stayed exact at its end.
"""

from __future__ import annotations

import time

import harness
import numpy as np
import pytest

WINDOW = 32
CHECKPOINTS = (1_000, 100_000, 1_000_000)
CHECK = 2_000  # timed steps per checkpoint (per stream)
ROUNDS = 10  # alternating old / young blocks per checkpoint
YOUNG = 2_000  # the young stream is reset before it reaches this position
BLOCKS = 40  # interleaved blocks per subject in the static-vs-windowed comparison
PER_BLOCK = 500


@pytest.fixture(scope="module")
def windowed(control, artifact_for):
    config, _ = control
    return artifact_for(config.replace(window=WINDOW))


@pytest.fixture(scope="module")
def static_w(control, artifact_for):
    config, _ = control
    return artifact_for(config.replace(max_len=WINDOW))


def _inputs(config, n=256, seed=0):
    rng = np.random.default_rng(seed)
    seq = rng.uniform(-1.0, 1.0, size=(1, n, config.d_in)).astype(np.float32)
    return [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(n)]


def _timed(session, xs, out, start):
    step, clock, n = session.step, time.perf_counter_ns, len(xs)
    for i in range(out.shape[0]):
        x = xs[(start + i) % n]
        t0 = clock()
        step(x)
        out[i] = clock() - t0


def _run_stream(session, young, xs, checkpoints, check):
    """Step one stream to the last checkpoint; at each, time `check` of its steps in ROUNDS blocks
    alternating with blocks of the young stream."""
    step = session.step
    n = len(xs)
    out = {}
    pos = 0
    per = check // ROUNDS
    old_buf = np.zeros((ROUNDS, per), dtype=np.int64)
    young_buf = np.zeros((ROUNDS, per), dtype=np.int64)
    with harness.quiet_gc():
        for target in checkpoints:
            while pos < target:  # untimed: the stream's own steps up to the checkpoint
                step(xs[pos % n])
                pos += 1
            for r in range(ROUNDS):
                _timed(session, xs, old_buf[r], pos)
                pos += per
                if young.position + per >= YOUNG:
                    young.reset()  # untimed
                    for t in range(4 * WINDOW):  # back into the steady state (all W slots live)
                        young.step(xs[t % n])
                _timed(young, xs, young_buf[r], young.position)
            old, yng = harness.summarize(old_buf), harness.summarize(young_buf)
            out[target] = {
                "stats": old,
                "young_stats": yng,
                "old_over_young_p50": old["p50"] / yng["p50"],
                "rss_bytes": harness.rss_bytes(),
                "position": session.position,
                "ring_position": session.ring_position,
            }
            harness.save_samples(f"streaming-step-{target}", old_buf.ravel())
    return out


def test_stream_step_and_rss_do_not_grow(benchmark, windowed, flush_to_zero):
    from tickformer import runtime

    art, _ = windowed
    session = runtime.load(art, backend="ort")
    young = runtime.load(art, backend="ort")
    assert session.sliding
    xs = _inputs(session.config)
    result: dict = {}
    benchmark.pedantic(
        lambda: result.update(_run_stream(session, young, xs, CHECKPOINTS, CHECK)), rounds=1, iterations=1
    )
    points = {str(k): v for k, v in result.items()}
    first, last = result[CHECKPOINTS[0]], result[CHECKPOINTS[-1]]
    summary = {
        "window": WINDOW,
        "max_len": session.max_len,
        "check_steps": CHECK,
        "checkpoints": points,
        "p50_us": {str(k): v["stats"]["p50"] for k, v in result.items()},
        "old_over_young_p50": {str(k): v["old_over_young_p50"] for k, v in result.items()},
        "rss_mib": {str(k): v["rss_bytes"] / 2**20 for k, v in result.items()},
        "p50_ratio_last_over_first": last["stats"]["p50"] / first["stats"]["p50"],
        "rss_ratio_last_over_first": last["rss_bytes"] / first["rss_bytes"],
        "flush_to_zero": harness.flush_to_zero(),
    }
    benchmark.extra_info.update({"case": "streaming", "group": "streaming", **summary})
    _STORE["stream"] = summary
    _write()
    assert last["position"] == CHECKPOINTS[-1] + (CHECK // ROUNDS) * ROUNDS


def test_windowed_step_vs_static_cache_at_max_len_w(benchmark, windowed, static_w, flush_to_zero):
    from tickformer import runtime

    ring = runtime.load(windowed[0], backend="ort")
    static = runtime.load(static_w[0], backend="ort")
    xs = _inputs(ring.config)
    for s in (ring, static):  # warm-up; the ring into its steady state (all W slots live)
        for t in range(4 * WINDOW):
            if not s.sliding and s.position >= s.max_len:
                s.reset()
            s.step(xs[t % len(xs)])
    samples = {
        "windowed": np.zeros((BLOCKS, PER_BLOCK), np.int64),
        "static": np.zeros((BLOCKS, PER_BLOCK), np.int64),
    }
    clock = time.perf_counter_ns

    def block(session, out):
        step, n = session.step, len(xs)
        for i in range(out.shape[0]):
            if not session.sliding and session.position >= session.max_len:
                session.reset()  # untimed: the static sequence ends at max_len
            x = xs[i % n]
            t0 = clock()
            step(x)
            out[i] = clock() - t0

    def run():
        with harness.quiet_gc():
            for b in range(BLOCKS):
                block(ring, samples["windowed"][b])
                block(static, samples["static"][b])

    benchmark.pedantic(run, rounds=1, iterations=1)
    stats = {k: harness.summarize(v) for k, v in samples.items()}
    for k, v in samples.items():
        harness.save_samples(f"streaming-vs-static-{k}", v.ravel())
    summary = {
        "window": WINDOW,
        "windowed": stats["windowed"],
        "static_max_len_w": stats["static"],
        "p50_ratio_windowed_over_static": stats["windowed"]["p50"] / stats["static"]["p50"],
    }
    benchmark.extra_info.update({"case": "streaming-vs-static", "group": "streaming", **summary})
    _STORE["vs_static"] = summary
    _write()


_STORE: dict = {}


def _write() -> None:
    import datetime

    harness.write_json(
        "streaming",
        {**_STORE, "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
    )
