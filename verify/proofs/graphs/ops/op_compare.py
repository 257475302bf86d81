"""Comparisons and logical operators (Equal, Less, ..., And, Or, Xor): a bool output element
depends on the atoms of every input element broadcast to it; its value is not known (a
data-dependent mask: a Where it feeds may pick either side).
"""

from __future__ import annotations

import numpy as np

from ..values import Value, elementwise
from .base import Call

OPS = ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor")


def apply(call: Call, args: list[Value]) -> list[Value]:
    return [elementwise([call.sym(a) for a in args], np.dtype(bool))]
