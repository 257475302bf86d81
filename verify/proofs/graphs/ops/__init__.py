"""The operator rules of the graph prover, one module per rule (`op_*.py`, after onnx's
reference evaluator, onnx/reference/ops/op_*.py), and `HANDLERS`, the registry the interpreter
dispatches on: op_type -> rule. Each rule module states its rule and edge cases in its docstring
and declares the op_types it applies to (`OPS`); an op_type outside HANDLERS ends the proof as
FAILED ("not supported by the graph prover"), never as proven.

A new operator: `op_NAME.py` with `OPS` and `apply(call, args)` (ops/base.py); RULES finds it by
its name.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from .base import Rule

# Every op_*.py beside this file, in name order: a rule module is found by its name, so adding
# one is adding the file (a listing by hand was the same 21 names twice).
RULES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    if info.name.startswith("op_")
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
