"""What an artifact's ONNX graph may contain, checked on the verified bytes before any engine sees
them: bounded work per call, standard operators only, every byte inside the hashed file.

`check_graph(model, allowed=..., max_trip=..., where=...)` refuses:
- tensors whose data lives in external files (the manifest hashes only the .onnx file);
- opset imports and nodes of any domain but the standard one ("" / "ai.onnx"), and model-local
  functions (a custom domain's implementation is code the runtime would have to trust);
- control flow (`If`, `Loop`, `Scan`, `SequenceMap`) unless the artifact kind allows that
  operator in that graph (`tickformer.artifact.format.CONTROL_FLOW`); an allowed one must have
  a static trip count: a `Loop`'s M is a constant in 1..max_trip, a `Scan`'s scan inputs are
  graph inputs or initializers whose scan axis is an integer <= max_trip or a symbolic length.
  A symbolic length is the length of the input the caller passes: the Scan runs once per
  position of it, each time the body's fixed work, so one call's work is linear in the size of
  the caller's own array (the session bounds T by max_len, except for the ssm kind, whose full
  pass takes any T >= 1); it never comes from a value inside the graph. Bodies are checked by
  the same rules.

Graphs are walked without recursion (a hostile file may nest subgraphs thousands deep). Raises
ArtifactError naming the graph, the node and the fix. Not real-time code (runs once, at load).
Source: ONNX operator specification (Loop: "M" trip count, Scan: scan_input_axes).
"""

from __future__ import annotations

from typing import Any

from tickformer.errors import ArtifactError

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
FIX = "re-export the artifact with tickformer (its graphs use none)"


def all_tensors(model: Any) -> list[Any]:
    """Every TensorProto of `model` (initializers, Constant and attribute tensors, sparse
    initializers' parts), in every subgraph, walked without recursion."""
    found: list[Any] = []
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        found += list(graph.initializer)
        for sparse in graph.sparse_initializer:
            found += [sparse.values, sparse.indices]
        for node in graph.node:
            for attr in node.attribute:
                found += ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)
                graphs += ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
    return found


def external(model: Any) -> list[Any]:
    """Every TensorProto of `model` (`all_tensors`) whose data lives outside the file."""
    from onnx import TensorProto

    return [t for t in all_tensors(model) if t.data_location == TensorProto.EXTERNAL or len(t.external_data)]


def external_tensors(model: Any) -> list[str]:
    """Names of every tensor of `model` whose data lives outside the file (`external`)."""
    return [t.name or "<unnamed>" for t in external(model)]


def _constant_ints(graph: Any, name: str) -> list[int] | None:
    """The integer values of `name` if it is an initializer or a Constant node's output of `graph`."""
    from onnx import numpy_helper

    for init in graph.initializer:
        if init.name == name:
            return [int(v) for v in numpy_helper.to_array(init).reshape(-1)]
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.HasField("t"):
                    return [int(v) for v in numpy_helper.to_array(attr.t).reshape(-1)]
                if attr.name in ("value_int",):
                    return [int(attr.i)]
    return None


def _static_trip(node: Any, graph: Any, top: Any, max_trip: int) -> str | None:
    """None if the trip count of control-flow `node` is static and <= max_trip, else the problem."""
    if node.op_type == "Loop":
        trip = node.input[0] if node.input else ""
        values = _constant_ints(graph, trip) if trip else None
        if values is None or len(values) != 1:
            return "its trip count M is not a constant of the graph"
        if not 1 <= values[0] <= max_trip:
            return f"its trip count M = {values[0]} is outside 1..{max_trip}"
        return None
    if node.op_type == "Scan":
        n_scan = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
        axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [])
        scanned = list(node.input)[len(node.input) - n_scan :] if n_scan else []
        shapes = {v.name: v.type.tensor_type.shape for v in top.input}
        shapes.update({i.name: None for i in top.initializer})
        if not scanned:
            return "it has no scan inputs"
        for k, name in enumerate(scanned):
            if name not in shapes:
                return f"its scan input {name!r} is computed inside the graph (length not static)"
            shape = shapes[name]
            if shape is None:
                continue  # an initializer: its length is in the hashed file
            axis = axes[k] if k < len(axes) else 0
            dims = list(shape.dim)
            if not -len(dims) <= axis < len(dims):
                return f"its scan axis {axis} is outside the rank of {name!r}"
            dim = dims[axis]
            if dim.HasField("dim_value") and not 1 <= dim.dim_value <= max_trip:
                return f"its scan length {dim.dim_value} is outside 1..{max_trip}"
            if not dim.HasField("dim_value") and not dim.HasField("dim_param"):
                return f"the scan axis of {name!r} has no declared length"
        return None
    if node.op_type == "If":
        return None  # one branch runs once; each branch is checked by the same rules
    return "its iteration count is not static"


def check_graph(model: Any, *, allowed: frozenset[str], max_trip: int, where: str, what: str) -> None:
    """Raise ArtifactError unless `model` (an onnx.ModelProto) keeps the rules of the module
    docstring. `allowed`: the control-flow operators this graph may hold; `max_trip`: the largest
    static trip count accepted (the artifact's max_len); `where`: the file, for messages;
    `what`: "a decoder artifact's step graph", for messages."""
    external = external_tensors(model)
    if external:
        raise ArtifactError(
            f"{where}: tensors {external[:3]} keep their data in external files, which the manifest does not "
            f"hash; refusing to load them. Re-export the artifact (export embeds every weight)"
        )
    for imp in model.opset_import:
        if imp.domain not in STANDARD_DOMAINS:
            raise ArtifactError(
                f"{where}: imports the operator domain {imp.domain[:60]!r}; only standard ONNX operators are "
                f"accepted (a custom domain is code the runtime would run unchecked); {FIX}"
            )
    if len(model.functions):
        raise ArtifactError(
            f"{where}: defines model-local functions ({model.functions[0].name[:40]!r}); only standard ONNX "
            f"operators are accepted; {FIX}"
        )
    stack: list[tuple[Any, int]] = [(model.graph, 0)]
    while stack:
        graph, depth = stack.pop()
        for node in graph.node:
            label = f"node {node.name[:40]!r} ({node.op_type[:40]})"
            if node.domain not in STANDARD_DOMAINS:
                raise ArtifactError(
                    f"{where}: {label} is of the custom domain {node.domain[:60]!r}; only standard ONNX "
                    f"operators are accepted; {FIX}"
                )
            subgraphs = [a.g for a in node.attribute if a.HasField("g")]
            subgraphs += [g for a in node.attribute for g in a.graphs]
            if node.op_type in CONTROL_FLOW_OPS or subgraphs:
                if node.op_type not in allowed:
                    raise ArtifactError(
                        f"{where}: {label} is control flow, which {what} may not hold (its work per call "
                        f"would not be bounded by the graph); {FIX}"
                    )
                problem = _static_trip(node, graph, model.graph, max_trip)
                if problem is not None:
                    raise ArtifactError(
                        f"{where}: {label}: {problem}, so its work per call is not bounded; {FIX}"
                    )
                if depth >= 1:
                    raise ArtifactError(f"{where}: {label} nests control flow inside control flow; {FIX}")
                stack += [(g, depth + 1) for g in subgraphs]
