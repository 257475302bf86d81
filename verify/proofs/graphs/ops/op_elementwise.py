"""Elementwise operators of several inputs whose result keeps the first input's type (Pow, Max,
Min, Mod, Sum, Mean, PRelu, Clip): the union of the atoms of every input element broadcast to the
output element; no known constant survives. Optional inputs left empty (Clip's min/max) are
skipped.
"""

from __future__ import annotations

from ..values import Value, elementwise
from .base import Call

OPS = ("Pow", "Max", "Min", "Mod", "Sum", "Mean", "PRelu", "Clip")


def apply(call: Call, args: list[Value]) -> list[Value]:
    return [elementwise([call.sym(a) for a in args if a is not None], call.sym(args[0]).dtype)]
