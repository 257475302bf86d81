"""Position domains of the graph prover: a finite set of states (the integer inputs' values and
the data inputs' shapes) and, per state, which rows each target element may read -- built from
the session's history or the order of arrival, never from the predicate the graph builder calls,
so that a builder with a wrong predicate fails against them.

    StepPositions   pos in [0, max_len) over a static cache (the step graph)
    FullLengths     T in [1, max_len] for a full pass (causal, or windowed: the last R inputs)
    RingPositions   a sliding window on a ring of W slots (the windowed step graph)

Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class State:
    """One point of a position domain: the integer inputs' values and the data inputs' shapes."""

    label: str  # "pos 5", "T 17"
    value: int  # pos or T
    feeds: dict[str, np.ndarray]  # integer domain inputs (e.g. pos [1] int64)
    shapes: dict[str, tuple[int, ...]]  # data inputs whose shape depends on the state


class PositionDomain:
    """A finite domain of positions: `states()` and, per state and source, the rows a target
    element may read (`live`: bool [n_t, n_rows], n_t = 1 for a target without a position axis)."""

    kind = "positions"

    def states(self) -> list[State]:
        raise NotImplementedError

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class StepPositions(PositionDomain):
    """pos in [0, max_len) over a static cache of max_len rows (the own new row is passed apart, as
    k_new / v_new). The rows each step may read are built from the session's history, not from
    the mask predicate the graph builder calls (contracts.masking.cache_row_live): after a reset
    nothing is written; the step at p reads what the steps before it committed, and its commit
    writes row p (contracts.position P3, runtime/backends/layout.py). A builder whose predicate
    is wrong (row <= pos, say) therefore fails against this table."""

    max_len: int
    pos_input: str = "pos"
    kind = "step positions"

    def states(self) -> list[State]:
        return _step_positions(self.pos_input, self.max_len)

    def _table(self) -> np.ndarray:
        n = self.max_len
        table = np.zeros((n, n), dtype=bool)  # [pos, row]
        written = np.zeros(n, dtype=bool)  # rows committed since the reset
        for p in range(n):
            table[p] = written  # the step at p reads what was committed before it
            written[p] = True  # ... and commits row p
        return table

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        return _cached(self, "_live", self._table)[state.value][None, :n_rows]


@dataclass(frozen=True)
class FullLengths(PositionDomain):
    """T in [1, max_len] for a full pass whose input `input` has its time axis at `axis`: y[t] may
    read x[t'] iff x[t'] arrived no later than x[t] (causal) and, windowed, is one of the last R
    inputs, R = L (W - 1) + 1 the receptive field of L layers of window W (each layer reaches W - 1
    back). Built from the order of arrival, not from the predicates the builder calls
    (masking.causal_allowed / window_allowed). Lengths above max_len are not states of this
    domain: a windowed model.onnx accepts any T, and a proof over [1, max_len] says nothing about
    longer ones."""

    max_len: int
    input: str
    shape: tuple[int | str, ...]  # the declared input shape (the symbolic entry is the time axis)
    axis: int = 1
    window: int | None = None
    layers: int = 1
    kind = "full-pass lengths"

    def states(self) -> list[State]:
        out = []
        for t in range(1, self.max_len + 1):
            dims = tuple(t if i == self.axis else int(d) for i, d in enumerate(self.shape))
            out.append(State(f"T {t}", t, {}, {self.input: dims}))
        return out

    def receptive_field(self) -> int | None:
        return None if self.window is None else self.layers * (self.window - 1) + 1

    def _table(self) -> np.ndarray:
        n, field = self.max_len, self.receptive_field()
        table = np.zeros((n, n), dtype=bool)  # [t, t']
        arrived: list[int] = []  # the inputs so far, oldest first
        for t in range(n):
            arrived.append(t)
            recent = arrived if field is None else arrived[-field:]  # windowed: the last R only
            table[t, recent] = True
        return table

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        return _cached(self, "_live", self._table)[:n_t, :n_rows]


@dataclass(frozen=True)
class RingPositions(PositionDomain):
    """A sliding window of `window` keys (the own key and window - 1 cached ones) on a ring of
    `window` slots, for every ring position r in [0, 3W) the session feeds (runtime/session.py).
    The slots the step at r may read are built by simulating the ring, not from the slot
    predicate the graph builder calls (ring_buffer.slot_read): the positions 0..r-1 committed to
    slot q mod W (the layout, runtime/backends/layout.py), a slot read iff the position it holds
    is one of the W - 1 before r. Ring position r stands for every absolute position p with
    ring_position(p) = r, and the step reads alike at both (ring_buffer R10, proven), so the
    3W states cover every position of an unbounded stream."""

    window: int
    positions: int
    pos_input: str = "pos"
    kind = "ring positions"

    def states(self) -> list[State]:
        return _step_positions(self.pos_input, self.positions)

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        w, p = self.window, state.value
        held = [-1] * w  # the position each slot holds (-1: never written)
        for q in range(p):
            held[q % w] = q
        row = np.array([q >= 0 and q in range(p - w + 1, p) for q in held], dtype=bool)
        return row[None, :n_rows]


def _step_positions(pos_input: str, n: int) -> list[State]:
    """One state per step position 0..n-1, fed to the step graph as `pos_input` ([1] int64)."""
    return [State(f"pos {p}", p, {pos_input: np.array([p], dtype=np.int64)}, {}) for p in range(n)]


def _cached(obj: Any, name: str, make: Callable[[], np.ndarray]) -> np.ndarray:
    table = obj.__dict__.get(name)
    if table is None:
        table = make()
        object.__setattr__(obj, name, table)  # frozen dataclass: a memo, not state
    return table
