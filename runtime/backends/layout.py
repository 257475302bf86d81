"""Where a backend keeps the state a step reads: the KV cache's stacked layouts every backend
shares, and the ssm kind's double-buffered state; the host stores of both kinds behind one
interface (`HostBackend`).

The step graph (format 2, export/graphs.py `step_signature`) takes one tensor per layer; hosts
and devices keep each kind stacked over layers [L, ...] and hand layer i's slice to the graph:
K transposed [L, B, H, dh, N] (the graph's k_cache.i), V [L, B, H, N, dh], the staged new rows
[L, B, H, 1, dh], and for encoder-decoder the cross K/V [L, B, H, N, dh] (`stacked_shapes`).
`HostCache` is that layout in host memory (numpy, ORT CPU); `layer_pitch` and `commit_copies`
are its device geometry (TensorRT, ORT CUDA/TensorRT EPs). `Backend.cache()` always returns the
logical [L, B, H, N, dh] pair.

The ssm kind's state (base.py): two buffers [2, B, L, D, N]; `HostState` keeps them in host
memory (numpy's own, or the C backend's tf_state) with every view the real-time path needs
made once; `candidate_copies` is its peek commit's device geometry.

Both host stores answer the same calls -- `views(parity)` (the step graph's state inputs and
outputs by name, for the step at a position of that parity: a KV cache has one set, the
double-buffered state two), `commit`, `commit_candidate`, `reset`, `state`, `staged_state`,
`cache` -- and `HostBackend` hands the session's calls to the store its block kind selects.
"""

from __future__ import annotations

import numpy as np

from tickformer.artifact import format as fmt
from tickformer.contracts.ring_buffer import ring_slot
from tickformer.errors import BackendError

from .base import StoreBackend


def stacked_shapes(
    cache_shape: tuple[int, ...], row_shape: tuple[int, ...], *, cross: bool = False
) -> dict[str, tuple[int, ...]]:
    """Stored shape of each stack, by the step graph's tensor stem (k_cache, v_cache, k_new,
    v_new[, cross_k, cross_v]), from the logical cache [L, B, H, N, dh] and row [L, B, H, 1, dh]."""
    layers, batch, heads, n, dh = cache_shape
    shapes = {
        "k_cache": (layers, batch, heads, dh, n),
        "v_cache": tuple(cache_shape),
        "k_new": tuple(row_shape),
        "v_new": tuple(row_shape),
    }
    if cross:
        shapes.update({"cross_k": tuple(cache_shape), "cross_v": tuple(cache_shape)})
    return shapes


class CacheStore:
    """What every KV-cache store shares (HostCache here; device.DeviceCache, ort_gpu's host
    mirror): one set of step I/O views, no fixed-size state, nothing to clear at a reset, no
    peek commit unless the store implements one."""

    parities = 1  # one set of step I/O views, whatever the position

    def commit_candidate(self, pos: int, i: int) -> None:
        raise NotImplementedError("this KV cache does not implement peek/commit")

    def reset(self) -> None:
        """Nothing to clear: rows not written since the reset are selected out by position."""

    def state(self, pos: int) -> np.ndarray:
        raise BackendError(
            "an attention artifact has no fixed-size state; its history is the KV cache (cache())"
        )

    def staged_state(self, pos: int) -> np.ndarray:
        return self.state(pos)


class StateStore:
    """What every store of the ssm kind's double-buffered state shares (HostState here;
    device.DeviceState, ort_gpu's host path): two sets of step I/O views, nothing to copy at a
    commit, no KV cache."""

    parities = 2  # the step at an even position reads buffer 0, at an odd one buffer 1

    def commit(self, pos: int) -> None:
        """Nothing to copy: the session's position store selects the buffer."""

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        raise BackendError("an ssm artifact has no KV cache; its state is session.state()")


class HostCache(CacheStore):
    """Host-resident KV cache and staged rows, allocated once. `k`, `v` [L, B, H, N, dh] are the
    logical caches; K lives transposed in `k_t` [L, B, H, dh, N] (step.onnx's layout: layer i's
    contiguous slice k_t[i] is read in place) and `k` is a view of it; `v` is stored as it reads.
    k_new, v_new [L, B, H, 1, dh]: layer i's step outputs are written into slice i. The
    per-position row views are made here, once, so `commit` is two np.copyto calls: no index
    parsing, no new view, no allocation per step. window=W (ring cache, N = W rows): commit(r)
    takes the ring position r in [0, 3W) and writes row contracts.ring_buffer.ring_slot(r, W)
    (the row views are made per ring position, by calling it)."""

    def __init__(
        self, cache_shape: tuple[int, ...], row_shape: tuple[int, ...], window: int | None = None
    ) -> None:
        n = cache_shape[3]
        self.k_t = np.zeros(
            stacked_shapes(cache_shape, row_shape)["k_cache"], dtype=np.float32
        )  # [L, B, H, dh, N]
        self.k = self.k_t.swapaxes(-1, -2)  # [L, B, H, N, dh] view
        self.v = np.zeros(cache_shape, dtype=np.float32)  # [L, B, H, N, dh]
        self.k_new = np.zeros(row_shape, dtype=np.float32)  # [L, B, H, 1, dh]
        self.v_new = np.zeros(row_shape, dtype=np.float32)
        rows = commit_rows(n, window)
        self._k_rows = [
            self.k[:, :, :, p] for p in rows
        ]  # N (3W) views [L, B, H, dh] (strided: column p of k_t)
        self._v_rows = [self.v[:, :, :, p] for p in rows]
        self._k_src = self.k_new[:, :, :, 0]  # [L, B, H, dh]
        self._v_src = self.v_new[:, :, :, 0]
        batch = cache_shape[1]
        # Candidate i's staged rows [L, 1, H, dh], broadcast over the batch by commit_candidate.
        self._k_cand = [self.k_new[:, i : i + 1, :, 0] for i in range(batch)]
        self._v_cand = [self.v_new[:, i : i + 1, :, 0] for i in range(batch)]

    def views(self, parity: int) -> dict[str, np.ndarray]:
        """The step graph's cache inputs and outputs by name (format.k_cache(i), ...): layer i's
        contiguous slice of each stack, read and written in place."""
        out: dict[str, np.ndarray] = {}
        for i in range(self.k_t.shape[0]):
            out.update(
                {
                    fmt.k_cache(i): self.k_t[i],
                    fmt.v_cache(i): self.v[i],
                    fmt.k_new(i): self.k_new[i],
                    fmt.v_new(i): self.v_new[i],
                }
            )
        return out

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        return self.k, self.v

    def commit(self, pos: int) -> None:
        """Copy the staged rows into cache row pos (ring: row ring_slot(pos, W)). Real-time safe
        (0 bytes allocated)."""
        np.copyto(self._k_rows[pos], self._k_src)
        np.copyto(self._v_rows[pos], self._v_src)

    def commit_candidate(self, pos: int, i: int) -> None:
        """Copy batch row i's staged rows into cache row pos of EVERY batch row (the rows of a
        peek share one history, so after this they hold the same cache again). Real-time safe:
        two broadcasting np.copyto calls between views made at load (0 bytes)."""
        np.copyto(self._k_rows[pos], self._k_cand[i])
        np.copyto(self._v_rows[pos], self._v_cand[i])


class HostState(StateStore):
    """The ssm kind's double-buffered state in host memory: `states` [2, B, L, D, N] (numpy's own
    zeros, or the C backend's tf_state), with every view the real-time path needs made once.
    The step at position p reads buffer p & 1 and writes the other; `commit` has nothing to copy
    (the session's position store selects the buffer); `commit_candidate(pos, i)` copies row i
    over the other rows of the buffer the step at pos wrote (rows before i, rows after i: two
    broadcasting copies between views made here, no overlap, 0 bytes), so the state the position
    store commits is candidate i's in every row -- bit for bit what a step whose every row is
    xs[i] writes; `reset` zeroes buffer 0 in place (the state's size, never the stream's)."""

    def __init__(self, state_shape: tuple[int, ...], states: np.ndarray | None = None) -> None:
        if states is None:
            states = np.zeros((2, *state_shape), dtype=np.float32)  # [2, B, L, D, N]
        self.states = states
        self._buffers = (states[0], states[1])  # views made once: indexing makes a new one
        # [parity of pos][i]: (rows before i, rows after i, row i) of the buffer the step at pos writes
        self._cand: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = []
        for parity in (0, 1):
            staged = states[1 - parity]  # [B, L, D, N]
            self._cand.append(
                [(staged[:i], staged[i + 1 :], staged[i : i + 1]) for i in range(states.shape[1])]
            )

    def views(self, parity: int) -> dict[str, np.ndarray]:
        """The step graph's state input and output (format.SSM_STATE, SSM_STATE_NEW) for the step
        at a position of this parity: it reads buffer `parity` and writes the other."""
        return {fmt.SSM_STATE: self._buffers[parity], fmt.SSM_STATE_NEW: self._buffers[1 - parity]}

    def state(self, pos: int) -> np.ndarray:
        """The committed state, a view [B, L, D, N] made at load (0 bytes)."""
        return self._buffers[pos & 1]

    def staged_state(self, pos: int) -> np.ndarray:
        """The state the step at pos wrote, a view [B, L, D, N] made at load (0 bytes)."""
        return self._buffers[1 - (pos & 1)]

    def reset(self) -> None:
        """Zero the state read at position 0, in place. Constant time, 0 bytes."""
        self._buffers[0].fill(0.0)

    def commit_candidate(self, pos: int, i: int) -> None:
        """Candidate i's staged state into every batch row of the staged buffer. Real-time safe:
        two broadcasting copies between views made at load, 0 bytes."""
        before, after, row = self._cand[pos & 1][i]
        np.copyto(before, row)
        np.copyto(after, row)


class HostBackend(StoreBackend):
    """A backend whose state lives in host memory (numpy, ORT CPU): the store its block kind
    selects (`HostCache` or `HostState`, made by `_host_store`) answers the session's commit,
    peek commit, reset and state reads."""

    supports_peek = True

    def _host_store(self, states: np.ndarray | None = None) -> "HostCache | HostState":
        """The host store of this artifact's block kind; ssm: over `states` if given."""
        if self.block == "ssm":
            return HostState(self.state_shape, states)
        return HostCache(self.cache_shape, self.row_shape, self.config.window)


def candidate_copies(base: tuple[int, int], nbytes: int, batch: int) -> list[list[list[tuple[int, int]]]]:
    """The ssm peek commit's device copies: [parity][i] -> (dst, src) of the B - 1 row copies
    that put row i of the buffer the step at a position of that parity wrote over its other
    rows. base: the device addresses of the two state buffers; nbytes: one buffer's size (a
    batch row [L, D, N] is contiguous, nbytes / B)."""
    row = nbytes // batch
    return [
        [
            [(base[1 - parity] + r * row, base[1 - parity] + i * row) for r in range(batch) if r != i]
            for i in range(batch)
        ]
        for parity in (0, 1)
    ]


def commit_rows(n_rows: int, window: int | None) -> list[int]:
    """The cache row `commit(pos)` writes, indexed by pos: pos itself for a static cache of
    n_rows, contracts.ring_buffer.ring_slot(r, W) for every ring position r in [0, 3W) of a ring
    cache (the device backends add row * width to their copies' destinations). A list made at
    load: commit looks the row up, it computes nothing."""
    return list(range(n_rows)) if window is None else [ring_slot(r, window) for r in range(3 * window)]


ALIGN = 256  # bytes: IExecutionContext.setTensorAddress "must have at least 256-byte alignment"


def layer_pitch(shape: tuple[int, ...], itemsize: int = 4) -> tuple[int, int]:
    """(slice bytes, pitch bytes) of one layer of a stacked [L, ...] device buffer: the pitch is
    the slice rounded up to ALIGN, so base + i * pitch is aligned for every layer i."""
    slice_bytes = int(np.prod(shape[1:])) * itemsize
    return slice_bytes, -(-slice_bytes // ALIGN) * ALIGN


def stack_addresses(base: dict[str, int], pitch: dict[str, tuple[int, int]], layers: int) -> dict[str, int]:
    """The device address of layer i's tensor of every stack, by the step graph's name
    ("k_cache.i", ...): base + i * pitch (layer_pitch)."""
    return {f"{stack}.{i}": base[stack] + i * p for stack, (_, p) in pitch.items() for i in range(layers)}


def commit_copies(
    base: dict[str, int], pitch: dict[str, tuple[int, int]], cache_shape: tuple[int, ...], itemsize: int = 4
) -> list[tuple[int, int, int, int, int, int]]:
    """The strided copies that write the staged rows into cache position 0, as cudaMemcpy2D
    arguments (dst, dpitch, src, spitch, width, height); row p adds p * width to dst (ring caches:
    row commit_rows(...)[pos] = ring_slot(pos, W)).
    base: device address of each stack (k_cache, v_cache, k_new, v_new), pitch: layer_pitch of
    each, cache_shape: the logical [L, B, H, N, dh].
      K: k_cache [., B, H, dh, N] column p <- k_new [., B, H, 1, dh]: B*H*dh rows of one float.
      V: v_cache [., B, H, N, dh] row p    <- v_new [., B, H, 1, dh]: B*H rows of dh floats.
    One copy per stack when neither stack pads its layers (the rows run on across layers), else
    one per layer: a fixed number of copies whatever the position."""
    layers, batch, heads, n, dh = cache_shape
    ops: list[tuple[int, int, int, int, int, int]] = []
    for new, cache, width, rows in (
        ("k_new", "k_cache", itemsize, batch * heads * dh),
        ("v_new", "v_cache", dh * itemsize, batch * heads),
    ):
        (c_slice, c_pitch), (r_slice, r_pitch) = pitch[cache], pitch[new]
        dpitch = n * width  # one (b, h[, d]) row of the cache
        if c_slice == c_pitch and r_slice == r_pitch:
            ops.append((base[cache], dpitch, base[new], width, width, layers * rows))
        else:
            ops.extend(
                (base[cache] + i * c_pitch, dpitch, base[new] + i * r_pitch, width, width, rows)
                for i in range(layers)
            )
    return ops
