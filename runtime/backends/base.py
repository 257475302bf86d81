"""The interface every runtime backend implements (documented in docs/artifact_format.md).

Split of responsibilities (llama2.c's config / weights / run state kept apart):
the `Session` validates inputs, owns the position, the contract monitor and the commit order;
a `Backend` owns its buffers (the state a step reads, what it stages, the output buffer),
allocated once in its constructor, and runs the artifact's graphs.

One backend class per engine runs both block kinds (`Config.block`), in the manner of
codegen/caches.py and blocks.py: what differs is the state a step reads and what its commit keeps --

    attention  a KV cache (layout.HostCache on the host): the step at position pos reads cache
               rows 0..pos-1 and stages its new K/V rows; `commit(pos)` copies them into row pos
               (windowed artifacts: the ring cache of W rows, below).
    ssm        one fixed-size recurrent state [B, L, D, N], double-buffered (layout.HostState on
               the host): the step at position p reads buffer p & 1 and writes the other; it never
               writes the state it read, so `commit` has nothing to copy and the session's position
               store is the commit; `reset()` zeroes buffer 0 (the state's size, never the stream's).

Protocol of one step (the session's side):

    y = backend.step(x, pos)   # runs the step graph; may fail; never touches the committed state
    ...contract checks on y (ssm: and on staged_state(pos))...
    backend.commit(pos)        # attention: copies the staged K/V rows into cache row pos

so a failure anywhere before `commit` leaves the state and position exactly as they were.

Peek (candidate actions over one shared history, `Session.peek` / `Session.commit`): the batch
rows of the artifact are K candidates over ONE history (every row's state identical). The
session runs the same `step` on the K candidate inputs, then `commit_candidate(pos, i)` makes
row i's staged rows (ssm: its staged state) every batch row's, so the rows stay identical.
Backends that implement it keep `supports_peek = True`; the session refuses peek on the others
with a clear error.

Windowed artifacts (format.cache_kind "ring"): the cache has W rows and `pos` is the ring
position r in [0, 3W) (contracts.ring_buffer.ring_position; the step graph reads the same slots
for r as for the absolute position); commit writes row ring_slot(r, W). A backend that has no
ring cache keeps `ring_cache = False` and refuses windowed artifacts at construction.

A backend that does not run a block kind says so in `refuses` (kind -> why); `runtime.load`
refuses it in one line before anything is built, and a windowed artifact on a backend without a
ring cache likewise, naming those that have one (runtime/backends/__init__.py `backend_class`).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from tickformer.artifact.format import cache_shape, out_width, ssm_state_shape
from tickformer.artifact.reader import Artifact
from tickformer.errors import BackendError


class Backend(abc.ABC):
    """Runs one artifact's graphs on one engine; see the module docstring for the protocol."""

    name: ClassVar[str]
    static_cache: ClassVar[bool] = True  # False: the step's cost grows with the position
    # implements commit_candidate (module docstring, "Peek"); set per instance where the kind decides
    supports_peek: bool = False
    refuses: ClassVar[dict[str, str]] = {}  # block kind -> why this backend does not run it
    ring_cache: ClassVar[bool] = False  # runs windowed artifacts (ring KV cache of W rows, module docstring)
    # step() itself refuses a non-finite, out-of-domain or out-of-vocabulary input before it writes
    # anything, raising errors.InputRefused: the Session then checks only the type, dtype and shape
    # on the hot path and names the bad value only when the backend refused (runtime/session.py).
    checks_input: ClassVar[bool] = False

    def __init__(self, artifact: Artifact, **options: Any) -> None:
        if options:
            raise TypeError(f"backend {self.name!r} takes no options {sorted(options)}")
        if artifact.config.window is not None and not self.ring_cache:  # runtime.load refuses first, naming
            raise BackendError(  # the backends that have one (runtime/backends/__init__.py backend_class)
                f"backend {self.name!r} has no ring KV cache, which a windowed artifact (window "
                f"{artifact.config.window}) needs; load it on a backend that has one"
            )
        self.artifact = artifact
        self.config = artifact.config
        self.block = artifact.config.block  # "attention" | "ssm" (module docstring)

    # --- shapes every backend shares --------------------------------------------------------
    @property
    def cache_shape(self) -> tuple[int, ...]:
        return tuple(cache_shape(self.config, self.artifact.batch))  # [L, B, H, N, dh]

    @property
    def row_shape(self) -> tuple[int, ...]:
        return tuple(cache_shape(self.config, self.artifact.batch, rows=1))  # [L, B, H, 1, dh]

    @property
    def state_shape(self) -> tuple[int, ...]:
        return tuple(ssm_state_shape(self.config, self.artifact.batch))  # ssm: [B, L, D, N]

    @property
    def step_output_shape(self) -> tuple[int, ...]:
        return (self.artifact.batch, 1, out_width(self.config))  # [B, 1, d_out | V]

    # --- real-time path ----------------------------------------------------------------------
    @abc.abstractmethod
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Run the step graph at position pos on x ([B, 1, d_in] float32 / [B, 1] int64, already
        validated). Write the output into the preallocated output buffer and return it (the same
        array every call); stage k_new / v_new. Must not modify the cache. Raise BackendError if
        the engine fails. Real-time safe after the first call (implementations must keep it so)."""

    @abc.abstractmethod
    def commit(self, pos: int) -> None:
        """Attention: copy the staged rows into cache row pos; ssm: nothing to copy (module
        docstring). Real-time safe; called only after step()."""

    def commit_candidate(self, pos: int, i: int) -> None:
        """Make batch row i's staged rows (ssm: staged state) every batch row's (module docstring,
        "Peek"). Real-time safe where implemented; called only after step()."""
        raise NotImplementedError(f"backend {self.name!r} does not implement peek/commit")

    def reset(self) -> None:  # noqa: B027 - a no-op default: a KV cache needs nothing at a reset
        """Start a new stream: ssm backends zero the state read at position 0 (constant time);
        a KV cache needs nothing (rows not written since are selected out by position)."""

    def state(self, pos: int) -> np.ndarray:
        """ssm: the state the step at position pos reads (the committed state), [B, L, D, N]."""
        raise BackendError(
            "an attention artifact has no fixed-size state; its history is the KV cache (cache())"
        )

    def staged_state(self, pos: int) -> np.ndarray:
        """ssm: the state the step at position pos wrote (committed when the position advances)."""
        raise BackendError(
            "an attention artifact has no fixed-size state; its history is the KV cache (cache())"
        )

    # --- not real-time -------------------------------------------------------------------------
    @abc.abstractmethod
    def full(self, x: np.ndarray) -> np.ndarray:
        """Decoder-only full pass: [B, T, d_in] float32 / [B, T] int64 -> new [B, T, d_out | V]."""

    def set_source(self, src: np.ndarray, src_valid: np.ndarray) -> None:
        """Encoder-decoder: encode src [B, N] int64 with src_valid [B, N] bool, keep the cross K/V."""
        raise NotImplementedError(f"backend {self.name!r} does not run encoder-decoder artifacts")

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        """Attention: (k_cache, v_cache) [L, B, H, N, dh] as host arrays (views where the cache is
        on the host)."""
        raise BackendError("an ssm artifact has no KV cache; its state is session.state()")

    def close(self) -> None:  # noqa: B027 - a no-op default: a backend without resources need not override it
        """Release engine resources. Idempotent."""


class StoreBackend(Backend):
    """A backend whose state is a store of its block kind (`store`: layout.HostCache / HostState
    on the host, device.DeviceCache / DeviceState on a GPU): the commit, peek commit, reset,
    state reads and cache() the session asks for are the store's."""

    store: Any

    def commit(self, pos: int) -> None:
        """Real-time safe: the store's commit (fixed copies into views or addresses made at load)."""
        self.store.commit(pos)

    def commit_candidate(self, pos: int, i: int) -> None:
        """Real-time safe where the store implements it: fixed broadcasting or row copies."""
        self.store.commit_candidate(pos, i)

    def reset(self) -> None:
        self.store.reset()

    def state(self, pos: int) -> np.ndarray:
        return self.store.state(pos)

    def staged_state(self, pos: int) -> np.ndarray:
        return self.store.staged_state(pos)

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        return self.store.cache()
