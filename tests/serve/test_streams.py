"""The served model's stream table (serve/streams.py), without Triton: admission, END, idle
reclaim, the forgotten-stream and server-full refusals, tick-batched groups, and one batched
step per execution."""

from __future__ import annotations

import numpy as np
import pytest
from serve_kinds import KINDS, inputs

from tickformer import runtime
from tickformer.artifact.reader import open_artifact
from tickformer.serve.slots import SlotPool
from tickformer.serve.streams import FORGOTTEN, FULL, Request, StreamTable


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def table(arts):
    clock = Clock()
    return StreamTable(SlotPool(open_artifact(arts["windowed"]), 4), idle_s=10.0, clock=clock), clock


def x(rows: int, seed: int = 0) -> np.ndarray:
    return inputs(KINDS["windowed"], rows, 1, seed)[:, 0]  # [rows, 3]


def test_one_execution_is_one_batched_step(table, monkeypatch):
    t, _ = table
    calls = []
    step = t.pool.step
    monkeypatch.setattr(t.pool, "step", lambda slots, xs: calls.append(len(slots)) or step(slots, xs))
    out = t.execute(
        [Request(1, x(1), start=True), Request(2, x(2), start=True), Request(3, x(1), start=True)]
    )
    assert [r.error for r in out] == [None] * 3 and [r.y.shape for r in out] == [(1, 2), (2, 2), (1, 2)]
    assert calls == [4] and t.free == 0


def test_two_requests_of_one_stream_run_in_order(arts, table):
    t, _ = table
    xs = x(2, seed=5)
    out = t.execute([Request(1, xs[:1], start=True), Request(1, xs[1:])])
    session = runtime.load(arts["windowed"], backend="numpy")
    for r, xi in zip(out, xs):
        assert np.allclose(r.y[0], session.step(xi[None, None]).reshape(-1), atol=1e-5)


def test_a_step_without_start_for_an_unknown_stream_is_forgotten(table):
    t, _ = table
    (r,) = t.execute([Request(9, x(1))])
    assert FORGOTTEN in r.error and "restart the stream" in r.error


def test_end_frees_the_slots_and_then_the_stream_is_forgotten(table):
    t, _ = table
    t.execute([Request(1, x(3), start=True)])
    assert t.free == 1
    t.execute([Request(1, x(3), end=True)])
    assert t.free == 4 and FORGOTTEN in t.execute([Request(1, x(3))])[0].error


def test_close_without_rows_frees_without_a_step(table):
    t, _ = table
    t.execute([Request(1, x(1), start=True)])
    pos = t.pool.position.copy()
    (r,) = t.execute([Request(1, x(0), end=True)])
    assert r.error is None and r.y.shape == (0, 2) and t.free == 4 and np.array_equal(t.pool.position, pos)
    assert "START comes with" in t.execute([Request(2, x(0), start=True)])[0].error


def test_beyond_capacity_is_refused_in_one_line(table):
    t, _ = table
    out = t.execute([Request(1, x(3), start=True), Request(2, x(2), start=True)])
    assert out[0].error is None and FULL in out[1].error and "--slots" in out[1].error
    assert "\n" not in out[1].error and t.free == 1 and 2 not in t.held


def test_a_group_takes_the_lowest_free_slots_in_order(table):
    t, _ = table
    t.execute([Request(i, x(1), start=True) for i in (1, 2, 3, 4)])
    t.execute([Request(i, x(0), end=True) for i in (3, 1, 4, 2)])  # freed in another order
    t.execute([Request(9, x(3), start=True)])
    assert list(t.held[9].slots) == [0, 1, 2]  # a run: stepped through views


def test_a_start_waits_for_an_end_in_the_same_execution(table):
    t, _ = table
    t.execute([Request(1, x(4), start=True)])
    out = t.execute([Request(1, x(4), end=True), Request(2, x(2), start=True)])
    assert [r.error for r in out] == [None, None] and t.free == 2


def test_abandoned_streams_free_their_slots_after_the_idle_timeout(table):
    t, clock = table
    t.execute([Request(1, x(2), start=True), Request(2, x(2), start=True)])
    clock.now = 5.0
    t.execute([Request(2, x(2))])  # stream 2 keeps going, stream 1 is abandoned
    clock.now = 10.5
    (r,) = t.execute([Request(3, x(2), start=True)])
    assert r.error is None and 1 not in t.held and 2 in t.held
    assert FORGOTTEN in t.execute([Request(1, x(2))])[0].error


def test_a_restart_on_the_same_id_frees_the_old_slots_and_starts_at_zero(table):
    t, _ = table
    t.execute([Request(1, x(2), start=True)])
    t.execute([Request(1, x(2))])
    out = t.execute([Request(1, x(1), start=True)])
    assert out[0].error is None and t.free == 3 and t.pool.position[t.held[1].slots[0]] == 1


@pytest.mark.parametrize(
    "rows, want",
    [
        (np.full((1, 3), 11.0, np.float32), "outside the declared domain"),
        (np.full((1, 3), np.nan, np.float32), "non-finite value nan"),
        (np.zeros((1, 4), np.float32), "float32 rows [S, 3]"),
        (np.zeros((1, 3), np.float64), "float32 rows [S, 3]"),
    ],
)
def test_bad_rows_are_refused_and_no_slot_is_taken(table, rows, want):
    t, _ = table
    (r,) = t.execute([Request(1, rows, start=True)])
    assert want in r.error and "input refused" in r.error and t.free == 4


def test_wrong_row_count_and_full_static_streams(arts):
    t = StreamTable(SlotPool(open_artifact(arts["static"]), 2), idle_s=1.0)
    xs = inputs(KINDS["static"], 1, 17, seed=0)[0]
    t.execute([Request(1, xs[:1], start=True)])
    assert "holds 1 row(s)" in t.execute([Request(1, xs[:2])])[0].error
    for i in range(1, 16):
        assert t.execute([Request(1, xs[i : i + 1])])[0].error is None
    (r,) = t.execute([Request(1, xs[16:17])])
    assert "is full (16 positions" in r.error and t.free == 2


def test_tokens_outside_the_vocabulary(arts):
    t = StreamTable(SlotPool(open_artifact(arts["tokens"]), 2), idle_s=1.0)
    (r,) = t.execute([Request(1, np.array([11]), start=True)])
    assert "vocabulary [0, 11)" in r.error
    (r,) = t.execute([Request(1, np.array([3, 10]), start=True)])
    assert r.error is None and r.y.shape == (2, 11)
