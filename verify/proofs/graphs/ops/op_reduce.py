"""ReduceMax, ReduceMin, ReduceSum, ReduceMean over the given axes (an attribute, or the second
input from opset 18, which must be concrete): each output element depends on every element it
reduces. Known constants: the max/min of known values; a sum or mean is a known 0 only when every
term is a known 0.

Edge cases: empty axes with noop_with_empty_axes = 1 return the input unchanged; empty axes
otherwise reduce every axis.
"""

from __future__ import annotations

import numpy as np

from ..values import Sym, Value, compress, materialize, normalize_axes, or_reduce
from .base import Call

OPS = ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean")


def reduce(op: str, a: Sym, axes: list[int], keepdims: bool) -> Sym:
    """op (one of OPS) of a over `axes` (normalized, sorted)."""
    hard = or_reduce(materialize(a.hard, a.shape, True), axes, keepdims)
    soft = or_reduce(materialize(a.soft, a.shape, True), axes, keepdims)
    consts = materialize(a.const, a.shape, False)
    if op in ("ReduceMax", "ReduceMin"):
        const = (np.max if op == "ReduceMax" else np.min)(consts, axis=tuple(axes), keepdims=keepdims)
    else:  # sums and means: exactly 0 only if every term is a known 0
        zero = np.all(consts == 0, axis=tuple(axes), keepdims=keepdims)
        const = np.where(zero, 0.0, np.nan)
    shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape) if keepdims or i not in axes)
    return Sym(
        shape,
        compress(hard, True),
        compress(soft, True),
        compress(np.asarray(const), False),
        a.dtype,
    )


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    axes = call.attrs.get("axes")
    if len(args) > 1 and args[1] is not None:
        axes = [int(v) for v in call.concrete(args[1], "axes")]
    if axes is not None and len(axes) == 0 and call.attrs.get("noop_with_empty_axes", 0):
        return [a]
    keepdims = bool(call.attrs.get("keepdims", 1))
    return [reduce(call.op, a, normalize_axes(axes if axes else None, len(a.shape)), keepdims)]
