"""Flatten: a reshape to 2-D at `axis` (default 1), a pure index map (values.restructure)."""

from __future__ import annotations

import numpy as np

from ..values import Value, restructure
from .base import Call

OPS = ("Flatten",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    ax = call.attrs.get("axis", 1) % (len(a.shape) + 1)
    shape = (int(np.prod(a.shape[:ax])), int(np.prod(a.shape[ax:])))
    return [restructure(a, shape, lambda arr: arr.reshape(shape + arr.shape[-1:]))]
