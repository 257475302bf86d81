"""The tolerance of comparisons between two evaluations of one ONNX graph that may order its
floating-point sums differently: ONNX Runtime with all graph optimizations vs none, ONNX Runtime
vs `onnx.reference`, and a KV-cache pair's steps vs its full pass.

Statement. For outputs a, b of the same graph on the same inputs,
    ||a - b||_inf <= tol * max(||a||_inf, ||b||_inf, ||x||_inf, tiny / u),   tol = factor * (2 R n + 4 E) u
with u the unit roundoff of the output dtype (2^-24 for float32), n the longest reduction in the
graph (the inner dimension of a MatMul/Gemm, the reduced extent of a Reduce*/Softmax/LayerNorm/
CumSum, a Conv's C_in/group x kernel volume, the cache length of an attention step), R the number
of reduction nodes, E the number of transcendental elementwise nodes (Exp, Log, Tanh, Erf,
Sigmoid, Pow, ...; correctly rounded ones like Sqrt and Div do not count), x the float inputs
and tiny the smallest normal number of the dtype (2^-126 for float32).

Reason. A sum or dot product of n terms computed in any order has error at most
gamma_{n-1} sum|x_i| ~ n u sum|x_i| (Higham, Accuracy and Stability of Numerical Algorithms, 2nd
ed., section 3.1 and 4.2), so two orders differ by at most 2 n u sum|x_i|: ONNX Runtime's fusions
(MatMul+Add into Gemm/FusedMatMul, LayerNorm and Gelu fusions, constant folding) and the
reference's numpy kernels reassociate such sums. A transcendental function evaluated by two
implementations (MLAS's vectorized approximations vs the C library) differs by a few ulps: 4 u
is taken per node. First-order errors of successive nodes add. This is a stated bound, not a
proof: it assumes sum|x_i| is of the order of the larger of the outputs' and the inputs' norms
(the inputs' norm is in the scale because outputs may cancel: x - mean_t(x) of a constant x is
0 in one evaluation and a few ulps of x in the other, seen with onnx.reference) and that
each node is well conditioned (errors are not amplified from one reduction to the next). The
floor tiny / u: ONNX Runtime's CPU kernels flush subnormal numbers to zero and onnx.reference
does not, so outputs of subnormal size differ by 100 % (seen: inputs of 2e-43 give outputs 0 vs
1.2e-43); below that scale the comparison is absolute, at tol * tiny / u.
`factor` (spec `tolerance_factor`, default 1) scales it for models where that fails. Every
comparison reports its measured margin (the worst ||a - b|| / (tol scale) seen): how far from
the bound the model actually was.

Not real-time code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

REDUCTIONS = frozenset(
    {
        "MatMul",
        "Gemm",
        "MatMulInteger",
        "Einsum",
        "Conv",
        "ConvTranspose",
        "ReduceSum",
        "ReduceMean",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSumExp",
        "ReduceSumSquare",
        "ReduceProd",
        "Softmax",
        "LogSoftmax",
        "LayerNormalization",
        "GroupNormalization",
        "InstanceNormalization",
        "CumSum",
        "Attention",
        "MultiHeadAttention",
        "SkipLayerNormalization",
        "FusedMatMul",
        "GlobalAveragePool",
        "AveragePool",
    }
)
TRANSCENDENTAL = frozenset(
    {
        "Exp",
        "Log",
        "Tanh",
        "Erf",
        "Sigmoid",
        "Pow",
        "Sin",
        "Cos",
        "Softplus",
        "Gelu",
        "FastGelu",
        "HardSigmoid",
        "Elu",
        "Selu",
        "Mish",
    }
)
ULPS_PER_TRANSCENDENTAL = 4
UNIT_ROUNDOFF = {"float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}


@dataclass(frozen=True)
class Profile:
    """What the bound needs from a graph: longest reduction n, reductions R, transcendentals E."""

    n: int
    reductions: int
    transcendentals: int

    def merge(self, other: "Profile") -> "Profile":
        return Profile(
            max(self.n, other.n),
            max(self.reductions, other.reductions),
            max(self.transcendentals, other.transcendentals),
        )


@dataclass(frozen=True)
class Tolerance:
    rel: float
    profile: Profile
    factor: float
    u: float

    def formula(self) -> str:
        p = self.profile
        return (
            f"tol = {self.factor:g} x (2 x R {p.reductions} x n {p.n} + 4 x E {p.transcendentals}) x u {self.u:.3g} "
            f"= {self.rel:.3g} (normwise, relative to max(||y||_inf, ||x||_inf))"
        )

    def to_dict(self) -> dict[str, Any]:
        p = self.profile
        return {
            "rel": self.rel,
            "formula": self.formula(),
            "n": p.n,
            "reductions": p.reductions,
            "transcendentals": p.transcendentals,
            "factor": self.factor,
            "u": self.u,
            "reason": "reassociated float sums (2 n u per reduction, Higham 3.1) and a few ulps per "
            "transcendental, first-order errors added; docs/verify.md",
        }


def _prod(values: list[int]) -> int:
    out = 1
    for v in values:
        out *= max(int(v), 1)
    return out


def _shape(shapes: dict[str, list[int | None]], name: str) -> list[int | None] | None:
    return shapes.get(name)


def _constant(graph: Any, name: str) -> float | None:
    """The scalar value of an initializer or Constant node output `name`, or None."""
    from onnx import numpy_helper

    for init in graph.initializer:
        if init.name == name:
            v = numpy_helper.to_array(init).reshape(-1)
            return float(v[0]) if v.size == 1 else None
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.HasField("t"):
                    v = numpy_helper.to_array(attr.t).reshape(-1)
                    return float(v[0]) if v.size == 1 else None
    return None


def profile(model: Any, input_shapes: dict[str, tuple[int, ...]]) -> Profile:
    """The Profile of an onnx.ModelProto with its inputs fixed at `input_shapes` (shape
    inference on a copy). A reduction whose extent inference cannot tell: a MatMul's weight
    gives its inner dimension; otherwise n is at least the longest axis of any input (the
    sequence or cache length an attention reduces over)."""
    import onnx
    from onnx import shape_inference

    m = copy.deepcopy(model)
    for vi in m.graph.input:
        if vi.name in input_shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, size in zip(dims, input_shapes[vi.name]):
                d.ClearField("dim_param")
                d.dim_value = int(size)
    try:
        m = shape_inference.infer_shapes(m, data_prop=True)
    except Exception:  # a graph shape inference cannot follow: count nodes only
        pass
    shapes: dict[str, list[int | None]] = {}
    for vi in [*m.graph.input, *m.graph.value_info, *m.graph.output]:
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    for init in m.graph.initializer:
        shapes[init.name] = list(init.dims)
    n, r, e, unknown = 1, 0, 0, 0
    for node in m.graph.node:
        op = node.op_type
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if op in TRANSCENDENTAL:
            e += 1
        if op not in REDUCTIONS:
            continue
        r += 1
        a = _shape(shapes, node.input[0]) if node.input else None
        extent: int | None = None
        if a and all(v is not None for v in a):
            dims = [int(v) for v in a]  # type: ignore[arg-type]
            if op in ("MatMul", "MatMulInteger", "FusedMatMul"):
                extent = dims[-1]
            elif op == "Gemm":
                extent = dims[0] if attrs.get("transA", 0) else dims[-1]
            elif op in ("Conv", "ConvTranspose"):
                w = _shape(shapes, node.input[1]) if len(node.input) > 1 else None
                extent = _prod([int(v) for v in w[1:] if v is not None]) if w else None
            elif op in ("Softmax", "LogSoftmax", "CumSum"):
                axis = int(attrs.get("axis", -1))
                if op == "CumSum":  # its axis is an input
                    given = _constant(m.graph, node.input[1]) if len(node.input) > 1 else None
                    axis = int(given) if given is not None else axis
                extent = dims[axis] if -len(dims) <= axis < len(dims) else None
            elif op in ("LayerNormalization",):
                axis = int(attrs.get("axis", -1))
                extent = _prod(dims[axis:])
            elif op.startswith("Reduce"):
                axes = attrs.get("axes")
                if axes is None and len(node.input) > 1:
                    axes = None  # opset 18: axes as an input; take the whole tensor (an upper bound)
                extent = _prod([dims[int(x)] for x in axes]) if axes is not None else _prod(dims)
            else:
                extent = max(dims) if dims else None
        if extent is None and op in ("MatMul", "Gemm", "FusedMatMul") and len(node.input) > 1:
            w = _shape(shapes, node.input[1])  # a weight: its rows are the inner dimension
            if w and len(w) >= 2 and w[-2] is not None and op != "Gemm":
                extent = int(w[-2])  # type: ignore[arg-type]
            elif w and len(w) == 2 and op == "Gemm" and all(v is not None for v in w):
                extent = int(w[1] if attrs.get("transB", 0) else w[0])  # type: ignore[arg-type]
        if extent is None:
            unknown += 1
        else:
            n = max(n, extent)
    if unknown:  # inference lost track of some shapes: take the longest input axis as well
        n = max(n, *(int(v) for dims in input_shapes.values() for v in dims), 1)
    return Profile(n, max(r, 1), e)


def tolerance(prof: Profile, dtype: str = "float32", factor: float = 1.0) -> Tolerance:
    u = UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["float32"])
    rel = factor * (2 * prof.reductions * prof.n + ULPS_PER_TRANSCENDENTAL * prof.transcendentals) * u
    return Tolerance(rel, prof, factor, u)


def input_scale(feeds: dict[str, np.ndarray]) -> float:
    """max |x| over the float inputs (0 without any): part of the scale of a comparison."""
    scale = 0.0
    for v in feeds.values():
        v = np.asarray(v)
        if v.dtype.kind == "f" and v.size:
            finite = np.abs(v[np.isfinite(v)])
            if finite.size:
                scale = max(scale, float(finite.max()))
    return scale


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| in float64 over the places where neither is NaN, for the messages of checks whose
    arrays should have been bitwise equal."""
    with np.errstate(invalid="ignore"):
        return float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def normwise_gap(a: np.ndarray, b: np.ndarray, scale: float = 0.0) -> float:
    """||a - b||_inf / max(||a||_inf, ||b||_inf, scale, floor) (0 when both are zero; inf on a
    NaN/inf mismatch; NaN at the same places in both counts as agreement). scale: the inputs'
    magnitude (input_scale), for outputs that cancel (x - mean(x) is tiny while its summands are
    not). floor = smallest normal / u of the dtype: below that scale the gap is the flushing of
    subnormal numbers to zero (ONNX Runtime's kernels do it, onnx.reference does not)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        return float("inf")
    same_nan = np.isnan(a64) & np.isnan(b64)
    same_inf = np.isinf(a64) & (a64 == b64)
    ok = ~(same_nan | same_inf)
    if not ok.any():
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a64[ok] - b64[ok])
    if not np.isfinite(diff).all():
        return float("inf")
    dtype = np.result_type(np.asarray(a).dtype, np.asarray(b).dtype)
    floor = (
        float(np.finfo(dtype).tiny / UNIT_ROUNDOFF.get(dtype.name, 2.0**-24)) if dtype.kind == "f" else 0.0
    )
    scale = max(float(np.abs(a64[ok]).max()), float(np.abs(b64[ok]).max()), scale, floor)
    worst = float(diff.max())
    if worst == 0.0:
        return 0.0
    return worst / scale if scale > 0 else float("inf")
