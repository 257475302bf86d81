"""Property tests of the integer specifications CrossHair proves (deadline, ring buffer,
position, latency): Hypothesis at the scale the runtime meets (ns timestamps near 2**62), plus the
runtime agreeing with them where the runtime exists."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickformer.contracts import deadline as D
from tickformer.contracts import position as P
from tickformer.contracts import ring_buffer as R
from tickformer.contracts.latency import over_budget_ns

ns = st.integers(0, 2**62)
period = st.integers(1, 10**10)


@given(ns, period, st.integers(0, 2**40), st.integers(-(2**20), 2**40))
def test_next_tick_skips_missed_periods_without_drift(start, p, tick, offset):
    now = D.deadline_of(start, p, tick) + offset
    nxt, skipped = D.next_tick(start, p, tick, now)
    assert nxt == tick + 1 + skipped and skipped >= 0
    release = D.release_time(start, p, nxt)
    assert (release - start) % p == 0  # on the grid: no drift
    if offset <= 0:
        assert skipped == 0
    else:
        assert now <= release < now + p  # first release not in the past, none skipped needlessly
    assert D.lateness_ns(now, D.deadline_of(start, p, tick)) == offset


def test_release_time_is_exact_past_2_53():
    start, p = 2**62, 999_999_937
    k = 10**9
    assert D.release_time(start, p, k) == start + k * p  # a float accumulation would be off


@given(st.integers(0, 10**6), st.integers(1, 64))
def test_ring_buffer_live_slots_distinct(pos, w):
    live = [R.recent_slot(pos, k, w) for k in range(w)]
    live = [s for s in live if s != -1]
    assert len(live) == len(set(live)) == min(w, pos + 1)
    assert all(0 <= s < w for s in live)
    ev = R.evicted_position(pos, w)
    assert ev == -1 or R.ring_slot(ev, w) == R.ring_slot(pos, w)


@given(st.integers(1, 64), st.lists(st.tuples(st.integers(1, 4), st.booleans()), max_size=40))
def test_position_bookkeeping_sequence(max_len, steps):
    pos = 0
    for n, ok in steps:
        new = P.step_position(pos, n, max_len, ok)
        assert 0 <= new <= max_len
        assert new == (pos + n if ok and pos + n <= max_len else pos)
        pos = new
    assert P.reset_position() == 0


@given(st.integers(0, 10**9), st.integers(1, 10**9))
def test_over_budget(elapsed, budget):
    late = over_budget_ns(elapsed, budget)
    assert late == max(0, elapsed - budget)


@given(st.integers(0, 10**6), st.integers(1, 64), st.integers(0, 64))
def test_recent_and_evicted_agree_with_the_window(pos, w, k):
    """recent_slot / evicted_position against a brute-force ring: write positions 0..pos into slot
    p mod W of a list and read back (the specs' independent definitions, at scale)."""
    ring = [-1] * w
    for p in range(max(0, pos - 2 * w), pos + 1):
        ring[p % w] = p
    slot = R.recent_slot(pos, k, w)
    if k < w and k <= pos:
        assert slot != -1 and ring[slot] == pos - k
    else:
        assert slot == -1
    ev = R.evicted_position(pos, w)
    assert ev == (pos - w if pos >= w else -1)


def test_runtime_session_agrees_with_position_spec(tmp_path):
    """A failed step leaves the session's position unchanged (P2), on the real runtime."""
    from tickformer import runtime
    from tickformer.errors import TickformerError
    from tickformer.export import writer as export
    from tickformer.model.config import preset
    from tickformer.model.transformer import init_params

    cfg = preset("tiny")
    from tickformer.model.checkpoint import Checkpoint

    art = export.export_artifact(
        Checkpoint(cfg, init_params(cfg), {}), tmp_path / "art", domain=(-1.0, 1.0), lengths=[1, 4]
    )
    sess = runtime.load(art, backend="numpy")
    x = np.zeros((1, 1, cfg.d_in), np.float32)  # [B, 1, d_in]
    for _ in range(3):
        sess.step(x)
    assert sess.position == P.step_position(2, 1, cfg.max_len, True) == 3
    bad = np.full((1, 1, cfg.d_in), np.nan, np.float32)
    with pytest.raises(TickformerError):
        sess.step(bad)
    assert sess.position == P.step_position(3, 1, cfg.max_len, False) == 3
    sess.reset()
    assert sess.position == P.reset_position()


# --- the ring cache's step arithmetic (R5-R13): what CrossHair proves, at scale, plus R9/R10 -------
@given(st.integers(0, 10**7), st.integers(1, 64))
def test_ring_step_reads_exactly_the_window(pos, w):
    """The slots the step writing `pos` reads hold exactly the positions of its window but pos
    itself (p - W < j < p, j >= 0), each once, at its true distance."""
    read = [s for s in range(w) if R.slot_read(pos, s, w)]
    held = sorted(R.held_position(pos, s, w) for s in read)
    assert held == list(range(max(0, pos - w + 1), pos))
    for s in read:
        assert R.window_distance(pos, s, w) == pos - R.held_position(pos, s, w)


def _walk(w: int, steps: int):
    """(position, ring, absolute position from the block counters) along a stream, writing the
    counters with the proven write (R11, R13: counters_after, block_counter)."""
    ring, c0, c1 = 0, 0, 0
    for p in range(steps):
        yield p, ring, R.absolute_position(ring, c1 if R.block_counter(ring, w) == 1 else c0, w)
        c0, c1 = R.counters_after(ring, c0, c1, w)
        ring = R.next_ring_position(ring, w)


@pytest.mark.parametrize("w", [1, 2, 3, 4, 5, 7, 8, 16, 31, 64])
def test_ring_positions_stand_in_exactly_over_20_windows(w):
    """Exhaustively over 20W + 7 positions: the successor table walks ring_position(p) (R9, R11),
    the block counters give p back (R12, R13), and the step reads the same slots at the same
    distances at p and at its ring position (R10's conclusion, which CrossHair proves per 2W-shift
    and the docstring's induction extends to every p)."""
    for p, ring, back in _walk(w, 20 * w + 7):
        assert ring == R.ring_position(p, w) and R.ring_consistent(p, ring, w)
        assert back == p
        for s in range(w):
            assert R.slot_read(ring, s, w) == R.slot_read(p, s, w)
            assert R.window_distance(ring, s, w) == R.window_distance(p, s, w)


@given(st.integers(0, 2**62), st.integers(1, 4096), st.integers(0, 4095))
def test_ring_position_reads_alike_far_into_the_stream(p, w, s):
    s %= w
    ring = R.ring_position(p, w)
    assert R.ring_consistent(p, ring, w) and R.ring_step(p, ring, w)
    assert R.slot_read(ring, s, w) == R.slot_read(p, s, w)
    assert R.window_distance(ring, s, w) == R.window_distance(p, s, w)
    assert R.absolute_position(ring, R.ring_block(p, w), w) == p


def test_ring_functions_take_arrays_as_the_backends_call_them():
    """The numpy backend and the training mask call the same functions on index arrays."""
    from tickformer.contracts import masking as M

    w, slots, rings = 5, np.arange(5), np.arange(15)[:, None]
    read = R.slot_read(rings, slots, w)  # [3W, W]
    assert read.dtype == np.bool_
    assert read.tolist() == [[R.slot_read(int(r), int(s), w) for s in slots] for r in rings[:, 0]]
    t = np.arange(12)
    assert np.array_equal(M.window_allowed(t[:, None], t[None, :], w), M.window_mask_spec(12, w))
