"""The declared I/O of a bare ONNX model: `read_graph` reads a .onnx file once (safe_files), and
the files its tensors keep their data in when it has external data (torch's dynamo exporter
writes MODEL.onnx.data beside MODEL.onnx): each a plain file name inside the model's own folder,
read once through `safe_files.Directory` as the artifact reader reads an artifact's files (no
"/", no "..", no link, a regular file), its bytes put into the tensors; `graph_io` lists the
inputs (initializers excluded) and outputs with their dtypes and dims, the vocabulary hints of
its integer inputs (the rows of the embedding table a Gather indexes with them), the axes it
declares of size 0 and the exporter that wrote it. onnx is imported when called (an optional
dependency). Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.artifact.graph_rules import external, external_tensors
from tickformer.errors import ArtifactError, FileRefused
from tickformer.safe_files import Directory, is_plain_name, read_path

# Operators that look ids (input 1) up in a table (input 0) row by row when this attribute is 0:
# Gather's axis; GatherND's batch_dims (torch's dynamo exporter writes table[ids] as
# GatherND(table, Unsqueeze(ids, -1))). The table's rows are then the vocabulary.
LOOKUPS = {"Gather": "axis", "GatherND": "batch_dims"}
# the operators an integer input passes through unchanged on its way to an embedding lookup
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
    zero_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)  # tensor -> axes declared of size 0
    exporter: str = ""  # "torch-dynamo", "torch-script" or "" (another tool): for the fix hints

    def input(self, name: str) -> Tensor | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> Tensor | None:
        return next((t for t in self.outputs if t.name == name), None)


def read_graph(path: str | Path, files: dict[str, tuple[int, str]] | None = None) -> tuple[bytes, Any]:
    """(bytes, onnx.ModelProto) of the .onnx file at `path`, read once (safe_files.read_path), with
    the data of its external tensors read from their files in the model's folder (module
    docstring; the bytes returned are then the model with that data inside, what ORT loads);
    ArtifactError naming the file and the fix if it cannot be read or parsed. `files`, when
    given, gets {file name: (bytes, sha256)} of every file read."""
    import hashlib

    import onnx

    p = Path(path)
    try:
        data = read_path(p)
    except FileRefused as exc:
        raise ArtifactError(f"{exc}; pass a .onnx file") from None
    if files is not None:
        files[p.name] = (len(data), hashlib.sha256(data).hexdigest())
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ArtifactError(f"{p}: not an ONNX model ({first[:200]}); pass a valid .onnx file") from None
    if not len(model.graph.output):
        raise ArtifactError(f"{p}: not an ONNX model (the graph has no outputs); pass a valid .onnx file")
    if external_tensors(model):
        _load_external(model, p, files)
        try:
            data = model.SerializeToString()
        except ValueError as exc:  # protobuf's 2 GiB limit on one message
            raise ArtifactError(
                f"{p}: with its external data the model is over protobuf's 2 GiB limit ({exc}); verify loads "
                "models up to 2 GiB: verify a smaller configuration of it"
            ) from None
    return data, model


def _load_external(model: Any, path: Path, files: dict[str, tuple[int, str]] | None) -> None:
    """Put the data of every external tensor into it, read from its file in the model's folder:
    a plain file name (no "/", no "..": the folder is the only place read), a regular file that
    is no link, each read once through safe_files.Directory; offset and length within the file."""
    import hashlib

    from onnx import TensorProto

    folder = path.parent
    blobs: dict[str, bytes] = {}
    with Directory(folder) as d:
        for t in external(model):
            info = {e.key: e.value for e in t.external_data}
            name = info.get("location", "")
            if not is_plain_name(name):
                raise ArtifactError(
                    f"{path}: tensor {t.name!r} keeps its data in {name!r}, which is not a file in the model's own "
                    f"folder {folder} (verify reads external data only there, by plain file name: no '/', no '..'); "
                    "save the model with its data beside it (onnx.save(model, path, save_as_external_data=True, "
                    "location=NAME)) or inside it (save_as_external_data=False)"
                )
            if name not in blobs:
                try:
                    blobs[name] = d.read(name, listed_in="")
                except FileRefused as exc:
                    raise ArtifactError(
                        f"{path}: the external data file of tensor {t.name!r}: {exc}; keep {name} beside the model "
                        "as the exporter wrote it (a regular file, not a link)"
                    ) from None
                if files is not None:
                    files[name] = (len(blobs[name]), hashlib.sha256(blobs[name]).hexdigest())
            blob = blobs[name]
            try:
                offset = int(info.get("offset", "0"))
                length = int(info["length"]) if "length" in info else len(blob) - offset
            except ValueError:
                raise ArtifactError(
                    f"{path}: tensor {t.name!r} has an offset or length that is not an integer ({info}); "
                    "export the model again"
                ) from None
            if offset < 0 or length < 0 or offset + length > len(blob):
                raise ArtifactError(
                    f"{path}: tensor {t.name!r} reads bytes {offset}..{offset + length} of {name}, which has "
                    f"{len(blob)}: the data file does not belong to this model; export the model again"
                )
            t.raw_data = blob[offset : offset + length]
            del t.external_data[:]
            t.data_location = TensorProto.DEFAULT


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


def _zero_axes(value_info: Any) -> tuple[int, ...]:
    """The axes a tensor declares of size 0 (dim_value set to 0: an empty axis, not an unknown one)."""
    dims = value_info.type.tensor_type.shape.dim
    return tuple(a for a, d in enumerate(dims) if d.WhichOneof("value") == "dim_value" and d.dim_value == 0)


def exporter_of(model: Any) -> str:
    """ "torch-dynamo" (torch.onnx.export(..., dynamo=True): node names node_*, values val_*),
    "torch-script" (dynamo=False: /module/Op names), or "" for another tool."""
    if model.producer_name != "pytorch":
        return ""
    names = [n.name for n in model.graph.node[:64]]
    return "torch-dynamo" if any(n.startswith("node_") for n in names) else "torch-script"


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
    """int graph input -> rows V of the initializer a Gather (axis 0) or a GatherND (batch_dims 0)
    indexes with it, following Cast/Unsqueeze/Reshape/... from the input (an embedding lookup: ids
    in [0, V-1])."""
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
                attr = LOOKUPS.get(node.op_type)
                if attr is not None and len(node.input) > 1 and node.input[1] == value:
                    by_rows = next((a.i for a in node.attribute if a.name == attr), 0) == 0
                    table = inits.get(node.input[0])
                    if table and by_rows:
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
    zeros = {
        v.name: _zero_axes(v)
        for v in [*g.input, *g.output]
        if v.name not in init_names and v.type.HasField("tensor_type") and _zero_axes(v)
    }
    return GraphIO(
        inputs,
        outputs,
        opset,
        f"{model.producer_name} {model.producer_version}".strip(),
        _vocab_hints(model),
        zeros,
        exporter_of(model),
    )
