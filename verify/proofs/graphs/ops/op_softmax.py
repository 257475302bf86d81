"""Softmax along one axis: every output of a row depends on the whole row (the max and the
normalizer). An entry that is exactly -inf gets exactly 0 (or NaN with its row's atoms), unless
the whole row is -inf: then every entry is NaN (a fully masked row), never a known 0.
"""

from __future__ import annotations

import numpy as np

from ..values import Sym, Value, compress, materialize
from .base import Call

OPS = ("Softmax",)


def softmax(a: Sym, axis: int) -> Sym:
    """Softmax of a along `axis` (module docstring)."""
    ax = axis % len(a.shape)
    hard = np.bitwise_or.reduce(materialize(a.hard, a.shape, True), axis=ax, keepdims=True)
    soft = np.bitwise_or.reduce(materialize(a.soft, a.shape, True), axis=ax, keepdims=True)
    ninf = materialize(a.const, a.shape, False) == -np.inf
    row_all = np.all(ninf, axis=ax, keepdims=True)
    const = np.where(ninf & ~row_all, 0.0, np.nan)
    return Sym(
        a.shape,
        compress(hard, True),
        compress(soft, True),
        compress(const, False),
        a.dtype,
    )


def apply(call: Call, args: list[Value]) -> list[Value]:
    return [softmax(call.sym(args[0]), call.attrs.get("axis", -1))]
