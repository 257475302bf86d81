"""Where(cond, a, b): the selection that makes masks exact. A concrete condition (computed by the
position subgraph) selects elementwise: an element takes the atoms and known constant of the side
it selects only, so a row selected out does not reach the consumers. A data-dependent condition
may pick either side: the union of all three, known only where both sides hold the same constant.

Edge cases: Where(mask, s, -inf) gives an exact -inf at every masked element (Softmax then gives
an exact 0); a fully masked row is -inf throughout (Softmax then gives NaN, op_softmax).
"""

from __future__ import annotations

import numpy as np

from ..values import Sym, Value, compress, elementwise, known, pad
from .base import Call

OPS = ("Where",)


def where(cond: Value, a: Sym, b: Sym) -> Sym:
    """Where with a concrete (np.ndarray) or abstract (Sym) condition (module docstring)."""
    if isinstance(cond, Sym):  # a data-dependent selection: it may pick either side
        n = max(len(cond.shape), len(a.shape), len(b.shape))
        ca, cb = pad(a.const, n, False), pad(b.const, n, False)
        same = np.where(known(ca) & (ca == cb), ca, np.nan)
        return elementwise([cond, a, b], np.result_type(a.dtype, b.dtype), same)
    cond = np.asarray(cond, dtype=bool)
    shape = tuple(np.broadcast_shapes(cond.shape, a.shape, b.shape))
    n = len(shape)
    c = pad(cond, n, False)
    hard = np.where(c[..., None], pad(a.hard, n, True), pad(b.hard, n, True))
    soft = np.where(c[..., None], pad(a.soft, n, True), pad(b.soft, n, True))
    const = np.where(c, pad(a.const, n, False), pad(b.const, n, False))
    return Sym(
        shape,
        compress(hard, True),
        compress(soft, True),
        compress(const, False),
        np.result_type(a.dtype, b.dtype),
    )


def apply(call: Call, args: list[Value]) -> list[Value]:
    cond = args[0] if isinstance(args[0], Sym) else np.asarray(args[0])
    return [where(cond, call.sym(args[1]), call.sym(args[2]))]
