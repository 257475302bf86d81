"""Expand: a broadcast to a concrete target shape; every output element has the atoms and known
constant of the input element broadcast to it (the bitsets stay compressed)."""

from __future__ import annotations

import numpy as np

from ..values import Sym, Value, pad
from .base import Call

OPS = ("Expand",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    target = tuple(int(v) for v in call.concrete(args[1], "target shape"))
    shape = tuple(np.broadcast_shapes(a.shape, target))
    nd = len(shape)
    return [
        Sym(
            shape,
            pad(a.hard, nd, True),
            pad(a.soft, nd, True),
            pad(a.const, nd, False),
            a.dtype,
        )
    ]
