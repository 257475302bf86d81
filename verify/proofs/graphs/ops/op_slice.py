"""Slice: starts, ends, axes and steps must be concrete (from the position subgraph or constant);
each output element is the input element it selects, atoms and known constant alike.

Edge cases: negative and out-of-range starts/ends are clamped the way Python slices clamp them;
a negative step walks backwards.
"""

from __future__ import annotations

import numpy as np

from ..values import Sym, Value, pad
from .base import Call

OPS = ("Slice",)


def slice_axis(a: Sym, ax: int, index: slice | np.ndarray) -> Sym:
    """a restricted to `index` (a slice or integer positions) along axis ax; a size-1 (broadcast)
    bitset or constant axis stays as it is."""
    nd = len(a.shape)

    def take(arr: np.ndarray, last: bool) -> np.ndarray:
        arr = pad(arr, nd, last)
        if arr.shape[ax] == 1:
            return arr
        return arr[(slice(None),) * ax + (index,)]

    length = len(range(a.shape[ax])[index]) if isinstance(index, slice) else len(index)
    shape = tuple(length if i == ax else d for i, d in enumerate(a.shape))
    return Sym(shape, take(a.hard, True), take(a.soft, True), take(a.const, False), a.dtype)


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    starts = call.concrete(args[1], "starts")
    ends = call.concrete(args[2], "ends")
    axes = call.concrete(args[3], "axes") if len(args) > 3 and args[3] is not None else np.arange(len(starts))
    steps = (
        call.concrete(args[4], "steps")
        if len(args) > 4 and args[4] is not None
        else np.ones(len(starts), int)
    )
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = int(ax) % len(a.shape)
        rng = slice(*slice(int(s), int(e), int(st)).indices(a.shape[ax]))
        a = slice_axis(a, ax, rng)
    return [a]
