"""The `Session` of an ssm artifact (docs/ssm.md): the same API over a fixed-size state.

    session = tickformer.runtime.load("ART", backend="ort")   # an SsmSession for kind "ssm"
    y = session.step(x)      # x [B, 1, d_in] -> y [B, 1, d_out], same buffer every call
    session.reset()          # zero the state: constant time (its size, not the stream's length)
    ys = session.run(seq)    # full pass, any T >= 1 (the Scan graph / the numpy scan)
    ys = session.peek(xs)    # K candidate inputs over one stream (export --batch K), nothing committed
    session.commit(i)        # candidate i's state becomes the stream's, position + 1

What differs from the attention Session (runtime/session.py), and why:
  * No ContextFull, ever: the state does not grow, and there is no position input; a stream
    runs as long as the caller steps it. `position` counts the steps since reset().
  * Commit: the backend double-buffers the state (runtime/backends/ssm.py): the step at
    position p reads buffer p & 1 and writes the other. The commit point is one store, the
    position's; before it the state read is untouched (a refused or failed step leaves the
    session exactly as it was), after it the new state is the one read next.
  * Allocation-free counting past max_len: the low part of the position walks a list of
    2^16 ints made at load (ints above 256 are objects; `pos + 1` would allocate); every 2^16
    steps it wraps to 0 and a Python int counts the wraps (32 B, once per 65,536 steps). The
    buffer parity is that of the low part (2^16 is even). The wrap is two stores (wraps, then
    low); an exception landing between them (a signal handler's) reports position + 2^16 for the
    step that did not commit: the one case where `position` does not tell retry from committed.
  * Contracts: with a monitor, also the state bound (contracts/state_bound.py, the manifest's
    "state_bound") on the state the step wrote, before the commit.
  * Peek / commit (docs/control.md, runtime/session.py): the same methods and semantics as the
    attention session's -- `peek(xs)` stages K candidate states and commits nothing, `commit(i)`
    copies candidate i's staged state over the other rows of the staged buffer (nothing reads
    it yet) and then does the one position store; afterwards the state is bit for bit what a
    `step` whose every row is xs[i] leaves (tests/runtime/test_peek.py). Any step, reset or
    failed peek drops a pending peek.

`step`, `peek`, `commit`, input validation, the busy flag, close and output are Session's
(inherited); this class replaces the two halves of a step (`_stage`: no ContextFull, the state
monitor; `_advance`: the buffer-selecting position store), `reset`, `run`'s length rule and the
position's representation. The position table is built at load by the proven
contracts.position.step_position (its max_len there is WRAP). Single-threaded, like Session.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tickformer.artifact.reader import Artifact
from tickformer.contracts.position import step_position
from tickformer.errors import InputError, TickformerError

from .backends.ssm import SsmBackend
from .session import Session, _busy, _engine_failure

WRAP = 1 << 16  # low part of the position: a list of this many ints, made once


class SsmSession(Session):
    """Session over an ssm artifact and an SsmBackend. Use `tickformer.runtime.load`."""

    def __init__(
        self, artifact: Artifact, backend: SsmBackend, *, contracts: str = "off", budget_ns: int | None = None
    ) -> None:
        super().__init__(artifact, backend, contracts=contracts, budget_ns=budget_ns)
        self.ssm_backend = backend
        # _next_position[p] is p + 1 (the proven step_position; [WRAP - 1] is WRAP): ints made once
        self._wrap = WRAP  # fixed at load (the table's length)
        self._next_position = [step_position(p, 1, WRAP, True) for p in range(WRAP)]
        self._wraps = 0
        if self.monitor is not None:
            bound = artifact.manifest.get("state_bound", {}).get("layers")
            self.monitor.state_bound = None if bound is None else np.array(bound, dtype=np.float64)
        backend.reset()

    @property
    def position(self) -> int:
        """Steps since the last reset() (not bounded by max_len)."""
        return self._wraps * self._wrap + self._position

    def state(self) -> np.ndarray:
        """The committed state [B, L, D, N]: a view into the backend (host backends) or a host
        buffer the GPU backends copy the device state into on this call, overwritten by the next
        read. Copy it to keep it."""
        return self.ssm_backend.state(self._position)

    def reset(self) -> None:
        """Zero the state and the position; drops a pending peek. Constant time (the state's
        size), 0 bytes on the host backends; idempotent (an interrupted reset is completed by
        calling it again)."""
        if self._busy:
            raise _busy("reset")
        self._check_open()
        self._peeked = -1
        self.ssm_backend.reset()  # buffer 0 := 0 (the one position 0 reads)
        self._wraps = 0
        self._position = 0

    # `step`, `peek` and `commit` are Session's (runtime/session.py): the checks, the busy flag and
    # the order stage -> commit; what differs is the two halves below.
    def _stage(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """The uncommitted part of step and peek: checks, the backend's step (reads state(pos),
        writes staged_state(pos)), the monitor on the output and on the state written. No
        ContextFull: the state does not grow. Returns (output buffer, pos: the low part of the
        position, whose parity selects the buffers). Drops a pending peek once the backend runs.
        Busy flag held by the caller."""
        monitor = self.monitor
        start = 0 if monitor is None else time.perf_counter_ns()
        self._check_open()
        self._validate_step_input(x)
        pos = self._position
        self._peeked = -1
        try:
            y = self.backend.step(x, pos)  # reads state(pos), writes staged_state(pos)
        except TickformerError:
            raise
        except Exception as exc:
            raise _engine_failure(self.backend.name, f"at step {self.position}", exc) from exc
        if monitor is not None:
            monitor.check_output(y, time.perf_counter_ns() - start)
            monitor.check_state(self.ssm_backend.staged_state(pos))
        return y, pos

    def _advance(self, key: int, i: int) -> None:
        """The commit: the backend's hook (i < 0: `commit`, a no-op for the double-buffered
        backends; i >= 0: candidate i's state into every row of the staged buffer, which nothing
        reads before the store below), then the position store -- the commit point that makes
        the staged buffer the one read next."""
        if i < 0:
            self.ssm_backend.commit(key)
        else:
            self.ssm_backend.commit_candidate(key, i)
        nxt = self._next_position[key]
        if nxt == self._wrap:  # once per 65,536 steps (module docstring)
            self._wraps += 1
            nxt = 0
        self._position = nxt  # the commit point

    def _run(self, seq: np.ndarray) -> np.ndarray:
        """Full pass over any length T >= 1 (no max_len: the Scan runs T steps)."""
        self._check_open()
        self._check_run_shape(seq, nonempty=True)
        return self._full_pass(seq)

    def set_source(self, src: Any) -> None:
        raise InputError("set_source() is for encoder-decoder artifacts; this one is an ssm (decoder-only)")


def load_ssm(
    artifact: Artifact, backend: str, contracts: str, budget_ns: int | None, options: dict
) -> SsmSession:
    """`runtime.load` for an artifact of kind "ssm": the ssm variant of the named backend
    (runtime/backends/ssm.py SSM_BACKENDS, imported lazily), or a clear refusal naming the reason
    and the backends that run this kind. Not real-time."""
    from .backends.ssm import ssm_backend_class

    cls = ssm_backend_class(backend)
    if cls.runs_graphs:
        from tickformer.export.consistency import check_graph_weights

        check_graph_weights(artifact)
    return SsmSession(artifact, cls(artifact, **options), contracts=contracts, budget_ns=budget_ns)
