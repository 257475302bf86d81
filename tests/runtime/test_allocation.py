"""The real-time path allocates nothing net on the Python side: after warm-up, 10,000 steps
(with a reset() every max_len steps) leave zero net traced blocks (tracemalloc also traces
numpy's data buffers). The warm-up runs under tracing too: objects parked on CPython's free
lists by the first steps count as allocated to tracemalloc, but they do not grow with steps.
Temporaries freed before a step returns are allowed (numpy backend);
ORT's own C++ allocations are invisible to tracemalloc and not Python allocations.
The session's own part (validation, position, commit order) allocates nothing at all, not even
transiently: measured with an allocation-free stand-in backend, every step's peak rise of traced
memory is 0 bytes; and so does the whole path with the real ORT backend (IOBinding), for
continuous, token and encoder-decoder artifacts (tests at the end of this file).
Speed and jitter live in benchmarks/, never here.
"""

from __future__ import annotations

import gc
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from tickformer import runtime
from tickformer.model import preset
from tickformer.runtime.backends.base import Backend

STEPS = 10_000
# Blocks allocated inside onnxruntime's own Python binding (innermost Python frame in the
# onnxruntime package) are ORT's, not tickformer's, and are excluded: measured over 100,000
# steps they are bounded but not constant -- binding="run" grows to ~350 blocks over the first
# ~30,000 calls then stays flat; "iobinding" hovers at ~110 +- 5 (docs/export_runtime.md).
ORT_INTERNAL = tracemalloc.Filter(False, "*/onnxruntime/*")
CASES = [("ort", {"binding": "iobinding"}), ("ort", {"binding": "run"}), ("numpy", {})]


def net_blocks(session, xs, steps):
    """Net traced blocks (and bytes) allocated by `steps` steps after a warm-up sequence."""
    n = session.max_len
    step, reset = session.step, session.reset

    def loop(count):
        for i in range(count):
            if i % n == 0:
                reset()
            step(xs[i % n])

    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        loop(4 * n)  # warm-up under tracing: first-call allocations, interpreter free lists
        before = tracemalloc.take_snapshot()
        loop(steps)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        gc.enable()
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), ORT_INTERNAL]
    diff = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "traceback")
    return sum(d.count_diff for d in diff), [str(d) for d in diff if d.count_diff]


@pytest.mark.parametrize(("backend", "opts"), CASES, ids=["ort-iobinding", "ort-run", "numpy"])
def test_zero_net_allocation_over_10000_steps(tiny_art, seq_for, backend, opts):
    path, _ = tiny_art
    session = runtime.load(path, backend=backend, **opts)
    seq = seq_for(session.config, 1, session.max_len, seed=0)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(session.max_len)]  # preallocated inputs
    steps = STEPS if backend == "ort" else STEPS // 5  # numpy is ~10x slower per step under tracemalloc
    blocks, where = net_blocks(session, xs, steps)
    assert blocks == 0, f"{backend}: {blocks} net blocks after {steps} steps: {where[:5]}"


def test_zero_net_allocation_with_contract_monitor(tiny_art, seq_for):
    path, _ = tiny_art
    session = runtime.load(path, backend="ort", contracts="monitor", budget_ns=10**9)
    seq = seq_for(session.config, 1, session.max_len, seed=0)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(session.max_len)]
    blocks, where = net_blocks(session, xs, STEPS)
    assert blocks == 0, where[:5]


def test_probe_detects_a_retained_allocation(tiny_art, seq_for, monkeypatch):
    """The probe can fail: a step that keeps one small object per call shows up."""
    path, _ = tiny_art
    session = runtime.load(path, backend="ort")
    kept = []
    commit = session.backend.commit
    monkeypatch.setattr(session.backend, "commit", lambda pos: (kept.append(np.zeros(1)), commit(pos)))
    seq = seq_for(session.config, 1, session.max_len, seed=0)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(session.max_len)]
    blocks, _ = net_blocks(session, xs, 500)
    assert blocks >= 500


# --- the session's own part: 0 bytes per step, even transiently ----------------------------------
SESSION_STEPS = 2_000
LONG = 300  # max_len above 256: positions and token ids that are not CPython's cached small ints


class CopyBackend(Backend):
    """Allocation-free stand-in: step returns its preallocated output buffer, commit copies a
    staged row into a row view made at construction (np.copyto: 0 B)."""

    name = "copy"

    def __init__(self, artifact, *, leak=False):
        super().__init__(artifact)
        self._y = np.zeros(self.step_output_shape, np.float32)  # [B, 1, d_out | V]
        self._k = np.zeros(self.cache_shape, np.float32)  # [L, B, H, N, dh]
        self._v = np.zeros(self.cache_shape, np.float32)
        self._rows = [self._k[:, :, :, p] for p in range(self.config.max_len)]  # N x [L, B, H, dh]
        self._new = np.ones(self._rows[0].shape, np.float32)  # [L, B, H, dh]
        self._leak = leak  # the probe's control: allocate (and free) one small array per commit

    def step(self, x, pos):
        return self._y

    def commit(self, pos):
        np.copyto(self._rows[pos], self._new)
        if self._leak:
            np.zeros(1)

    def full(self, x):
        raise NotImplementedError

    def cache(self):
        return self._k, self._v


@pytest.fixture(scope="module", params=["continuous", "tokens"])
def long_artifact(request):
    """What a Session reads of an artifact, max_len 300 (tokens: V = 1000), domain [-10, 10]:
    a stand-in, so that this test of the session's own part needs no export."""
    config = preset("tiny").replace(max_len=LONG)
    if request.param == "tokens":
        config = config.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=1000)
    return SimpleNamespace(
        config=config,
        batch=1,
        max_len=LONG,
        input_domain=(-10.0, 10.0),
        input_domain_columns=None,
        output_bound=None,
        manifest={},
    )


def peak_rise(session, xs, steps):
    """Rise of traced memory's peak over `steps` steps (a reset() before each sequence of
    max_len), after a warm-up run of the same loop: any allocation inside any step shows, even
    one freed before the step returns. The loop allocates nothing itself: it walks an iterator
    made beforehand over prepared (input, new sequence?) pairs."""
    n = session.max_len
    plan = [(xs[i % n], i % n == 0) for i in range(steps)]
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        _peak_rise_loop(session.step, session.reset, plan[: 2 * n])  # warm-up: first calls, free lists
        return _peak_rise_loop(session.step, session.reset, plan)
    finally:
        tracemalloc.stop()
        gc.enable()


def _peak_rise_loop(step, reset, plan):
    get, reset_peak = tracemalloc.get_traced_memory, tracemalloc.reset_peak
    it = iter(plan)
    base = get()[0]
    base = get()[0]  # replaces an int of the same size: traced memory is back to the value read
    reset_peak()
    for x, first in it:
        if first:
            reset()
        step(x)
    return get()[1] - base


def long_inputs(session, seed=0):
    """Preallocated step inputs for every position; token ids span the whole vocabulary."""
    seq = _long_seq(session.config, session.max_len, seed)
    return [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(session.max_len)]


def _long_seq(config, length, seed):
    rng = np.random.default_rng(seed)
    if config.inputs == "tokens":
        seq = rng.integers(0, config.vocab_size, size=(1, length), dtype=np.int64)  # [1, T]
        seq[0, :2] = (0, config.vocab_size - 1)  # both ends of the vocabulary
        return seq
    return rng.uniform(-10.0, 10.0, size=(1, length, config.d_in)).astype(np.float32)  # [1, T, d_in]


def test_session_step_allocates_zero_bytes(long_artifact):
    """contracts off, a backend that allocates nothing: not one byte is allocated in 2,000 steps
    (~7 sequences of 300), positions and token ids above 256 included."""
    session = runtime.Session(long_artifact, CopyBackend(long_artifact))
    rise = peak_rise(session, long_inputs(session), SESSION_STEPS)
    assert rise == 0, f"{rise} B allocated within {SESSION_STEPS} steps"


def test_step_probe_detects_a_transient_allocation(long_artifact):
    """The probe can fail: a commit that allocates one small array and frees it shows up."""
    session = runtime.Session(long_artifact, CopyBackend(long_artifact, leak=True))
    assert peak_rise(session, long_inputs(session), 500) > 0


def test_step_probe_detects_the_old_position_increment(long_artifact):
    """...and one small int: `pos + 1` above 256, what step did before the position list."""
    session = runtime.Session(long_artifact, CopyBackend(long_artifact))
    step = session.step

    def old_step(x):
        y = step(x)
        session._position = session._position - 1 + 1  # a new int above 256
        return y

    session.step = old_step
    assert peak_rise(session, long_inputs(session), LONG) > 0


@pytest.mark.parametrize("art", ["tiny_art", "tokens_art", "seq2seq_art"])
def test_ort_session_step_allocates_zero_bytes_even_transiently(request, seq_for, art):
    """The whole real-time path with the real engine -- Session.step over the ORT backend with
    its default IOBinding -- allocates nothing traced, not even within a step: ORT is called
    through its bound C++ session with a RunOptions made once (runtime/backends/ort.py
    `_iobinding_runner`), and the commit copies into row views made at load."""
    path, _ = request.getfixturevalue(art)
    session = runtime.load(path, backend="ort")
    if session.config.arch == "encoder-decoder":
        session.set_source(np.array([[1, 2, 3]], dtype=np.int64))
    seq = seq_for(session.config, 1, session.max_len, seed=0)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(session.max_len)]
    assert peak_rise(session, xs, SESSION_STEPS) == 0


def test_ort_probe_sees_the_public_run_with_iobinding(tiny_art, seq_for):
    """The control: onnxruntime's public wrapper (WebGPU capture bookkeeping, a default
    RunOptions per call) does allocate within each call, and the probe sees it."""
    path, _ = tiny_art
    session = runtime.load(path, backend="ort")
    be = session.backend
    be._runs = [lambda: be._step.run_with_iobinding(be._ios[0])]
    seq = seq_for(session.config, 1, session.max_len, seed=0)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(session.max_len)]
    assert peak_rise(session, xs, 500) > 0


# --- sliding sessions (windowed artifacts): no resets, the ring wraps, the position runs on -----------------
def sliding_peak_rise(session, xs, steps):
    """peak_rise for a stream that is never reset: `steps` steps after a warm-up of 2 * len(xs)."""
    n = len(xs)
    plan = [(xs[i % n], False) for i in range(steps)]
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        _peak_rise_loop(session.step, session.reset, plan[: 2 * n])
        return _peak_rise_loop(session.step, session.reset, plan)
    finally:
        tracemalloc.stop()
        gc.enable()


class RingCopyBackend(CopyBackend):
    """CopyBackend over a ring of W rows: commit(r) copies into row r mod W (views made at load)."""

    name = "ring-copy"
    ring_cache = True

    def __init__(self, artifact, *, leak=False):
        Backend.__init__(self, artifact)
        w = self.config.window
        self._y = np.zeros(self.step_output_shape, np.float32)  # [B, 1, d_out | V]
        self._k = np.zeros(self.cache_shape, np.float32)  # [L, B, H, W, dh]
        self._v = np.zeros(self.cache_shape, np.float32)
        self._rows = [self._k[:, :, :, r % w] for r in range(3 * w)]  # 3W x [L, B, H, dh]
        self._new = np.ones(self._rows[0].shape, np.float32)
        self._leak = leak


@pytest.fixture(scope="module")
def long_window_artifact():
    """A windowed stand-in: window 100, max_len 300, so ring positions reach 299 (> 256, not
    CPython's cached small ints) and the block counters are updated every 100 steps."""
    config = preset("tiny").replace(max_len=LONG, window=100)
    return SimpleNamespace(
        config=config,
        batch=1,
        max_len=LONG,
        input_domain=(-10.0, 10.0),
        input_domain_columns=None,
        output_bound=None,
        manifest={},
    )


def test_sliding_session_step_allocates_zero_bytes(long_window_artifact):
    """The sliding session's own part (ring position, successor table, block counters) allocates
    not one byte over 2,000 steps of one stream (20 wraps of a ring of 100)."""
    session = runtime.Session(long_window_artifact, RingCopyBackend(long_window_artifact))
    assert session.sliding
    rise = sliding_peak_rise(session, long_inputs(session), SESSION_STEPS)
    assert rise == 0, f"{rise} B allocated within {SESSION_STEPS} steps"
    assert session.position == SESSION_STEPS + 2 * LONG


def test_sliding_probe_detects_an_int_position(long_window_artifact):
    """The probe can fail: a sliding session that counted its absolute position as an int would
    allocate one per step above 256."""
    session = runtime.Session(long_window_artifact, RingCopyBackend(long_window_artifact))
    step = session.step
    count = [0]

    def counting_step(x):
        y = step(x)
        count[0] = count[0] + 1  # a new int above 256
        return y

    session.step = counting_step
    assert sliding_peak_rise(session, long_inputs(session), LONG) > 0


@pytest.mark.parametrize("art", ["window_art", "window_tokens_art"])
def test_ort_sliding_session_allocates_zero_bytes_even_transiently(request, seq_for, art):
    """The whole real-time path on a windowed artifact (ORT, IOBinding): 2,000 steps of one stream
    over a ring of 3-4 rows, not one byte traced."""
    path, _ = request.getfixturevalue(art)
    session = runtime.load(path, backend="ort")
    seq = seq_for(session.config, 1, session.max_len, seed=0)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(session.max_len)]
    assert sliding_peak_rise(session, xs, SESSION_STEPS) == 0
