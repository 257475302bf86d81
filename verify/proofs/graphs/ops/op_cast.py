"""Cast: the same atoms; a known constant stays known from float to float (its value rounded to
the target type), and becomes unknown across kinds (float <-> int <-> bool).
"""

from __future__ import annotations

from ..proto import onnx_dtype
from ..values import Value
from .base import Call
from .op_unary import unary

OPS = ("Cast",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    to = onnx_dtype(call.attrs["to"])
    a = call.sym(args[0])
    keep = a.dtype.kind == "f" and to.kind == "f"
    return [unary(a, (lambda x: x) if keep else None, to)]
