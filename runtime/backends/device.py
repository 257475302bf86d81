"""The state a step reads, on a GPU: one store per block kind, shared by the GPU backends.

Both GPU engines (runtime/backends/tensorrt.py, ort_gpu.py) keep the state at fixed device
addresses bound once to their step, and copy on a non-blocking stream of their own with
cuda-python. What is copied depends on the block kind (base.py), not on the engine, so each kind
is one store here, given the device addresses, the stream and a `sync` (that stream's
synchronisation: every method returns with its copies complete, after the engine's run --
`step` synchronised its outputs -- and before the next run is enqueued, whatever stream the
engine uses):

    DeviceCache  attention: the KV cache stacked over layers, K transposed [L, B, H, dh, N] and
                 V [L, B, H, N, dh], and the staged rows [L, B, H, 1, dh], one device buffer per
                 stack, layer i at base + i * pitch (layout.layer_pitch: 256-byte aligned).
                 `commit(pos)` is the fixed-size strided copies of layout.commit_copies into row
                 pos (windowed: row ring_slot(pos, W), layout.commit_rows): the same copies at
                 every position, only the destination offset moves. `cache()` reads it back.
    DeviceState  ssm: the state's two buffers [B, L, D, N]; the step at position p reads buffer
                 p & 1 and writes the other, so `commit` has nothing to copy; `commit_candidate`
                 (peek) is the B - 1 fixed-size row copies of layout.candidate_copies, `reset` a
                 memset of buffer 0, the state reads copies into host buffers made at load.

`addresses(parity)` names the device address of every state input and output of the step graph
(format.step_signature) for the step at a position of that parity: a KV cache has one set, the
double-buffered state two (an engine binds each set once: one binding, execution context or
captured CUDA graph per parity). ORT without cuda-python has host fallbacks of both
(ort_gpu.py). Sources (facts only): CUDA Runtime API (cudaMemcpy2DAsync, cudaMemcpyAsync,
cudaMemsetAsync, "API synchronization behavior"). Real-time: commit, commit_candidate and reset
are fixed work and allocate nothing but cuda-python's small result tuples; the reads are not.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tickformer.artifact import format as fmt

from .cuda import cuda_check
from .layout import CacheStore, StateStore, candidate_copies, commit_copies, commit_rows, stack_addresses

Sync = Callable[[], None]


class DeviceCache(CacheStore):
    """Attention's KV cache on the device (module docstring)."""

    def __init__(
        self,
        cudart: Any,
        stream: Any,
        sync: Sync,
        base: dict[str, int],
        pitch: dict[str, tuple[int, int]],
        stacks: dict[str, tuple[int, ...]],
        cache_shape: tuple[int, ...],
        window: int | None,
    ) -> None:
        self._c, self._stream, self._sync = cudart, stream, sync
        self.base, self.pitch, self.stacks = base, pitch, stacks  # name -> address, (slice, pitch), shape
        self._layers = cache_shape[0]
        self._rows = commit_rows(cache_shape[3], window)  # commit(pos) -> cache row
        cache = {name: base[name] for name in ("k_cache", "v_cache", "k_new", "v_new")}
        self._ops = commit_copies(cache, pitch, cache_shape)  # (dst, dpitch, src, spitch, width, height)

    def addresses(self, parity: int) -> dict[str, int]:
        """Layer i's tensor of every stack (format.k_cache(i), ...) at base + i * pitch."""
        return stack_addresses(self.base, self.pitch, self._layers)

    def commit(self, pos: int) -> None:
        """Real-time safe: fixed-size strided device copies (k_new -> K column row, v_new -> V row
        row, row = pos or ring_slot(pos, W)), on the stream, then its sync."""
        c, stream = self._c, self._stream
        kind = c.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        row = self._rows[pos]
        for dst, dpitch, src, spitch, width, height in self._ops:
            cuda_check(
                c.cudaMemcpy2DAsync(dst + row * width, dpitch, src, spitch, width, height, kind, stream),
                "cudaMemcpy2DAsync commit",
            )
        self._sync()

    def read(self, name: str) -> np.ndarray:
        """Stack `name` in its stored shape, copied from the device (its layer slices without the
        padding). Not real-time."""
        slice_bytes, pitch = self.pitch[name]
        raw = np.empty((self._layers, pitch // 4), np.float32)
        kind = self._c.cudaMemcpyKind.cudaMemcpyDeviceToHost
        cuda_check(
            self._c.cudaMemcpyAsync(raw.ctypes.data, self.base[name], raw.nbytes, kind, self._stream),
            "cudaMemcpyAsync cache",
        )
        self._sync()
        return raw[:, : slice_bytes // 4].reshape(self.stacks[name])

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        """(k, v), each [L, B, H, N, dh] (the logical layout, as every backend): K transposed back."""
        k_t = self.read("k_cache")  # [L, B, H, dh, N]
        return np.ascontiguousarray(k_t.swapaxes(-1, -2)), np.ascontiguousarray(self.read("v_cache"))


class DeviceState(StateStore):
    """The ssm kind's double-buffered state on the device (module docstring). `read`: two host
    buffers [B, L, D, N] made at load (pinned where the engine has them), the state reads'."""

    def __init__(
        self,
        cudart: Any,
        stream: Any,
        sync: Sync,
        base: tuple[int, int],
        state_shape: tuple[int, ...],
        read: tuple[np.ndarray, np.ndarray],
    ) -> None:
        self._c, self._stream, self._sync = cudart, stream, sync
        self.base = base
        self.nbytes = int(np.prod(state_shape)) * 4
        self._read = read
        self._row = self.nbytes // state_shape[0]  # one batch row [L, D, N], contiguous
        self._cand = candidate_copies(base, self.nbytes, state_shape[0])

    def addresses(self, parity: int) -> dict[str, int]:
        """The step at a position of this parity reads buffer `parity` and writes the other."""
        return {fmt.SSM_STATE: self.base[parity], fmt.SSM_STATE_NEW: self.base[1 - parity]}

    def commit_candidate(self, pos: int, i: int) -> None:
        """Candidate i's staged state over the other B - 1 rows of the staged buffer: fixed-size
        device-to-device copies on the stream, then its sync. Real-time safe."""
        c = self._c
        kind = c.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        for dst, src in self._cand[pos & 1][i]:
            cuda_check(
                c.cudaMemcpyAsync(dst, src, self._row, kind, self._stream), "cudaMemcpyAsync candidate"
            )
        self._sync()

    def reset(self) -> None:
        """Zero buffer 0 (the one position 0 reads): a memset on the stream and its sync."""
        cuda_check(
            self._c.cudaMemsetAsync(self.base[0], 0, self.nbytes, self._stream), "cudaMemsetAsync reset"
        )
        self._sync()

    def _copy(self, buffer: int, out: np.ndarray) -> np.ndarray:
        """Device buffer -> the host array `out` (made at load), complete on return."""
        kind = self._c.cudaMemcpyKind.cudaMemcpyDeviceToHost
        cuda_check(
            self._c.cudaMemcpyAsync(out.ctypes.data, self.base[buffer], self.nbytes, kind, self._stream),
            "cudaMemcpyAsync state",
        )
        self._sync()
        return out

    def state(self, pos: int) -> np.ndarray:
        """The committed state, copied into a host buffer made at load."""
        return self._copy(pos & 1, self._read[0])

    def staged_state(self, pos: int) -> np.ndarray:
        """The state the step at pos wrote, copied into its own host buffer (the monitor's read)."""
        return self._copy(1 - (pos & 1), self._read[1])
