"""The graphs of an artifact carry the weights of its weights.npz: checked by building the graphs
again from weights.npz and comparing the tensors in them by what they are.

Two copies of the model live in an artifact: weights.npz (what the numpy backend and the
reference run) and the initializers of each .onnx graph (what ONNX Runtime and TensorRT run),
several of them folded from the weights (biases shifted through the residual stream, positional
tables with the input bias added: export/graphs.py). Hashes make each file intact, not the two
consistent: a re-sealed artifact could pair the weights of one model with the graphs of another.
`check_graph_weights(artifact)` rebuilds the graphs from `artifact.params()` with the manifest's
config, batch, opset and precision (export/graphs.py, export/fp16.py: deterministic) and
compares the tensors of each stored graph (initializers and Constant values, in subgraphs too)
in two classes:

- **named tensors** -- every tensor the builder names: the parameters (their weights.npz names),
  the values derived from them (`*_step`, `pe_plus_in_bias_step`, ...) and the named tables
  (`pe`, `causal`, `key_index`, ...). The stored graph must hold exactly the rebuilt graph's
  names, each equal bit for bit. This is where the weights are: a changed, missing or added one
  is "does not run this artifact's weights".
- **numbered constants** -- the small structural values the builder creates without a name
  (`GraphBuilder.const` numbers them `c_1`, `c_2`, ...; `scan_c_N` in a Scan body, `__fp16`
  copies): reshape shapes, axes, split sizes, scalars such as -inf, 0 or 1/sqrt(dh). Their
  numbers follow the order the builder happens to create them in, so any change to the builder
  renumbers them; they are compared by value, not by number: every numbered constant of the
  stored graph must equal (dtype, shape, bytes) one the builder writes for this config now.
  A stored graph cannot smuggle a weight in under a number (its value is no constant the builder
  writes), and an artifact whose graph an older builder wired differently still loads as long as
  its weights and structural values are this builder's -- the artifacts exported before the
  re-cut (tests/artifact/fixtures/) do. When they are not, the message says that the weights
  match and the structure is another tickformer's, and to re-export.

The wiring itself (which node reads what) is not compared: operators are checked by
artifact/graph_rules.py, inputs and outputs by artifact/format.py, and the graph as a whole only
by a signature (SECURITY.md, "Hashing and signing").

When it runs: when the artifact is written -- the writer (export/writer.py) checks the graphs it
is about to write against the ones rebuilt from the weights.npz bytes it is about to write, before
it seals the manifest, and a TensorRT build (export/engines.py) before it re-seals it -- and on
demand (`check_graph_weights`: `tickformer inspect ART --graphs`). Loading is reading: the runtime
verifies hashes, the signature and the format's rules and never rebuilds a graph, so a graph
changed and re-sealed after export is caught by a signature (with a trust key), not at load.

Not real-time code (rebuilds every graph: about as long as the export's graph building).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterator

from tickformer.artifact.reader import Artifact
from tickformer.errors import ArtifactError, TickformerError

# The names GraphBuilder.const gives an unnamed constant ("c_<n>"), as a Scan body's builder
# prefixes them ("scan_c_<n>") and as to_fp16 copies them ("c_<n>__fp16").
NUMBERED = re.compile(r"(?:[a-z]+_)*c_[0-9]+(?:__fp16)?")


def is_numbered(name: str) -> bool:
    """True for a constant the builder numbered rather than named (compared by value)."""
    return NUMBERED.fullmatch(name) is not None


def _text(name: str | bytes) -> str:
    return name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else name


def _tensors(graph: Any, prefix: str = "") -> Iterator[tuple[str, str, Any]]:
    """(key, name, TensorProto) of every initializer and Constant-node value of `graph` and of
    its subgraphs (a Scan body's), keyed by path so equal names in two scopes stay apart."""
    for init in graph.initializer:
        name = _text(init.name)
        yield prefix + name, name, init
    for node in graph.node:
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.HasField("t"):
                name = _text(node.output[0]) if node.output else ""
                yield f"{prefix}{name}#{_text(attr.name)}", name, attr.t
            subgraphs = [attr.g] if attr.HasField("g") else []
            for sub in [*subgraphs, *attr.graphs]:
                yield from _tensors(sub, f"{prefix}{_text(node.name)}.{_text(attr.name)}/")


def _value(tensor: Any) -> bytes:
    """The serialized tensor without its name: what it is, whatever it is called."""
    copy = type(tensor)()
    copy.CopyFrom(tensor)
    copy.ClearField("name")
    return copy.SerializeToString()


def graph_tensors(model: Any) -> dict[str, bytes]:
    """{key: serialized TensorProto} of every named tensor of `model` (initializers and
    Constant-node values, subgraphs included; a Constant keyed "output#attribute"). protobuf
    hands back a name that is not valid UTF-8 as bytes; it is decoded with escapes so every key is
    a str (and differs from every name export writes)."""
    return {key: t.SerializeToString() for key, name, t in _tensors(model.graph) if not is_numbered(name)}


def numbered_constants(model: Any) -> Counter[bytes]:
    """The values (name cleared) of `model`'s numbered constants, with multiplicity."""
    return Counter(_value(t) for _, name, t in _tensors(model.graph) if is_numbered(name))


def rebuild(
    params: dict[str, Any], config: Any, batch: int, opset: Any, precision: Any, where: str
) -> dict[str, Any]:
    """The graphs export builds from `params` with these manifest settings (export/graphs.py,
    export/fp16.py: deterministic). ArtifactError naming `where` for an opset or precision this
    tickformer does not export."""
    from .builder import check_opset
    from .graphs import build_graphs

    try:
        check_opset(opset)
    except TickformerError:
        raise ArtifactError(
            f"{where}: manifest.json opset {opset!r} is not one this tickformer exports; re-export it"
        ) from None
    if precision not in ("fp32", "fp16"):
        raise ArtifactError(
            f"{where}: manifest.json precision {str(precision)[:20]!r} is not fp32 or fp16; re-export it"
        )
    graphs = build_graphs(params, config, batch, opset)
    if precision == "fp16":
        from .fp16 import to_fp16

        graphs = {name: to_fp16(g) for name, g in graphs.items()}
    return graphs


def rebuilt_graphs(artifact: Artifact) -> dict[str, Any]:
    """The graphs export builds from this artifact's weights.npz and manifest settings."""
    manifest = artifact.manifest
    return rebuild(
        artifact.params(),
        artifact.config,
        artifact.batch,
        manifest.get("opset"),
        manifest.get("precision", "fp32"),
        str(artifact.root),
    )


def check_graphs(stored: dict[str, bytes], rebuilt: dict[str, Any], arch: str, where: dict[str, str]) -> None:
    """Raise ArtifactError unless every named tensor of every stored graph (name -> serialized
    bytes) equals the one in the rebuilt graph of that name and every numbered constant is one
    the builder writes (module docstring). where: graph name -> its path, for messages."""
    import onnx

    for name in sorted(stored):
        if name not in rebuilt:
            raise ArtifactError(
                f"{where[name]}: graph {name!r} is not one export builds for a {arch} artifact; re-export it"
            )
        model = onnx.load_model_from_string(stored[name])
        have, expected = graph_tensors(model), graph_tensors(rebuilt[name])
        if have != expected:
            differ = sorted(n for n in set(have) | set(expected) if have.get(n) != expected.get(n))
            raise ArtifactError(
                f"{where[name]}: tensors {differ[:3]} differ from the graph export builds from "
                f"weights.npz ({len(differ)} of {len(expected)}): the graph does not run this artifact's weights; "
                "re-export the artifact"
            )
        known = numbered_constants(rebuilt[name])
        foreign = [v for v in numbered_constants(model) if v not in known]
        if foreign:
            raise ArtifactError(
                f"{where[name]}: its weights equal those export builds from weights.npz, but "
                f"{len(foreign)} structural constant(s) (shapes, axes, scalars) are none this tickformer's graph "
                "builder writes: the graph was built by another tickformer version, or altered; re-export the "
                "artifact with this tickformer"
            )


def check_graph_weights(artifact: Artifact) -> None:
    """Raise ArtifactError unless the graphs of an opened artifact carry its weights.npz (module
    docstring): on demand (`tickformer inspect ART --graphs`) and before a TensorRT build re-seals
    the manifest. Parses the verified bytes (`verified_graph_bytes`)."""
    from tickformer.artifact.reader import verified_graph_bytes

    names = sorted(artifact.manifest["graphs"])
    check_graphs(
        {name: verified_graph_bytes(artifact, name) for name in names},
        rebuilt_graphs(artifact),
        artifact.config.arch,
        {name: str(artifact.graph_path(name)) for name in names},
    )
