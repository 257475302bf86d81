"""Gather along an axis. Concrete indices (from the position subgraph: the step's own row, the
live rows of V) select: each output element is the element its index names, a pure index map
(values.restructure); negative indices count from the end. Data-dependent indices (token ids)
may name any element: each output element depends on the whole gathered axis and on its index.

Edge cases: a stale row replaced by a zero row (Gather(Concat(V, 0), index)) reaches nothing;
both operands concrete cannot occur in the data part (it is the position subgraph's).
"""

from __future__ import annotations

import numpy as np

from ..values import Sym, Unsupported, Value, lift, pad, restructure
from .base import Call
from .op_reduce import reduce

OPS = ("Gather",)


def gather(data: Value, idx: Value, axis: int, w: int) -> Sym:
    if isinstance(idx, Sym):  # data-dependent indices (token ids): the whole axis, plus the index atoms
        d = data if isinstance(data, Sym) else lift(data, w)
        ax = axis % len(d.shape)
        whole = reduce("ReduceMax", d, [ax], keepdims=False)  # union along the gathered axis
        out_shape = d.shape[:ax] + idx.shape + d.shape[ax + 1 :]
        ni = len(idx.shape)

        def place(arr: np.ndarray, last: bool) -> np.ndarray:
            arr = pad(arr, len(whole.shape), last)
            return arr.reshape(arr.shape[:ax] + (1,) * ni + arr.shape[ax:])

        def idx_place(arr: np.ndarray, last: bool) -> np.ndarray:
            arr = pad(arr, ni, last)
            lead, trail = (1,) * ax, (1,) * (len(d.shape) - ax - 1)
            return arr.reshape(lead + arr.shape[:ni] + trail + ((arr.shape[-1],) if last else ()))

        hard = place(whole.hard, True) | idx_place(idx.hard, True)
        soft = place(whole.soft, True) | idx_place(idx.soft, True)
        return Sym(out_shape, hard, soft, np.full((1,) * len(out_shape), np.nan), d.dtype)
    idx = np.asarray(idx).astype(np.int64)
    d = data
    ax = axis % len(d.shape)
    idx = np.where(idx < 0, idx + d.shape[ax], idx)
    out_shape = d.shape[:ax] + idx.shape + d.shape[ax + 1 :]
    return restructure(d, out_shape, lambda arr: np.take(arr, idx, axis=ax))


def apply(call: Call, args: list[Value]) -> list[Value]:
    data = args[0] if isinstance(args[0], Sym) else np.asarray(args[0])
    idx = args[1]
    axis = call.attrs.get("axis", 0)
    if not isinstance(data, Sym) and not isinstance(idx, Sym):
        raise Unsupported(f"{call.label}: concrete Gather in the data part")  # kinds guarantee otherwise
    if not isinstance(data, Sym) and isinstance(idx, Sym):
        return [gather(data, idx, axis, call.words)]
    return [gather(call.sym(data), idx, axis, call.words)]
