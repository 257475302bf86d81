"""Checkpoints: a directory with config.json, weights.npz and a checkpoint.json manifest.

Layout of a checkpoint directory:

    config.json       the model Config (Config.to_dict), JSON
    weights.npz       one float32 array per parameter, named as in parameter_shapes(config);
                      np.savez, loaded with allow_pickle=False (no code runs on load)
    checkpoint.json   {"format": "tickformer-checkpoint", "version": 1,
                       "files": {name: {"sha256": hex, "bytes": n}}, "meta": {...},
                       "manifest_sha256": hex}  (its own hash: `tickformer.sealed.digest`)
    (extra files)     optional, listed and hashed in checkpoint.json like the others
                      (training writes metrics.json this way)

The manifest is sealed (`tickformer.sealed`: its own SHA-256 over canonical JSON, shared with the
artifact format), so a corrupted or hand-edited value no file hash covers (e.g.
meta.input_domain, which export uses) is refused. It is an integrity check, not a signature.

Writing is atomic (`tickformer.durable.replace_dir`): everything goes to a temporary sibling
directory, is fsynced, and is moved into place with os.replace, so a crash never leaves a
directory that loads. Loading verifies the
manifest, the set of files and every SHA-256 *before* parsing any weight, then checks every
parameter's name, shape, dtype and finiteness against parameter_shapes(config); each failure
raises CheckpointError naming exactly what is wrong and how to fix it.

Nothing here is real-time safe (file I/O); load once, before the control loop starts.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from tickformer import sealed
from tickformer.durable import replace_dir
from tickformer.errors import CheckpointError, ConfigError

from .config import Config
from .transformer import parameter_shapes

FORMAT = "tickformer-checkpoint"
VERSION = 1
MANIFEST = "checkpoint.json"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.npz"
PARAM_DTYPE = np.dtype(np.float32)
MANIFEST_HASH = sealed.MANIFEST_HASH


@dataclass(frozen=True)
class Checkpoint:
    """A loaded, verified checkpoint: config, float32 parameters (flat dict), free-form meta."""

    config: Config
    params: dict[str, np.ndarray] = field(repr=False)
    meta: dict[str, Any]
    path: Path | None = None


sha256_bytes = sealed.sha256_bytes


def _jsonable(value: Any) -> Any:
    """json.dumps default: numpy scalars and arrays become Python numbers and lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"meta value {value!r} of type {type(value).__name__} is not JSON-serialisable")


def _dump_json(obj: Any, what: str) -> bytes:
    try:
        text = json.dumps(obj, indent=2, sort_keys=True, default=_jsonable, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(
            f"cannot write {what}: {exc}; meta must hold JSON values (numbers, strings, lists, dicts), finite"
        ) from None
    return (text + "\n").encode("utf-8")


def check_params(config: Config, params: Mapping[str, np.ndarray], *, where: str = "params") -> None:
    """Raise CheckpointError unless params has exactly the names, shapes and dtype (float32)
    of parameter_shapes(config), with finite values."""
    expected = parameter_shapes(config)
    missing = [name for name in expected if name not in params]
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing parameters {missing}")
        if extra:
            parts.append(f"unexpected parameters {extra}")
        raise CheckpointError(
            f"{where}: {'; '.join(parts)} for this config ({config.arch}, {config.inputs}, "
            f"{config.n_enc_layers}+{config.n_layers} layers); the weights belong to a different config"
        )
    for name, shape in expected.items():
        value = params[name]
        if not isinstance(value, np.ndarray):
            raise CheckpointError(
                f"{where}: parameter {name!r} is a {type(value).__name__}, not a numpy array"
            )
        if tuple(value.shape) != tuple(shape):
            raise CheckpointError(
                f"{where}: parameter {name!r} has shape {tuple(value.shape)}, config expects {tuple(shape)}"
            )
        if value.dtype != PARAM_DTYPE:
            raise CheckpointError(
                f"{where}: parameter {name!r} has dtype {value.dtype}, checkpoints hold float32; "
                f"cast with .astype(np.float32) before saving"
            )
        if not np.all(np.isfinite(value)):
            raise CheckpointError(
                f"{where}: parameter {name!r} contains NaN or Inf; the training run diverged"
            )


def _weights_bytes(config: Config, params: Mapping[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    ordered = {name: np.ascontiguousarray(params[name]) for name in parameter_shapes(config)}
    np.savez(buffer, **ordered)  # type: ignore[arg-type]
    return buffer.getvalue()


def _is_replaceable(path: Path) -> bool:
    """An existing target may be replaced only if it is an empty directory or a checkpoint."""
    if not path.is_dir():
        return False
    entries = list(path.iterdir())
    return not entries or (path / MANIFEST).is_file()


def check_target(path: str | os.PathLike[str]) -> Path:
    """Raise CheckpointError now if save_checkpoint(path, ...) would refuse to write there
    (call before a long training run, so it does not fail at the end)."""
    target = Path(path)
    if target.exists() and not _is_replaceable(target):
        raise CheckpointError(
            f"{target} exists and is not a checkpoint directory; refusing to overwrite it; choose another --out"
        )
    return target


def save_checkpoint(
    path: str | os.PathLike[str],
    config: Config,
    params: Mapping[str, np.ndarray],
    meta: Mapping[str, Any] | None = None,
    *,
    extra_files: Mapping[str, bytes] | None = None,
) -> Path:
    """Write a checkpoint directory at `path` atomically and return its path.

    params must match parameter_shapes(config) exactly (float32, finite). meta is JSON data
    (task name, normalisation statistics, metrics...). extra_files maps plain file names to
    bytes; they are hashed and listed in the manifest like the others. An existing checkpoint
    (or empty directory) at `path` is replaced; anything else there is refused.
    """
    target = Path(path)
    check_params(config, params, where=f"save_checkpoint({target})")
    files: dict[str, bytes] = {
        CONFIG_FILE: _dump_json(config.to_dict(), CONFIG_FILE),
        WEIGHTS_FILE: _weights_bytes(config, params),
    }
    for name, data in (extra_files or {}).items():
        if name in files or name == MANIFEST or Path(name).name != name or name.startswith("."):
            raise CheckpointError(
                f"extra file name {name!r} is reserved or not a plain file name; pick another"
            )
        files[name] = bytes(data)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "files": {
            name: {"sha256": sha256_bytes(data), "bytes": len(data)} for name, data in sorted(files.items())
        },
        "meta": dict(meta or {}),
    }
    files[MANIFEST] = _dump_json(sealed.seal(json.loads(_dump_json(manifest, MANIFEST))), MANIFEST)
    check_target(target)
    return replace_dir(target, files, last=MANIFEST)


def _read_manifest(root: Path) -> dict[str, Any]:
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(
            f"{root}: no {MANIFEST}; this is not a tickformer checkpoint directory (write one with `tickformer train`)"
        )
    try:
        manifest = sealed.loads(manifest_path.read_bytes())
    except ValueError as exc:  # JSONDecodeError is a ValueError; sealed.loads maps deep nesting to one
        raise CheckpointError(
            f"{manifest_path}: not valid JSON ({str(exc)[:120]}); the checkpoint is corrupted, retrain or restore it"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise CheckpointError(f"{manifest_path}: format {got!r} is not {FORMAT!r}")
    version = manifest.get("version")
    if type(version) is not int or version != VERSION:  # True == 1 and 1.0 == 1: refused
        shown = version if type(version) is int else f"{version!r} ({type(version).__name__})"
        raise CheckpointError(
            f"{manifest_path}: checkpoint format version {shown} is not supported "
            f"(this tickformer reads version {VERSION}); re-save it with this version"
        )
    recorded = manifest.get(MANIFEST_HASH)
    if not isinstance(recorded, str):
        raise CheckpointError(
            f"{manifest_path}: has no {MANIFEST_HASH} (an older or hand-edited manifest); retrain or restore it"
        )
    digest = sealed.digest(manifest)
    if digest != recorded:
        raise CheckpointError(
            f"{manifest_path}: was modified after it was written (its content hashes to {digest[:16]}..., "
            f"{MANIFEST_HASH} says {recorded[:16]}...); retrain or restore it"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("bytes"), int)
        for v in files.values()
    ):
        raise CheckpointError(f"{manifest_path}: 'files' must map file names to {{sha256, bytes}}")
    for required in (CONFIG_FILE, WEIGHTS_FILE):
        if required not in files:
            raise CheckpointError(f"{manifest_path}: does not list {required}; the manifest is incomplete")
    if not isinstance(manifest.get("meta", {}), dict):
        raise CheckpointError(f"{manifest_path}: 'meta' must be a JSON object")
    return manifest


def _verified_files(root: Path, listed: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    """Read every listed file and check its size and SHA-256; report missing and unlisted files."""
    present = {p.name for p in root.iterdir() if p.name != MANIFEST}
    missing = sorted(set(listed) - present)
    unlisted = sorted(present - set(listed))
    if missing or unlisted:
        parts = []
        if missing:
            parts.append(f"missing files {missing} listed in {MANIFEST}")
        if unlisted:
            parts.append(f"unlisted files {unlisted}")
        hint = " (renamed?)" if missing and unlisted else ""
        raise CheckpointError(
            f"{root}: {'; '.join(parts)}{hint}; the checkpoint directory was modified, retrain or restore it"
        )
    contents: dict[str, bytes] = {}
    for name, entry in sorted(listed.items()):
        data = (root / name).read_bytes()
        if len(data) != entry["bytes"]:
            raise CheckpointError(
                f"{root / name}: {len(data)} bytes, {MANIFEST} says {entry['bytes']}; the file is truncated or modified"
            )
        digest = sha256_bytes(data)
        if digest != entry["sha256"]:
            raise CheckpointError(
                f"{root / name}: SHA-256 {digest[:16]}... does not match {MANIFEST} ({entry['sha256'][:16]}...); "
                f"the file is corrupted or was modified; retrain or restore it"
            )
        contents[name] = data
    return contents


def _parse_config(root: Path, data: bytes) -> Config:
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{root / CONFIG_FILE}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{root / CONFIG_FILE}: must hold a JSON object of config fields")
    try:
        return Config.from_dict(raw)
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{root / CONFIG_FILE}: invalid config: {exc}") from None


def _parse_weights(root: Path, data: bytes) -> dict[str, np.ndarray]:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise CheckpointError(
            f"{root / WEIGHTS_FILE}: cannot read weights ({exc}); object arrays are refused"
        ) from None


def load_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Load and verify a checkpoint directory (hashes first, then config, then every weight).

    Not real-time safe (file I/O). Raises CheckpointError saying exactly what is wrong.
    """
    root = Path(path)
    if not root.exists():
        raise CheckpointError(
            f"checkpoint {root} does not exist; train one with `tickformer train --task NAME --out {root}`"
        )
    if not root.is_dir():
        raise CheckpointError(
            f"checkpoint {root} is not a directory; pass the directory `tickformer train --out` wrote"
        )
    manifest = _read_manifest(root)
    contents = _verified_files(root, manifest["files"])
    config = _parse_config(root, contents[CONFIG_FILE])
    params = _parse_weights(root, contents[WEIGHTS_FILE])
    check_params(config, params, where=str(root / WEIGHTS_FILE))
    ordered = {name: params[name] for name in parameter_shapes(config)}
    return Checkpoint(config=config, params=ordered, meta=manifest.get("meta", {}), path=root)


def read_extra_file(checkpoint: Checkpoint, name: str) -> bytes:
    """Bytes of an extra file listed in the manifest (re-verified against its hash)."""
    if checkpoint.path is None:
        raise CheckpointError("this checkpoint was not loaded from disk; it has no files")
    manifest = _read_manifest(checkpoint.path)
    if name not in manifest["files"]:
        raise CheckpointError(f"{checkpoint.path}: no file {name!r} listed in {MANIFEST}")
    return _verified_files(checkpoint.path, manifest["files"])[name]
