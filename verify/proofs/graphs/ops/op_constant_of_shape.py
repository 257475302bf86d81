"""ConstantOfShape in the data part: its shape is computed from data, which the prover does not
analyse (a constant or position-dependent shape is evaluated by the position subgraph instead)."""

from __future__ import annotations

from ..values import Unsupported, Value
from .base import Call

OPS = ("ConstantOfShape",)


def apply(call: Call, args: list[Value]) -> list[Value]:
    raise Unsupported(f"{call.label}: ConstantOfShape of a data-dependent shape")
