"""A runtime session: one stream at a time, one position per `step`, for both block kinds.

Longer than 600 lines: one class is the session's state machine for every cache kind -- the
checks, the commit order and the position bookkeeping whose order this docstring argues
(signals, threads, allocation); split across files, the commit would sit apart from the checks
it orders.

The kind is a parameter of the one mechanism, as in codegen/caches.py: what a step reads and
how the stream ends differ by the artifact's cache kind (format.cache_kind; the ssm block's
"state"), the protocol does not --

    static  a KV cache of max_len rows: position p's rows go to row p; past max_len the stream is
            full (`on_full="raise"`, the only policy: ContextFull, call reset()).
    ring    a windowed artifact's ring cache of W rows: `on_full="slide"` (its default) keeps going
            without end (below, "Sliding sessions"); "raise" stops at max_len like a static one.
    state   the ssm block's fixed-size state [B, L, D, N], double-buffered by the backend (the
            step at position p reads buffer p & 1 and writes the other): never full, no
            position input; `position` counts the steps since reset(), and `state()` reads the
            committed state. reset() zeroes it (constant time: its size, not the stream's).

State (llama2.c style, allocated once at load): the backend's buffers (KV cache or state, staged
rows, output buffer), this session's token-check buffers and position ints, and the position.
The step protocol:

    1. validate x (closed? context full? type, dtype, shape, finite, in the declared domain; a
       backend that checks its input itself, `Backend.checks_input` -- the generated C step --
       gets the values checked there, and the session names a refused value with its own check)
    2. y = backend.step(x, pos)            -- may fail; never touches the committed state
    3. contract monitor on y and latency (state: and on the state the step wrote) -- `check`
       mode may raise
    4. backend.commit(pos); position += 1  -- only now does state change

so any exception leaves `position` and the committed state exactly as they were. `reset()` sets
the position to 0 (and has the backend zero a fixed-size state): constant time; stale cache rows
are selected out by position in every step (Where(j < pos, s, -inf)), never cleared. Past max_len
a static cache raises `ContextFull` (call reset(), or re-export with a larger --max-len); a
ring cache slides: the W rows hold the last W positions, the step reads exactly those
(contracts.ring_buffer.slot_read) and writes row ring_slot(p, W).

Sliding sessions (docs/streaming.md). The absolute position p is unbounded; the step graph
depends on it only through p mod W and p >= W (ring_buffer R10), so the session hands the backend
the ring position r = ring_position(p) in [0, 3W) instead: it walks a successor table made at
load (next_ring_position, R11) and keeps two block counters (int64 cells of one array [c0, c1,
-1] made at load, written by one ufunc per step through views tabulated from block_write, R13)
from which `position` gives p back (the counter block_counter names, absolute_position, R12). The
commit is the counter write (which never touches the counter the current state reads: proven),
the backend's row store, then one attribute store of r -- the commit point.
Every table is built at load by calling the proven contract functions, not re-implemented.

Counting a state's steps without allocation: the low part of the position walks a list of
WRAP = 2^16 ints made at load by the proven contracts.position.step_position (ints above 256 are
objects; `pos + 1` would allocate); every 2^16 steps it wraps to 0 and a Python int counts the
wraps (32 B, once per 65,536 steps). The buffer parity is that of the low part (2^16 is even).
The wrap is two stores (wraps, then low); an exception landing between them (a signal handler's)
reports position + 2^16 for the step that did not commit: the one case where `position` does not
tell retry from committed.

State and signals. The state a step reads is `position` and the cache rows 0..position-1 (a
state kind: the buffer of the position's parity); rows at position and above (the other buffer)
are scratch (masked out by every step, and overwritten by the step at that position before any
step reads them). So the commit is two stores in this order: the backend writes the new rows into
row `pos` (scratch until the next store; a state kind writes nothing), then one attribute store
advances `position` -- the commit point. A Python signal handler runs between bytecodes
and may raise anywhere (KeyboardInterrupt from SIGINT, an exception from a SIGALRM handler):
before the commit point the state is unchanged (at most scratch row `pos` was written); after
it the step has committed and its output is in `output`. The caller tells which from
`position`: unchanged -> retry the same input, advanced by one -> the step took effect (tested
with SIGALRM interrupts at random moments: tests/reliability/test_session_safety.py). No signal
mask is needed, so the hot path makes no system call for it.

Threads. A Session is single-threaded: one call at a time, from any one thread at a time (a
control loop owns its session). Concurrent use is detected, not serialized: every method that
touches the state sets a busy flag on entry and clears it on exit (try/finally); a call that
finds it set -- from a second thread while one call is in flight, or re-entered from a signal
handler -- raises `SessionBusy` at once and changes nothing. The check and the set are two
bytecodes with no call between them, so CPython (with its GIL) never switches threads in
between; it costs two attribute stores and allocates nothing (no lock, no thread id). On a
free-threaded build (PEP 703) two threads may both pass it; give each thread its own session.

`step(x)` takes the step graph's input, x [B, 1, d_in] float32 (tokens [B, 1] int64), and returns
the backend's preallocated output buffer [B, 1, d_out] (tokens [B, 1, V]): the SAME array every
call, overwritten by the next step -- copy it if you keep it.

Candidates over one history (`peek` / `commit`, docs/control.md). An artifact exported with
batch K holds K candidate rows of ONE stream: `peek(xs)` runs the same staged part of a step
(`_stage`: checks, backend step, monitor) on K candidate inputs and commits nothing;
`commit(i)` then runs the same commit (`_advance`) with candidate i's rows (a state kind: its
staged state) written into every batch row. Any `step`, `reset`, source change or backend run of
a later peek drops a pending peek, so `commit` can only commit rows staged at the current position.

Allocation (tracemalloc, tests/runtime/test_allocation.py): with contracts off, `step` itself
allocates 0 bytes in steady state -- the input check loops over values (contracts.input_domain)
or compares tokens into buffers made at load, the position ints come from a list made at load
(ints above 256 are not cached by CPython), the latency stamp is taken only when a monitor is
attached. What remains is the backend's (docs: runtime/backends/*.py) and the monitor's.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tickformer import validation
from tickformer.artifact.reader import Artifact
from tickformer.contracts.input_domain import check_values, validate_input
from tickformer.contracts.position import can_step, reset_position, step_position
from tickformer.contracts.ring_buffer import (
    absolute_position,
    block_counter,
    block_write,
    next_ring_position,
    ring_position,
)
from tickformer.errors import (
    BackendError,
    ConfigError,
    ContextFull,
    InputError,
    InputRefused,
    SessionBusy,
    SessionClosed,
    TickformerError,
)

from .backends.base import Backend

CONTRACT_MODES = ("off", "check", "monitor")
ON_FULL = ("raise", "slide")  # past max_len: ContextFull, or slide the window (windowed artifacts)
WRAP = 1 << 16  # a state kind's low part of the position: a list of this many ints, made once


def _describe(x: object) -> str:
    if type(x) is np.ndarray:
        return f"ndarray {x.dtype} {x.shape}"
    if isinstance(x, np.ndarray):  # a subclass (np.ma.MaskedArray, np.matrix, ...): refused
        return f"{type(x).__module__}.{type(x).__name__} (an ndarray subclass) {x.dtype} {x.shape}"
    return type(x).__name__


def _busy(method: str) -> SessionBusy:
    return SessionBusy(
        f"{method}() was called while another call of this session is in flight (from another thread, or "
        "from a signal handler inside a step); a Session is single-threaded: give each thread its own "
        "session, or serialize the calls"
    )


def _engine_failure(backend: str, where: str, exc: Exception) -> BackendError:
    """Any exception of an engine that is not ours, as a BackendError (state is untouched)."""
    lines = str(exc).splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return BackendError(
        f"backend {backend} failed {where} ({detail}); the session state is unchanged: reset() or load "
        "the artifact again"
    )


class Session:
    """Real-time session over one artifact and one backend. Use `tickformer.runtime.load`."""

    def __init__(
        self,
        artifact: Artifact,
        backend: Backend,
        *,
        contracts: str = "off",
        budget_ns: int | None = None,
        on_full: str | None = None,
    ) -> None:
        if contracts not in CONTRACT_MODES:
            raise ConfigError(f"contracts={contracts!r} is not one of {CONTRACT_MODES}")
        cfg = artifact.config
        self.window: int | None = cfg.window
        # The state kind (module docstring): a fixed-size state never fills, so on_full does not apply.
        self.recurrent = cfg.block == "ssm"
        self.on_full = validation.one_of(
            ("raise" if cfg.window is None and not self.recurrent else "slide")
            if on_full is None
            else on_full,
            "on_full",
            ON_FULL,
        )
        if self.on_full == "slide" and cfg.window is None and not self.recurrent:
            raise ConfigError(
                f"on_full='slide' needs a windowed artifact (a ring KV cache); this one has a static cache of "
                f"max_len {cfg.max_len} positions: use on_full='raise', or train with --window W and re-export"
            )
        self.sliding = self.on_full == "slide" and cfg.window is not None  # a ring cache that slides
        self.artifact = artifact
        self.config = cfg
        self.backend = backend
        # The values are checked once per step, by the backend when it checks them itself (the C
        # step's tf_check_input: the same predicate, docs/codegen.md), else here.
        self._values_checked_by_backend = backend.checks_input
        self.batch = artifact.batch
        self.max_len = artifact.max_len
        self.contracts = contracts
        self.tokens = cfg.inputs == "tokens"
        self.domain = artifact.input_domain
        self._lo, self._hi = self.domain  # passed as two arguments: `*self.domain` allocates ~120 B per call
        self.domain_columns = artifact.input_domain_columns  # one [lo, hi] per input column, or None
        if self.tokens:
            self.input_shape: tuple[int, ...] = (self.batch, 1)
            self.input_dtype: np.dtype = np.dtype(np.int64)
        else:
            self.input_shape = (self.batch, 1, cfg.d_in)
            self.input_dtype = np.dtype(np.float32)
        self._position = reset_position()
        self._peeked = -1  # the position (sliding: ring position) of a pending peek, else -1
        # Every position as a Python int made once: `pos + 1` would allocate an int above 256.
        # A state kind counts WRAP positions and then wraps (module docstring); a cache, max_len.
        limit = WRAP if self.recurrent else self.max_len
        self._wrap = WRAP if self.recurrent else -1  # the low part's successor that wraps (never: -1)
        self._wraps = 0
        # [N]: the position after a successful one-token step at p (contracts.position P1-P3, called)
        self._next_position = [step_position(p, 1, limit, True) for p in range(limit)]
        # [N + 1]: whether one more token fits at p (P1), the proven predicate called once per p at load:
        # a call per step would compute max_len - p, an int allocation above 256; a state always fits
        self._fits = [True] * limit if self.recurrent else [can_step(p, 1, limit) for p in range(limit + 1)]
        if cfg.window is not None:
            w = cfg.window
            # Ring positions and their tables, made once by the proven functions (module docstring).
            self._ring = 0  # sliding: the ring position standing in for the absolute one
            self._next_ring = [next_ring_position(r, w) for r in range(3 * w)]  # [3W] successor table (R11)
            self._ring_of = [
                ring_position(p, w) for p in range(self.max_len + 1)
            ]  # raise: ring position of p
            # The block counters c[0], c[1] and the constant -1 that block_write's source -1 names,
            # as [1] views made once, so the commit writes c[target] = c[source] + 1 with one ufunc
            # into a view (no allocation): tabulated per ring position from the proven functions.
            self._blocks = np.array([0, 0, -1], np.int64)
            cells = [self._blocks[i : i + 1] for i in range(3)]  # cells[-1]: the constant -1
            writes = [block_write(r, w) for r in range(3 * w)]  # [3W] (target, source) (R13)
            self._block_dst = [cells[t] if t >= 0 else None for t, _ in writes]
            self._block_src = [cells[src] for _, src in writes]
            self._counter_of = [block_counter(r, w) for r in range(3 * w)]  # [3W] counter read (R12)
            self._one = np.ones(1, np.int64)
        if self.tokens:
            # Step-input token check into buffers made once (ufuncs with out= allocate nothing;
            # x.min()/x.max() allocate ~1 KB, x.item(i) an int per id above 256).
            self._zero = np.zeros((), np.int64)
            self._vocab = np.array(cfg.vocab_size, np.int64)
            self._tok_ge = np.zeros(self.input_shape, np.bool_)  # [B, 1] id >= 0
            self._tok_lt = np.zeros(self.input_shape, np.bool_)  # [B, 1] id < V
        self._closed = False
        self._busy = False  # set while a call is in flight (module docstring, "Threads")
        self._source_set = False
        self._output: np.ndarray | None = None  # the last step's output buffer (module docstring)
        self.monitor = None
        if contracts != "off":
            from .monitor import ContractMonitor

            state_bound = artifact.manifest.get("state_bound", {}).get("layers") if self.recurrent else None
            self.monitor = ContractMonitor(
                contracts,
                input_domain=self.domain,
                input_columns=self.domain_columns,
                output_bound=artifact.output_bound,
                budget_ns=budget_ns,
                state_bound=state_bound,
            )
        backend.reset()  # a fixed-size state starts at zero; a KV cache needs nothing

    # --- state -------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Number of positions committed in the current sequence (the next step's position);
        unbounded for sliding sessions (computed from the ring position and a block counter:
        contracts.ring_buffer.absolute_position; not on the hot path) and for a state kind (the
        wraps and the low part: module docstring)."""
        if self.sliding and self.window is not None:
            ring, w = self._ring, self.window
            return absolute_position(ring, int(self._blocks[self._counter_of[ring]]), w)
        return self._wraps * self._wrap + self._position if self.recurrent else self._position

    def state(self) -> np.ndarray:
        """ssm artifacts: the committed state [B, L, D, N] -- a view into the backend (host
        backends) or a host buffer the GPU backends copy the device state into on this call,
        overwritten by the next read. Copy it to keep it. BackendError for a KV cache."""
        return self.backend.state(self._position)

    @property
    def peek_pending(self) -> bool:
        """True when a `peek` at the current position awaits `commit(i)`."""
        return self._peeked == (self._ring if self.sliding else self._position)

    @property
    def ring_position(self) -> int:
        """Windowed artifacts: the bounded stand-in of `position` the step graph is fed (in [0, 3W));
        contracts.ring_buffer.ring_position(position, W)."""
        if self.window is None:
            raise ConfigError("ring_position is for windowed artifacts; this one has a static cache")
        return self._ring if self.sliding else self._ring_of[self._position]

    @property
    def in_flight(self) -> bool:
        """True while a call of this session is running (another thread's; module docstring)."""
        return self._busy

    @property
    def output(self) -> np.ndarray | None:
        """The output buffer of the last step that passed its checks (None before the first): after
        an interrupt, if `position` advanced, it holds that committed step's output. The same
        array step() returns, overwritten by the next step."""
        return self._output

    @property
    def backend_name(self) -> str:
        return self.backend.name

    def reset(self) -> None:
        """Start a new sequence: position = 0 and, for a state kind, the state zeroed in place by
        the backend (its size, 0 bytes on the host backends; an interrupted reset is completed
        by calling it again). Constant time, real-time safe; a cache is not cleared (stale rows
        are masked by position in every step). Drops a pending peek. SessionBusy during a step."""
        if self._busy:
            raise _busy("reset")
        self._check_open()
        self._peeked = -1
        self.backend.reset()  # a state: buffer 0 := 0 (the one position 0 reads); a cache: nothing
        self._wraps = 0
        self._position = reset_position()
        if self.window is not None:
            self._ring = 0  # the block counters are not read below ring position W (R12)

    def close(self) -> None:
        """Release the backend; later calls raise SessionClosed. Idempotent. SessionBusy while
        another thread's call is in flight."""
        if self._busy:
            raise _busy("close")
        self._busy = True
        try:
            if not self._closed:
                self._closed = True
                self.backend.close()
        finally:
            self._busy = False

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- validation (hot path: no allocation on success) -----------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosed(
                "the session was closed; load the artifact again with tickformer.runtime.load(...)"
            )

    def _check_step_type(self, x: np.ndarray) -> None:
        # Exactly np.ndarray: a subclass can hide values (a masked array's min() skips masked
        # NaN) or override min/max, and the engine reads the raw buffer. `type(x) is` allocates nothing.
        if type(x) is not np.ndarray or x.dtype != self.input_dtype or x.shape != self.input_shape:
            raise InputError(
                f"step input must be a plain numpy.ndarray of {self.input_dtype} with shape "
                f"{self.input_shape}, got {_describe(x)}; "
                f"convert with np.asarray(x, np.{self.input_dtype}).reshape{self.input_shape}"
            )

    def _validate_step_input(self, x: np.ndarray) -> None:
        self._check_step_type(x)
        if self.tokens:
            if not self._step_tokens_valid(x):
                self._validate_values(x)  # raises with the message naming the bad id
        else:
            # finite and in the declared domain, per column if declared (type and dtype checked above); 0 B
            check_values(x, self._lo, self._hi, self.domain_columns)

    def _step_tokens_valid(self, x: np.ndarray) -> bool:
        """0 <= x < V for the step input x [B, 1] int64. Allocation-free: two ufuncs into the
        buffers made at load, then a `while` loop over Python bools (singletons)."""
        ge, lt = self._tok_ge, self._tok_lt
        np.greater_equal(x, self._zero, out=ge)  # [B, 1]
        np.less(x, self._vocab, out=lt)  # [B, 1]
        n = ge.size
        i = 0
        while i < n:
            if not (ge.item(i) and lt.item(i)):
                return False
            i += 1
        return True

    def _validate_values(self, x: np.ndarray) -> None:
        if self.tokens:
            vocab = self.config.vocab_size
            if x.size and not (0 <= x.min() and x.max() < vocab):
                bad = x[(x < 0) | (x >= vocab)]
                raise InputError(
                    f"token id {int(bad.flat[0])} is outside the vocabulary [0, {vocab - 1}]; map it to a valid id"
                )
        else:
            validate_input(x, *self.domain, self.domain_columns)  # finite and inside the declared domain

    # --- real-time path ----------------------------------------------------------------------------
    def step(self, x: np.ndarray) -> np.ndarray:
        """Run one position. x: [B, 1, d_in] float32 (tokens: [B, 1] int64), the step graph's
        input. Returns the output at this position, [B, 1, d_out] (tokens: [B, 1, V]): the
        backend's preallocated buffer, the same array every call. Raises InputError /
        ContextFull / SessionClosed / BackendError / ContractViolation (mode `check`), and then
        leaves position and cache unchanged.

        Real-time safe after the first call: the session's part allocates 0 bytes with contracts
        off (module docstring), work independent of the position (static-cache backends). Time
        is measured with perf_counter_ns for the latency contract, only when a monitor is attached
        (the stamp is an int above 2^30: 32 B). Single-threaded: SessionBusy if another call is in
        flight. Interrupted (a signal handler's exception): `position` says whether it committed
        (module docstring, "State and signals")."""
        if self._busy:
            raise _busy("step")
        self._busy = True  # no call between the check and this store: atomic under the GIL
        try:
            y, key = self._stage(x)
            self._output = y
            self._advance(key, -1)
            return y
        finally:
            self._busy = False

    def peek(self, xs: np.ndarray) -> np.ndarray:
        """Evaluate K candidate inputs at the current position over one shared history, without
        committing: xs [K, 1, d_in] float32 (K = the artifact's batch, export with --batch K),
        returns the preallocated output buffer [K, 1, d_out] (overwritten by the next peek or
        step). Then `commit(i)` makes candidate i this position's input. The same checks, graph
        and cost as `step` (the batch rows are the K candidates; their caches are kept
        identical by `commit(i)`, so every row attends over the same history).

        Position and cache never change here; on any exception they are exactly as before, and
        a pending peek is dropped once the backend has run (its staged rows are overwritten).
        Real-time safe: what `step` allocates (0 bytes with contracts off on ORT IOBinding).
        Backends without a host cache refuse it (BackendError naming the ones that have it)."""
        if self._busy:
            raise _busy("peek")
        self._busy = True
        try:
            if not self.backend.supports_peek:
                raise BackendError(
                    f"backend {self.backend.name!r} does not implement peek/commit; use backend 'ort', 'numpy' or 'c'"
                )
            y, _ = self._stage(xs)
            self._peeked = self._ring if self.sliding else self._position  # commit(i) allowed here
            return y
        finally:
            self._busy = False

    def commit(self, i: int) -> None:
        """Commit candidate i of the last `peek` at this position: its new K/V rows go into every
        batch row's cache at the position, and the position advances (the state is then exactly
        what a `step` whose every row is xs[i] leaves, bit for bit on the cache rows: the rows
        are copies of candidate i's, tests/runtime/test_peek.py). Raises InputError (no peek
        pending at this position, or i outside 0..K-1) with the state unchanged. Real-time safe:
        two broadcasting row copies into views made at load, 0 bytes."""
        if self._busy:
            raise _busy("commit")
        self._busy = True
        try:
            self._check_open()
            if not self.peek_pending:
                raise InputError(
                    "commit(i) needs a peek(xs) at the current position first (none pending: a step(), reset() "
                    "or failed peek since drops it)"
                )
            if not (type(i) is int or isinstance(i, np.integer)) or not 0 <= i < self.batch:
                raise InputError(f"candidate index {i!r} must be an int in 0..{self.batch - 1}")
            key = self._ring if self.sliding else self._position
            if not self.sliding and self.window is not None:
                key = self._ring_of[key]
            self._peeked = -1
            self._advance(key, int(i))
        finally:
            self._busy = False

    def _stage(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """The uncommitted part of step and peek: checks, the backend's step, the monitor.
        Returns (output buffer, the row key the backend was given: the position, or the ring
        position of a windowed artifact). Drops a pending peek once the backend runs (its staged
        rows are overwritten). Busy flag held by the caller."""
        monitor = self.monitor
        start = 0 if monitor is None else time.perf_counter_ns()
        self._check_open()
        checked_by_backend = self._values_checked_by_backend
        if checked_by_backend:
            self._check_step_type(x)  # the values: tf_check_input, before the C step writes anything
        else:
            self._validate_step_input(x)
        if self.sliding:
            key = self._ring
        else:
            pos = self._position
            if not self._fits[pos]:  # contracts.position.can_step (P1), tabulated at load
                if checked_by_backend:
                    self._validate_step_input(x)  # a bad value is named first, as on every backend
                raise ContextFull(
                    f"position {pos} is at max_len {self.max_len} of this artifact: the static cache is full; "
                    f"call reset() to start a new sequence, or re-export with a larger --max-len"
                )
            if self.config.arch == "encoder-decoder" and not self._source_set:
                raise InputError(
                    "no source sequence: call set_source(src) (or generate(src, ...)) before step()"
                )
            key = pos if self.window is None else self._ring_of[pos]  # windowed: its ring position
        peeked, self._peeked = self._peeked, -1
        try:
            y = self.backend.step(x, key)  # [B, 1, d_out | V]; may raise, state untouched
        except InputRefused as exc:
            self._peeked = peeked  # refused before it wrote anything: a pending peek stands
            self._validate_step_input(x)  # raises the InputError naming the value
            raise BackendError(
                f"{exc}, but the session's check of the declared domain accepts this input: the library's "
                "input check does not match the artifact; regenerate the library (backend 'c' rebuilds it)"
            ) from exc
        except TickformerError:
            raise
        except Exception as exc:  # e.g. numpy FloatingPointError/MemoryError: ours, state untouched
            where = f"at ring position {key}" if self.sliding else f"at position {self.position}"
            raise _engine_failure(self.backend.name, where, exc) from exc
        if monitor is not None:
            # The input was validated above (always on); the monitor checks output and latency,
            # and a state kind's state the step wrote (before the commit makes it the stream's).
            monitor.check_output(y, time.perf_counter_ns() - start)
            if self.recurrent:
                monitor.check_state(self.backend.staged_state(key))
        return y, key

    def _advance(self, key: int, i: int) -> None:
        """The commit: the staged rows (all of them, i < 0; candidate i's into every batch row,
        i >= 0) into row `key`, then the one store that advances the state -- the commit point.
        Sliding (module docstring, "Sliding sessions"): the block counter update first (never
        the counter the current state reads), then the rows, then the ring position."""
        if self.sliding:
            dst = self._block_dst[key]  # R13: block_write(key), never the counter the state reads
            if dst is not None:
                np.add(self._block_src[key], self._one, out=dst)  # c[target] = c[source] + 1
        if i < 0:
            self.backend.commit(key)  # row key: the slot no step reads before this commit
        else:
            self.backend.commit_candidate(key, i)
        if self.sliding:
            self._ring = self._next_ring[key]  # the commit point
            return
        nxt = self._next_position[self._position]  # no new int
        if nxt == self._wrap:  # a state kind, once per 65,536 steps (module docstring)
            self._wraps += 1
            nxt = 0
        self._position = nxt  # the commit point

    # --- not real-time --------------------------------------------------------------------------
    def run(self, seq: np.ndarray) -> np.ndarray:
        """Full pass over a whole sequence (model.onnx / the numpy model): seq [B, T, d_in] float32
        (tokens: [B, T] int64), 1 <= T <= max_len (windowed: any T >= 1, the window mask applied;
        ssm: any T >= 1, the Scan graph or the numpy scan) -> new array [B, T, d_out | V]. Does
        not touch the step state. Decoder-only artifacts. Not real-time (allocates)."""
        if self._busy:
            raise _busy("run")
        self._busy = True
        try:
            return self._run(seq)
        finally:
            self._busy = False

    def _run(self, seq: np.ndarray) -> np.ndarray:
        self._check_open()
        if self.config.arch != "decoder":
            raise InputError(
                "run() is for decoder-only artifacts; for encoder-decoder use generate(src, max_new)"
            )
        self._check_run_shape(seq, nonempty=self.recurrent)
        if (
            not 1
            <= seq.shape[1]
            <= (self.max_len if self.window is None and not self.recurrent else seq.shape[1])
        ):
            raise ContextFull(
                f"sequence length {seq.shape[1]} is outside 1..max_len {self.max_len} of this artifact; "
                f"re-export with --max-len {seq.shape[1]}"
                if seq.shape[1]
                else "sequence length 0: give at least one position"
            )
        return self._full_pass(seq)

    def _check_run_shape(self, seq: np.ndarray, *, nonempty: bool = False) -> None:
        """run()'s input: exactly an ndarray of the input dtype, [B, T] (tokens) or [B, T, d_in];
        nonempty (a state kind: no max_len): T >= 1 is part of the shape. InputError otherwise."""
        ndim = 2 if self.tokens else 3
        if (
            type(seq) is not np.ndarray
            or seq.dtype != self.input_dtype
            or seq.ndim != ndim
            or seq.shape[0] != self.batch
            or (not self.tokens and seq.shape[2] != self.config.d_in)
            or (nonempty and seq.shape[1] < 1)
        ):
            want = f"[{self.batch}, T]" if self.tokens else f"[{self.batch}, T, {self.config.d_in}]"
            raise InputError(
                f"run input must be an ndarray of {self.input_dtype} with shape {want}"
                f"{', T >= 1' if nonempty else ''}, got {_describe(seq)}"
            )

    def _full_pass(self, seq: np.ndarray) -> np.ndarray:
        """The values checked (the input domain, token ids), then the backend's full pass; an
        engine's exception as a BackendError. seq's shape and length checked by the caller."""
        self._validate_values(seq)
        try:
            return self.backend.full(seq)
        except TickformerError:
            raise
        except Exception as exc:
            raise _engine_failure(self.backend.name, "in the full pass", exc) from exc

    def set_source(self, src: np.ndarray) -> None:
        """Encoder-decoder: encode src [B, S] int64 (S <= max_len, padded internally with a
        validity mask), compute the cross-attention K/V once, and reset() to position 0."""
        if self._busy:
            raise _busy("set_source")
        self._busy = True
        try:
            self._set_source(src)
        finally:
            self._busy = False

    def _set_source(self, src: np.ndarray) -> None:
        self._check_open()
        if self.config.arch != "encoder-decoder":
            raise InputError("set_source() is for encoder-decoder artifacts; this one is decoder-only")
        if (
            type(src) is not np.ndarray
            or src.dtype != np.int64
            or src.ndim != 2
            or src.shape[0] != self.batch
        ):
            raise InputError(
                f"source must be an ndarray of int64 with shape [{self.batch}, S], got {_describe(src)}"
            )
        if not 1 <= src.shape[1] <= self.max_len:
            raise ContextFull(
                f"source length {src.shape[1]} is outside 1..max_len {self.max_len}; re-export with a larger --max-len"
            )
        self._validate_values(src)
        padded = np.zeros((self.batch, self.max_len), dtype=np.int64)  # [B, N]
        padded[:, : src.shape[1]] = src
        valid = np.zeros((self.batch, self.max_len), dtype=np.bool_)  # [B, N]
        valid[:, : src.shape[1]] = True
        try:
            self.backend.set_source(padded, valid)
        except (TickformerError, NotImplementedError):
            raise
        except Exception as exc:
            raise _engine_failure(self.backend.name, "encoding the source", exc) from exc
        self._source_set = True
        self._peeked = -1
        self._position = reset_position()

    def special_token(self, name: str) -> int | None:
        """A special token id ("bos", "eos", "pad") recorded by training in the checkpoint meta
        (manifest source.checkpoint_meta.tokens), or None."""
        source = self.artifact.manifest.get("source")
        meta = source.get("checkpoint_meta") if isinstance(source, dict) else None
        tokens = meta.get("tokens") if isinstance(meta, dict) else None
        value = tokens.get(name) if isinstance(tokens, dict) else None
        return value if type(value) is int else None

    def generate(
        self, src: np.ndarray, max_new: int, *, bos: int | None = None, eos: int | None = None
    ) -> np.ndarray:
        """Greedy decoding with the step machinery: set_source(src), feed bos, then the argmax
        token, up to max_new tokens (<= max_len) or until every row has produced eos.
        bos/eos default to the ids training recorded in the checkpoint meta (`special_token`).
        Returns int64 [B, n] (without bos). Not real-time (allocates the result)."""
        if not isinstance(max_new, int) or not 1 <= max_new <= self.max_len:
            raise InputError(f"max_new={max_new!r} must be in 1..max_len {self.max_len}")
        bos = self.special_token("bos") if bos is None else bos
        eos = self.special_token("eos") if eos is None else eos
        if bos is None:
            raise InputError("no start token: pass bos=ID (the checkpoint meta records none)")
        vocab = self.config.vocab_size
        for name, tok in (("bos", bos), ("eos", eos)):
            if tok is not None and not (isinstance(tok, int) and 0 <= tok < vocab):
                raise InputError(f"{name}={tok!r} must be a token id in [0, {vocab - 1}]")
        self.set_source(src)
        token = np.full((self.batch, 1), bos, dtype=np.int64)  # [B, 1]
        done = np.zeros(self.batch, dtype=np.bool_)
        out = []
        for _ in range(max_new):
            logits = self.step(token)  # [B, 1, V]
            token = np.argmax(logits, axis=-1).astype(np.int64)  # [B, 1]
            out.append(token[:, 0])
            if eos is not None:
                done |= token[:, 0] == eos
                if done.all():
                    break
        return np.stack(out, axis=1)  # [B, n]
