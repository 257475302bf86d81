"""Reading an exported artifact directory: manifest, hashes, config (format: artifact/format.py).

`open_artifact(path)` checks, in this order, before any graph or weight is parsed:
1. manifest.json: valid JSON (no RecursionError on hostile nesting), format, version (an `int`
   equal to VERSION: True and 1.0 are refused);
2. its self-hash (`tickformer.sealed`): a flipped digit in a safety value (output_bound,
   input_domain, tolerance) is reported as "manifest.json was modified". The hash detects
   corruption and accidental edits, not a forger (nothing is signed): whoever can rewrite the
   manifest can recompute it, which is why every value is also schema-checked (step 3) and the
   graphs and weights are checked against the config when loaded;
3. the schema of every value the runtime uses (`check_schema`);
4. the set of files: every listed file present, a regular file (no symlinks), with its size and
   SHA-256; files present but not listed are reported by name (renamed?), except the unhashed
   caches of TensorRT builds (`format.UNHASHED_CACHES`) and hidden `.tmp` leftovers of an
   interrupted atomic write (`tickformer.durable`), which nothing reads;
5. the config, the graphs' recorded I/O against the config and batch (`format.expected_io`),
   and the weights against the config (`model.checkpoint.check_params`).
A failure raises `ArtifactError` naming the file or field and the fix. `verified_graph_bytes`
re-reads a graph once, re-checks its hash and refuses external data, for backends that must
not re-open a file by path after it was checked (time of check = time of use).

Nothing here is real-time safe (file I/O): load once, before the control loop.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tickformer import sealed
from tickformer.contracts.input_domain import check_domain
from tickformer.errors import ArtifactError, CheckpointError, ConfigError
from tickformer.model.checkpoint import check_params
from tickformer.model.config import Config

from .format import (
    FORMAT,
    GRAPH_FILES,
    MANIFEST,
    REQUIRED_GRAPHS,
    UNHASHED_CACHES,
    VERSION,
    WEIGHTS,
    expected_io,
)

MANIFEST_HASH = sealed.MANIFEST_HASH


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Artifact:
    """A verified artifact: its directory, manifest and model config (as exported)."""

    root: Path
    manifest: dict[str, Any] = field(repr=False)
    config: Config

    @property
    def batch(self) -> int:
        return int(self.manifest["batch"])

    @property
    def max_len(self) -> int:
        return int(self.manifest["max_len"])

    @property
    def input_domain(self) -> tuple[float, float]:
        lo, hi = self.manifest["input_domain"]
        return float(lo), float(hi)

    @property
    def output_bound(self) -> float | None:
        bound = self.manifest.get("output_bound")
        return None if bound is None else float(bound)

    @property
    def tolerance(self) -> dict[str, Any]:
        return dict(self.manifest["tolerance"])

    def graph_spec(self, name: str) -> dict[str, Any]:
        try:
            return dict(self.manifest["graphs"][name])
        except KeyError:
            raise ArtifactError(
                f"{self.root}: has no {name!r} graph (graphs: {sorted(self.manifest['graphs'])})"
            ) from None

    def graph_path(self, name: str) -> Path:
        return self.root / self.graph_spec(name)["file"]

    def params(self) -> dict[str, np.ndarray]:
        """The float32 parameter dict from weights.npz, re-verified against its hash (no pickle)
        and checked against the config (names, shapes, float32, finite). Raises ArtifactError."""
        path = self.root / WEIGHTS
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ArtifactError(
                f"{path}: cannot read weights ({exc.strerror}); re-export the artifact"
            ) from None
        if hashlib.sha256(data).hexdigest() != self.manifest["files"][WEIGHTS]["sha256"]:
            raise ArtifactError(f"{path} changed after the artifact was opened; load it again")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                params = {name: archive[name] for name in archive.files}
        except Exception as exc:  # an untrusted archive: BadZipFile, EOFError, ValueError, zlib.error...
            raise ArtifactError(
                f"{path}: cannot read weights ({type(exc).__name__}: {exc}); re-export the artifact"
            ) from None
        try:
            check_params(self.config, params, where=str(path))
        except CheckpointError as exc:
            raise ArtifactError(f"{exc} (config in {MANIFEST}); re-export the artifact") from None
        return params


def _fail(root: Path, what: str) -> ArtifactError:
    return ArtifactError(f"{root}: {what}")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _parse_manifest(root: Path) -> Any:
    path = root / MANIFEST
    if path.is_symlink() or not path.is_file():
        raise _fail(
            root,
            f"no {MANIFEST}; not a tickformer artifact (or an interrupted export): run `tickformer "
            f"export CKPT --out {root}`",
        )
    try:
        return sealed.loads(path.read_bytes())
    except ValueError as exc:  # JSONDecodeError is a ValueError; sealed.loads maps deep nesting to one
        raise _fail(
            root, f"{MANIFEST} is not valid JSON ({str(exc)[:120]}); re-export the artifact"
        ) from None
    except OSError as exc:
        raise _fail(
            root, f"cannot read {MANIFEST} ({exc.strerror}); check its permissions or re-export"
        ) from None


def check_self_hash(root: Path, manifest: dict[str, Any]) -> None:
    """The manifest's MANIFEST_HASH must equal sealed.digest(manifest)."""
    recorded = manifest.get(MANIFEST_HASH)
    if not isinstance(recorded, str):
        raise _fail(
            root,
            f"{MANIFEST} has no {MANIFEST_HASH} (an older or hand-edited manifest); re-export the artifact",
        )
    digest = sealed.digest(manifest)
    if digest != recorded:
        raise _fail(
            root,
            f"{MANIFEST} was modified after export: its content hashes to {digest[:16]}..., "
            f"{MANIFEST_HASH} says {recorded[:16]}...; restore it or re-export the artifact",
        )


def _check_io_spec(root: Path, graph: str, key: str, spec: Any) -> None:
    ok = isinstance(spec, list) and all(
        isinstance(v, dict)
        and isinstance(v.get("name"), str)
        and isinstance(v.get("dtype"), str)
        and isinstance(v.get("shape"), list)
        and all(_is_int(d) or isinstance(d, str) for d in v["shape"])
        for v in spec
    )
    if not ok:
        raise _fail(
            root,
            f"{MANIFEST}: graphs.{graph}.{key} must be a list of {{name, dtype, shape}}; re-export the artifact",
        )


def check_schema(root: Path, manifest: dict[str, Any]) -> None:
    """Types and ranges of every manifest value the runtime reads. Raises ArtifactError naming
    the field. (The config is checked by Config.from_dict, the graphs against it in open_artifact.)"""
    for key in ("config", "graphs", "files", "batch", "max_len", "input_domain", "tolerance"):
        if key not in manifest:
            raise _fail(root, f"{MANIFEST} lacks {key!r}; the manifest is incomplete, re-export the artifact")
    files = manifest["files"]
    if not isinstance(files, dict) or not all(
        isinstance(v, dict)
        and isinstance(v.get("sha256"), str)
        and _is_int(v.get("bytes"))
        and v["bytes"] >= 0
        for v in files.values()
    ):
        raise _fail(
            root, f"{MANIFEST}: 'files' must map file names to {{sha256, bytes}}; re-export the artifact"
        )
    if not isinstance(manifest["config"], dict):
        raise _fail(
            root, f"{MANIFEST}: 'config' must be an object (the model Config); re-export the artifact"
        )
    graphs = manifest["graphs"]
    if not isinstance(graphs, dict):
        raise _fail(
            root,
            f"{MANIFEST}: 'graphs' must map graph names to {{file, inputs, outputs}}, got "
            f"{type(graphs).__name__}; re-export the artifact",
        )
    for name, spec in graphs.items():
        if name not in GRAPH_FILES:
            raise _fail(
                root,
                f"{MANIFEST}: unknown graph {name!r} (known: {sorted(GRAPH_FILES)}); re-export the artifact",
            )
        if not isinstance(spec, dict) or not isinstance(spec.get("file"), str):
            raise _fail(
                root, f"{MANIFEST}: graphs.{name} must be {{file, inputs, outputs}}; re-export the artifact"
            )
        for key in ("inputs", "outputs"):
            _check_io_spec(root, name, key, spec.get(key))
    for key in ("batch", "max_len"):
        value = manifest[key]
        if not _is_int(value) or value < 1:
            raise _fail(
                root, f"{MANIFEST}: {key} {value!r} must be a positive integer; re-export the artifact"
            )
    domain = manifest["input_domain"]
    if not isinstance(domain, list) or len(domain) != 2 or not all(_is_number(v) for v in domain):
        raise _fail(
            root, f"{MANIFEST}: input_domain {domain!r} must be [lo, hi], two numbers; re-export the artifact"
        )
    try:
        check_domain(*domain)
    except ConfigError:
        raise _fail(
            root,
            f"{MANIFEST}: input_domain {domain} must be two finite numbers with lo <= hi (the run-time "
            f"input check and the score bounds use it); re-export the artifact",
        ) from None
    tolerance = manifest["tolerance"]
    if not isinstance(tolerance, dict) or not all(
        _is_number(tolerance.get(k)) and math.isfinite(tolerance[k]) and tolerance[k] >= 0
        for k in ("atol", "rtol")
    ):
        raise _fail(
            root,
            f"{MANIFEST}: tolerance {str(tolerance)[:80]} must hold finite atol >= 0 and rtol >= 0; "
            "re-export the artifact",
        )
    bound = manifest.get("output_bound")
    if bound is not None and not (_is_number(bound) and math.isfinite(bound) and bound > 0):
        raise _fail(
            root,
            f"{MANIFEST}: output_bound {bound!r} must be null or a finite positive number; re-export the artifact",
        )


def read_manifest(root: Path) -> dict[str, Any]:
    """Parse manifest.json and check format, version, self-hash and schema (no file hashing)."""
    manifest = _parse_manifest(root)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _fail(root, f"{MANIFEST} format is not {FORMAT!r}; this is not a tickformer artifact")
    version = manifest.get("version")
    if not _is_int(version) or version != VERSION:
        shown = version if _is_int(version) else f"{version!r} ({type(version).__name__})"
        raise _fail(
            root,
            f"artifact format version {shown} is not supported (this tickformer reads {VERSION}); re-export it",
        )
    check_self_hash(root, manifest)
    check_schema(root, manifest)
    return manifest


def _unlisted_ok(name: str) -> bool:
    """Files nothing reads: TensorRT's caches and leftovers of an interrupted atomic write."""
    return name in UNHASHED_CACHES or (name.startswith(".") and name.endswith(".tmp"))


def verify_files(root: Path, files: dict[str, dict[str, Any]]) -> None:
    """Size and SHA-256 of every listed file (regular files only, no symlinks), then the files
    present but not listed; raises ArtifactError naming the first bad one."""
    missing = []
    for name in sorted(files):
        path = root / name
        if (
            Path(name).name != name
            or name in (".", "..", MANIFEST)
            or not (path.is_symlink() or path.is_file())
        ):
            missing.append(name)
    unlisted = sorted(
        p.name
        for p in root.iterdir()
        if p.name not in files and p.name != MANIFEST and not _unlisted_ok(p.name)
    )
    if missing or unlisted:
        parts = [f"file {name!r} listed in {MANIFEST} is missing" for name in missing[:1]]
        if len(missing) > 1:
            parts = [f"missing files {missing} listed in {MANIFEST}"]
        if unlisted:
            parts.append(
                f"unlisted files {unlisted}" + (" (renamed?)" if missing else " (not written by export)")
            )
        raise _fail(root, "; ".join(parts) + "; the artifact is incomplete or altered, re-export it")
    for name, entry in sorted(files.items()):
        path = root / name
        if path.is_symlink() or not path.is_file():
            raise _fail(
                root,
                f"{name} is a symbolic link or not a regular file; an artifact holds only regular files, re-export it",
            )
        size = path.stat().st_size
        if size != entry["bytes"]:
            raise _fail(
                root,
                f"{name} has {size} bytes, {MANIFEST} says {entry['bytes']}; the file is truncated or "
                "modified, re-export",
            )
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            raise _fail(
                root,
                f"{name} SHA-256 {digest[:16]}... does not match {MANIFEST} "
                f"({entry['sha256'][:16]}...); the file was modified, re-export",
            )


def _check_graph_io(root: Path, manifest: dict[str, Any], config: Config) -> None:
    """The graphs' recorded inputs/outputs must be what export writes for this config and batch."""
    batch = manifest["batch"]
    for graph, want in expected_io(config, batch).items():
        spec = manifest["graphs"].get(graph)
        if not isinstance(spec, dict) or spec.get("file") not in manifest["files"]:
            raise _fail(
                root,
                f"{MANIFEST} lists no hashed {graph!r} graph; a {config.arch} artifact needs "
                f"{REQUIRED_GRAPHS[config.arch]}",
            )
        for key in ("inputs", "outputs"):
            have = {v["name"]: (v["dtype"], v["shape"]) for v in spec[key]}
            expected = {name: (dtype, list(shape)) for name, (dtype, shape) in want[key].items()}
            if have != expected:
                bad = sorted(n for n in set(have) | set(expected) if have.get(n) != expected.get(n))
                raise _fail(
                    root,
                    f"{MANIFEST}: graphs.{graph}.{key} {bad}: name, dtype or shape disagrees with the config "
                    f"and batch {batch} (expected "
                    f"{[(n, *expected[n]) for n in bad if n in expected][:2]}); re-export the artifact",
                )


def open_artifact(path: str | os.PathLike[str]) -> Artifact:
    """Verify and open an artifact directory (module docstring: the order of the checks).
    Raises ArtifactError saying what is wrong. Not real-time safe (file I/O, hashing)."""
    root = Path(path)
    if not root.is_dir():
        raise ArtifactError(
            f"artifact {root} is not a directory; pass the directory `tickformer export --out` wrote"
        )
    manifest = read_manifest(root)
    verify_files(root, manifest["files"])
    try:
        config = Config.from_dict(manifest["config"])
    except (ConfigError, TypeError, ValueError) as exc:
        raise _fail(root, f"invalid config in {MANIFEST}: {exc}") from None
    if config.max_len != manifest["max_len"]:
        raise _fail(
            root, f"config max_len {config.max_len} != manifest max_len {manifest['max_len']}; re-export"
        )
    if WEIGHTS not in manifest["files"]:
        raise _fail(root, f"{MANIFEST} lists no {WEIGHTS}; re-export the artifact")
    _check_graph_io(root, manifest, config)
    artifact = Artifact(root=root, manifest=manifest, config=config)
    artifact.params()  # weights vs config: names, shapes, float32, finite (ArtifactError)
    return artifact


def _external_tensors(model: Any) -> list[str]:
    """Names of every tensor of `model` (initializers, Constant/attribute tensors, sparse
    initializers, in every subgraph, walked without recursion) whose data lives outside the file."""
    from onnx import TensorProto

    found: list[str] = []
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        tensors = list(graph.initializer)
        for sparse in graph.sparse_initializer:
            tensors += [sparse.values, sparse.indices]
        for node in graph.node:
            for attr in node.attribute:
                tensors += ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)
                graphs += ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
        found += [
            t.name or "<unnamed>"
            for t in tensors
            if t.data_location == TensorProto.EXTERNAL or len(t.external_data)
        ]
    return found


def verified_graph_bytes(artifact: Artifact, graph: str) -> bytes:
    """The bytes of one graph, read once, hash-checked against the manifest, parsed by onnx to
    refuse external data (every byte a backend runs must be hashed). Pass these bytes -- not the
    path -- to the engine. Raises ArtifactError. Not real-time."""
    spec = artifact.graph_spec(graph)
    name = spec["file"]
    path = artifact.root / name
    entry = artifact.manifest["files"].get(name)
    if entry is None:
        raise ArtifactError(
            f"{artifact.root}: graph file {name} is not listed in {MANIFEST}; re-export the artifact"
        )
    try:
        if path.is_symlink():
            raise ArtifactError(
                f"{path} is a symbolic link; an artifact holds only regular files, re-export it"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read it ({exc.strerror}); re-export the artifact") from None
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ArtifactError(
            f"{path}: {name} changed after the artifact was opened (SHA-256 does not match {MANIFEST}); "
            "load it again or re-export"
        )
    import onnx

    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf DecodeError, RecursionError, ...: an unparsable graph
        raise ArtifactError(
            f"{path}: not a valid ONNX model ({type(exc).__name__}: {str(exc)[:100]}); re-export the artifact"
        ) from None
    external = _external_tensors(model)
    if external:
        raise ArtifactError(
            f"{path}: tensors {external[:3]} keep their data in external files, which the manifest does not "
            f"hash; refusing to load them. Re-export the artifact (export embeds every weight)"
        )
    return data
