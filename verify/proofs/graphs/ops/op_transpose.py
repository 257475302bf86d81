"""Transpose: the atoms and known constants move with their elements (perm; default: reversed
axes)."""

from __future__ import annotations

from typing import Sequence

from ..values import Sym, Value, pad
from .base import Call

OPS = ("Transpose",)


def transpose(a: Sym, perm: Sequence[int]) -> Sym:
    nd = len(a.shape)
    return Sym(
        tuple(a.shape[p] for p in perm),
        pad(a.hard, nd, True).transpose(*perm, nd),
        pad(a.soft, nd, True).transpose(*perm, nd),
        pad(a.const, nd, False).transpose(*perm),
        a.dtype,
    )


def apply(call: Call, args: list[Value]) -> list[Value]:
    a = call.sym(args[0])
    return [transpose(a, call.attrs.get("perm", list(range(len(a.shape)))[::-1]))]
