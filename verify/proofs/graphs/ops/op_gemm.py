"""Gemm: alpha * A' B' + beta * C (A', B' transposed by transA / transB), composed from the
rules of Transpose, MatMul (zero-weight sites recorded under the Gemm's label) and Mul / Add.
"""

from __future__ import annotations

import numpy as np

from ..values import Value, lift
from .base import Call
from .op_arith import arith
from .op_matmul import matmul
from .op_transpose import transpose

OPS = ("Gemm",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    a, b = call.sym(args[0]), call.sym(args[1])
    if call.attrs.get("transA", 0):
        a = transpose(a, [1, 0])
    if call.attrs.get("transB", 0):
        b = transpose(b, [1, 0])
    y = matmul(a, b, call.sites, call.label)
    alpha, beta = call.attrs.get("alpha", 1.0), call.attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = arith("Mul", y, lift(np.array(alpha, np.float32), call.words))
    if len(args) > 2 and args[2] is not None:
        c = call.sym(args[2])
        if beta != 1.0:
            c = arith("Mul", c, lift(np.array(beta, np.float32), call.words))
        y = arith("Add", y, c)
    return [y]
