"""Streaming on a ring KV cache (windowed artifacts, docs/streaming.md): a sliding session
reproduces the windowed full pass on streams 20x longer than the window and more, with resets
anywhere; the step is the same function at position 10 and 10^7; the ring tables come from the
proven contract functions (each call site is shown by swapping in a wrong twin); policies and
refusals are explicit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer import runtime
from tickformer.artifact.format import step_feeds, step_outputs
from tickformer.contracts import ring_buffer as R
from tickformer.errors import ArtifactError, BackendError, ConfigError, ContextFull, ExportError
from tickformer.export.equivalence import runners
from tickformer.export.writer import export_params
from tickformer.model import forward, init_params, preset
from tickformer.runtime import ControlLoop, LoopConfig
from tickformer.verify.proofs import wrong_twins as twins

ARTS: dict[tuple[int, str], tuple[object, dict]] = {}


def _windowed(tmp_path_factory, window: int, inputs: str = "continuous"):
    """A tiny windowed artifact per (window, inputs), exported once per test session."""
    key = (window, inputs)
    if key not in ARTS:
        cfg = preset("tiny").replace(window=window)
        if inputs == "tokens":
            cfg = cfg.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)
        params = init_params(cfg, seed=window)
        out = tmp_path_factory.mktemp(f"w{window}{inputs}") / "art"
        export_params(cfg, params, out, lengths=[1, cfg.max_len])
        ARTS[key] = (out, params)
    return ARTS[key]


def _inputs(config, length, seed):
    rng = np.random.default_rng(seed)
    if config.inputs == "tokens":
        return rng.integers(0, config.vocab_size, size=(1, length), dtype=np.int64)
    return rng.uniform(-10, 10, size=(1, length, config.d_in)).astype(np.float32)


def _stream(session, seq, resets=()):
    """Step through seq (resetting before the positions in `resets`); -> outputs [1, T, out] and
    the index each segment started at."""
    ys, starts = [], [0]
    for t in range(seq.shape[1]):
        if t in resets:
            session.reset()
            starts.append(t)
        ys.append(session.step(np.ascontiguousarray(seq[:, t : t + 1]))[:, 0].copy())
    return np.stack(ys, axis=1), starts


def _expected(params, config, seq, starts):
    """The windowed full pass of every segment between resets, concatenated."""
    bounds = [*starts, seq.shape[1]]
    parts = [forward(params, config, seq[:, a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("backend", ["ort", "numpy"])
@given(
    window=st.sampled_from([1, 2, 3, 5]),
    extra=st.integers(0, 17),
    resets=st.lists(st.integers(1, 120), max_size=3),
    tokens=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=12, deadline=None)
def test_streaming_equals_the_windowed_full_pass(
    tmp_path_factory, backend, window, extra, resets, tokens, seed
):
    """Streams of 20W + extra positions (and resets at random points): every output within the
    artifact's stated fp32 tolerance of the windowed full pass over its segment."""
    path, params = _windowed(tmp_path_factory, window, "tokens" if tokens else "continuous")
    session = runtime.load(path, backend=backend)
    assert session.sliding and session.on_full == "slide"
    length = 20 * window + extra
    seq = _inputs(session.config, length, seed)
    got, starts = _stream(session, seq, resets={r for r in resets if r < length})
    want = _expected(params, session.config, seq, starts)
    tol = session.artifact.tolerance
    assert np.all(np.abs(got - want) <= tol["atol"] + tol["rtol"] * np.abs(want))
    assert session.position == length - starts[-1]


def test_a_long_stream_wraps_many_times_and_stays_exact(window_art):
    """400 positions on a ring of 4 (100 wraps), ORT and numpy agreeing with the full pass."""
    path, params = window_art
    for backend in ("ort", "numpy"):
        session = runtime.load(path, backend=backend)
        seq = _inputs(session.config, 400, seed=1)
        got, _ = _stream(session, seq)
        np.testing.assert_allclose(got, forward(params, session.config, seq), rtol=0, atol=2e-5)
        assert session.position == 400 and session.ring_position == R.ring_position(400, 4)


def test_the_step_is_the_same_function_at_position_10_and_10_to_the_7(window_art):
    """The step graph at absolute position p, at p + 2W * 10^6 (beyond 10^7) and at the ring
    position the session feeds (ring_position(p)) computes the same outputs bit for bit, from the
    same ring contents: it depends on p only through p mod W and p >= W (ring_buffer R10)."""
    path, _ = window_art
    session = runtime.load(path, backend="ort")
    cfg = session.config
    run = runners(_step_graph(session))["ort"]
    rng = np.random.default_rng(0)
    shape = session.backend.cache_shape
    k, v = rng.normal(size=shape).astype(np.float32), rng.normal(size=shape).astype(np.float32)
    x = _inputs(cfg, 1, seed=2)
    for p in (10, 11, 4, 7):
        outs = [
            step_outputs(cfg, run(step_feeds(cfg, x, q, k, v)))
            for q in (
                p,
                p + 2 * cfg.window * 10**6,
                p + cfg.window * (10**7 // cfg.window),
                R.ring_position(p, 4),
            )
        ]
        for other in outs[1:]:
            for a, b in zip(outs[0], other):
                assert np.array_equal(a, b)


def _step_graph(session):
    import onnx

    from tickformer.artifact.reader import verified_graph_bytes

    return onnx.load_from_string(verified_graph_bytes(session.artifact, "step"))


def test_a_sliding_session_far_into_the_stream_reports_its_position(window_art, monkeypatch):
    """Positions are unbounded: after 3W..many steps the session's position is the absolute one
    (block counters, R12/R13), and reset() brings it back to 0 in constant time."""
    path, _ = window_art
    session = runtime.load(path, backend="ort")
    x = _inputs(session.config, 1, seed=0)
    for n in range(1, 150):
        session.step(x)
        assert session.position == n
    session.reset()
    assert session.position == 0 and session.ring_position == 0


# --- each call site of the proven functions: a wrong twin swapped in is seen -----------------------------
def _diverges(session, params, length=40):
    seq = _inputs(session.config, length, seed=3)
    got, _ = _stream(session, seq)
    return not np.allclose(got, forward(params, session.config, seq), rtol=0, atol=1e-4)


def test_the_session_walks_the_proven_successor_table(window_art, monkeypatch):
    path, params = window_art
    assert not _diverges(runtime.load(path, backend="ort"), params)

    def wraps_to_zero(ring, window):  # the wrong twin's successor: back to 0, as if reset
        return ring + 1 if ring + 1 < 3 * window else 0

    monkeypatch.setattr("tickformer.runtime.session.next_ring_position", wraps_to_zero)
    assert _diverges(runtime.load(path, backend="ort"), params)


def test_the_session_counts_blocks_with_the_proven_write(window_art, monkeypatch):
    """The session's counter cells after every commit are counters_after of the cells before (the
    proven write, R13), over 5W + 3 steps; with the wrong twin block_write_in_place swapped in at
    the call site, the position is lost once the ring wraps."""
    path, _ = window_art
    session = runtime.load(path, backend="ort")
    x = _inputs(session.config, 1, seed=0)
    w = session.window
    for n in range(5 * w + 3):
        ring, (c0, c1) = session.ring_position, (int(session._blocks[0]), int(session._blocks[1]))
        session.step(x)
        assert (int(session._blocks[0]), int(session._blocks[1])) == R.counters_after(ring, c0, c1, w)
        assert session.position == n + 1
    monkeypatch.setattr("tickformer.runtime.session.block_write", twins.block_write_in_place)
    session = runtime.load(path, backend="ort")
    for _ in range(5 * w + 3):
        session.step(x)
    assert session.position != 5 * w + 3  # the twin's write loses the block


def test_the_session_reads_the_counter_block_counter_names(window_art, monkeypatch):
    path, _ = window_art
    monkeypatch.setattr("tickformer.runtime.session.block_counter", lambda ring, window: 0)
    session = runtime.load(path, backend="ort")
    x = _inputs(session.config, 1, seed=0)
    positions = []
    for _ in range(4 * session.window):
        session.step(x)
        positions.append(session.position)
    assert positions != list(range(1, 4 * session.window + 1))  # c[0] read in [2W, 3W): wrong


def test_the_host_cache_commits_to_the_proven_slot(window_art, monkeypatch):
    path, params = window_art
    monkeypatch.setattr("tickformer.runtime.backends.layout.ring_slot", lambda p, w: (p + 1) % w)
    assert _diverges(runtime.load(path, backend="ort"), params)
    assert _diverges(runtime.load(path, backend="numpy"), params)


def test_the_numpy_backend_reads_the_proven_slots(window_art, monkeypatch):
    path, params = window_art
    monkeypatch.setattr("tickformer.runtime.backends.numpy.slot_read", twins.slot_read_evicted)
    assert _diverges(runtime.load(path, backend="numpy"), params)


def test_the_numpy_backend_biases_by_the_proven_distance(window_art, monkeypatch):
    path, params = window_art
    monkeypatch.setattr("tickformer.runtime.backends.numpy.window_distance", twins.window_distance_reversed)
    assert _diverges(runtime.load(path, backend="numpy"), params)


def test_the_step_graph_is_built_from_the_proven_slot_read(tmp_path, monkeypatch):
    """export/graphs.py calls ring_buffer.slot_read on the pos input: with the wrong twin that
    also reads the slot being overwritten, the export's own equivalence check fails."""
    cfg = preset("tiny").replace(window=3)
    monkeypatch.setattr("tickformer.export.graphs.slot_read", twins.slot_read_evicted)
    with pytest.raises(ExportError, match="disagree"):
        export_params(cfg, init_params(cfg, 0), tmp_path / "art", lengths=[1, 16])


def test_the_full_graph_is_built_from_the_proven_window_mask(tmp_path, monkeypatch):
    cfg = preset("tiny").replace(window=3)
    monkeypatch.setattr("tickformer.export.graphs.window_allowed", lambda i, j, w: j <= i)  # causal only
    with pytest.raises(ExportError, match="disagree"):
        export_params(cfg, init_params(cfg, 0), tmp_path / "art", lengths=[1, 16])


# --- policies and refusals ---------------------------------------------------------------------------------
def test_on_full_raise_on_a_windowed_artifact_stops_at_max_len(window_art):
    path, params = window_art
    session = runtime.load(path, backend="ort", on_full="raise")
    assert not session.sliding
    seq = _inputs(session.config, session.max_len, seed=4)
    got, _ = _stream(session, seq)
    np.testing.assert_allclose(got, forward(params, session.config, seq), rtol=0, atol=2e-5)
    with pytest.raises(ContextFull, match="reset"):
        session.step(np.ascontiguousarray(seq[:, :1]))
    assert session.position == session.max_len
    assert session.ring_position == R.ring_position(session.max_len, 4)


def test_slide_needs_a_windowed_artifact(tiny_art):
    with pytest.raises(ConfigError, match="on_full='slide' needs a windowed artifact"):
        runtime.load(tiny_art[0], backend="ort", on_full="slide")
    with pytest.raises(ConfigError, match="on_full"):
        runtime.load(tiny_art[0], backend="ort", on_full="wrap")
    assert runtime.load(tiny_art[0], backend="ort").on_full == "raise"


@pytest.mark.parametrize("backend", ["numpy-growing"])
def test_backends_without_a_ring_cache_refuse_windowed_artifacts(window_art, backend):
    from tickformer.errors import BackendUnavailable

    try:
        runtime.load(window_art[0], backend=backend)
    except BackendUnavailable as exc:  # the c backend needs a compiler: then it refuses earlier
        pytest.skip(str(exc))
    except (BackendError, ArtifactError) as exc:
        assert "window" in str(exc)
    else:
        raise AssertionError(f"{backend} ran a windowed artifact")


def test_a_reader_that_predates_windows_refuses_them(window_art, monkeypatch):
    """Windowed artifacts are format version 3: a version-2 reader refuses them at the version."""
    monkeypatch.setattr("tickformer.artifact.reader.READS", (2,))
    with pytest.raises(ArtifactError, match="version 3 is not supported"):
        runtime.load(window_art[0], backend="ort")


def test_static_artifacts_keep_version_2(tiny_art, window_art):
    assert runtime.load(tiny_art[0]).artifact.manifest["version"] == 2
    assert runtime.load(window_art[0]).artifact.manifest["version"] == 3


def test_the_full_pass_takes_any_length(window_art):
    path, params = window_art
    session = runtime.load(path, backend="ort")
    seq = _inputs(session.config, 5 * session.max_len, seed=5)
    np.testing.assert_allclose(session.run(seq), forward(params, session.config, seq), rtol=0, atol=2e-5)


def test_control_loop_slides_a_windowed_session_instead_of_resetting(window_art, tiny_art):
    """3 max_len of ticks: the windowed session is never reset (its position runs on), the static
    one is reset every max_len."""
    for path, sliding in ((window_art[0], True), (tiny_art[0], False)):
        session = runtime.load(path, backend="ort")
        loop = ControlLoop(session, LoopConfig(period_ns=10**6), output_shape=(1, 1, 2))
        ticks = 3 * session.max_len
        stats = loop.run(ticks, observe=lambda k: np.zeros((1, 1, 3), np.float32), actuate=lambda u: None)
        if sliding:
            assert stats.resets == 0 and session.position == ticks
        else:
            assert stats.resets == 2


def test_codegen_plans_windowed_artifacts_on_a_ring_cache(window_art):
    """Codegen generates windowed artifacts with its ring cache kind (docs/codegen.md; its tests
    are tests/codegen/test_ring.py and tests/runtime/test_c_backend.py)."""
    from tickformer.codegen.plan import plan_for

    plan = plan_for(runtime.open_artifact(window_art[0]))
    assert (plan.cache_kind, plan.rows) == ("ring", 4)  # window_art: W = 4


def test_trt_lint_is_clean_on_the_windowed_graphs(window_art):
    """`tickformer check --target trt-10.3`: Range, Mod, GreaterOrEqual, And, Gather on int64 are
    all in the parser's table; no error and no warning."""
    from pathlib import Path

    from tickformer.export import trt_support as ts

    findings = ts.check_path(Path(window_art[0]), ts.target("trt-10.3"))
    assert [f for f in findings if f.severity in ("error", "warning")] == []


def test_consistency_rebuilds_the_windowed_graphs_bit_identically(window_art):
    """export/consistency.py rebuilds every graph from weights.npz and the manifest: for a windowed
    artifact the ring graphs come out byte for byte the same (deterministic builder)."""
    from tickformer.artifact.reader import verified_graph_bytes
    from tickformer.export.consistency import check_graph_weights, rebuilt_graphs

    art = runtime.open_artifact(window_art[0])
    check_graph_weights(art)
    for name, graph in rebuilt_graphs(art).items():
        assert graph.SerializeToString() == verified_graph_bytes(art, name)
