"""Session.peek / Session.commit: K candidate inputs over one shared history, then one committed.

What must hold (runtime/session.py, runtime/backends/base.py "Peek"):
- commit after peek == a plain step whose every batch row is the chosen candidate: the cache and
  every later output are bit for bit the same (the committed rows are copies of the candidate's
  staged rows, computed by the same graph on the same input row);
- a peek changes nothing (position, cache); a failed peek or commit leaves the state unchanged;
- commit needs a pending peek at the current position (a step or reset in between drops it);
- the whole peek + commit path allocates nothing traced (ORT IOBinding), not even transiently;
- backends without commit_candidate refuse peek clearly.
"""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from tickformer import runtime
from tickformer.errors import BackendError, ContextFull, InputError
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

K = 4
BACKENDS = ["ort", "numpy"]


@pytest.fixture(scope="module")
def peek_art(tmp_path_factory):
    """The tiny continuous model exported with batch K: K candidates x 1 stream."""
    config = preset("tiny")
    out = tmp_path_factory.mktemp("peek") / "art"
    export_params(config, init_params(config, 5), out, batch=K)
    return out


@pytest.fixture(scope="module")
def ring_art(tmp_path_factory):
    """The same with a window of 4 (ring cache of 4 rows; a session slides without end)."""
    config = preset("tiny").replace(window=4)
    out = tmp_path_factory.mktemp("peek-ring") / "art"
    export_params(config, init_params(config, 6), out, batch=K)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_commit_after_peek_equals_a_plain_step_while_sliding(ring_art, backend):
    """Windowed, sliding past the window many times (40 ticks, W = 4): peek + commit(i) and a
    plain step of the chosen candidate give the same outputs and the same ring cache, bit for
    bit, and the K rows of the ring stay one history."""
    a = runtime.load(ring_art, backend=backend)
    b = runtime.load(ring_art, backend=backend)
    assert a.sliding
    xs = _inputs(a, 40, seed=11)
    for t in range(40):
        ya = a.peek(xs[t]).copy()
        choice = (3 * t + 1) % K
        a.commit(choice)
        yb = b.step(np.ascontiguousarray(np.broadcast_to(xs[t, choice], xs[t].shape)))
        np.testing.assert_array_equal(ya[choice], yb[choice])
        assert a.position == b.position == t + 1
        (ka, va), (kb, vb) = _cache_copy(a), _cache_copy(b)
        np.testing.assert_array_equal(ka, kb)
        np.testing.assert_array_equal(va, vb)
        for row in range(1, K):
            np.testing.assert_array_equal(ka[:, row], ka[:, 0])


def test_peek_and_commit_allocate_zero_bytes_while_sliding(ring_art):
    s = runtime.load(ring_art, backend="ort")
    xs = list(_inputs(s, 64, seed=12))
    plan = [(xs[t], t % K, False) for t in range(64)] * 10
    assert _peak_rise(s, plan) == 0


def _inputs(session, steps, seed):
    rng = np.random.default_rng(seed)
    d_in = session.config.d_in
    return rng.uniform(-3, 3, size=(steps, K, 1, d_in)).astype(np.float32)  # [steps, K, 1, d_in]


def _cache_copy(session):
    k, v = session.backend.cache()
    return k.copy(), v.copy()


@pytest.mark.parametrize("backend", BACKENDS)
def test_commit_after_peek_equals_a_plain_step(peek_art, backend):
    """Session A peeks K candidates and commits one each tick; session B steps with every row
    set to that candidate. Caches and outputs agree bit for bit at every position, and every
    batch row of A's cache stays identical (one shared history)."""
    a = runtime.load(peek_art, backend=backend)
    b = runtime.load(peek_art, backend=backend)
    xs = _inputs(a, a.max_len, seed=1)
    for t in range(a.max_len):
        ya = a.peek(xs[t]).copy()  # [K, 1, d_out]
        choice = t % K
        a.commit(choice)
        yb = b.step(np.ascontiguousarray(np.broadcast_to(xs[t, choice], xs[t].shape)))
        np.testing.assert_array_equal(ya[choice], yb[choice])
        assert a.position == b.position == t + 1
        (ka, va), (kb, vb) = _cache_copy(a), _cache_copy(b)
        np.testing.assert_array_equal(ka[:, :, :, : t + 1], kb[:, :, :, : t + 1])
        np.testing.assert_array_equal(va[:, :, :, : t + 1], vb[:, :, :, : t + 1])
        for row in range(1, K):
            np.testing.assert_array_equal(ka[:, row, :, : t + 1], ka[:, 0, :, : t + 1])
            np.testing.assert_array_equal(va[:, row, :, : t + 1], va[:, 0, :, : t + 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_peek_changes_no_state_and_candidates_see_the_same_history(peek_art, backend):
    """Peeking twice gives the same outputs (nothing committed in between), the position stays,
    the cache is untouched; and candidates equal to each other give equal outputs (same history)."""
    s = runtime.load(peek_art, backend=backend)
    xs = _inputs(s, 4, seed=2)
    for t in range(3):
        s.peek(xs[t])
        s.commit(0)
    before = _cache_copy(s)
    y1 = s.peek(xs[3]).copy()
    y2 = s.peek(xs[3]).copy()
    np.testing.assert_array_equal(y1, y2)
    assert s.position == 3
    after = _cache_copy(s)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    same = np.ascontiguousarray(np.broadcast_to(xs[3, 1], xs[3].shape))
    y = s.peek(same)
    for row in range(1, K):
        np.testing.assert_array_equal(y[row], y[0])


def test_commit_needs_a_pending_peek_at_this_position(peek_art):
    s = runtime.load(peek_art, backend="ort")
    xs = _inputs(s, 3, seed=3)
    with pytest.raises(InputError, match="needs a peek"):
        s.commit(0)
    s.peek(xs[0])
    s.commit(1)
    with pytest.raises(InputError, match="needs a peek"):
        s.commit(1)  # already committed: no peek pending at position 1
    s.peek(xs[1])
    s.step(xs[1])  # a plain step overwrites the staged rows: the peek is dropped
    with pytest.raises(InputError, match="needs a peek"):
        s.commit(0)
    s.peek(xs[2])
    s.reset()
    with pytest.raises(InputError, match="needs a peek"):
        s.commit(0)
    assert s.position == 0


@pytest.mark.parametrize("bad", [-1, K, 1.0, "0", None, True + 10])
def test_commit_with_a_bad_index_changes_nothing(peek_art, bad):
    s = runtime.load(peek_art, backend="ort")
    xs = _inputs(s, 2, seed=4)
    s.peek(xs[0])
    s.commit(2)
    s.peek(xs[1])
    before = _cache_copy(s)
    with pytest.raises(InputError, match="candidate index"):
        s.commit(bad)
    assert s.position == 1
    after = _cache_copy(s)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    s.commit(np.int64(3))  # the peek is still pending after a refused index; numpy ints are fine
    assert s.position == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_failed_peek_changes_nothing(peek_art, backend):
    """A bad input (NaN, wrong shape) and a full context: InputError / ContextFull, state as before."""
    s = runtime.load(peek_art, backend=backend)
    xs = _inputs(s, s.max_len, seed=5)
    s.peek(xs[0])
    s.commit(0)
    before = _cache_copy(s)
    bad = xs[1].copy()
    bad[2, 0, 0] = np.nan
    with pytest.raises(InputError):
        s.peek(bad)
    with pytest.raises(InputError):
        s.peek(xs[1][:1])
    assert s.position == 1
    after = _cache_copy(s)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    for t in range(1, s.max_len):
        s.peek(xs[t])
        s.commit(t % K)
    with pytest.raises(ContextFull):
        s.peek(xs[0])
    assert s.position == s.max_len


def test_backend_without_peek_is_refused(peek_art):
    s = runtime.load(peek_art, backend="ort")
    s.backend.supports_peek = False  # as a backend without commit_candidate declares
    with pytest.raises(BackendError, match="does not implement peek"):
        s.peek(_inputs(s, 1, seed=6)[0])


def _peak_rise(session, plan):
    """Rise of traced memory's peak over a run of `plan`, a list of (candidates, choice, new
    sequence?) made beforehand, after a warm-up run of it; the iterator exists before the base
    is read, so the loop itself allocates nothing (tests/runtime/test_allocation.py peak_rise)."""
    peek, commit, reset = session.peek, session.commit, session.reset

    def run():
        get, reset_peak = tracemalloc.get_traced_memory, tracemalloc.reset_peak
        it = iter(plan)
        base = get()[0]
        base = get()[0]  # replaces an int of the same size
        reset_peak()
        for x, i, first in it:
            if first:
                reset()
            peek(x)
            commit(i)
        return get()[1] - base

    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        run()  # warm-up under tracing: first calls, free lists
        return run()
    finally:
        tracemalloc.stop()
        gc.enable()


def test_peek_and_commit_allocate_zero_bytes_on_ort(peek_art):
    """The whole candidate path on ORT IOBinding: not one byte traced, even transiently."""
    s = runtime.load(peek_art, backend="ort")
    xs = list(_inputs(s, s.max_len, seed=7))
    choices = list(range(K))
    plan = [(xs[t], choices[t % K], t == 0) for t in range(s.max_len)] * 20
    assert _peak_rise(s, plan) == 0


def test_peek_probe_detects_an_allocating_commit(peek_art):
    """The probe can fail: a commit_candidate that makes one small array shows up."""
    s = runtime.load(peek_art, backend="ort")
    host = s.backend._host
    real = host.commit_candidate

    def leaky(pos, i):
        np.zeros(4)
        real(pos, i)

    host.commit_candidate = leaky
    xs = list(_inputs(s, s.max_len, seed=8))
    plan = [(xs[t], 1, t == 0) for t in range(s.max_len)]
    assert _peak_rise(s, plan) > 0


def test_commit_candidate_mutant_is_caught(peek_art):
    """Mutant: commit_candidate writes only batch row i (not every row): the rows' histories
    diverge, and the equality-with-a-plain-step test's row check would fail."""
    s = runtime.load(peek_art, backend="numpy")
    host = s.backend._host

    def only_row_i(pos, i):
        host.k[:, i, :, pos] = host.k_new[:, i, :, 0]
        host.v[:, i, :, pos] = host.v_new[:, i, :, 0]

    host.commit_candidate = only_row_i
    xs = _inputs(s, 1, seed=9)
    s.peek(xs[0])
    s.commit(2)
    k, _ = s.backend.cache()
    assert not np.array_equal(k[:, 0, :, 0], k[:, 2, :, 0])
