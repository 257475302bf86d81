"""C backend for the "ssm" artifact kind: the generated state-space step (codegen/blocks.py
SsmBlock) behind SsmSession (runtime/ssm_session.py), through ctypes.

    session = tickformer.runtime.load("ART", backend="c")   # an SsmSession for kind "ssm"

Loading (not real-time): as the attention `c` backend (runtime/backends/c.py): codegen.plan_for,
the build cache or `library=`, the artifact hash and the state layout checked.

State: the generated `tf_state` holds both buffers of the double-buffered state,
`state[2][B][L][D][N]`; `state(pos)` / `staged_state(pos)` are numpy views of buffer pos & 1 /
1 - (pos & 1) made at load (the monitor's state check reads the staged one), so a step reads
the committed buffer and writes the other, never the state it read: a refused step (bad input,
an output or a written state beyond its bound: the C step's own checks) leaves the session's
state as it was, and SsmSession's position store is the commit. `reset()` calls tf_reset
(buffer 0 zeroed, bounded work: the state's size).

Real-time: `step` is one np.copyto into the input buffer and one C call with pointer arguments
made once (ctypes.byref) and the session's position as a plain int (only its parity matters);
argtypes unset, so nothing is allocated (tests/runtime/test_c_ssm_backend.py, tracemalloc).
`commit_candidate` (peek) is two np.copyto calls between views made at load.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Sequence

import numpy as np

from tickformer.artifact.reader import Artifact
from tickformer.errors import BackendError, ConfigError

from .c import _aligned, _ref, refused
from .ssm import HostSsmBackend


class CSsmBackend(HostSsmBackend):
    """The generated ssm step (see the module docstring)."""

    name = "c"
    runs_graphs = False  # computes from the generated code (weights.npz), not the .onnx graphs
    supports_peek = True

    def __init__(
        self,
        artifact: Artifact,
        *,
        cc: str | None = None,
        cflags: Sequence[str] | None = None,
        cache_dir: "str | os.PathLike[str] | None" = None,
        library: "str | os.PathLike[str] | None" = None,
    ) -> None:
        super().__init__(artifact)  # host buffers, replaced by the C state's below (_bind_states)
        from tickformer.codegen import toolchain
        from tickformer.codegen.plan import plan_for

        if library is not None and (cc is not None or cflags is not None):
            raise ConfigError(
                "library= loads a prebuilt library; cc= and cflags= only apply when the backend builds it"
            )
        self._plan = plan_for(artifact)
        path = (
            toolchain.build_library(self._plan, cc=cc, cflags=cflags, cache_dir=cache_dir)
            if library is None
            else library
        )
        self.library_path = str(path)
        self._lib = toolchain.load_library(path, self._plan)
        layout = [int(self._lib.tf_layout(i)) for i in range(3)]  # size, state, pos
        shape = (2, *self.state_shape)  # [2, B, L, D, N]
        nbytes = int(np.prod(shape)) * 4
        if layout[0] <= 0 or layout[1] < 0 or layout[1] + nbytes > layout[0] or layout[2] < 0:
            raise BackendError(
                f"{path}: its state layout {layout} does not hold this artifact's state {list(shape)}; regenerate it"
            )
        self._mem = _aligned(layout[0])
        # the two buffers are the C state's: state/staged_state/commit_candidate are HostSsmBackend's
        self._bind_states(np.ndarray(shape, np.float32, buffer=self._mem, offset=layout[1]))
        batch = artifact.batch
        cfg = self.config
        if cfg.inputs == "tokens":
            self._x = np.zeros((batch, 1), np.int64)  # [B, 1]
        else:
            self._x = np.zeros((batch, 1, cfg.d_in), np.float32)  # [B, 1, d_in]
        self._refs: tuple[Any, ...] = (_ref(self._mem), _ref(self._x), _ref(self._y))
        self._stage_fn = self._lib.tf_stage
        self._stage_fn.restype = ctypes.c_int
        self._reset_fn = self._lib.tf_reset
        self._reset_fn.restype = None
        self._reset_fn(self._refs[0])

    # --- real-time path ------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time safe: one copy into the input buffer and one C call; 0 bytes allocated.
        Reads state(pos), writes staged_state(pos) and the output buffer."""
        np.copyto(self._x, x)
        sref, xref, yref = self._refs
        status = self._stage_fn(sref, xref, pos, yref)
        if status:
            raise refused(status, pos, "the state is unchanged")
        return self._y

    def reset(self) -> None:
        """tf_reset: buffer 0 zeroed (the state's size, constant in the stream length), 0 bytes."""
        self._reset_fn(self._refs[0])

    # --- not real-time ---------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        """The recurrence over T steps on a private state (this session's is untouched)."""
        t = x.shape[1]
        mem = _aligned(self._mem.nbytes)
        xin = np.zeros_like(self._x)
        y = np.zeros_like(self._y)
        out = np.zeros((x.shape[0], t, y.shape[-1]), np.float32)  # [B, T, d_out | V]
        refs = (_ref(mem), _ref(xin), _ref(y))
        self._reset_fn(refs[0])
        for pos in range(t):
            np.copyto(xin, x[:, pos : pos + 1])
            status = self._stage_fn(refs[0], refs[1], pos, refs[2])
            if status:
                raise refused(status, pos, "the full pass stopped there")
            out[:, pos] = y[:, 0]
        return out

    def close(self) -> None:
        """The library stays mapped (ctypes cannot unload it safely); the state is released."""
        self._refs = ()
