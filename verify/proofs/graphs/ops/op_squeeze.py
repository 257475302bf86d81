"""Squeeze and Unsqueeze: reshapes that drop or insert size-1 axes, pure index maps
(values.restructure). The axes come from the attribute (opset < 13) or the second input, which
must be concrete; Squeeze without axes drops every size-1 axis.
"""

from __future__ import annotations

from ..values import Value, normalize_axes, restructure
from .base import Call

OPS = ("Squeeze", "Unsqueeze")


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    axes = call.attrs.get("axes")
    if len(args) > 1 and args[1] is not None:
        axes = [int(v) for v in call.concrete(args[1], "axes")]
    if call.op == "Squeeze":
        axes = (
            normalize_axes(axes, len(a.shape))
            if axes is not None
            else [i for i, d in enumerate(a.shape) if d == 1]
        )
        shape = tuple(d for i, d in enumerate(a.shape) if i not in axes)
    else:
        nd = len(a.shape) + len(axes)
        ins = sorted(int(x) % nd for x in axes)
        it = iter(a.shape)
        shape = tuple(1 if i in ins else next(it) for i in range(nd))
    return [restructure(a, shape, lambda arr: arr.reshape(shape + arr.shape[-1:]))]
