"""A small graph builder over `onnx.helper`: named nodes, initializers, opset-aware reductions.

No tracing and no PyTorch: graphs are written op by op from the numpy parameters (the flat dict's
names become initializer names). Only plain operators (MatMul, Add, Reshape, Transpose, Where,
ReduceMax, ReduceSum, Exp, Div, LayerNormalization, Gather, Concat, ...) so the same file imports
into TensorRT 10.x/11.x; never the ONNX `Attention` operator (TensorRT rejects it with past K/V).

Opset differences handled here: ReduceMax/ReduceMin take `axes` as an attribute before opset 18
and as an input from 18 on; ReduceSum/ReduceMean take it as an input from 13 (ReduceMean: 18).
Sources: ONNX operator specification (github.com/onnx/onnx/blob/main/docs/Operators.md).

Not real-time code: runs once, at export.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tickformer import validation
from tickformer.errors import ExportError

MIN_OPSET = 17
MAX_OPSET = 21  # newest opset checked with the onnxruntime this project pins
DTYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64, "bool": TensorProto.BOOL}
DTYPE_NAMES: dict[int, str] = {int(v): k for k, v in DTYPES.items()}

Dim = int | str


def check_opset(opset: int) -> int:
    if not validation.is_int(opset) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise ExportError(
            f"--opset {opset!r} is not supported; choose {MIN_OPSET}..{MAX_OPSET} "
            f"(17 imports into TensorRT 10.3 on JetPack 6)"
        )
    return int(opset)


class GraphBuilder:
    """Accumulates nodes, initializers and I/O of one graph; `model()` checks and returns it."""

    def __init__(self, name: str, opset: int) -> None:
        self.name = name
        self.opset = check_opset(opset)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._count = 0

    # --- declarations -------------------------------------------------------------------
    def input(self, name: str, dtype: str, shape: Sequence[Dim]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, DTYPES[dtype], list(shape)))
        return name

    def output(self, value: str, name: str, dtype: str, shape: Sequence[Dim]) -> None:
        """Declare graph output `name`, renaming `value` by an Identity when they differ."""
        if value != name:
            self.nodes.append(helper.make_node("Identity", [value], [name], name=f"{name}_out"))
        self.outputs.append(helper.make_tensor_value_info(name, DTYPES[dtype], list(shape)))

    def const(self, value: np.ndarray, name: str | None = None) -> str:
        """An initializer; `name` reuses a parameter's name, otherwise a fresh one."""
        name = name or self._fresh("c")
        if name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(
                np.array(value, order="C"), name=name
            )  # keeps 0-d (ascontiguousarray would not)
        return name

    def ints(self, values: Sequence[int], name: str | None = None) -> str:
        return self.const(np.asarray(values, dtype=np.int64), name)

    def scalar(self, value: float, dtype: type = np.float32) -> str:
        return self.const(np.asarray(value, dtype=dtype))

    # --- nodes ----------------------------------------------------------------------------
    def _fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        """Append one single-output node; return its output's name."""
        out = self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=self._fresh(op_type), **attrs))
        return out

    def split(self, x: str, sizes: Sequence[int], axis: int, names: Sequence[str] | None = None) -> list[str]:
        """Split x along `axis` into pieces of `sizes` (opset >= 13: sizes as an input); `names`
        gives the outputs their final names (e.g. graph outputs, so no Identity is needed)."""
        outs = list(names) if names is not None else [self._fresh("split") for _ in sizes]
        self.nodes.append(
            helper.make_node("Split", [x, self.ints(list(sizes))], outs, name=self._fresh("Split"), axis=axis)
        )
        return outs

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: bool = True) -> str:
        """ReduceMax/ReduceSum/ReduceMean over `axes`, attribute or input as the opset wants."""
        axes_as_input = op_type == "ReduceSum" or self.opset >= 18
        if axes_as_input:
            return self.op(op_type, x, self.ints(axes), keepdims=int(keepdims))
        return self.op(op_type, x, axes=list(axes), keepdims=int(keepdims))

    # --- result ---------------------------------------------------------------------------
    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, initializer=list(self.initializers.values())
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)],
            producer_name="tickformer",
            ir_version=8 if self.opset <= 17 else 9 if self.opset <= 20 else 10,
        )
        return check_graph(model)


def check_graph(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx.checker (full_check) plus strict shape inference; the inferred output shapes must
    equal the declared ones. Raises ExportError naming the graph and the problem."""
    name = model.graph.name
    try:
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise ExportError(f"graph {name!r} fails the ONNX checker: {exc}") from None
    declared = {o.name: o.type for o in model.graph.output}
    for out in inferred.graph.output:
        if out.type != declared[out.name]:
            raise ExportError(
                f"graph {name!r}: output {out.name!r} inferred as {out.type}, declared {declared[out.name]}"
            )
    return model


def io_spec(values: Sequence[onnx.ValueInfoProto]) -> list[dict[str, Any]]:
    """[{"name", "dtype", "shape"}] for the manifest (symbolic dims as strings)."""
    spec = []
    for value in values:
        tensor = value.type.tensor_type
        shape: list[Dim] = [d.dim_param if d.dim_param else d.dim_value for d in tensor.shape.dim]
        spec.append({"name": value.name, "dtype": DTYPE_NAMES[int(tensor.elem_type)], "shape": shape})
    return spec
