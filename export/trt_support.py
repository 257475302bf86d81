"""Offline lint of ONNX graphs against TensorRT's documented ONNX support, for named releases.

No TensorRT is needed, and its ONNX parser is not run: the tables of export/trt_tables.py
are transcribed from onnx-tensorrt's docs/operators.md (operator support and restrictions, opset
range, data types) for each target, and `check_model` walks a graph (nodes, subgraphs, local
functions, every tensor type) against them, plus static-shape, dtype and fp16-range rules, and
returns one `Finding` per problem. Errors mean "by the documentation, the parser or our
static-shape build will reject this, or it would silently change the numbers"; warnings mean "it
builds, but check"; notes record what the target does with a construct (e.g. pins a dynamic dim).
A graph that passes can still be refused by the real parser (undocumented limits, a table
mistake).

Not real-time code: runs once, offline, allocates freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

import numpy as np

from tickformer.artifact.reader import open_artifact, verified_graph_bytes
from tickformer.errors import ArtifactError, ConfigError, FileRefused
from tickformer.safe_files import read_path

from .trt_tables import (
    CONTROL_FLOW,
    DATA_DEPENDENT_SHAPE,
    FP16_MAX,
    FP16_TINY,
    NATIVE_TYPES,
    QUANTIZED_TYPES,
    RANDOM,
    REDUCE,
    SELECTION_OPS,
    TARGETS,
    TYPE_NAME,
    UNSUPPORTED_10X,
    TargetSpec,
    build_targets,
    first_opset,
)

Severity = Literal["error", "warning", "note"]
Role = Literal["full", "step", "encoder"]


def target(name: str) -> TargetSpec:
    """The named target; the error lists the known names."""
    if not TARGETS:
        build_targets()
    try:
        return TARGETS[name]
    except KeyError:
        raise ConfigError(f"unknown --target {name!r}; choose one of {sorted(TARGETS)}") from None


def target_names() -> list[str]:
    """The names of the known targets, sorted."""
    if not TARGETS:
        build_targets()
    return sorted(TARGETS)


@dataclass(frozen=True)
class Finding:
    """One problem (or fact) about one graph, printable on one line."""

    severity: Severity
    graph: str
    code: str
    where: str
    message: str

    def line(self) -> str:
        return f"{self.graph}: {self.severity}: [{self.code}] {self.where}: {self.message}"


@dataclass
class _Walk:
    """Everything the checks need, gathered once from a (shape-inferred) model."""

    nodes: list = field(default_factory=list)  # (node, location) pairs
    tensor_types: dict = field(default_factory=dict)  # name -> elem_type
    initializers: dict = field(default_factory=dict)  # name -> TensorProto
    constant_names: set = field(default_factory=set)  # initializers + Constant outputs
    consumers: dict = field(default_factory=dict)  # tensor name -> op types that read it


def _walk_graph(graph, where: str, walk: _Walk) -> None:
    for init in graph.initializer:
        walk.initializers[init.name] = init
        walk.constant_names.add(init.name)
        walk.tensor_types[init.name] = init.data_type
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type"):
            walk.tensor_types[vi.name] = vi.type.tensor_type.elem_type
    for node in graph.node:
        walk.nodes.append((node, where))
        for name in node.input:
            walk.consumers.setdefault(name, set()).add(node.op_type)
        if node.op_type == "Constant":
            walk.constant_names.update(node.output)
        for attr in node.attribute:
            if attr.HasField("g"):
                _walk_graph(attr.g, f"{where}/{node.name or node.op_type}.{attr.name}", walk)
            for sub in attr.graphs:
                _walk_graph(sub, f"{where}/{node.name or node.op_type}.{attr.name}", walk)


def _collect(model) -> _Walk:
    import onnx

    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # shape inference is best effort; the raw graph is still walked
        pass
    walk = _Walk()
    _walk_graph(model.graph, "graph", walk)
    for fn in model.functions:
        for node in fn.node:
            walk.nodes.append((node, f"function {fn.domain}:{fn.name}"))
    return walk


def _attr(node, name: str):
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return None


def _node_label(node, where: str) -> str:
    name = node.name or (node.output[0] if node.output else "?")
    return f"{node.op_type} '{name}'" + ("" if where == "graph" else f" in {where}")


def _check_opsets(model, spec: TargetSpec, graph: str) -> Iterator[Finding]:
    local_domains = {fn.domain for fn in model.functions}
    seen_default = False
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            seen_default = True
            if not spec.opset_min <= imp.version <= spec.opset_max:
                yield Finding(
                    "error",
                    graph,
                    "opset",
                    f"ai.onnx opset {imp.version}",
                    f"{spec.name} parses opset {spec.opset_min}..{spec.opset_max} "
                    f"({spec.source}); re-export with an opset in that range",
                )
        elif imp.domain not in local_domains:
            yield Finding(
                "error",
                graph,
                "domain",
                f"opset domain '{imp.domain}'",
                "non-standard operator domain: TensorRT needs a plugin for these ops; "
                "export with default-domain (ai.onnx) operators only",
            )
    if not seen_default:
        yield Finding("error", graph, "opset", "opset_import", "no ai.onnx opset declared")


def _check_node(
    node, where: str, spec: TargetSpec, role: Role, walk: _Walk, graph: str, local_functions: set
) -> Iterator[Finding]:
    op, label = node.op_type, _node_label(node, where)
    if node.domain not in ("", "ai.onnx"):
        if (node.domain, op) in local_functions:
            return  # its body is walked as a function
        yield Finding(
            "error",
            graph,
            "domain",
            label,
            f"operator of domain '{node.domain}' needs a TensorRT plugin; use ai.onnx ops",
        )
        return
    if op not in spec.operators:
        first = first_opset(op)
        if op in UNSUPPORTED_10X:
            why = f"documented as unsupported by the TensorRT ONNX parser ({spec.source})"
        elif first is not None and first > spec.opset_max:
            why = f"first defined at opset {first}, beyond the {spec.name} parser ceiling (opset {spec.opset_max})"
        else:
            why = f"not in the operator support matrix of {spec.name} ({spec.source})"
        yield Finding("error", graph, "op-unsupported", label, why)
        return
    yield from _check_restrictions(node, op, label, role, walk, graph)


def _check_restrictions(node, op: str, label: str, role: Role, walk: _Walk, graph: str) -> Iterator[Finding]:
    def err(code: str, msg: str) -> Finding:
        return Finding("error", graph, code, label, msg)

    if op == "Attention":
        if len(node.input) > 4 and any(node.input[4:]):
            yield err(
                "attention-kv",
                "past_key/past_value/nonpad_kv_seqlen inputs are unsupported by the "
                "TensorRT parser; keep the KV cache as explicit graph inputs and use MatMul/Softmax",
            )
        if len(node.output) > 1 and any(node.output[1:]):
            yield err("attention-kv", "present_key/present_value/qk_matmul_output outputs are unsupported")
        for a in ("softcap", "qk_matmul_output_mode"):
            if _attr(node, a):
                yield err("attention-attr", f"attribute '{a}' is unsupported")
    if op in REDUCE and len(node.input) > 1 and node.input[1] and node.input[1] not in walk.initializers:
        yield err("reduce-axes", "`axes` input must be an initializer for TensorRT")
    if (
        op in ("Squeeze", "Unsqueeze")
        and len(node.input) > 1
        and node.input[1]
        and node.input[1] not in walk.constant_names
    ):
        yield err("axes-const", "`axes` must resolve to a constant")
    if op == "CumSum" and len(node.input) > 1 and node.input[1] not in walk.constant_names:
        yield err("axes-const", "`axis` must be a build-time constant")
    if op == "ScatterND" and (_attr(node, "reduction") or b"none") not in (b"none", "none"):
        yield err("scatter-reduction", "ScatterND `reduction` other than none is unsupported")
    if op == "Dropout" and len(node.input) > 2 and node.input[2]:
        init = walk.initializers.get(node.input[2])
        if init is None or bool(_to_array(init).any()):
            yield err(
                "dropout-training",
                "`training_mode` must be an initializer that is false; export for inference",
            )
    if op == "LayerNormalization" and len(node.output) > 1 and any(node.output[1:]):
        yield err("layernorm-outputs", "only the first output Y of LayerNormalization is supported")
    if op == "TopK":
        if _attr(node, "sorted") == 0:
            yield err("topk", "`sorted` must be 1")
        k = walk.initializers.get(node.input[1]) if len(node.input) > 1 else None
        if k is not None and int(_to_array(k).max()) >= 3840:
            yield err("topk", "K must be < 3840")
    if op in DATA_DEPENDENT_SHAPE:
        sev: Severity = "error" if role == "step" else "warning"
        yield Finding(
            sev,
            graph,
            "data-dependent-shape",
            label,
            "output shape depends on data: no static step, no CUDA-graph capture; remove it",
        )
    if op in CONTROL_FLOW and role == "step":
        yield Finding(
            "warning",
            graph,
            "control-flow",
            label,
            "control flow in the step graph: per-step work may vary; prefer straight-line ops",
        )
    if op in RANDOM:
        yield Finding(
            "warning",
            graph,
            "random",
            label,
            "TensorRT ignores the `seed`: results differ from ORT; inference graphs should not sample",
        )


def _to_array(tensor) -> np.ndarray:
    from onnx import numpy_helper

    return numpy_helper.to_array(tensor)


def _check_dtypes(walk: _Walk, spec: TargetSpec, graph: str, io_names: set) -> Iterator[Finding]:
    for name, elem in sorted(walk.tensor_types.items()):
        if elem == 0:
            continue
        tname = TYPE_NAME.get(elem, f"type {elem}")
        if tname in NATIVE_TYPES:
            continue
        if tname == "DOUBLE":
            yield Finding(
                "error",
                graph,
                "dtype-double",
                f"tensor '{name}'",
                "DOUBLE: TensorRT casts it to FLOAT, clamping to +-FLT_MAX, so the graph would "
                "not compute what ORT computes; export float32",
            )
        elif tname == "BFLOAT16":
            yield Finding(
                "warning",
                graph,
                "dtype-bf16",
                f"tensor '{name}'",
                "BFLOAT16 needs compute capability >= 8.0 (Ampere, Jetson Orin); not on Volta/Turing",
            )
        elif tname == "UINT8":
            if name not in io_names:
                yield Finding(
                    "error",
                    graph,
                    "dtype-uint8",
                    f"tensor '{name}'",
                    "UINT8 is supported only as a network input or output",
                )
        elif tname in QUANTIZED_TYPES:
            yield Finding(
                "error",
                graph,
                "dtype-quantized",
                f"tensor '{name}'",
                f"{tname} is a quantized type in TensorRT, usable only through explicit "
                "QuantizeLinear/DequantizeLinear; our exporter never emits it",
            )
        else:
            yield Finding(
                "error",
                graph,
                "dtype-unsupported",
                f"tensor '{name}'",
                f"{tname} has no TensorRT data type; use FLOAT/FLOAT16/INT32/INT64/BOOL",
            )
    for node, where in walk.nodes:
        if node.op_type == "Cast":
            to = _attr(node, "to")
            tname = TYPE_NAME.get(int(to or 0), f"type {to}")
            if tname not in NATIVE_TYPES and tname not in ("BFLOAT16", "UINT8"):
                yield Finding(
                    "error",
                    graph,
                    "dtype-cast",
                    _node_label(node, where),
                    f"Cast to {tname}: not a TensorRT compute type",
                )


def _check_shapes(model, role: Role, graph: str) -> Iterator[Finding]:
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            yield Finding(
                "error", graph, "io-type", f"'{vi.name}'", "graph I/O must be tensors (no sequences/maps)"
            )
            continue
        shape = vi.type.tensor_type.shape
        if not vi.type.tensor_type.HasField("shape"):
            yield Finding("error", graph, "static-shape", f"'{vi.name}'", "no shape declared (unknown rank)")
            continue
        dynamic = [d.dim_param or "?" for d in shape.dim if not (d.HasField("dim_value") and d.dim_value > 0)]
        if not dynamic:
            continue
        if role == "step":
            yield Finding(
                "error",
                graph,
                "static-shape",
                f"'{vi.name}'",
                f"dynamic dims {dynamic}: the step graph must be fully static (TensorRT profile "
                "min=opt=max, fixed device buffers, CUDA-graph replay); re-export with fixed shapes",
            )
        elif vi in model.graph.input:
            yield Finding(
                "note",
                graph,
                "pinned-shape",
                f"'{vi.name}'",
                f"dynamic dims {dynamic} will be pinned by a min=opt=max profile (batch 1, max_len)",
            )


def _check_fp16_ranges(walk: _Walk, graph: str) -> Iterator[Finding]:
    """Initializers that cannot be represented in fp16: overflow to inf, or flush to zero."""
    for name, init in sorted(walk.initializers.items()):
        if init.data_type not in (1, 10):
            continue
        x = _to_array(init).astype(np.float64).ravel()  # [N]
        if x.size == 0:
            continue
        if not np.isfinite(x).all():
            # A -inf fill consumed only by Where/comparisons is masking by selection: fine. Arithmetic is not.
            if walk.consumers.get(name, set()) - SELECTION_OPS:
                n_bad = int((~np.isfinite(x)).sum())
                yield Finding(
                    "warning",
                    graph,
                    "nonfinite-weight",
                    f"initializer '{name}'",
                    f"{n_bad} non-finite value(s) feed {sorted(walk.consumers[name])}: "
                    "mask by selection (Where), never by arithmetic with -inf",
                )
            x = x[np.isfinite(x)]
        big = float(np.abs(x).max()) if x.size else 0.0
        if init.data_type == 1 and big > FP16_MAX:
            yield Finding(
                "warning",
                graph,
                "fp16-overflow",
                f"initializer '{name}'",
                f"max |x| = {big:.3g} > 65504 overflows to inf in fp16 (e.g. a -1e9 additive mask); "
                "use Where-selection masks, or keep this tensor fp32",
            )
        tiny = (x != 0) & (np.abs(x) < FP16_TINY)
        if init.data_type == 1 and tiny.any():
            yield Finding(
                "note",
                graph,
                "fp16-underflow",
                f"initializer '{name}'",
                f"{int(tiny.sum())} nonzero value(s) below 2^-24 flush to zero in fp16",
            )


def check_model(model, spec: TargetSpec, *, role: Role = "full", graph: str = "model.onnx") -> list[Finding]:
    """Every finding for one ModelProto against one target, errors first.

    role: "step" demands fully static I/O shapes and no data-dependent shapes.
    """
    walk = _collect(model)
    local_functions = {(fn.domain, fn.name) for fn in model.functions}
    io_names = {vi.name for vi in list(model.graph.input) + list(model.graph.output)}
    findings: list[Finding] = []
    findings += _check_opsets(model, spec, graph)
    for node, where in walk.nodes:
        findings += _check_node(node, where, spec, role, walk, graph, local_functions)
    findings += _check_dtypes(walk, spec, graph, io_names)
    findings += _check_shapes(model, role, graph)
    findings += _check_fp16_ranges(walk, graph)
    if spec.strongly_typed_only and not any(t == 10 for t in walk.tensor_types.values()):
        findings.append(
            Finding(
                "note",
                graph,
                "strong-typing",
                "graph",
                f"{spec.name} builds strongly typed networks only: this graph has no FLOAT16 "
                "tensors, so the engine runs fp32; for fp16, `tickformer build --precision fp16` "
                "applies the fp16 policy",
            )
        )
    order = {"error": 0, "warning": 1, "note": 2}
    return sorted(findings, key=lambda f: order[f.severity])


def role_of(path: Path) -> Role:
    """Graph role from the artifact file name (step.onnx, encoder.onnx, else full)."""
    stem = path.stem
    if stem.startswith("step"):
        return "step"
    if stem.startswith("encoder"):
        return "encoder"
    return "full"


def graphs_of(path: Path, *, trust: Any = None) -> list[tuple[str, bytes | None, str]]:
    """The ONNX graphs to check, as (file name, bytes, problem): a bare .onnx file (read once,
    a regular file, a FIFO never blocks), or every graph an artifact's manifest lists, read
    through the artifact loader (every hash, `trust`'s signature; `verified_graph_bytes`) --
    never a glob of *.onnx. An unreadable bare file gives bytes None and the problem, a finding."""
    try:
        is_dir = path.is_dir()
        exists = is_dir or path.exists() or path.is_symlink()
    except OSError as exc:
        raise ArtifactError(
            f"{str(path)[:200]}: {exc.strerror}; pass an exported artifact directory or an .onnx file"
        ) from None
    if not exists:
        raise ArtifactError(f"{path} does not exist; pass an exported artifact directory or an .onnx file")
    if not is_dir:
        if trust is not None:
            raise ArtifactError(
                f"--trust applies to signed artifacts; {path} is a bare .onnx file, which carries no signature: "
                "pass the artifact directory"
            )
        if path.suffix != ".onnx":
            raise ArtifactError(f"{path} is not an .onnx file nor an artifact directory; pass one of those")
        try:
            return [(path.name, read_path(path), "")]  # a user's own file: links followed, never a FIFO
        except FileRefused as exc:
            return [(path.name, None, str(exc))]
    art = open_artifact(path, trust=trust)
    return [
        (art.graph_spec(g)["file"], verified_graph_bytes(art, g), "") for g in sorted(art.manifest["graphs"])
    ]


def check_path(path: Path, spec: TargetSpec, *, trust: Any = None) -> list[Finding]:
    """Check every graph of an artifact (or one .onnx file). Loading errors of a bare file
    become findings; an artifact that fails verification raises ArtifactError."""
    import onnx

    findings: list[Finding] = []
    for name, data, problem in graphs_of(Path(path), trust=trust):
        try:
            if data is None:
                raise ValueError(problem)
            model = onnx.load_model_from_string(data)
            onnx.checker.check_model(model)
        except Exception as exc:  # a broken file is a finding, not a crash
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            findings.append(Finding("error", name, "onnx-invalid", "file", msg[:300]))
            continue
        findings += check_model(model, spec, role=role_of(Path(name)), graph=name)
    return findings


def count(findings: Iterable[Finding], severity: Severity) -> int:
    return sum(1 for f in findings if f.severity == severity)
