"""Reshape: a pure index map (values.restructure). The target shape must be concrete (computed
by the position subgraph or constant); 0 copies the input's dimension unless allowzero = 1, -1
is inferred.
"""

from __future__ import annotations

import numpy as np

from ..values import Value, restructure
from .base import Call

OPS = ("Reshape",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    target = [int(v) for v in call.concrete(args[1], "target shape")]
    if call.attrs.get("allowzero", 0) == 0:
        target = [a.shape[i] if v == 0 else v for i, v in enumerate(target)]
    shape = tuple(np.empty(a.shape, dtype=np.bool_).reshape(target).shape)
    return [restructure(a, shape, lambda arr: arr.reshape(shape + arr.shape[-1:]))]
