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
directory that loads. Loading opens the directory and every file once, without following links
(`tickformer.safe_files`: regular files with one link, sizes checked before reading), verifies
the manifest (strict JSON: `tickformer.sealed.loads`), the set of files and every SHA-256
*before* parsing any weight, parses the same bytes it hashed, checks the npz members by name
and declared size before decompressing them, then checks every parameter's name, shape, dtype
and finiteness against parameter_shapes(config); each failure raises CheckpointError naming
exactly what is wrong and how to fix it.

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
from tickformer.errors import CheckpointError, ConfigError, FileRefused
from tickformer.safe_files import MAX_FILE_BYTES, MAX_MANIFEST_BYTES, Directory, is_plain_name

from .config import Config, parameter_count
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
    files: Mapping[str, bytes] = field(
        default_factory=dict, repr=False, compare=False
    )  # extra files, verified
    # checkpoint.json as verified at load (its "files" listing: names, sizes, SHA-256), so a
    # reader shows what was checked without opening the file again by path
    manifest: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


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


def _names_problem(config: Config, names: set[str] | Mapping[str, Any], where: str) -> CheckpointError | None:
    expected = parameter_shapes(config)
    missing = [name for name in expected if name not in names]
    extra = sorted(set(names) - set(expected))
    if not (missing or extra):
        return None
    parts = []
    if missing:
        parts.append(f"missing parameters {missing}")
    if extra:
        parts.append(f"unexpected parameters {[name[:60] for name in extra[:8]]}")
    return CheckpointError(
        f"{where}: {'; '.join(parts)} for this config ({config.arch}, {config.inputs}, "
        f"{config.n_enc_layers}+{config.n_layers} layers); the weights belong to a different config"
    )


def check_params(config: Config, params: Mapping[str, np.ndarray], *, where: str = "params") -> None:
    """Raise CheckpointError unless params has exactly the names, shapes and dtype (float32)
    of parameter_shapes(config), with finite values."""
    expected = parameter_shapes(config)
    problem = _names_problem(config, params, where)
    if problem is not None:
        raise problem
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


def _refused(root: Path, exc: FileRefused, fix: str) -> CheckpointError:
    return CheckpointError(f"{root}: {exc}; {fix}")


def _read_manifest(root: Path, directory: Directory) -> dict[str, Any]:
    manifest_path = root / MANIFEST
    kind = directory.kind(MANIFEST)
    if kind == "missing":
        raise CheckpointError(
            f"{root}: no {MANIFEST}; this is not a tickformer checkpoint directory (write one with `tickformer train`)"
        )
    try:
        data = directory.read(MANIFEST, max_bytes=MAX_MANIFEST_BYTES)
    except FileRefused as exc:
        raise _refused(root, exc, "a checkpoint holds only regular files; retrain or restore it") from None
    try:
        manifest = sealed.loads(data)
    except ValueError as exc:  # JSONDecodeError is a ValueError; so is everything sealed.loads refuses
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
        isinstance(v, dict)
        and isinstance(v.get("sha256"), str)
        and type(v.get("bytes")) is int
        and 0 <= v["bytes"] <= MAX_FILE_BYTES
        for v in files.values()
    ):
        raise CheckpointError(f"{manifest_path}: 'files' must map file names to {{sha256, bytes}}")
    for required in (CONFIG_FILE, WEIGHTS_FILE):
        if required not in files:
            raise CheckpointError(f"{manifest_path}: does not list {required}; the manifest is incomplete")
    if not isinstance(manifest.get("meta", {}), dict):
        raise CheckpointError(f"{manifest_path}: 'meta' must be a JSON object")
    return manifest


def _verified_files(root: Path, directory: Directory, listed: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    """Read every listed file once (tickformer.safe_files: no links, regular, size first) and
    check its SHA-256; report missing, unlisted and non-regular files by name."""
    present = {name for name in directory.names if name != MANIFEST}
    bad_names = sorted(name for name in listed if not is_plain_name(name) or name == MANIFEST)
    missing = sorted(name for name in set(listed) - present if name not in bad_names)
    unlisted = sorted(present - set(listed))
    if bad_names or missing or unlisted:
        parts = []
        if bad_names:
            parts.append(f"listed names {[n[:60] for n in bad_names[:3]]} are not plain file names")
        if missing:
            parts.append(f"missing files {missing} listed in {MANIFEST}")
        if unlisted:
            parts.append(f"unlisted files {unlisted}")
        hint = " (renamed?)" if missing and unlisted else ""
        raise CheckpointError(
            f"{root}: {'; '.join(parts)}{hint}; the checkpoint directory was modified, retrain or restore it"
        )
    try:
        return directory.read_all_listed(listed, listed_in=MANIFEST)
    except FileRefused as exc:
        fix = {
            "size": "the file is truncated or modified, retrain or restore it",
            "digest": "retrain or restore it",
        }
        if exc.reason in fix:
            raise CheckpointError(f"{root}: {exc}; {fix[exc.reason]}") from None
        raise _refused(
            root, exc, "a checkpoint holds only its own regular files; retrain or restore it"
        ) from None


def _parse_config(root: Path, data: bytes) -> Config:
    try:
        raw = sealed.loads(data)
    except ValueError as exc:
        raise CheckpointError(
            f"{root / CONFIG_FILE}: not valid JSON ({str(exc)[:120]}); retrain or restore it"
        ) from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{root / CONFIG_FILE}: must hold a JSON object of config fields")
    try:
        return Config.from_dict(raw)
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{root / CONFIG_FILE}: invalid config: {exc}") from None


NPY_HEADER_MAX = 4096  # bytes of .npy header a member may carry beyond its data (np.save writes 128)


def check_weights_size(data: bytes, config: Config, *, where: str) -> None:
    """In O(1), before anything is enumerated per layer or per parameter: `data` starts as a zip
    archive does, and the config's parameters (`parameter_count`, float32) fit in its bytes
    (np.savez writes them uncompressed, so every genuine config passes). An inflated config is
    refused here, whatever loop would come after (n_layers = 2^62 in a resealed manifest had the
    artifact reader enumerate that many layers' graph inputs until memory ran out:
    tests/reliability). Raises CheckpointError."""
    if not data.startswith(b"PK"):
        raise CheckpointError(
            f"{where}: not an .npz archive (no zip signature); re-save the weights with np.savez"
        )
    need, nbytes = parameter_count(config) * PARAM_DTYPE.itemsize, len(data)
    if need > nbytes:
        raise CheckpointError(
            f"{where}: the config declares {need} bytes of float32 parameters, more than the {nbytes} bytes "
            "of the weights; the config does not belong to these weights"
        )


def check_npz_members(data: bytes, config: Config, *, where: str) -> None:
    """Before anything is decompressed: `data` is a zip archive whose members are exactly
    "<name>.npy" for the parameters of `config` (none twice), each declaring (in the zip
    directory) an uncompressed size of at most its float32 data plus NPY_HEADER_MAX, and an .npy
    header that can be read and declares no more bytes than that data. This bounds the work and
    the memory np.load can be made to use. Raises CheckpointError naming the first bad member."""
    check_weights_size(data, config, where=where)  # before parameter_shapes enumerates the config
    shapes = parameter_shapes(config)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception as exc:  # an untrusted directory: BadZipFile, NotImplementedError (a zip version
        # or method zipfile lacks: the reliability fuzz found one), ValueError, EOFError...
        detail = str(exc)[:120] or type(exc).__name__
        raise CheckpointError(f"{where}: not a readable .npz archive ({detail})") from None
    with archive:
        infos = archive.infolist()
        names = [info.filename[:-4] if info.filename.endswith(".npy") else info.filename for info in infos]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise CheckpointError(
                f"{where}: members {[n[:60] for n in twice[:3]]} appear twice in the archive"
            )
        problem = _names_problem(config, set(names), where)
        if problem is not None:
            raise problem
        data_bytes = [int(np.prod(shapes[name], dtype=np.int64)) * PARAM_DTYPE.itemsize for name in names]
        for name, info, size in zip(names, infos, data_bytes):  # the zip directory: nothing decompressed yet
            if info.file_size > size + NPY_HEADER_MAX:
                raise CheckpointError(
                    f"{where}: member {info.filename!r} declares {info.file_size} bytes, more than its "
                    f"parameter's {size + NPY_HEADER_MAX} (shape {tuple(shapes[name])}, float32, "
                    "with header); the weights are not this config's"
                )
        # np.load allocates the shape an .npy header declares before it reads a byte of data (a
        # header of a few bytes can ask for any size: tests/reliability/test_fuzz_loaders.py found
        # one), so every header must be readable and declare no more bytes than its parameter holds
        # (a wrong shape or dtype within that is named by check_params after the load).
        for name, info, size in zip(names, infos, data_bytes):
            header = _npy_header(archive, info)
            if header is None:
                raise CheckpointError(f"{where}: member {info.filename!r} has no readable .npy header")
            declared = declared_bytes(header)
            if declared > size:
                raise CheckpointError(
                    f"{where}: {name!r} has shape {header[0]}, config expects {tuple(shapes[name])} ({header[2]}, "
                    f"declared in its .npy header: {declared} bytes, refused before loading)"
                )


def declared_bytes(header: tuple) -> int:
    """The bytes an .npy header's (shape, fortran_order, dtype) asks np.load to allocate."""
    shape, _, dtype = header
    return int(np.prod(shape, dtype=object)) * int(dtype.itemsize)  # object: no int64 overflow


def read_npy_header(stream: Any) -> tuple | None:
    """(shape, fortran_order, dtype) of the .npy header at the start of `stream`, read without
    touching the data; None if it cannot be read. np.load allocates the shape a header declares
    before it reads a byte of data, so an untrusted .npy is checked with this first."""
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(stream)
        read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, fortran, dtype = read(stream)
        return tuple(shape), bool(fortran), np.dtype(dtype)
    except Exception:  # an untrusted header: ValueError, EOFError, zlib.error, BadZipFile...
        return None


def _npy_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple | None:
    """`read_npy_header` of an archive member; None if the member cannot be opened either."""
    try:
        with archive.open(info) as stream:
            return read_npy_header(stream)
    except Exception:  # NotImplementedError (zip version, method), BadZipFile, zlib.error...
        return None


def parse_weights(data: bytes, config: Config, *, where: str) -> dict[str, np.ndarray]:
    """The parameter dict of a weights.npz, parsed from `data` (members checked first,
    `check_npz_members`; np.load with allow_pickle=False: no code runs), then `check_params`.
    Raises CheckpointError naming `where`."""
    check_npz_members(data, config, where=where)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            params = {name: archive[name] for name in archive.files}
    except Exception as exc:  # an untrusted archive: BadZipFile, EOFError, ValueError, zlib.error...
        detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{where}: cannot read weights ({detail}); object arrays are refused") from None
    check_params(config, params, where=where)
    return params


def load_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Load and verify a checkpoint directory (hashes first, then config, then every weight).
    Every file is read once, without following links (`tickformer.safe_files`), and hashed and
    parsed from the same bytes; extra files' bytes are kept (`read_extra_file`).

    Not real-time safe (file I/O). Raises CheckpointError saying exactly what is wrong.
    """
    root = Path(path)
    try:
        directory = Directory(root)
    except FileRefused as exc:
        if exc.reason == "missing":
            raise CheckpointError(
                f"checkpoint {root} does not exist; train one with `tickformer train --task NAME --out {root}`"
            ) from None
        if exc.reason == "not a directory":
            raise CheckpointError(
                f"checkpoint {root} is not a directory; pass the directory `tickformer train --out` wrote"
            ) from None
        fix = "" if exc.reason == "symlink" else "; pass the checkpoint directory itself"
        raise CheckpointError(f"checkpoint {exc}{fix}") from None
    with directory:
        manifest = _read_manifest(root, directory)
        contents = _verified_files(root, directory, manifest["files"])
    config = _parse_config(root, contents[CONFIG_FILE])
    params = parse_weights(contents[WEIGHTS_FILE], config, where=str(root / WEIGHTS_FILE))
    ordered = {name: params[name] for name in parameter_shapes(config)}
    extra = {name: data for name, data in contents.items() if name not in (CONFIG_FILE, WEIGHTS_FILE)}
    return Checkpoint(
        config=config,
        params=ordered,
        meta=manifest.get("meta", {}),
        path=root,
        files=extra,
        manifest=manifest,
    )


def read_extra_file(checkpoint: Checkpoint, name: str) -> bytes:
    """Bytes of an extra file listed in the manifest: the ones verified when the checkpoint was
    loaded (never re-read from disk)."""
    if checkpoint.path is None:
        raise CheckpointError("this checkpoint was not loaded from disk; it has no files")
    if name not in checkpoint.files:
        raise CheckpointError(f"{checkpoint.path}: no file {name!r} listed in {MANIFEST}")
    return checkpoint.files[name]
