"""The graph prover's entry points (`tickformer prove ART | FILE.onnx`): an artifact's graphs read
through the verifying reader, or a bare .onnx file read once through tickformer.safe_files, each
parsed and checked against the artifact graph rules (`load_onnx`), dispatched by artifact kind or
by the graph's inputs to the specs of our attention graphs (specs.prove_model_proto) or of ssm
graphs (ssm.prove_ssm_*), and the report (JSON and text). Not real-time code.
"""

from __future__ import annotations

from typing import Any, Sequence

from tickformer.artifact import format as fmt
from tickformer.artifact import graph_rules, open_artifact, verified_graph_bytes
from tickformer.errors import ArtifactError, ConfigError, FileRefused
from tickformer.safe_files import read_path

from .claims import FAILED, IF_FINITE, PROVEN, Claim, GraphProof
from .specs import prove_model_proto
from .ssm import prove_ssm_model, prove_ssm_step
from .values import Unsupported


def load_onnx(data: bytes, where: str, *, allowed: frozenset[str] = frozenset(), max_trip: int = 1) -> Any:
    """Parse verified bytes and apply the artifact graph rules (no external data, standard operators
    only, no control flow but `allowed` with a static trip count): raises ArtifactError."""
    import onnx

    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:
        raise ArtifactError(
            f"{where}: not a valid ONNX model ({type(exc).__name__}); pass an exported graph"
        ) from None
    graph_rules.check_graph(model, allowed=allowed, max_trip=max_trip, where=where, what="a graph to prove")
    return model


def _ssm_kind(model: Any) -> str | None:
    """'step' for an ssm step graph (a `state` input), 'model' for an ssm full graph (a Scan), else None."""
    if fmt.SSM_STATE in {vi.name for vi in model.graph.input}:
        return "step"
    if any(n.op_type == "Scan" for n in model.graph.node):
        return "model"
    return None


def _window_of(model: Any) -> tuple[int, int] | None:
    """(W, layers) of one of our windowed full-pass graphs, read from its relative-position bias
    initializers (one [H, W] table per self-attention layer, names.py), or None."""
    from onnx import numpy_helper

    tables = [t for t in model.graph.initializer if t.name.endswith(".rel_bias")]
    if not tables:
        return None
    widths = {numpy_helper.to_array(t).shape[-1] for t in tables}
    if len(widths) != 1:
        raise Unsupported(f"relative-position tables of different widths {sorted(widths)}")
    return int(widths.pop()), len(tables)


def prove_artifact(path: str, *, trust: Any = None) -> list[GraphProof]:
    """Prove every graph of an artifact we can analyse (decoder, windowed: model and step;
    encoder-decoder: step; ssm: model and step), read through the verifying reader."""
    art = open_artifact(path, trust=trust)
    kind = fmt.artifact_kind(art.config)
    proofs = []
    for graph in ("model", "step"):
        if graph not in art.manifest["graphs"]:
            continue
        where = str(art.root / fmt.GRAPH_FILES[graph])
        allowed = fmt.allowed_control_flow(kind, graph)
        model = load_onnx(
            verified_graph_bytes(art, graph),
            where,
            allowed=allowed,
            max_trip=art.max_len,
        )
        cfg = art.config
        if kind == "ssm":
            proofs.append(prove_ssm_model(model, where) if graph == "model" else prove_ssm_step(model, where))
        else:
            proofs.append(
                prove_model_proto(
                    model,
                    where,
                    max_len=art.max_len,
                    window=cfg.window,
                    layers=cfg.n_layers,
                )
            )
    return proofs


def prove_file(path: str, *, max_len: int | None = None) -> list[GraphProof]:
    """Prove a bare .onnx file (one of our exported graphs), read once through tickformer.safe_files.
    Recognised by its inputs: an ssm step (state), an ssm full graph (one Scan), a step (pos), or a
    full pass (needs max_len; windowed ones by their relative-position tables)."""
    import onnx

    try:
        data = read_path(path)
    except FileRefused as exc:
        raise ArtifactError(f"{exc}; pass an artifact directory or an exported .onnx graph") from None
    try:
        kind = _ssm_kind(onnx.load_model_from_string(data))
    except Exception:
        kind = None  # load_onnx below names the problem
    if kind is not None:
        if max_len is not None:
            raise ConfigError(f"{path} is an ssm graph: it has no max_len (drop --max-len)")
        allowed = frozenset({"Scan"}) if kind == "model" else frozenset()
        model = load_onnx(data, str(path), allowed=allowed)
        return [prove_ssm_model(model, str(path)) if kind == "model" else prove_ssm_step(model, str(path))]
    model = load_onnx(data, str(path))
    if "pos" not in {vi.name for vi in model.graph.input} and max_len is None:
        raise ConfigError(
            f"{path} is a full-pass graph (no 'pos' input) with a symbolic length: pass --max-len N "
            "(its artifact's max_len) to prove it for every T <= N"
        )
    if "pos" in {vi.name for vi in model.graph.input}:
        return [prove_model_proto(model, str(path), max_len=max_len)]
    try:
        windowed = _window_of(model)
    except Unsupported as exc:
        return [
            GraphProof(
                "?",
                str(path),
                "?",
                0,
                len(model.graph.node),
                0.0,
                [Claim("analysis", FAILED, str(exc))],
            )
        ]
    window, layers = windowed if windowed is not None else (None, 1)
    return [prove_model_proto(model, str(path), max_len=max_len, window=window, layers=layers)]


def report(proofs: Sequence[GraphProof], wall_s: float) -> dict[str, Any]:
    """The JSON report of `tickformer prove ART | FILE.onnx`: every graph's claims and the worst
    status over them (FAILED > proven if finite > proven)."""
    statuses = [p.status for p in proofs]
    status = FAILED if FAILED in statuses else IF_FINITE if IF_FINITE in statuses else PROVEN
    return {
        "tool": "tickformer.verify.proofs.graphs",
        "method": "exhaustive over the position domain: concrete position subgraph (onnx.reference), "
        "abstract per-element dependency sets over the float part",
        "wall_s": round(wall_s, 3),
        "status": status,
        "ok": status != FAILED,
        "graphs": [p.to_json() for p in proofs],
    }


def report_text(data: dict[str, Any]) -> str:
    """The report as plain text, one block per graph, one line per claim."""
    lines = []
    for g in data["graphs"]:
        lines.append(
            f"{g['graph']} ({g['file']}): {g['status']} -- {g['domain']}: {g['states']} state(s), "
            f"{g['nodes']} nodes, {g['seconds']:.2f} s"
        )
        for c in g["claims"]:
            lines.append(f"  {c['status']:<17} {c['name']}: {c['detail']}")
    lines.append(
        f"{data['status'].upper() if data['status'] == FAILED else data['status']}: "
        f"{len(data['graphs'])} graph(s), {data['wall_s']:.2f} s wall"
    )
    return "\n".join(lines)
