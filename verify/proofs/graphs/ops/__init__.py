"""The operator rules of the graph prover, one module per rule (`op_*.py`, after onnx's
reference evaluator, onnx/reference/ops/op_*.py), and `HANDLERS`, the registry the interpreter
dispatches on: op_type -> rule. Each rule module states its rule and edge cases in its docstring
and declares the op_types it applies to (`OPS`); an op_type outside HANDLERS ends the proof as
FAILED ("not supported by the graph prover"), never as proven.

A new operator: `op_NAME.py` with `OPS` and `apply(call, args)` (ops/base.py), listed in RULES.
"""

from __future__ import annotations

from types import ModuleType

from . import (
    op_arith,
    op_cast,
    op_compare,
    op_concat,
    op_constant_of_shape,
    op_elementwise,
    op_expand,
    op_flatten,
    op_gather,
    op_gemm,
    op_layer_norm,
    op_matmul,
    op_reduce,
    op_reshape,
    op_slice,
    op_softmax,
    op_split,
    op_squeeze,
    op_transpose,
    op_unary,
    op_where,
)
from .base import Rule

RULES: tuple[ModuleType, ...] = (
    op_arith,
    op_cast,
    op_compare,
    op_concat,
    op_constant_of_shape,
    op_elementwise,
    op_expand,
    op_flatten,
    op_gather,
    op_gemm,
    op_layer_norm,
    op_matmul,
    op_reduce,
    op_reshape,
    op_slice,
    op_softmax,
    op_split,
    op_squeeze,
    op_transpose,
    op_unary,
    op_where,
)


def _registry(rules: tuple[ModuleType, ...]) -> dict[str, Rule]:
    handlers: dict[str, Rule] = {}
    for module in rules:
        for op in module.OPS:
            if op in handlers:
                raise ValueError(f"operator {op} has two rules ({module.__name__} and another): keep one")
            handlers[op] = module.apply
    return handlers


HANDLERS: dict[str, Rule] = _registry(RULES)
