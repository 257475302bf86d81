"""Unary elementwise operators: each output element depends on the one input element it is
computed from (the same atoms). A known constant stays known where the function is given
(Exp(-inf) is exactly 0: a masked score's weight), else becomes unknown (Erf, Gelu, ...).

Edge cases: Exp of an exact -inf gives an exact +0; an unknown input gives an unknown output.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..values import Sym, Value, known
from .base import Call

FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray] | None] = {
    "Identity": lambda x: x,
    "Exp": np.exp,
    "Relu": lambda x: np.maximum(x, 0),
    "Neg": np.negative,
    "Abs": np.abs,
    "Sqrt": np.sqrt,
    "Tanh": np.tanh,
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "Erf": None,
    "Log": np.log,
    "Reciprocal": lambda x: 1 / x,
    "Not": None,
    "IsNaN": None,
    "IsInf": None,
    "Sin": np.sin,
    "Cos": np.cos,
    "Softplus": None,
    "Gelu": None,
}
OPS = tuple(FUNCTIONS)


def unary(
    a: Sym,
    f: Callable[[np.ndarray], np.ndarray] | None,
    out_dtype: np.dtype | None = None,
) -> Sym:
    """The same atoms; the known constants mapped through f (None: no longer known)."""
    dt = np.dtype(out_dtype or a.dtype)
    if f is None:
        const = np.full(a.const.shape, np.nan)
    else:
        with np.errstate(all="ignore"):
            const = np.where(known(a.const), f(a.const.astype(dt)).astype(np.float64), np.nan)
    return Sym(a.shape, a.hard, a.soft, const, dt)


def apply(call: Call, args: list[Value]) -> list[Value]:
    return [unary(call.sym(args[0]), FUNCTIONS[call.op])]
