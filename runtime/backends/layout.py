"""Where a backend keeps the KV cache: the stacked layouts every backend shares.

The step graph (format 2, export/graphs.py `step_signature`) takes one tensor per layer; hosts
and devices keep each kind stacked over layers [L, ...] and hand layer i's slice to the graph:
K transposed [L, B, H, dh, N] (the graph's k_cache.i), V [L, B, H, N, dh], the staged new rows
[L, B, H, 1, dh], and for encoder-decoder the cross K/V [L, B, H, N, dh] (`stacked_shapes`).
`HostCache` is that layout in host memory (numpy, ORT CPU); `layer_pitch` and `commit_copies`
are its device geometry (TensorRT, ORT CUDA/TensorRT EPs). `Backend.cache()` always returns the
logical [L, B, H, N, dh] pair.
"""

from __future__ import annotations

import numpy as np

from tickformer.contracts.ring_buffer import ring_slot


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


class HostCache:
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
