"""Where a bare model's outputs can break, read from its graph: the input values at which an
elementwise chain of constants from an input reaches a pole, a cusp or a threshold. `verify`'s
float strategies draw these points (and their neighbours) beside Hypothesis's own floats, so a
bound broken only near x = 0.5 -- or near 0.123456, or 1e-6 wide -- is reached in a few examples.

    break_points(model) -> {input: (x, ...)}

How: each float input is followed through nodes that keep it an affine function a x + b of
itself, elementwise (Identity, Cast, Neg, Add/Sub/Mul/Div with a constant, and the reshaping
nodes for scalar a, b); where such a value meets a node that breaks at a critical value c --
the denominator of a Div, Reciprocal, Log, Sqrt, a negative or fractional Pow (a pole or cusp
at 0), Abs, Relu, Sign (a kink at 0), a comparison with a constant c, a Clip's bounds -- the
input value x* = (c - b) / a is a break point. A chain through a MatMul, a Gather or anything
else mixing elements stops there (the targeted search of output_bound covers those,
verify/properties/search.py). Pure function of the parsed graph. Not real-time code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_POINTS = 64  # per input
_KEEP = frozenset({"Identity", "Cast"})
_RESHAPE = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Transpose", "Flatten", "Expand"})
_AT_ZERO = frozenset({"Reciprocal", "Log", "Sqrt", "Abs", "Relu", "Sign", "LeakyRelu", "Softplus"})
_COMPARE = frozenset({"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"})


def _constants(graph: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    out = {
        i.name: numpy_helper.to_array(i) for i in graph.initializer if np.prod(i.dims, dtype=np.int64) <= 256
    }
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value" and a.HasField("t") and np.prod(a.t.dims, dtype=np.int64) <= 256:
                    out[node.output[0]] = numpy_helper.to_array(a.t)
                elif a.name == "value_float":
                    out[node.output[0]] = np.asarray(a.f, np.float32)
    return {k: np.asarray(v, np.float64) for k, v in out.items() if np.asarray(v).dtype.kind in "fiu"}


def _solve(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list[float]:
    """x with a x + b = c, elementwise over the broadcast (a = 0 gives none)."""
    a, b, c = np.broadcast_arrays(
        np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(a != 0, (c - b) / np.where(a != 0, a, 1), np.nan)
    return [float(v) for v in x.reshape(-1) if np.isfinite(v)]


def _pow_breaks(consts: dict[str, np.ndarray], node: Any) -> bool:
    e = consts.get(node.input[1]) if len(node.input) > 1 else None
    return e is not None and bool(np.any((e < 0) | (e != np.round(e))))


def break_points(model: Any) -> dict[str, tuple[float, ...]]:
    """{float input: its break points} (module docstring), at most MAX_POINTS each, sorted."""
    graph = model.graph
    consts = _constants(graph)
    init = {i.name for i in graph.initializer}
    found: dict[str, set[float]] = {}
    for inp in graph.input:
        if inp.name in init or inp.type.tensor_type.elem_type not in (1, 10, 11, 16):  # float types
            continue
        affine: dict[str, tuple[np.ndarray, np.ndarray]] = {inp.name: (np.float64(1.0), np.float64(0.0))}
        points: set[float] = set()
        for node in graph.node:
            ins = list(node.input)
            hit = [k for k, n in enumerate(ins) if n in affine]
            if not hit:
                continue
            k = hit[0]
            a, b = affine[ins[k]]
            other = consts.get(ins[1 - k]) if len(ins) == 2 else None
            op, out = node.op_type, node.output[0] if node.output else ""
            scalar = np.ndim(a) == 0 and np.ndim(b) == 0
            if op == "Div" and len(ins) == 2 and ins[1] in affine:  # a pole where the denominator is 0
                points.update(_solve(*affine[ins[1]], 0.0))
            if op in _KEEP or (op in _RESHAPE and scalar and k == 0):
                affine[out] = (a, b)
            elif op == "Neg":
                affine[out] = (-a, -b)
            elif op in ("Add", "Sub", "Mul", "Div") and other is not None and len(hit) == 1:
                if op == "Add":
                    affine[out] = (a, b + other)
                elif op == "Sub":
                    affine[out] = (a, b - other) if k == 0 else (-a, other - b)
                elif op == "Mul":
                    affine[out] = (a * other, b * other)
                elif k == 0 and np.all(other != 0):  # t / c
                    affine[out] = (a / other, b / other)
            elif op in _AT_ZERO or (op == "Pow" and k == 0 and _pow_breaks(consts, node)):
                points.update(_solve(a, b, 0.0))
            elif op in _COMPARE and other is not None:
                points.update(_solve(a, b, other))
            elif op == "Clip" and k == 0:
                for bound in ins[1:3]:
                    if bound in consts:
                        points.update(_solve(a, b, consts[bound]))
        if points:
            found[inp.name] = tuple(sorted(points, key=lambda v: (abs(v), v))[:MAX_POINTS])
    return found
