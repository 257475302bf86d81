"""Concat along an axis: each output element is the input element it comes from, atoms and known
constant alike (the parts' compressed axes broadcast to their full size first)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..values import Sym, Value, compress, pad
from .base import Call

OPS = ("Concat",)


def concat(parts: list[Sym], ax: int) -> Sym:
    nd = len(parts[0].shape)
    ax %= nd
    sizes = [p.shape[ax] for p in parts]
    shape = tuple(sum(sizes) if i == ax else parts[0].shape[i] for i in range(nd))

    def cat(get: Callable[[Sym], np.ndarray], last: bool) -> np.ndarray:
        arrs = [pad(get(p), nd, last) for p in parts]
        other = [max(x.shape[i] for x in arrs) for i in range(nd)]
        full = []
        for p, x in zip(parts, arrs):
            tgt = [p.shape[ax] if i == ax else other[i] for i in range(nd)]
            full.append(np.broadcast_to(x, tuple(tgt) + ((x.shape[-1],) if last else ())))
        return compress(np.concatenate(full, axis=ax), last)

    return Sym(
        shape,
        cat(lambda p: p.hard, True),
        cat(lambda p: p.soft, True),
        cat(lambda p: p.const, False),
        parts[0].dtype,
    )


def apply(call: Call, args: list[Value]) -> list[Value]:
    return [concat([call.sym(x) for x in args], call.attrs["axis"])]
