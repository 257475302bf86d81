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

import tickformer.codegen  # noqa: F401  (registers backend "c"'s library builder: runtime/backends/c.py)
from tickformer import runtime
from tickformer.errors import BackendError, ContextFull, InputError
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

K = 4
BACKENDS = ["ort", "numpy", "c"]  # c: the generated tf_peek / tf_commit_candidate (codegen/peek.py)
SSM_PEEK_BACKENDS = BACKENDS  # the generated C ssm step has commit_candidate too


def _load(art, backend, **kw):
    """runtime.load, skipping `c` (with the reason) where no C compiler is installed."""
    from tickformer.errors import BackendUnavailable

    try:
        return runtime.load(art, backend=backend, **kw)
    except BackendUnavailable as exc:
        if backend != "c":
            raise
        pytest.skip(f"the c backend cannot be built here: {exc}")


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
    a = _load(ring_art, backend)
    b = _load(ring_art, backend)
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
    a = _load(peek_art, backend)
    b = _load(peek_art, backend)
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
    s = _load(peek_art, backend)
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_commit_needs_a_pending_peek_at_this_position(peek_art, backend):
    s = _load(peek_art, backend)
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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [-1, K, 1.0, "0", None, True + 10])
def test_commit_with_a_bad_index_changes_nothing(peek_art, bad, backend):
    s = _load(peek_art, backend)
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
    s = _load(peek_art, backend)
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


@pytest.mark.parametrize("backend", ["ort", "c"])
def test_peek_and_commit_allocate_zero_bytes(peek_art, backend):
    """The whole candidate path on ORT IOBinding and on the generated C (tf_peek,
    tf_commit_candidate): not one byte traced, even transiently."""
    s = _load(peek_art, backend)
    xs = list(_inputs(s, s.max_len, seed=7))
    choices = list(range(K))
    plan = [(xs[t], choices[t % K], t == 0) for t in range(s.max_len)] * 20
    assert _peak_rise(s, plan) == 0


def test_peek_probe_detects_an_allocating_commit(peek_art):
    """The probe can fail: a commit_candidate that makes one small array shows up."""
    s = runtime.load(peek_art, backend="ort")
    host = s.backend.store
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
    host = s.backend.store

    def only_row_i(pos, i):
        host.k[:, i, :, pos] = host.k_new[:, i, :, 0]
        host.v[:, i, :, pos] = host.v_new[:, i, :, 0]

    host.commit_candidate = only_row_i
    xs = _inputs(s, 1, seed=9)
    s.peek(xs[0])
    s.commit(2)
    k, _ = s.backend.cache()
    assert not np.array_equal(k[:, 0, :, 0], k[:, 2, :, 0])


# --- ssm artifacts: the same peek / commit over a fixed-size state (runtime/session.py) -------------
SSM = preset("tiny").replace(block="ssm", d_state=3)


@pytest.fixture(scope="module")
def ssm_peek_art(tmp_path_factory):
    """The tiny ssm model exported with batch K (state [K, L, D, N], K candidates of one stream)."""
    out = tmp_path_factory.mktemp("peek-ssm") / "art"
    export_params(SSM, init_params(SSM, 7), out, batch=K)
    return out


@pytest.mark.parametrize("backend", SSM_PEEK_BACKENDS)
def test_ssm_commit_after_peek_equals_a_plain_step(ssm_peek_art, backend):
    """Past max_len (40 ticks, max_len 16; no ContextFull): session A peeks K candidates and
    commits one per tick, session B steps with every row set to that candidate. Outputs and the
    whole state agree bit for bit at every position, and A's K rows stay one state."""
    a = _load(ssm_peek_art, backend, contracts="check")
    b = _load(ssm_peek_art, backend)
    xs = _inputs(a, 40, seed=21)
    for t in range(40):
        ya = a.peek(xs[t]).copy()
        assert a.peek_pending and a.position == t
        choice = (5 * t + 2) % K
        a.commit(choice)
        yb = b.step(np.ascontiguousarray(np.broadcast_to(xs[t, choice], xs[t].shape)))
        np.testing.assert_array_equal(ya[choice], yb[choice])
        assert a.position == b.position == t + 1
        np.testing.assert_array_equal(a.state(), b.state())
        for row in range(1, K):
            np.testing.assert_array_equal(a.state()[row], a.state()[0])
    assert a.monitor.summary()["contracts"]["state_bound"]["violations"] == 0


@pytest.mark.parametrize("backend", SSM_PEEK_BACKENDS)
def test_ssm_peek_changes_no_state_and_a_step_or_reset_drops_it(ssm_peek_art, backend):
    s = _load(ssm_peek_art, backend)
    xs = _inputs(s, 4, seed=22)
    s.peek(xs[0])
    s.commit(0)  # one shared history in every row
    before = s.state().copy()
    y1 = s.peek(xs[1]).copy()
    np.testing.assert_array_equal(s.peek(xs[1]), y1)  # nothing committed in between
    assert s.position == 1
    np.testing.assert_array_equal(s.state(), before)
    same = np.ascontiguousarray(np.broadcast_to(xs[1, 2], xs[1].shape))
    y = s.peek(same)
    for row in range(1, K):
        np.testing.assert_array_equal(y[row], y[0])  # one shared history
    s.step(xs[2])  # overwrites the staged state: the peek is dropped
    with pytest.raises(InputError, match="needs a peek"):
        s.commit(0)
    s.peek(xs[3])
    s.reset()
    with pytest.raises(InputError, match="needs a peek"):
        s.commit(0)
    assert s.position == 0 and not s.state().any()


@pytest.mark.parametrize("backend", SSM_PEEK_BACKENDS)
def test_ssm_failed_peek_or_commit_changes_nothing(ssm_peek_art, backend):
    """NaN input, wrong shape, a state-bound violation (mode check), a bad index: the error, and
    position and state exactly as before."""
    s = _load(ssm_peek_art, backend, contracts="check")
    xs = _inputs(s, 3, seed=23)
    s.peek(xs[0])
    s.commit(1)
    before, pos = s.state().copy(), s.position
    bad = xs[1].copy()
    bad[2, 0, 0] = np.nan
    with pytest.raises(InputError):
        s.peek(bad)
    with pytest.raises(InputError):
        s.peek(xs[1][:1])
    s.peek(xs[1])
    with pytest.raises(InputError, match="candidate index"):
        s.commit(K)
    s.monitor.state_bound = s.monitor.state_bound * 1e-9  # a bound every candidate state breaks
    from tickformer.errors import ContractViolation

    with pytest.raises(ContractViolation, match="state_bound"):
        s.peek(xs[2])
    with pytest.raises(InputError, match="needs a peek"):
        s.commit(0)  # the failed peek ran the backend: the earlier peek is dropped
    assert s.position == pos
    np.testing.assert_array_equal(s.state(), before)


def test_ssm_peek_across_the_position_wrap(ssm_peek_art, monkeypatch):
    """The buffer parity follows the low part of the position through its wrap (WRAP = 4 here)."""
    from tickformer.runtime import session as session_module

    monkeypatch.setattr(session_module, "WRAP", 4)
    a = runtime.load(ssm_peek_art, backend="ort")
    monkeypatch.setattr(session_module, "WRAP", 1 << 16)
    b = runtime.load(ssm_peek_art, backend="ort")
    xs = _inputs(a, 11, seed=24)
    for t in range(11):
        a.peek(xs[t])
        a.commit(t % K)
        b.step(np.ascontiguousarray(np.broadcast_to(xs[t, t % K], xs[t].shape)))
    assert a.position == b.position == 11 and a._wraps == 2
    np.testing.assert_array_equal(a.state(), b.state())


def test_ssm_peek_and_commit_allocate_zero_bytes_on_ort(ssm_peek_art):
    """600 ticks of peek + commit (positions past 256) on ORT IOBinding: not one byte traced."""
    s = runtime.load(ssm_peek_art, backend="ort")
    xs = list(_inputs(s, 60, seed=25))
    plan = [(xs[t % 60], t % K, t == 0) for t in range(600)]
    assert _peak_rise(s, plan) == 0
    assert s.position > 256


@pytest.mark.parametrize("mutant", ["no copy", "rows before i only"])
def test_ssm_commit_candidate_mutants_are_caught(ssm_peek_art, mutant):
    """commit_candidate copying nothing, or only the rows before i: the K rows' states diverge
    and the equality with a plain step fails (what the tests above assert)."""
    from tickformer.runtime.backends.layout import HostState

    s = runtime.load(ssm_peek_art, backend="numpy")
    store = s.backend.store
    assert isinstance(store, HostState)

    def broken(pos, i):
        if mutant == "rows before i only":
            before, _, row = store._cand[pos & 1][i]
            np.copyto(before, row)

    store.commit_candidate = broken
    xs = _inputs(s, 1, seed=26)
    s.peek(xs[0])
    s.commit(1)
    assert not all(np.array_equal(s.state()[row], s.state()[1]) for row in range(K))


def test_an_ssm_backend_without_commit_candidate_is_refused_naming_those_with_it(ssm_peek_art):
    """Backend declares supports_peek False; a backend that adds no commit_candidate (as a new
    one may) is refused before anything runs, with backends that have it named (which do)."""
    from tickformer.runtime.backends.base import Backend

    assert Backend.supports_peek is False
    s = runtime.load(ssm_peek_art, backend="numpy")
    s.backend.supports_peek = False
    with pytest.raises(BackendError, match="does not implement peek.*'ort', 'numpy' or 'c'"):
        s.peek(_inputs(s, 1, seed=27)[0])
    for name in ("ort", "numpy"):
        assert runtime.load(ssm_peek_art, backend=name).backend.supports_peek
