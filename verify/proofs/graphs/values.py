"""The abstract values of the graph prover: per element, the set of *atoms* (a cache row, an
input time step, another input, one of the step's own new rows) it can depend on, kept as uint64
bitsets, and a *known constant* ("exactly c, or NaN when one of the element's own atoms is").
Atoms reached only through a product with an exactly-zero factor are kept apart ("soft").

The array helpers every operator rule shares (broadcasting a bitset, selecting, OR-reducing) and
the two rules most operators reduce to: `elementwise` (every input element reaches the output
element it is broadcast to) and `restructure` (a pure index map: reshape, gather, ...).

Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np


class Unsupported(Exception):
    """The analysis cannot decide this graph (an operator outside the supported set, a shape
    computed from data, control flow): the proof fails, it is never assumed."""


@dataclass
class Sym:
    """An abstract tensor. hard/soft: uint64 bitsets [..., W] over the atoms, broadcastable to
    shape + (W,) (a size-1 axis: the same for every element along it); const: float64 broadcastable
    to shape, c = 'exactly c, or NaN caused by this element's own atoms', NaN = not a known
    constant. soft atoms reach the element only through a product with an exactly-zero factor."""

    shape: tuple[int, ...]
    hard: np.ndarray
    soft: np.ndarray
    const: np.ndarray
    dtype: np.dtype


Value = Any  # np.ndarray (concrete) or Sym


def nodeps(shape: Sequence[int], w: int) -> np.ndarray:
    """An empty bitset broadcastable to shape + (W,): no atoms."""
    return np.zeros((1,) * len(shape) + (w,), dtype=np.uint64)


def lift(value: np.ndarray, w: int) -> Sym:
    """A concrete tensor as an abstract one: no atoms, every element a known constant."""
    value = np.asarray(value)
    const = value.astype(np.float64) if value.dtype.kind in "fiub" else np.full(value.shape, np.nan)
    return Sym(value.shape, nodeps(value.shape, w), nodeps(value.shape, w), const, value.dtype)


def compress(arr: np.ndarray, keep_last: bool) -> np.ndarray:
    """Shrink every axis along which `arr` is constant to size 1 (the W axis of a bitset kept)."""
    axes = range(arr.ndim - 1 if keep_last else arr.ndim)
    for ax in axes:
        if arr.shape[ax] > 1:
            first = arr.take([0], axis=ax)
            same = (
                (arr == first) | (np.isnan(arr) & np.isnan(first)) if arr.dtype.kind == "f" else arr == first
            )
            if same.all():
                arr = first
    return arr


def pad(arr: np.ndarray, ndim: int, last: bool) -> np.ndarray:
    """Prepend size-1 axes so that arr has ndim data axes (+ the W axis when last)."""
    have = arr.ndim - (1 if last else 0)
    return arr.reshape((1,) * (ndim - have) + arr.shape) if have < ndim else arr


def materialize(arr: np.ndarray, shape: Sequence[int], last: bool) -> np.ndarray:
    """arr broadcast to its full shape (+ the W axis when last): a read-only view."""
    target = tuple(shape) + ((arr.shape[-1],) if last else ())
    return np.broadcast_to(pad(arr, len(shape), last), target)


def sel(mask: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """bits where mask (broadcast over the W axis), else 0."""
    return np.where(mask[..., None], bits, np.uint64(0))


def union_all(arr: np.ndarray) -> np.ndarray:
    """OR of every element's bitset: [W]."""
    return np.bitwise_or.reduce(arr.reshape(-1, arr.shape[-1]), axis=0)


def or_reduce(bits: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    """OR of the bitsets along `axes` (data axes; the W axis is kept)."""
    out = bits
    for ax in sorted(axes, reverse=True):
        out = np.bitwise_or.reduce(out, axis=ax, keepdims=True)
    if not keepdims:
        out = out.squeeze(axis=tuple(axes))
    return out


def elementwise(inputs: list[Sym], out_dtype: np.dtype, const: np.ndarray | None = None) -> Sym:
    """Every input element reaches the output element it is broadcast to (a union of atoms)."""
    shape = tuple(np.broadcast_shapes(*(a.shape for a in inputs)))
    n = len(shape)
    hard = pad(inputs[0].hard, n, True)
    soft = pad(inputs[0].soft, n, True)
    for a in inputs[1:]:
        hard = hard | pad(a.hard, n, True)
        soft = soft | pad(a.soft, n, True)
    if const is None:
        const = np.full((1,) * n, np.nan)
    return Sym(shape, hard, soft, pad(const, n, False), np.dtype(out_dtype))


def known(c: np.ndarray) -> np.ndarray:
    """Where a known-constant array holds a known constant (NaN: not known)."""
    return ~np.isnan(c)


def normalize_axes(attr_axes: Sequence[int] | None, ndim: int) -> list[int]:
    """Axes as sorted non-negative indices; None: every axis."""
    if attr_axes is None:
        return list(range(ndim))
    return sorted({int(ax) % ndim for ax in attr_axes})


def restructure(a: Sym, shape: tuple[int, ...], f: Callable[[np.ndarray], np.ndarray]) -> Sym:
    """Materialize, apply a pure index map f (reshape, gather, ...), compress again."""
    hard = f(np.ascontiguousarray(materialize(a.hard, a.shape, True)))
    soft = f(np.ascontiguousarray(materialize(a.soft, a.shape, True)))
    const = f(np.ascontiguousarray(materialize(a.const, a.shape, False))[..., None])[..., 0]
    return Sym(
        tuple(shape),
        compress(hard, True),
        compress(soft, True),
        compress(const, False),
        a.dtype,
    )
