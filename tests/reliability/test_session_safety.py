"""Issue 20: a session under threads and signals.

Threads: a Session is single-threaded by contract; a call from a second thread while one is in
flight raises SessionBusy and changes nothing (before: lost updates, a cache row matching
neither caller's input). Signals: a handler's exception (KeyboardInterrupt, here from SIGALRM at
random moments) leaves the state unchanged unless the commit completed, and `position` tells
which (before: 3 in 3000 left the cache changed without the position, or raised after the
commit with nothing to tell). The state is `position` and cache rows 0..position-1
(runtime/session.py, "State and signals").
"""

from __future__ import annotations

import signal
import statistics
import threading
import time

import numpy as np
import pytest

from tickformer import runtime
from tickformer.errors import ContextFull, SessionBusy


def _rows(session, n):
    k, v = session.backend.cache()
    return k[:, :, :, :n].copy(), v[:, :, :, :n].copy()


def _x(rng, session):
    return rng.uniform(-1, 1, size=session.input_shape).astype(np.float32)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["numpy", "ort"])
def test_a_second_thread_gets_session_busy_while_a_step_is_in_flight(art_src, outcomes, backend):
    session = runtime.load(art_src[0], backend=backend)
    entered, release = threading.Event(), threading.Event()
    real_step = session.backend.step

    def slow_step(x, pos):
        entered.set()
        release.wait(10)
        return real_step(x, pos)

    session.backend.step = slow_step
    x = np.full(session.input_shape, 0.25, np.float32)
    result = {}
    thread = threading.Thread(target=lambda: result.update(y=session.step(x).copy()))
    thread.start()
    assert entered.wait(10)
    kind = "threads: a call from a second thread while a step is in flight"
    outcomes.describe(
        kind,
        "step, reset, run, set_source and close from another thread during a step; each must "
        "raise SessionBusy at once and change nothing",
    )
    assert session.in_flight
    for call in (
        lambda: session.step(x),
        session.reset,
        lambda: session.run(np.zeros((1, 2, 3), np.float32)),
        session.close,
    ):
        with pytest.raises(SessionBusy, match="single-threaded"):
            outcomes.run(kind, call, reraise=True)
    release.set()
    thread.join(10)
    session.backend.step = real_step
    assert session.position == 1 and not session.in_flight
    reference = runtime.load(art_src[0], backend=backend)
    np.testing.assert_array_equal(result["y"], reference.step(x))
    for a, b in zip(_rows(session, 1), _rows(reference, 1)):
        np.testing.assert_array_equal(a, b)
    session.close()


@pytest.mark.timeout(60)
def test_a_signal_handler_re_entering_step_gets_session_busy(art_src):
    session = runtime.load(art_src[0], backend="numpy")
    x = np.zeros(session.input_shape, np.float32)
    seen = []

    def handler(signum, frame):
        try:
            session.step(x)
        except SessionBusy as exc:
            seen.append(exc)
            raise

    real_step = session.backend.step

    def step_with_signal(x, pos):
        signal.raise_signal(signal.SIGUSR1)  # the handler runs inside the step
        return real_step(x, pos)

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        session.backend.step = step_with_signal
        with pytest.raises(SessionBusy):
            session.step(x)
    finally:
        signal.signal(signal.SIGUSR1, old)
    session.backend.step = real_step
    assert seen and session.position == 0 and not session.in_flight
    session.step(x)  # the flag was cleared: the session goes on
    assert session.position == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["numpy", "ort"])
def test_two_threads_hammering_one_session_never_corrupt_it(art_src, outcomes, backend):
    """Two threads step the same session as fast as they can (the engine call sleeps 0.2 ms, so
    calls overlap). Every call returns or raises SessionBusy; the committed inputs, replayed in
    commit order on a fresh session, give the same position and bit-identical cache rows."""
    session = runtime.load(art_src[0], backend=backend)
    reference = runtime.load(art_src[0], backend=backend)
    real_step, real_commit = session.backend.step, session.backend.commit
    staged, log = [None], []

    def step(x, pos):
        staged[0] = x.copy()
        time.sleep(0.0002)  # releases the GIL mid-step
        return real_step(x, pos)

    def commit(pos):
        log.append((pos, staged[0]))
        real_commit(pos)

    session.backend.step, session.backend.commit = step, commit
    kind = f"threads: two threads stepping one session concurrently ({backend})"
    outcomes.describe(
        kind,
        "each call: success or SessionBusy; commits replayed in order on a fresh session must give "
        "the same position and cache rows (no lost update, no mixed row)",
    )
    busy = [0]

    def hammer(seed):
        rng = np.random.default_rng(seed)
        while True:
            x = _x(rng, session)
            try:
                outcomes.run(kind, lambda x=x: session.step(x), reraise=True)
            except SessionBusy:
                busy[0] += 1
            except ContextFull:
                return

    # 4 rounds at least; more (up to 20) until the two threads' calls overlapped once: on a busy
    # machine the second thread may not be scheduled within a round
    for round_ in range(20):
        if round_ >= 4 and busy[0] > 0:
            break
        log.clear()
        threads = [threading.Thread(target=hammer, args=(10 * round_ + i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert session.position == len(log) == session.max_len
        assert [pos for pos, _ in log] == list(range(session.max_len))
        reference.reset()
        for _, x in log:
            reference.step(x)
        for a, b in zip(_rows(session, session.max_len), _rows(reference, reference.max_len)):
            np.testing.assert_array_equal(a, b)
        session.reset()
    assert busy[0] > 0, "the calls never overlapped: the test did not exercise concurrent entry"


class _Interrupt(KeyboardInterrupt):
    """What the SIGALRM handler raises: a KeyboardInterrupt, as Ctrl-C would."""


def _alarm(signum, frame):
    raise _Interrupt()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", ["numpy", "ort"])
def test_sigalrm_interrupts_at_random_moments_leave_old_or_committed_state(art_src, outcomes, backend):
    """1500 steps, each with a SIGALRM set to fire after a random delay of 0 to 2 step times: an
    interrupt lands before, inside or after the step. After each call: position is the old one
    and rows 0..position-1 are byte-identical (not committed; any scratch row is not state), or
    position advanced by one and the new row equals a reference session's (committed, its output
    in session.output). The next clean step is exact either way."""
    session = runtime.load(art_src[0], backend=backend)
    reference = runtime.load(art_src[0], backend=backend)
    rng = np.random.default_rng(20)
    warm = [_x(rng, session) for _ in range(50)]
    times = []
    for x in warm:
        start = time.perf_counter()
        session.step(x)
        times.append(time.perf_counter() - start)
        if session.position == session.max_len:
            session.reset()
    session.reset()
    typical = statistics.median(times)
    kind = f"signal: SIGALRM raising KeyboardInterrupt at a random moment in step ({backend})"
    outcomes.describe(
        kind,
        "delay U(0, 2 x median step); outcome: before commit (state unchanged), after commit "
        "(position + 1, row equal to a reference), or not interrupted",
    )
    old = signal.signal(signal.SIGALRM, _alarm)
    counts = {"not interrupted": 0, "interrupted before commit": 0, "interrupted after commit": 0}
    try:
        for trial in range(1500):
            if session.position == session.max_len:
                session.reset()
                reference.reset()
            x = _x(rng, session)
            pos = session.position
            before = _rows(session, pos)
            interrupted = False
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(0, 2 * typical))
                try:
                    session.step(x)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    time.sleep(0)  # a call: a signal already delivered raises here, inside the try
            except _Interrupt:
                interrupted = True
            assert not session.in_flight
            after = session.position
            assert after in (pos, pos + 1), (trial, pos, after)
            for a, b in zip(before, _rows(session, pos)):
                np.testing.assert_array_equal(a, b)
            if after == pos + 1:
                y = reference.step(x)
                np.testing.assert_array_equal(session.output, y)
                for a, b in zip(_rows(session, after), _rows(reference, after)):
                    np.testing.assert_array_equal(a, b)
            else:
                assert interrupted
            outcome = (
                "not interrupted"
                if not interrupted
                else ("interrupted after commit" if after == pos + 1 else "interrupted before commit")
            )
            counts[outcome] += 1
            outcomes.record(kind, outcome)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert counts["interrupted before commit"] > 0, counts
    x = _x(rng, session)
    if session.position == session.max_len:
        session.reset()
        reference.reset()
    np.testing.assert_array_equal(session.step(x), reference.step(x))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "where", ["between the K and V row copies", "after both copies, before the position"]
)
@pytest.mark.parametrize("backend", ["numpy", "ort"])
def test_an_interrupt_inside_the_commit_leaves_the_old_state(art_src, outcomes, backend, where):
    """The two worst moments, made deterministic: a KeyboardInterrupt raised inside the commit.
    The position is unchanged, rows 0..position-1 are byte-identical, and retrying the same
    input gives exactly what an uninterrupted session gives."""
    session = runtime.load(art_src[0], backend=backend)
    reference = runtime.load(art_src[0], backend=backend)
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = _x(rng, session)
        session.step(x)
        reference.step(x)
    host = session.backend.store
    real_commit = host.commit

    def interrupted_commit(pos):
        if where.startswith("between"):
            np.copyto(host._k_rows[pos], host._k_src)  # K row written, V not
        else:
            real_commit(pos)
        raise _Interrupt()

    kind = "signal: KeyboardInterrupt inside the commit (deterministic)"
    outcomes.describe(
        kind,
        "raised between the K and V row copies, or after both before the position store; "
        "state (position, rows below it) unchanged, the retry exact",
    )
    x = _x(rng, session)
    before = _rows(session, session.position)
    host.commit = interrupted_commit
    with pytest.raises(_Interrupt):
        session.step(x)
    outcomes.record(kind, "state unchanged" if session.position == 3 else "CHANGED")
    host.commit = real_commit
    assert session.position == 3 and not session.in_flight
    for a, b in zip(before, _rows(session, 3)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(session.step(x), reference.step(x))  # the retry
    for a, b in zip(_rows(session, 4), _rows(reference, 4)):
        np.testing.assert_array_equal(a, b)
