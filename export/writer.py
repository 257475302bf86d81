"""Writing an artifact directory atomically (format: `tickformer.artifact.format`).

export_artifact(config, params, out): build the graphs (export/graphs.py), check each with
onnx.checker (full_check) and strict shape inference, run the three-way equivalence
(export/equivalence.py), check that the graphs carry the weights.npz written beside them
(`check_consistent`, export/consistency.py: what a loader then need not rebuild), then write
weights.npz, the .onnx files and manifest.json (sealed, last) with
`tickformer.durable.replace_dir`: a hidden temporary sibling directory, fsync, os.replace onto
`out`. Any failure (or an interruption) before the rename leaves `out`
untouched and at most a hidden temp directory without a manifest, which
`tickformer.artifact.open_artifact` refuses.

Not real-time code.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import onnx
import onnxruntime

import tickformer
from tickformer import sealed, validation
from tickformer.artifact import ranges
from tickformer.artifact.format import FORMAT, GRAPH_FILES, MANIFEST, SIGNATURE, WEIGHTS, artifact_version
from tickformer.contracts.input_domain import Columns, check_columns, check_domain
from tickformer.durable import replace_dir
from tickformer.durable import write_synced as _write  # a module name: tests inject faults here
from tickformer.errors import ArtifactError, CheckpointError, ConfigError, ExportError
from tickformer.model.config import Config
from tickformer.model.transformer import parameter_shapes

from . import equivalence
from .bounds import fp32_tolerance, output_bound
from .builder import check_opset, io_spec
from .graphs import build_graphs

if TYPE_CHECKING:
    from tickformer.model.checkpoint import Checkpoint

DEFAULT_DOMAIN = (-10.0, 10.0)


def check_finite_params(params: Mapping[str, Any]) -> None:
    """Every weight finite, before any graph is built: a NaN weight otherwise surfaces as an
    equivalence failure blamed on the input domain, or as a linear-algebra error."""
    for name in sorted(params):
        value = np.asarray(params[name])
        if value.dtype.kind not in "fiu":
            raise ExportError(f"weight {name!r} has dtype {value.dtype}, not a number; pass float32 weights")
        bad = np.size(value) - int(np.count_nonzero(np.isfinite(value)))
        if bad:
            first = np.unravel_index(int(np.argmin(np.isfinite(value))), np.shape(value))
            raise ExportError(
                f"weight {name!r} holds {bad} NaN or infinite value(s), the first at index "
                f"{tuple(int(i) for i in first)}; an artifact's weights are finite: retrain or fix the weights"
            )


def export_config(config: Config, max_len: int | None, batch: int) -> Config:
    """The config as exported (max_len <= the checkpoint's), with a batch inside the manifest's
    range and caches inside the memory budget a session may allocate (artifact/ranges.py),
    refused before anything is built."""
    _, most, _ = ranges.range_of("batch")
    validation.integer(
        batch,
        "--batch",
        min_value=1,
        max_value=int(most),
        hint="rows per step an artifact may declare (artifact/ranges.py)",
        error=ExportError,
    )
    exported = config if max_len is None else _with_max_len(config, max_len)
    too_big = ranges.size_problems(
        {"config": exported.to_dict(), "batch": batch, "max_len": exported.max_len}
    )
    if too_big:
        raise ExportError(f"{too_big[0]}; lower --batch or --max-len")
    return exported


def _with_max_len(config: Config, max_len: int) -> Config:
    """The config with max_len lowered (at most the checkpoint's; a window must fit)."""
    hint = (
        "the checkpoint's max_len: the model was not trained on longer sequences; retrain with a larger "
        "max_len to export longer"
    )
    validation.integer(
        max_len, "--max-len", min_value=1, max_value=config.max_len, hint=hint, error=ExportError
    )
    if config.window is not None and max_len < config.window:
        raise ExportError(
            f"--max-len {max_len} is below the model's window {config.window}: a windowed artifact's max_len "
            f"must hold a full window; raise --max-len to {config.window}..{config.max_len} (or omit it)"
        )
    return config.replace(max_len=max_len)


def input_domain(config: Config, domain: Any) -> tuple[float, float]:
    """The declared domain [lo, hi] of the inputs: `domain`, else DEFAULT_DOMAIN; with one pair
    per input column (`per_column_domain`), their envelope. Token models: the vocabulary."""
    if config.inputs == "tokens":
        if domain is not None:
            raise ExportError(
                f"--domain {domain} is for continuous inputs; a token model's domain is its vocabulary "
                f"[0, {config.vocab_size - 1}]"
            )
        return (0.0, float(config.vocab_size - 1))
    columns = per_column_domain(config, domain)
    if columns is not None:
        return (min(columns[0]), max(columns[1]))
    try:
        return check_domain(*(DEFAULT_DOMAIN if domain is None else domain))
    except TypeError:
        raise ExportError(
            f"--domain {domain!r:.80} must be (lo, hi) or one (lo, hi) per input column"
        ) from None


def per_column_domain(config: Config, domain: Any) -> Columns | None:
    """One [lo, hi] per input column when `domain` is a list of pairs (a model trained on logged
    signals: model/forecast.py), validated (`contracts.input_domain.check_columns`, against their
    own envelope); None for a single (lo, hi)."""
    if domain is None or not isinstance(domain[0], (list, tuple)):
        return None
    try:
        lows = [float(p[0]) for p in domain]
        highs = [float(p[1]) for p in domain]
        return check_columns(domain, (min(lows), max(highs)), config.d_in)
    except (ConfigError, TypeError, ValueError, IndexError) as exc:
        raise ExportError(f"--domain: {exc}") from None


def _versions() -> dict[str, str]:
    return {
        "tickformer": tickformer.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def _weights_bytes(params: Mapping[str, np.ndarray], config: Config) -> bytes:
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {
        name: np.asarray(params[name], dtype=np.float32) for name in parameter_shapes(config)
    }
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def write_artifact(
    out: Path, files: Mapping[str, bytes], manifest: dict[str, Any], *, sign: Any = None
) -> Path:
    """Write files, then manifest.json (sealed: `tickformer.sealed`), as the directory `out`,
    all or nothing (`tickformer.durable.replace_dir`). A manifest edited or corrupted later is
    refused at load. sign: an Ed25519 private key (`tickformer.signing.load_private_key`): also
    write manifest.sig, its signature of the sealed manifest. An existing `out` is replaced only
    if it is an artifact (has manifest.json) or empty."""
    try:
        replaceable = not out.exists() or (
            out.is_dir() and ((out / MANIFEST).is_file() or not any(out.iterdir()))
        )
    except OSError as exc:
        raise ExportError(f"--out {str(out)[:200]}: {exc.strerror or exc}; choose another --out") from None
    if not replaceable:
        raise ExportError(
            f"{out} exists and is not an artifact directory; refusing to overwrite it, choose another --out"
        )
    sealed_manifest = sealed.seal(manifest)
    text = json.dumps(sealed_manifest, indent=2, sort_keys=True, allow_nan=False) + "\n"
    all_files = {**files, MANIFEST: text.encode()}
    if sign is not None:
        from tickformer import signing

        all_files[SIGNATURE] = signing.signature_document(sealed.canonical(sealed_manifest), sign)
    return replace_dir(out, all_files, last=MANIFEST, writer=lambda path, data: _write(path, data))


def check_consistent(
    files: Mapping[str, bytes],
    graphs: list[str],
    cfg: Config,
    batch: int,
    opset: int,
    precision: str,
    out: Path,
) -> None:
    """The graphs about to be written carry the weights.npz about to be written: rebuilt from those
    bytes and compared tensor by tensor (export/consistency.py) before the manifest seals them,
    so a loader need only verify hashes and the signature. ExportError (one line) otherwise."""
    from tickformer.model.checkpoint import parse_weights

    from . import consistency

    try:
        weights = parse_weights(files[WEIGHTS], cfg, where=str(out / WEIGHTS))
        rebuilt = consistency.rebuild(weights, cfg, batch, opset, precision, str(out))
        stored = {name: files[GRAPH_FILES[name]] for name in graphs}
        consistency.check_graphs(stored, rebuilt, cfg.arch, {n: str(out / GRAPH_FILES[n]) for n in graphs})
    except (ArtifactError, CheckpointError) as exc:
        raise ExportError(
            f"export did not seal {out}: {exc} (the graphs were built from other values than the weights.npz "
            "written beside them: export float32 parameters, or report this)"
        ) from None


def _score_bounds(
    params: Mapping[str, np.ndarray], cfg: Config, lo_hi: tuple[float, float]
) -> dict[str, Any]:
    """Sound per-layer bounds on |q.k|/sqrt(dh) from the weights (contracts/score_bound.py,
    computed by export/score_bounds.py);
    they say whether fp16 scores would be safe. Our fp16 policy keeps scores in fp32 anyway."""
    from tickformer.export.score_bounds import score_bound_report

    domain = lo_hi if cfg.inputs == "continuous" else None
    layers = [b.to_dict() for b in score_bound_report(cfg, dict(params), domain)]
    return {"layers": layers, "fp16_scores_safe": all(layer["fp16_safe"] for layer in layers)}


def _ssm_parts(
    params: Mapping[str, np.ndarray],
    cfg: Config,
    batch: int,
    opset: int,
    lo_hi: tuple[float, float],
    seed: int,
    lengths: list[int] | None,
    precision: str,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, onnx.ModelProto], dict[str, Any], dict[str, Any]]:
    """The ssm kind's graphs, checks and manifest fields (export/ssm_graphs.py, export/ssm_bounds.py):
    (kind fields, score bounds, graphs, tolerance, equivalence)."""
    from .ssm_bounds import state_bound
    from .ssm_graphs import build_ssm_graphs, ssm_tolerance

    if precision != "fp32":
        raise ExportError(
            f"--precision {precision} is not available for ssm artifacts (the fp16 policy covers attention graphs); "
            "export with --precision fp32"
        )
    graphs = build_ssm_graphs(params, cfg, batch, opset)
    tolerance = ssm_tolerance(cfg)
    equiv = equivalence.check(graphs, params, cfg, batch, lo_hi, tolerance, seed, lengths)
    kind_fields = {"kind": "ssm", "state_bound": state_bound(params, cfg, lo_hi)}
    score_bounds = {"layers": [], "fp16_scores_safe": None, "reason": "an ssm model has no attention scores"}
    return kind_fields, score_bounds, graphs, tolerance, equiv


def export_params(
    config: Config,
    params: Mapping[str, np.ndarray],
    out: str | os.PathLike[str],
    *,
    max_len: int | None = None,
    batch: int = 1,
    opset: int = 17,
    domain: Any = None,
    seed: int = 0,
    lengths: list[int] | None = None,
    source: Mapping[str, Any] | None = None,
    precision: str = "fp32",
    sign: str | os.PathLike[str] | None = None,
    release: int | None = None,
) -> dict[str, Any]:
    """Build, check, compare and write the artifact from a config and parameters; return its
    manifest. lengths: export-time equivalence lengths (default {1, 2, N/2, N}; the step
    sequence runs max(lengths) positions). precision "fp16" writes the mixed-precision graphs of
    export/fp16.py (fp32 kept for scores, softmax, LayerNorm statistics and the residual stream)
    after the fp32 graphs passed the three-way check, and records the measured fp16 error.
    domain: (lo, hi) of every input, or one (lo, hi) per input column (recorded as
    input_domain_columns; input_domain is then their envelope, from which the bounds are derived).
    The signals of a model trained on logged data (source's checkpoint_meta "signals": columns,
    units, order) are recorded as the manifest's "signals".
    sign: a private key file (`tickformer keygen`): the artifact is written signed (manifest.sig).
    release: the artifact's release number, monotonic (a device refuses a signed artifact older
    than the minimum it pins: `runtime.load(..., trust=KEY, min_release=N)`); default the UNIX time
    of the export in seconds, so a later export has a larger number. Raises ExportError."""
    private = None
    if sign is not None:
        from tickformer import signing

        private = signing.load_private_key(sign)  # before the export's work: a bad key fails fast
    if precision not in ("fp32", "fp16"):
        raise ExportError(f"precision {precision!r} is not one of ('fp32', 'fp16')")
    check_opset(opset)
    if release is None:
        release = int(_dt.datetime.now(_dt.timezone.utc).timestamp())
    elif isinstance(release, bool) or not isinstance(release, int) or not 0 <= release < 2**63:
        raise ExportError(f"--release {release!r} must be a whole number >= 0 (higher for a later release)")
    cfg = export_config(config, max_len, batch)
    check_finite_params(params)
    lo_hi = input_domain(cfg, domain)
    columns = None if cfg.inputs == "tokens" else per_column_domain(cfg, domain)
    if cfg.block == "ssm":
        kind_fields, score_bounds, graphs, tolerance, equiv = _ssm_parts(
            params, cfg, batch, opset, lo_hi, seed, lengths, precision
        )
    else:
        kind_fields = {}
        score_bounds = _score_bounds(params, cfg, lo_hi)
        graphs = build_graphs(params, cfg, batch, opset)
        tolerance = fp32_tolerance(cfg)
        equiv = equivalence.check(graphs, params, cfg, batch, lo_hi, tolerance, seed, lengths)
    fp16_record = None
    if precision == "fp16":
        from tickformer.export.fp16 import measure_error, to_fp16

        graphs32, graphs = graphs, {name: to_fp16(g) for name, g in graphs.items()}
        fp16_record = measure_error(graphs32, graphs, params, cfg, domain=lo_hi, seed=seed)
        if not fp16_record["within_bound"]:
            raise ExportError(
                f"fp16 export: measured normwise error {fp16_record['worst']:.3g} exceeds its bound "
                f"{fp16_record['bound']:.3g}; export with --precision fp32"
            )
        tolerance = {
            "atol": fp16_record["bound"] * output_bound(params, cfg),
            "rtol": 0.0,
            "reason": "fp16 policy (export/fp16.py): normwise error <= bound, and max|y| <= output_bound",
        }
    files: dict[str, bytes] = {WEIGHTS: _weights_bytes(params, cfg)}
    for name, graph in graphs.items():
        files[GRAPH_FILES[name]] = graph.SerializeToString()
    check_consistent(files, list(graphs), cfg, batch, opset, precision, Path(out))
    manifest = {
        "format": FORMAT,
        "version": artifact_version(config),
        "release": release,
        "config": cfg.to_dict(),
        "batch": batch,
        "max_len": cfg.max_len,
        "opset": opset,
        "precision": precision,
        "fp16": fp16_record,
        "input_domain": list(lo_hi),
        **({} if columns is None else {"input_domain_columns": [list(pair) for pair in zip(*columns)]}),
        **_signals(source),
        "output_bound": output_bound(params, cfg),
        "score_bounds": score_bounds,
        "graphs": {
            name: {
                "file": GRAPH_FILES[name],
                "inputs": io_spec(g.graph.input),
                "outputs": io_spec(g.graph.output),
            }
            for name, g in graphs.items()
        },
        "files": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for name, data in sorted(files.items())
        },
        "tolerance": tolerance,
        "equivalence": equiv,
        "versions": _versions(),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "source": dict(source or {}),
        **kind_fields,
    }
    manifest = sealed.seal(manifest)  # what is written (write_artifact seals again: idempotent)
    write_artifact(Path(out), files, manifest, sign=private)
    return manifest


def _signals(source: Mapping[str, Any] | None) -> dict[str, Any]:
    """{"signals": ...} of a model trained on logged data (its checkpoint's meta), else {}."""
    meta = (source or {}).get("checkpoint_meta") or {}
    return (
        {"signals": meta["signals"]}
        if isinstance(meta, dict) and isinstance(meta.get("signals"), dict)
        else {}
    )


def export_artifact(
    checkpoint: "str | os.PathLike[str] | Checkpoint",
    out: str | os.PathLike[str],
    *,
    domain: Any = None,
    **options: Any,
) -> Path:
    """Export a checkpoint (directory or loaded `Checkpoint`) to the artifact directory `out`;
    options: `export_params`'s (max_len, batch, opset, seed, lengths, precision, sign).

    The input domain (continuous inputs) is `domain`, else the checkpoint meta's per-column
    domain ("input_domain_per_column", a model trained on logged signals), else its
    "input_domain", else -10..10; token models' domain is their vocabulary.
    Returns `out`. Raises CheckpointError / ExportError. Not real-time."""
    from tickformer.model.checkpoint import Checkpoint, load_checkpoint

    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    if domain is None and ckpt.config.inputs == "continuous":
        if "input_domain_per_column" in ckpt.meta:  # a model trained on logged signals
            domain = [tuple(pair) for pair in ckpt.meta["input_domain_per_column"]]  # type: ignore[assignment]
        elif "input_domain" in ckpt.meta:
            domain = tuple(ckpt.meta["input_domain"])  # type: ignore[assignment]
    source = {"checkpoint": None if ckpt.path is None else str(ckpt.path), "checkpoint_meta": ckpt.meta}
    export_params(ckpt.config, ckpt.params, out, domain=domain, source=source, **options)
    return Path(out)
