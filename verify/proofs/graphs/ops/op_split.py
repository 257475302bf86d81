"""Split along an axis into consecutive parts (sizes from the second input, which must be
concrete, or the `split` attribute, else equal parts with the remainder in the last): each part
is a slice of the input (op_slice.slice_axis).
"""

from __future__ import annotations

from ..values import Value
from .base import Call
from .op_slice import slice_axis

OPS = ("Split",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    ax = call.attrs.get("axis", 0) % len(a.shape)
    if len(args) > 1 and args[1] is not None:
        sizes = [int(v) for v in call.concrete(args[1], "split sizes")]
    elif "split" in call.attrs:
        sizes = [int(v) for v in call.attrs["split"]]
    else:
        n = call.outputs
        sizes = [-(-a.shape[ax] // n)] * n
        sizes[-1] = a.shape[ax] - sum(sizes[:-1])
    outs: list[Value] = []
    start = 0
    for s in sizes:
        outs.append(slice_axis(a, ax, slice(start, start + s)))
        start += s
    return outs
