"""LayerNormalization: each output element depends on its own element, on every element of the
normalized axes (axis .. last: the mean and variance) and on the scale and bias it is broadcast
to; nothing stays known. The optional outputs (mean, inverse std deviation) carry the statistics'
atoms.
"""

from __future__ import annotations

from ..values import Sym, Value, elementwise
from .base import Call
from .op_reduce import reduce

OPS = ("LayerNormalization",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    x = call.sym(args[0])
    ax = call.attrs.get("axis", -1) % len(x.shape)
    stats = reduce("ReduceSum", x, list(range(ax, len(x.shape))), keepdims=True)
    parts = [x, stats] + [call.sym(a) for a in args[1:] if a is not None]
    y = elementwise(parts, x.dtype)
    y = Sym(x.shape, y.hard, y.soft, y.const, x.dtype)
    return [y] + [stats] * (call.outputs - 1)
