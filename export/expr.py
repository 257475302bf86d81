"""Graph expressions: int64 ONNX tensors that Python's operators turn into nodes, so the graph
builders can CALL the contract functions (contracts.masking.window_allowed,
contracts.ring_buffer.window_distance / slot_read) on index tensors instead of re-implementing
them: `(j <= i) & (i - j < w)` on two `Expr` builds LessOrEqual, Sub, Less and And nodes.

Supported: - (Sub), % (Mod, fmod=0: the sign of the divisor, as Python's %), < <= > >= (Less,
LessOrEqual, Greater, GreaterOrEqual), & (And, on bool tensors). An int operand becomes an int64
scalar constant. `==` and `!=` are not overloaded (an Expr stays hashable); bool(expr) raises,
so a contract written with `and`/`if` on its arguments cannot silently run once at build time.
Not real-time code: runs once, at export.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from .builder import GraphBuilder

Operand = Union["Expr", int]


class Expr:
    """One graph tensor (its name) in the builder `g`."""

    __slots__ = ("g", "name")

    def __init__(self, g: GraphBuilder, name: str) -> None:
        self.g, self.name = g, name

    def _other(self, other: Operand) -> str:
        if isinstance(other, Expr):
            return other.name
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return self.g.const(np.asarray(int(other), dtype=np.int64))
        return NotImplemented  # type: ignore[return-value]

    def _node(self, op: str, a: str, b: str, **attrs: int) -> "Expr":
        return Expr(self.g, self.g.op(op, a, b, **attrs))

    def __sub__(self, other: Operand) -> "Expr":
        return self._node("Sub", self.name, self._other(other))

    def __rsub__(self, other: Operand) -> "Expr":
        return self._node("Sub", self._other(other), self.name)

    def __mod__(self, other: Operand) -> "Expr":
        return self._node("Mod", self.name, self._other(other), fmod=0)

    def __lt__(self, other: Operand) -> "Expr":
        return self._node("Less", self.name, self._other(other))

    def __le__(self, other: Operand) -> "Expr":
        return self._node("LessOrEqual", self.name, self._other(other))

    def __gt__(self, other: Operand) -> "Expr":
        return self._node("Greater", self.name, self._other(other))

    def __ge__(self, other: Operand) -> "Expr":
        return self._node("GreaterOrEqual", self.name, self._other(other))

    def __and__(self, other: "Expr") -> "Expr":
        return self._node("And", self.name, other.name)

    def __bool__(self) -> bool:
        raise TypeError("a graph expression has no truth value at build time: use & (And), not `and`/`if`")
