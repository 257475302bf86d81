"""The fp16 precision policy: an explicitly typed mixed-precision graph for TensorRT 11 and ORT.

`to_fp16(model)` rewrites an fp32 ONNX graph so that the heavy, well-conditioned work runs in
fp16 and the numerically delicate work stays fp32, with every conversion an explicit `Cast` in
the graph. TensorRT 11 builds only strongly typed networks (the fp16 builder flag is gone: the
precision must be in the graph), and ORT runs the same file, so one artifact serves both.

The policy, node by node (in topological order, one pass):

- fp16: projections, i.e. MatMul/Gemm with a constant (weight) operand, and Gather from a
  constant table (embeddings). Their weights are stored as fp16 initializers.
- fp32, always: LayerNormalization (and the other normalizations), every Reduce* (softmax max
  and sum, LayerNorm statistics, means), Softmax/LogSoftmax, Exp/Log/Pow/Sqrt/Reciprocal/Erf,
  CumSum, and the attention core: MatMul between two activations (scores Q K^T and the
  weighted value sum P V -- the online-softmax state m, l, acc stays fp32).
- everything else (elementwise, Where, layout ops) follows its non-constant float inputs:
  fp32 if any of them is fp32, else fp16. So the residual stream after a LayerNorm is fp32 and
  the ops between a projection and the next fp32 op (bias add, ReLU) are fp16.
- graph inputs and outputs keep their fp32 types (a Cast at each boundary): the runtime API,
  the KV-cache buffers and the manifest stay unchanged.

Why these: fp16 has an 11-bit significand (unit roundoff u = 2^-11 ~ 4.9e-4) and max 65504.
Reductions over N terms lose up to N*u relative accuracy when accumulated in fp16 and a sum of
exponentials can overflow; LayerNorm variance is a difference of squares (cancellation);
Exp amplifies an absolute input error e into a relative output error e (scores of size 10 in
fp16 carry an absolute error ~5e-3). Projections are dot products whose relative error is ~u
per rounding. Sources: Micikevicius et al. 2018, "Mixed Precision Training" (fp32 master copies,
fp32 reductions); Higham, "Accuracy and Stability of Numerical Algorithms", ch. 3 (gamma_n).
TensorRT 10.x->11.x migration guide (strong typing replaces BuilderFlag.FP16).

Not real-time code: runs once, at export.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOAT, FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16
UNIT_ROUNDOFF_FP16 = 2.0**-11

# Always fp32 (their float inputs are cast up).
FP32_OPS = frozenset(
    {
        "LayerNormalization",
        "GroupNormalization",
        "InstanceNormalization",
        "BatchNormalization",
        "RMSNormalization",
        "LpNormalization",
        "MeanVarianceNormalization",
        "ReduceMax",
        "ReduceMin",
        "ReduceSum",
        "ReduceMean",
        "ReduceSumSquare",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceL1",
        "ReduceL2",
        "ReduceProd",
        "Softmax",
        "LogSoftmax",
        "Exp",
        "Log",
        "Pow",
        "Sqrt",
        "Reciprocal",
        "Erf",
        "CumSum",
        "If",
        "Loop",
        "Scan",
    }
)
# fp16 when an operand is a constant weight (projection / embedding table).
WEIGHT_OPS = frozenset({"MatMul", "Gemm", "Gather", "Conv", "ConvTranspose"})
# Ops whose output type is fixed by an attribute (not by their inputs): left untouched.
TYPED_SOURCES = frozenset(
    {
        "Cast",
        "CastLike",
        "ConstantOfShape",
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "EyeLike",
        "Shape",
        "Size",
    }
)
# Float inputs that must keep their own dtype whatever the node's precision.
_FIXED_INPUTS = {"Resize": {1, 2}, "Range": {0, 1, 2}}


@dataclass(frozen=True)
class Fp16Report:
    """What `to_fp16` did: counts, for the manifest and the docs."""

    nodes_fp16: int
    nodes_fp32: int
    casts: int
    weights_fp16: int
    weights_fp32: int
    fp16_weight_bytes: int
    fp32_weight_bytes: int

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _float_types(model) -> dict[str, int]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types: dict[str, int] = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        types[vi.name] = vi.type.tensor_type.elem_type
    for init in g.initializer:
        types[init.name] = init.data_type
    return types


def _constant_tensors(graph) -> set[str]:
    """Initializers, Constant outputs, and anything computed only from them (folded shapes)."""
    const = {i.name for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" or (
            node.input
            and all((not n) or n in const for n in node.input)
            and node.op_type not in ("RandomNormal", "RandomUniform")
        ):
            const.update(node.output)
    return const


def _precision(node, types: dict[str, int], new_types: dict[str, int], const: set[str]) -> int | None:
    """FLOAT or FLOAT16 for a node with float inputs or outputs; None if it has none."""
    float_ins = [(i, n) for i, n in enumerate(node.input) if n and types.get(n) == FLOAT]
    float_outs = [n for n in node.output if types.get(n) == FLOAT]
    if node.op_type in TYPED_SOURCES or (not float_ins and not float_outs):
        return None
    if node.op_type in FP32_OPS:
        return FLOAT
    if node.op_type in WEIGHT_OPS:
        data_idx = 0 if node.op_type == "Gather" else None
        operands = [n for i, n in float_ins if data_idx is None or i == data_idx]
        has_weight = any(n in const for n in operands)
        return FLOAT16 if has_weight else FLOAT  # activation x activation: attention core, fp32
    votes = [new_types.get(n, FLOAT) for _, n in float_ins if n not in const]
    if not votes:
        return FLOAT
    return FLOAT if FLOAT in votes else FLOAT16


def _split_residual_gemms(graph) -> None:
    """Keep the residual stream fp32: the fp32 step computes h + a W + b as one Gemm(a, W, C=h)
    (export/graphs.py build_step), and ONNX's Gemm has one element type for A, B and C, so in
    fp16 the residual sum itself would round to fp16. Split each Gemm whose C is an activation
    into Gemm(a, W) (fp16: a weight product) and Add(., h), which the vote rule keeps fp32."""
    from onnx import helper

    const = _constant_tensors(graph)
    nodes = []
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if (
            node.op_type == "Gemm"
            and len(node.input) == 3
            and node.input[2]
            and node.input[2] not in const
            and attrs.get("beta", 1.0) == 1.0
        ):
            product = f"{node.output[0]}__product"
            kept = {k: v for k, v in attrs.items() if k != "beta"}
            nodes.append(
                helper.make_node(
                    "Gemm", list(node.input[:2]), [product], name=f"{node.name}__product", **kept
                )
            )
            nodes.append(
                helper.make_node(
                    "Add", [product, node.input[2]], list(node.output), name=f"{node.name}__residual"
                )
            )
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def to_fp16(model, *, report: bool = False):
    """Mixed-precision copy of an fp32 ModelProto under the policy above (see module docstring).

    Returns the new model (or (model, Fp16Report) with report=True). The result passes
    onnx.checker and strict shape inference; graph I/O types are unchanged.
    """
    import onnx
    from onnx import helper, numpy_helper

    from tickformer.errors import ExportError

    src = onnx.ModelProto()
    src.CopyFrom(model)
    graph = src.graph
    _split_residual_gemms(graph)
    try:
        types = _float_types(src)
    except Exception as exc:
        raise ExportError(f"to_fp16: graph {graph.name!r} fails shape inference: {exc}") from None
    const = _constant_tensors(graph)
    inits = {i.name: i for i in graph.initializer}
    new_types: dict[str, int] = {vi.name: vi.type.tensor_type.elem_type for vi in graph.input}
    casts: dict[tuple[str, int], str] = {}  # (tensor, type) -> casted name
    out_nodes: list = []
    new_inits: dict[str, object] = {}
    used_init: dict[str, set[int]] = {}
    n16 = n32 = 0

    def as_type(name: str, want: int) -> str:
        if name in inits:  # a weight: store a converted copy instead of casting at run time
            used_init.setdefault(name, set()).add(want)
            return name if want == FLOAT else f"{name}__fp16"
        if new_types.get(name, types.get(name)) == want:
            return name
        key = (name, want)
        if key not in casts:
            casts[key] = f"{name}__to_{'fp16' if want == FLOAT16 else 'fp32'}"
            out_nodes.append(
                helper.make_node("Cast", [name], [casts[key]], to=want, name=f"cast_{casts[key]}")
            )
            new_types[casts[key]] = want
        return casts[key]

    for node in graph.node:
        prec = _precision(node, types, new_types, const)
        new = onnx.NodeProto()
        new.CopyFrom(node)
        if prec is None:
            for n in node.input:
                if n in inits and types.get(n) == FLOAT:
                    used_init.setdefault(n, set()).add(FLOAT)
            out_nodes.append(new)
            for n in node.output:
                new_types[n] = types.get(n, 0)
            continue
        n16 += prec == FLOAT16
        n32 += prec == FLOAT
        fixed = _FIXED_INPUTS.get(node.op_type, set())
        for i, n in enumerate(node.input):
            if n and types.get(n) == FLOAT:
                new.input[i] = as_type(n, FLOAT if i in fixed else prec)
        if node.op_type == "Constant":
            for a in new.attribute:
                if a.name == "value" and a.t.data_type == FLOAT and prec == FLOAT16:
                    a.t.CopyFrom(
                        numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16), a.t.name)
                    )
        out_nodes.append(new)
        for n in node.output:
            new_types[n] = prec if types.get(n) == FLOAT else types.get(n, 0)

    # Weights: fp16 copies where a fp16 node reads them; the fp32 original only if still read.
    w16 = w32 = b16 = b32 = 0
    for name, init in inits.items():
        wants = used_init.get(name, {FLOAT} if types.get(name) != FLOAT else set())
        if FLOAT16 in wants:
            arr = numpy_helper.to_array(init).astype(np.float32)
            if np.isfinite(arr).all() and np.abs(arr).max(initial=0.0) > 65504.0:
                raise ExportError(
                    f"to_fp16: weight {name!r} has |w| up to {np.abs(arr).max():.3g} > 65504 "
                    "(fp16 max); it would become inf -- keep this graph fp32"
                )
            new_inits[f"{name}__fp16"] = numpy_helper.from_array(arr.astype(np.float16), f"{name}__fp16")
            w16 += 1
            b16 += arr.size * 2
        if FLOAT in wants or types.get(name) != FLOAT:
            new_inits[name] = init
            if types.get(name) == FLOAT:
                w32 += 1
                b32 += int(np.prod(init.dims)) * 4

    # Graph outputs keep their declared type: rename an fp16 producer's output and cast back.
    for out in graph.output:
        want = out.type.tensor_type.elem_type
        if new_types.get(out.name) == want:
            continue
        inner = f"{out.name}__fp16"
        for node in out_nodes:
            for i, n in enumerate(node.input):
                if n == out.name:
                    node.input[i] = inner
            for i, n in enumerate(node.output):
                if n == out.name:
                    node.output[i] = inner
        out_nodes.append(helper.make_node("Cast", [inner], [out.name], to=want, name=f"cast_{out.name}_out"))
        casts[(out.name, want)] = out.name

    del graph.node[:]
    graph.node.extend(out_nodes)
    del graph.initializer[:]
    graph.initializer.extend(new_inits.values())
    del graph.value_info[:]
    try:
        onnx.checker.check_model(src, full_check=True)
        onnx.shape_inference.infer_shapes(src, check_type=True, strict_mode=True)
    except Exception as exc:
        raise ExportError(f"to_fp16: the rewritten graph {graph.name!r} is invalid: {exc}") from None
    if not report:
        return src
    return src, Fp16Report(
        nodes_fp16=n16,
        nodes_fp32=n32,
        casts=len(casts),
        weights_fp16=w16,
        weights_fp32=w32,
        fp16_weight_bytes=b16,
        fp32_weight_bytes=b32,
    )


def error_bound(*, n_layers: int, n_enc_layers: int = 0, cross: bool = False, safety: float = 2.0) -> float:
    """Recorded normwise bound on max|y16 - y_ref| / max|y_ref| for a post-LN Transformer.

    First-order count of fp16 roundings on the deepest path, each at most u = 2^-11 relative:
    4 per projection (input cast, weight, product, bias add). Input projection or embedding: 4;
    per encoder or decoder layer, Q (K, V run in parallel), O, FFN-in, FFN-out: 16; cross
    attention adds Q and O: 8 per decoder layer; output projection (or the encoder's cross K/V
    projection): 4. The attention core, softmax, LayerNorm and the residual stream are fp32, and
    LayerNorm renormalises after every sublayer, so the errors add rather than compound.
    `safety` = 2 covers the Lipschitz constants of the sublayers (O(1) for Xavier-initialised or
    trained weights of moderate norm) and summation order. A heuristic engineering bound, checked
    by measurement at the edge of the input domain (tests/export/test_fp16.py,
    `measure_error`), not a proof. control preset (L=2): 40 roundings -> 2 * 40 * u = 3.9e-2.
    """
    roundings = 4 + 16 * n_enc_layers + (16 + (8 if cross else 0)) * n_layers + 4
    return safety * roundings * UNIT_ROUNDOFF_FP16


def measure_error(
    graphs32: dict, graphs16: dict, params: dict, config, *, domain: tuple[float, float], seed: int = 0
) -> dict:
    """Measured fp16 error, to record in the manifest next to its bound. Not real-time.

    Decoder-only: the fp16 full-pass graph vs the numpy reference model (float32), over full
    max_len sequences at the edge of the declared input domain: uniform in [lo, hi], all lo, all
    hi, alternating lo/hi (tokens: uniform random ids); and the fp16 step graph over every
    position of the uniform and all-hi sequences (tokens: the uniform ids). Encoder-decoder: the
    fp16 encoder's cross K/V vs the fp32 encoder graph (itself checked against numpy at export).
    Normwise: max|a - b| / max|b|.
    """
    from tickformer.model.transformer import forward
    from tickformer.runtime.ort_session import make_session

    def run(model, feeds):
        return make_session(model).run(None, feeds)

    rng = np.random.default_rng(seed)
    n = config.max_len
    results: dict[str, float] = {}
    if config.arch == "decoder":
        lo, hi = domain
        if config.inputs == "tokens":
            cases = {"uniform_tokens": rng.integers(0, config.vocab_size, (1, n), dtype=np.int64)}
            name = "tokens"
        else:
            shape = (1, n, config.d_in)
            alternating = np.where(np.arange(n)[None, :, None] % 2 == 0, hi, lo)
            cases = {
                "uniform": rng.uniform(lo, hi, shape),
                "all_lo": np.full(shape, lo),
                "all_hi": np.full(shape, hi),
                "alternating": np.broadcast_to(alternating, shape),
            }
            cases = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in cases.items()}
            name = "x"
        for label, x in cases.items():
            ref = forward(params, config, x)  # numpy reference [1, N, out]
            y16 = run(graphs16["model"], {name: x})[0]
            results[label] = float(np.abs(y16 - ref).max() / max(np.abs(ref).max(), 1e-30))
            if label in (
                "uniform",
                "all_hi",
                "uniform_tokens",
            ):  # the graph the runtime steps: every position, cache fed back
                y16 = _step_through(graphs16["step"], x, None, config)
                results[f"step_{label}"] = float(np.abs(y16 - ref).max() / max(np.abs(ref).max(), 1e-30))
        bound = error_bound(n_layers=config.n_layers)
        reference = "numpy model (float32): full pass over max_len, and the step graph over every position"
    else:
        src = rng.integers(0, config.vocab_size, (1, n), dtype=np.int64)
        valid = np.ones((1, n), dtype=bool)
        feeds = {"src": src, "src_valid": valid}
        cross16 = run(graphs16["encoder"], feeds)
        for label, a, b in zip(("cross_k", "cross_v"), cross16, run(graphs32["encoder"], feeds)):
            results[label] = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
        # Decoder: the fp16 step graph over every position (teacher forcing) vs numpy logits.
        tgt = rng.integers(0, config.vocab_size, (1, n), dtype=np.int64)
        ref = forward(params, config, tgt, src=src, src_valid=valid)  # [1, N, V]
        logits = _step_through(graphs16["step"], tgt, (cross16[0], cross16[1], valid), config)
        results["step_logits"] = float(np.abs(logits - ref).max() / max(np.abs(ref).max(), 1e-30))
        bound = error_bound(n_layers=config.n_layers, n_enc_layers=config.n_enc_layers, cross=True)
        reference = "encoder: fp32 encoder graph; step logits: numpy model (teacher forcing)"
    worst = max(results.values())
    return {
        "normwise": results,
        "worst": worst,
        "bound": bound,
        "within_bound": worst <= bound,
        "reference": reference,
        "unit_roundoff": UNIT_ROUNDOFF_FP16,
    }


def _step_through(step_model, seq: np.ndarray, cross: tuple | None, config) -> np.ndarray:
    """The fp16 step graph over every position of seq (equivalence.step_through, zero caches)."""
    from tickformer.runtime.ort_session import make_session

    from .equivalence import step_through

    sess = make_session(step_model)
    return step_through(lambda feeds: sess.run(None, dict(feeds)), config, seq, cross)
