"""Add, Sub, Mul, Div: the union of both operands' atoms, with the IEEE facts the proof needs.

    Add/Sub   inf + anything is inf or NaN: an infinite known operand keeps the result known
              (so a -inf mask added to a score stays exactly -inf);
    Mul       0 * x is 0 when x is finite, NaN otherwise: an operand meeting an exact zero of the
              other reaches the result only through its finiteness, so its atoms become soft
              there (0 * inf = NaN, and 0 * v carries v's sign into a zero result).

Edge cases: an exact zero times an unknown operand is a known 0 with the unknown's atoms soft;
0 * inf (both known) is an exact NaN, never 0.
"""

from __future__ import annotations

import numpy as np

from ..values import Sym, Value, elementwise, known, pad, sel
from .base import Call

OPS = ("Add", "Sub", "Mul", "Div")
_EXACT = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


def arith(op: str, a: Sym, b: Sym) -> Sym:
    """a op b for op in OPS (module docstring)."""
    n = max(len(a.shape), len(b.shape))
    ca, cb = pad(a.const, n, False), pad(b.const, n, False)
    dt = np.result_type(a.dtype, b.dtype)
    with np.errstate(all="ignore"):
        both = known(ca) & known(cb)
        fa, fb = (
            ca.astype(dt) if dt.kind == "f" else ca,
            cb.astype(dt) if dt.kind == "f" else cb,
        )
        exact = _EXACT[op](fa, fb)
        exact = np.where(both, exact.astype(np.float64), np.nan)
        if op in ("Add", "Sub"):
            sb = -cb if op == "Sub" else cb
            exact = np.where(~both & np.isinf(ca), ca, exact)
            exact = np.where(~both & np.isinf(cb), sb, exact)
    if op != "Mul":
        return elementwise([a, b], dt, exact)
    # Mul: a zero factor times an unknown one
    az, bz = ca == 0, cb == 0
    afin, bfin = np.isfinite(ca), np.isfinite(cb)
    a_soft = bz & ~afin  # a meets an exact zero and may be non-finite: a reaches only via its finiteness
    b_soft = az & ~bfin
    ah, bh = pad(a.hard, n, True), pad(b.hard, n, True)
    hard = sel(~a_soft, ah) | sel(~b_soft, bh)
    soft = pad(a.soft, n, True) | pad(b.soft, n, True) | sel(a_soft, ah) | sel(b_soft, bh)
    const = np.where(both, exact, np.where(az | bz, 0.0, np.nan))  # 0 (or NaN via the other's atoms)
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    return Sym(shape, hard, soft, const, dt)


def apply(call: Call, args: list[Value]) -> list[Value]:
    return [arith(call.op, call.sym(args[0]), call.sym(args[1]))]
