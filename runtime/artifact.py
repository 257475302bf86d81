"""Reading an exported artifact directory: manifest, hashes, config (format: docs/artifact_format.md).

`open_artifact(path)` checks the manifest's format and version and the SHA-256 and size of every
file it lists *before* any graph or weight is parsed; a missing, truncated, modified or renamed
file raises `ArtifactError` naming it. Files not listed in the manifest are never read.
The writer is `tickformer.export.artifact`; both share the constants below.

Nothing here is real-time safe (file I/O): load once, before the control loop.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.errors import ArtifactError, ConfigError
from tickformer.model.config import Config

FORMAT = "tickformer-artifact"
VERSION = 1
MANIFEST = "manifest.json"
WEIGHTS = "weights.npz"
GRAPH_FILES = {"model": "model.onnx", "step": "step.onnx", "encoder": "encoder.onnx"}
REQUIRED_GRAPHS = {"decoder": ("model", "step"), "encoder-decoder": ("encoder", "step")}


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
            raise ArtifactError(f"{self.root}: has no {name!r} graph (graphs: {sorted(self.manifest['graphs'])})") from None

    def graph_path(self, name: str) -> Path:
        return self.root / self.graph_spec(name)["file"]

    def params(self) -> dict[str, np.ndarray]:
        """The float32 parameter dict from weights.npz, re-verified against its hash (no pickle)."""
        data = (self.root / WEIGHTS).read_bytes()
        if hashlib.sha256(data).hexdigest() != self.manifest["files"][WEIGHTS]["sha256"]:
            raise ArtifactError(f"{self.root / WEIGHTS} changed after the artifact was opened; load it again")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                return {name: archive[name] for name in archive.files}
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            raise ArtifactError(f"{self.root / WEIGHTS}: cannot read weights ({exc})") from None


def _fail(root: Path, what: str) -> ArtifactError:
    return ArtifactError(f"{root}: {what}")


def read_manifest(root: Path) -> dict[str, Any]:
    """Parse and structurally check manifest.json (no hashing)."""
    path = root / MANIFEST
    if not path.is_file():
        raise _fail(root, f"no {MANIFEST}; not a tickformer artifact (or an interrupted export): run `tickformer export CKPT --out {root}`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(root, f"{MANIFEST} is not valid JSON ({exc}); re-export the artifact") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _fail(root, f"{MANIFEST} format is not {FORMAT!r}; this is not a tickformer artifact")
    if manifest.get("version") != VERSION:
        raise _fail(root, f"artifact format version {manifest.get('version')!r} is not supported (this tickformer reads {VERSION}); re-export it")
    for key in ("config", "graphs", "files", "batch", "max_len", "input_domain", "tolerance"):
        if key not in manifest:
            raise _fail(root, f"{MANIFEST} lacks {key!r}; the manifest is incomplete, re-export the artifact")
    files = manifest["files"]
    if not isinstance(files, dict) or not all(isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("bytes"), int) for v in files.values()):
        raise _fail(root, f"{MANIFEST}: 'files' must map file names to {{sha256, bytes}}")
    return manifest


def verify_files(root: Path, files: dict[str, dict[str, Any]]) -> None:
    """Size and SHA-256 of every listed file; raises ArtifactError naming the first bad one."""
    for name, entry in sorted(files.items()):
        path = root / name
        if Path(name).name != name or not path.is_file():
            raise _fail(root, f"file {name!r} listed in {MANIFEST} is missing; the artifact is incomplete, re-export it")
        size = path.stat().st_size
        if size != entry["bytes"]:
            raise _fail(root, f"{name} has {size} bytes, {MANIFEST} says {entry['bytes']}; the file is truncated or modified, re-export")
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            raise _fail(root, f"{name} SHA-256 {digest[:16]}... does not match {MANIFEST} ({entry['sha256'][:16]}...); the file was modified, re-export")


def open_artifact(path: str | os.PathLike[str]) -> Artifact:
    """Verify and open an artifact directory. Raises ArtifactError saying what is wrong.

    Not real-time safe (file I/O, hashing)."""
    root = Path(path)
    if not root.is_dir():
        raise ArtifactError(f"artifact {root} is not a directory; pass the directory `tickformer export --out` wrote")
    manifest = read_manifest(root)
    verify_files(root, manifest["files"])
    try:
        config = Config.from_dict(manifest["config"])
    except (ConfigError, TypeError) as exc:
        raise _fail(root, f"invalid config in {MANIFEST}: {exc}") from None
    if config.max_len != manifest["max_len"]:
        raise _fail(root, f"config max_len {config.max_len} != manifest max_len {manifest['max_len']}; re-export")
    for graph in REQUIRED_GRAPHS[config.arch]:
        spec = manifest["graphs"].get(graph)
        if not isinstance(spec, dict) or spec.get("file") not in manifest["files"]:
            raise _fail(root, f"{MANIFEST} lists no hashed {graph!r} graph; a {config.arch} artifact needs {REQUIRED_GRAPHS[config.arch]}")
    if WEIGHTS not in manifest["files"]:
        raise _fail(root, f"{MANIFEST} lists no {WEIGHTS}; re-export the artifact")
    return Artifact(root=root, manifest=manifest, config=config)
