"""The declared I/O of a bare ONNX model: `read_graph` reads a .onnx file once (safe_files; tensors
in external files refused), `graph_io` lists its inputs (initializers excluded) and outputs with
their dtypes and dims, and the vocabulary hints of its integer inputs (the rows of the embedding
table a Gather indexes with them). onnx is imported when called (an optional dependency).
Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.artifact.graph_rules import external_tensors
from tickformer.errors import ArtifactError, FileRefused
from tickformer.safe_files import read_path

# the operators an integer input passes through unchanged on its way to an embedding Gather
PASSTHROUGH_OPS = frozenset({"Cast", "Unsqueeze", "Squeeze", "Reshape", "Identity", "Flatten", "Expand"})


@dataclass(frozen=True)
class Tensor:
    """A graph input or output as the graph declares it."""

    name: str
    dtype: str  # numpy dtype name
    dims: tuple[int | str | None, ...]  # int: static; str: symbolic (dim_param); None: unnamed dynamic

    @property
    def rank(self) -> int:
        return len(self.dims)

    def is_dynamic(self, axis: int) -> bool:
        return not isinstance(self.dims[axis], int)

    def shown(self) -> str:
        return f"{self.name} {self.dtype}[{', '.join('?' if d is None else str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class GraphIO:
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    opset: int | None
    producer: str
    vocab_hints: dict[str, int]  # int input -> rows of the embedding table it indexes (Gather)

    def input(self, name: str) -> Tensor | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> Tensor | None:
        return next((t for t in self.outputs if t.name == name), None)


def read_graph(path: str | Path) -> tuple[bytes, Any]:
    """(bytes, onnx.ModelProto) of the .onnx file at `path`, read once (safe_files.read_path);
    ArtifactError naming the file and the fix if it cannot be read or parsed, or keeps tensors in
    external files (they would be read by path, outside the one loader)."""
    import onnx

    p = Path(path)
    try:
        data = read_path(p)
    except FileRefused as exc:
        raise ArtifactError(f"{exc}; pass a .onnx file") from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ArtifactError(f"{p}: not an ONNX model ({first[:200]}); pass a valid .onnx file") from None
    if not len(model.graph.output):
        raise ArtifactError(f"{p}: not an ONNX model (the graph has no outputs); pass a valid .onnx file")
    external = external_tensors(model)
    if external:
        raise ArtifactError(
            f"{p}: tensors {external[:3]} keep their data in external files, which verify does not read; "
            "save the model with every tensor inside the file (onnx.save(model, path, "
            "save_as_external_data=False))"
        )
    return data, model


def _dims(value_info: Any) -> tuple[int | str | None, ...]:
    shape = value_info.type.tensor_type.shape
    out: list[int | str | None] = []
    for d in shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(str(d.dim_param))
        else:
            out.append(None)
    return tuple(out)


def _dtype(value_info: Any, where: str) -> str:
    from onnx import helper

    t = value_info.type
    if not t.HasField("tensor_type"):
        raise ArtifactError(
            f"{where}: {value_info.name!r} is not a tensor (sequence, map or optional); verify feeds tensors only"
        )
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)).name
    except Exception:
        raise ArtifactError(
            f"{where}: {value_info.name!r} has element type {t.tensor_type.elem_type}, which numpy has no dtype "
            "for; verify feeds float, int and bool tensors"
        ) from None


def _vocab_hints(model: Any) -> dict[str, int]:
    """int graph input -> rows V of the initializer a Gather (axis 0) indexes with it, following
    Cast/Unsqueeze/Reshape/... from the input (an embedding lookup: ids in [0, V-1])."""
    g = model.graph
    inits = {i.name: list(i.dims) for i in g.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in g.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    hints: dict[str, int] = {}
    for inp in g.input:
        if inp.name in inits:
            continue
        frontier, seen = [inp.name], {inp.name}
        while frontier and inp.name not in hints:
            value = frontier.pop()
            for node in consumers.get(value, []):
                if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == value:
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    table = inits.get(node.input[0])
                    if table and axis == 0:
                        hints[inp.name] = int(table[0])
                        break
                elif node.op_type in PASSTHROUGH_OPS and node.input and node.input[0] == value:
                    for out in node.output:
                        if out not in seen:
                            seen.add(out)
                            frontier.append(out)
    return hints


def graph_io(model: Any, where: str = "model") -> GraphIO:
    """The declared inputs (initializers excluded) and outputs of an onnx.ModelProto."""
    g = model.graph
    init_names = {i.name for i in g.initializer}
    inputs = tuple(Tensor(v.name, _dtype(v, where), _dims(v)) for v in g.input if v.name not in init_names)
    outputs = tuple(Tensor(v.name, _dtype(v, where), _dims(v)) for v in g.output)
    opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), None)
    return GraphIO(
        inputs, outputs, opset, f"{model.producer_name} {model.producer_version}".strip(), _vocab_hints(model)
    )
