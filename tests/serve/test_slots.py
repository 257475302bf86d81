"""The slot pool (serve/slots.py): streams started at different ticks, stepped together in one
batched step, each equal to its own runtime Session; one stream's step never touches another's
slot; a failed step leaves every slot as it was."""

from __future__ import annotations

import numpy as np
import pytest
from serve_kinds import KINDS, inputs

from tickformer import runtime
from tickformer.artifact.reader import open_artifact
from tickformer.errors import ConfigError
from tickformer.serve.slots import SlotPool

STARTS = [0, 1, 3, 5, 0, 2, 7, 4]  # the tick each of 8 streams starts at


def _close(a, b, tol):
    return np.all(np.abs(a - b) <= tol["atol"] + tol["rtol"] * np.abs(b))


@pytest.mark.parametrize("kind", list(KINDS))
def test_staggered_streams_stepped_together_equal_their_own_sessions(arts, kind):
    art = open_artifact(arts[kind])
    pool = SlotPool(art, 8)
    length = 14 if kind == "static" else 26  # windowed: past 3W, the ring wraps more than once
    xs = inputs(KINDS[kind], 8, length, seed=3)
    sessions = [runtime.load(arts[kind], backend="ort") for _ in STARTS]
    compared = 0
    for t in range(length + max(STARTS)):
        pool.reset(np.array([i for i, s in enumerate(STARTS) if s == t], np.int64))
        live = np.array([i for i, s in enumerate(STARTS) if s <= t < s + length], np.int64)
        if len(live) == 0:
            continue
        y = pool.step(live, xs[live, t - np.array(STARTS)[live]])  # one batched step, mixed positions
        for j, i in enumerate(live):
            x = xs[i : i + 1, t - STARTS[i]][:, None]  # [1, 1, d_in] | [1, 1]
            assert _close(y[j], sessions[i].step(x).reshape(-1), art.tolerance), (kind, i, t)
            compared += 1
    assert compared == 8 * length


def test_a_step_touches_only_the_slots_it_names(arts):
    pool = SlotPool(open_artifact(arts["windowed"]), 6)
    pool.reset(np.arange(6))
    x = inputs(KINDS["windowed"], 6, 1, seed=0)[:, 0]
    pool.step(np.arange(6), x)
    k, v, pos = pool.k.copy(), pool.v.copy(), pool.position.copy()
    pool.step(np.array([1, 4]), x[[1, 4]])
    others = [0, 2, 3, 5]
    assert np.array_equal(pool.k[:, others], k[:, others]) and np.array_equal(pool.v[:, others], v[:, others])
    assert np.array_equal(pool.position[others], pos[others]) and list(pool.position[[1, 4]]) == [2, 2]
    assert not np.array_equal(pool.k[:, [1, 4]], k[:, [1, 4]])


def test_ssm_state_of_other_slots_untouched(arts):
    pool = SlotPool(open_artifact(arts["ssm"]), 4)
    x = inputs(KINDS["ssm"], 4, 1, seed=1)[:, 0]
    pool.step(np.arange(4), x)
    state = pool.state.copy()
    pool.step(np.array([2]), x[[2]])
    assert np.array_equal(pool.state[[0, 1, 3]], state[[0, 1, 3]]) and not np.array_equal(
        pool.state[2], state[2]
    )


def test_a_failed_step_leaves_every_slot_as_it_was(arts):
    pool = SlotPool(open_artifact(arts["static"]), 3)
    x = inputs(KINDS["static"], 3, 1, seed=2)[:, 0]
    pool.step(np.arange(3), x)
    k, pos = pool.k.copy(), pool.position.copy()
    for twice in ([0, 0], [2, 0, 2], [1, 2, 1]):  # a slot twice (never a run of consecutive slots)
        with pytest.raises(ValueError, match="a slot appears twice"):
            pool.step(np.array(twice), x[: len(twice)])
    with pytest.raises(ValueError):
        pool.step(np.array([0, 1]), x[:, :2])  # wrong width: fails inside the step, before the commit
    assert np.array_equal(pool.k, k) and np.array_equal(pool.position, pos)


def test_static_slots_fill_at_max_len(arts):
    pool = SlotPool(open_artifact(arts["static"]), 2)
    x = inputs(KINDS["static"], 2, 16, seed=4)
    for t in range(16):
        pool.step(np.array([0]), x[0:1, t])
    assert list(pool.full(np.array([0, 1]))) == [True, False]
    assert not SlotPool(open_artifact(arts["windowed"]), 1).full(np.array([0])).any()


def test_bad_pools_are_refused(arts, tmp_path):
    with pytest.raises(ConfigError, match="--slots 1 or more"):
        SlotPool(open_artifact(arts["static"]), 0)


def test_a_non_finite_row_is_never_committed(arts):
    """The pool holds finite rows only (so a stale row needs no masking of its values): a step
    whose new rows are not finite raises and leaves every slot as it was."""
    pool = SlotPool(open_artifact(arts["windowed"]), 2)
    x = inputs(KINDS["windowed"], 2, 1, seed=3)[:, 0]
    pool.step(np.arange(2), x)
    k, v, pos = pool.k.copy(), pool.v.copy(), pool.position.copy()
    pool._layers[1]["mixer"]["w_v"] = np.full_like(pool._layers[1]["mixer"]["w_v"], np.inf)
    with (
        pytest.raises(FloatingPointError, match="no stream advanced"),
        np.errstate(over="ignore", invalid="ignore"),
    ):
        pool.step(np.arange(2), x)
    assert np.array_equal(pool.k, k) and np.array_equal(pool.v, v) and np.array_equal(pool.position, pos)


def test_a_run_of_slots_and_the_same_slots_gathered_agree(arts):
    """The view path (consecutive slots) and the gather path (any other order) step alike."""
    a, b = SlotPool(open_artifact(arts["windowed"]), 4), SlotPool(open_artifact(arts["windowed"]), 4)
    xs = inputs(KINDS["windowed"], 4, 9, seed=8)
    order = np.array([3, 0, 2, 1])
    for t in range(9):
        ya = a.step(np.arange(4), xs[:, t])
        yb = b.step(order, xs[order, t])
        assert np.allclose(ya[order], yb, rtol=0, atol=1e-6)
    assert np.allclose(a.k, b.k, rtol=0, atol=1e-6) and np.allclose(a.v, b.v, rtol=0, atol=1e-6)
