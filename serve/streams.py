"""What the served model does with one execution's requests, without Triton: the stream table
(correlation id -> slots of the pool), admission, idle reclaim, and the batched step.

Triton's sequence batcher ("oldest" strategy) hands the model a list of requests, each of one
sequence (correlation id), with its control flags START / END / READY. A request carries S rows:
S = 1 for one stream, S > 1 for a tick-batched group (a sequence whose S member streams start,
step and end together: a simulation farm's rigs). The model keeps each sequence's state in S
slots of one `SlotPool` and advances every row of every request of the execution in ONE batched
step (`execute`); a second request of the same sequence in one execution (the oldest strategy
does not put two in one batch, but nothing here depends on it) runs in a later round, in order.

Admission. START takes S free slots (a START on an id already held first frees its old slots: a
client restarting a stream). When there are not enough, the table first frees the slots of
sequences idle for more than `idle_s` - `slack_s`
(Triton has forgotten them: its idle timeout counts from a request's arrival, the table's from
its execution, so Triton forgets first; `slack_s` covers the difference), and then refuses the
request: "server full" -- unless a sequence ENDs in this execution, when the START waits one
round for the slots that END frees after its step. Whether a stream beyond capacity waits or is refused is the config's
choice (repository.py): Triton queues sequences beyond max_candidate_sequences (its backlog), so
`queue` sets that to the pool's slot count and `refuse` above it, letting this refusal answer.

Forgetting. A sequence's slots are freed by its END (after its step; a request of no rows with
END frees them without a step: a client's close), by a START on the same id,
or once idle for `idle_s` (Triton's max_sequence_idle_microseconds: an abandoned stream frees
its slot). A request without START for an id the table does not hold is refused with
FORGOTTEN: the server forgot the stream (idle timeout, restart) and the client must restart it.

Not real-time: dict and list bookkeeping per request, numpy temporaries per step.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tickformer.contracts.input_domain import check_values
from tickformer.errors import InputError

from .slots import SlotPool

FORGOTTEN = "unknown to this server"  # in every forgotten-stream message (the client matches it)
FULL = "server full"  # in every refusal for capacity (the client matches it)
REFUSED = "input refused"  # in every refusal of a request's rows (shape, dtype, values)


@dataclass
class Request:
    """One request of an execution: its sequence's correlation id, control flags and input rows
    x [S, d_in] float32 (tokens [S] int64)."""

    corrid: int
    x: np.ndarray
    start: bool = False
    end: bool = False
    ready: bool = True


@dataclass
class Result:
    """y [S, d_out] (logits [S, V]) or an error message (one line: what happened, what to do)."""

    y: np.ndarray | None = None
    error: str | None = None


@dataclass
class _Held:
    slots: np.ndarray  # [S] int64
    last: float  # monotonic seconds of the last execution that stepped it


class StreamTable:
    """The served model's state: the slot pool and which sequence holds which slots."""

    def __init__(
        self,
        pool: SlotPool,
        *,
        idle_s: float,
        slack_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool = pool
        self.idle_s = idle_s
        self.slack_s = min(slack_s, idle_s / 4)
        self.clock = clock
        self.held: dict[int, _Held] = {}
        # a min-heap: a START takes the lowest free slots, in order, so a group started on a
        # quiet pool holds a run of consecutive slots (read through views: slots.py)
        self._free = list(range(pool.slots))
        cfg = pool.config
        self._tokens = cfg.inputs == "tokens"
        self._width = cfg.d_in
        self._vocab = cfg.vocab_size
        self._domain = pool.domain
        self._columns = pool.domain_columns

    @property
    def free(self) -> int:
        return len(self._free)

    def _release(self, corrid: int) -> None:
        held = self.held.pop(corrid, None)
        if held is not None:
            for slot in held.slots:
                heapq.heappush(self._free, int(slot))

    def reclaim_idle(self, older_than_s: float | None = None) -> list[int]:
        """Free the slots of sequences not stepped for `older_than_s` (default idle_s) seconds;
        returns their ids."""
        limit = self.clock() - (self.idle_s if older_than_s is None else older_than_s)
        gone = [c for c, h in self.held.items() if h.last < limit]
        for corrid in gone:
            self._release(corrid)
        return gone

    def _check_rows(self, x: np.ndarray) -> str | None:
        """None, or why x cannot be stepped (shape, dtype, values)."""
        if self._tokens:
            if x.ndim != 1 or x.dtype.kind not in "iu":
                return f"tokens must be int64 rows [S], got {x.dtype} {list(x.shape)}"
            if x.size and (x.min() < 0 or x.max() >= self._vocab):
                return f"token outside the vocabulary [0, {self._vocab}); send token ids 0..{self._vocab - 1}"
            return None
        if x.ndim != 2 or x.shape[1] != self._width or x.dtype != np.float32:
            return f"x must be float32 rows [S, {self._width}], got {x.dtype} {list(x.shape)}"
        try:
            check_values(x, *self._domain, self._columns)
        except InputError as exc:
            return str(exc)
        return None

    def _admit(self, req: Request, may_wait: bool) -> np.ndarray | str | None:
        """The slots the request steps, its refusal, or None: wait one round (this round's ENDs
        free slots after their step; `may_wait`). START frees the id's old slots, then takes S,
        making room as the module docstring says."""
        rows = len(req.x)
        if not req.start:
            held = self.held.get(req.corrid)
            if held is None:
                return (
                    f"stream {req.corrid} is {FORGOTTEN} (ended, idle past {self.idle_s:g} s, or the server "
                    "restarted): restart the stream (open it again)"
                )
            if len(held.slots) != rows:
                n = len(held.slots)
                return f"stream {req.corrid} holds {n} row(s), this request has {rows}: send {n}"
            return held.slots
        self._release(req.corrid)
        if rows > self.free:
            self.reclaim_idle(self.idle_s - self.slack_s)
        if rows > self.free:
            if may_wait:
                return None
            return (
                f"{FULL}: {rows} stream slot(s) wanted, {self.free} of {self.pool.slots} free; close streams, "
                "wait for idle ones to time out, or serve with more --slots"
            )
        slots = np.array([heapq.heappop(self._free) for _ in range(rows)], np.int64)
        self.pool.reset(slots)
        self.held[req.corrid] = _Held(slots, self.clock())
        return slots

    def execute(self, requests: Sequence[Request]) -> list[Result]:
        """Every request's result, in order. Rows of distinct sequences step together in one
        batched step per round (one round unless a sequence has two requests here, or a START
        waits for this execution's ENDs to free slots)."""
        self.reclaim_idle()
        results = [Result() for _ in requests]
        pending = []
        for i, req in enumerate(requests):
            if not req.ready:
                results[i].error = "READY is false: no request in this batch slot"
                continue
            why = self._check_rows(req.x)
            if why is not None:
                results[i].error = f"stream {req.corrid}: {REFUSED}: {why}"
            elif len(req.x) == 0:
                results[i] = self._control_only(req)
            else:
                pending.append(i)
        waited: set[int] = set()
        while pending:
            seen: set[int] = set()
            now, later = [], []
            for i in pending:
                (later if requests[i].corrid in seen else now).append(i)
                seen.add(requests[i].corrid)
            ends = any(requests[i].end for i in now)
            stepped: list[tuple[int, np.ndarray]] = []
            for i in now:
                req = requests[i]
                slots = self._admit(req, may_wait=ends and i not in waited)
                if slots is None:
                    waited.add(i)
                    later.append(i)
                elif isinstance(slots, str):
                    results[i].error = slots
                elif self.pool.full(slots).any():
                    self._release(req.corrid)
                    results[i].error = (
                        f"stream {req.corrid} is full ({self.pool.max_len} positions, the artifact's max_len): "
                        "restart the stream, or serve a windowed artifact (export --window) to stream without end"
                    )
                else:
                    stepped.append((i, slots))
            if stepped:
                self._step(requests, results, stepped)
            pending = sorted(later)
        return results

    def _control_only(self, req: Request) -> Result:
        """A request of no rows: END frees the stream's slots without a step (a client closing
        it); anything else is refused (START comes with the stream's first input)."""
        if req.start:
            return Result(
                error=f"stream {req.corrid}: START comes with the stream's first input (1 or more rows)"
            )
        if req.end:
            self._release(req.corrid)
        return Result(y=np.zeros((0, self.pool.out_width), np.float32))

    def _step(
        self, requests: Sequence[Request], results: list[Result], stepped: list[tuple[int, np.ndarray]]
    ) -> None:
        slots = np.concatenate([s for _, s in stepped])  # [n]
        x = np.concatenate([requests[i].x for i, _ in stepped])  # [n, d_in] | [n]
        try:
            y = self.pool.step(slots, x)  # [n, out]; commits only if it all succeeded
        except Exception as exc:  # noqa: BLE001 -- every request of the round gets the one-line reason
            for i, _ in stepped:
                results[i].error = f"step failed, no stream advanced: {type(exc).__name__}: {exc}"
            return
        now, at = self.clock(), 0
        for i, s in stepped:
            results[i].y = y[at : at + len(s)]
            at += len(s)
            req = requests[i]
            if req.end:
                self._release(req.corrid)
            else:
                self.held[req.corrid].last = now
