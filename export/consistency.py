"""The graphs of an artifact carry the weights of its weights.npz: checked by building the graphs
again from weights.npz and comparing every number in them.

Two copies of the model live in an artifact: weights.npz (what the numpy backend and the
reference run) and the initializers of each .onnx graph (what ONNX Runtime and TensorRT run),
several of them folded from the weights (biases shifted through the residual stream, positional
tables with the input bias added: export/graphs.py). Hashes make each file intact, not the two
consistent: a re-sealed artifact could pair the weights of one model with the graphs of another.
`check_graph_weights(artifact)` rebuilds the graphs from `artifact.params()` with the manifest's
config, batch, opset and precision (export/graphs.py, export/fp16.py: deterministic) and
requires every tensor of each stored graph -- initializers and Constant values, by name -- to
equal the rebuilt one bit for bit. The graph structure is checked elsewhere (operators:
artifact/graph_rules.py; inputs and outputs: artifact/format.py), so an artifact exported by a
version whose graph layout differs fails here only if its numbers differ.

Not real-time code (runs once, at load, for the backends that run graphs).
"""

from __future__ import annotations

from typing import Any

from tickformer.artifact.reader import Artifact
from tickformer.errors import ArtifactError, TickformerError


def graph_tensors(model: Any) -> dict[str, bytes]:
    """{name: serialized TensorProto} of every initializer and Constant-node value of `model`'s
    main graph (Constant values keyed by the node's output name). protobuf hands back a name that
    is not valid UTF-8 as bytes; it is decoded with escapes so every key is a str (and differs from
    every name export writes)."""
    out = {_text(init.name): init.SerializeToString() for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.HasField("t"):
                    out[f"{_text(node.output[0])}#{_text(attr.name)}"] = attr.t.SerializeToString()
    return out


def _text(name: str | bytes) -> str:
    return name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else name


def rebuilt_graphs(artifact: Artifact) -> dict[str, Any]:
    """The graphs export builds from this artifact's weights.npz and manifest settings."""
    from .builder import check_opset
    from .graphs import build_graphs

    manifest = artifact.manifest
    opset, precision = manifest.get("opset"), manifest.get("precision", "fp32")
    try:
        check_opset(opset)
    except TickformerError:
        raise ArtifactError(
            f"{artifact.root}: manifest.json opset {opset!r} is not one this tickformer exports; re-export it"
        ) from None
    if precision not in ("fp32", "fp16"):
        raise ArtifactError(
            f"{artifact.root}: manifest.json precision {str(precision)[:20]!r} is not fp32 or fp16; re-export it"
        )
    graphs = build_graphs(artifact.params(), artifact.config, artifact.batch, opset)
    if precision == "fp16":
        from .fp16 import to_fp16

        graphs = {name: to_fp16(g) for name, g in graphs.items()}
    return graphs


def check_graph_weights(artifact: Artifact) -> None:
    """Raise ArtifactError unless every tensor of every graph equals the one export builds from
    weights.npz (module docstring). Parses the verified bytes (`verified_graph_bytes`)."""
    import onnx

    from tickformer.artifact.reader import verified_graph_bytes

    rebuilt = rebuilt_graphs(artifact)
    for name in sorted(artifact.manifest["graphs"]):
        if name not in rebuilt:
            raise ArtifactError(
                f"{artifact.root}: graph {name!r} is not one export builds for a {artifact.config.arch} "
                "artifact; re-export it"
            )
        stored = graph_tensors(onnx.load_model_from_string(verified_graph_bytes(artifact, name)))
        expected = graph_tensors(rebuilt[name])
        if stored != expected:
            differ = sorted(n for n in set(stored) | set(expected) if stored.get(n) != expected.get(n))
            raise ArtifactError(
                f"{artifact.graph_path(name)}: tensors {differ[:3]} differ from the graph export builds from "
                f"weights.npz ({len(differ)} of {len(expected)}): the graph does not run this artifact's weights; "
                "re-export the artifact"
            )
