"""The generated library's loading: the bytes read once, checked against its build record and,
under trust=, vouched for, then dlopen'ed from a private copy (runtime/backends/c.py loads
through these; codegen/toolchain.py writes the records and registers what it compiled).

Trust (SECURITY.md): loading a library runs its code, so the bytes hashed are the bytes run --
the library is read once (a regular file, at most MAX_LIBRARY_BYTES), hashed, written to a
private 0700 directory and loaded from there, so a file swapped after the check is never run. A
build record beside the library (`build.json`: the artifact, the library's SHA-256, and the
generator, compiler and flags when they are known) is checked whenever it is there; the build
cache always writes one. Under `trust=` (the artifact's signature verified) a library runs only
if its SHA-256 is vouched for: compiled by this process from the verified artifact
(`register_built_library`, which tickformer.codegen's builder calls: a cached library is rebuilt
once per process, since anyone who can write the cache can rewrite its record), or named by a
build record signed with the trusted key (`build.sig` beside `build.json`: `tickformer sign ART
--key KEY --library LIB`). Anything else is refused in one line.

Not real-time code.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from tickformer import signing
from tickformer.artifact import Artifact
from tickformer.errors import ArtifactError, BackendError, UntrustedArtifact

MAX_LIBRARY_BYTES = 1 << 30  # a generated step with its weights is far below; more is not ours
MAX_RECORD_BYTES = 1 << 16
BUILD_RECORD = "build.json"  # beside the library: what it was built from (module docstring, "Trust")
BUILD_SIGNATURE = "build.sig"  # signing.signature_document over build.json's bytes
BUILD_FORMAT = "tickformer-library-build"
_BUILT_HERE: set[tuple[str, str]] = set()  # (manifest_sha256, library SHA-256) this process compiled


def register_built_library(artifact_sha256: str, library_sha256: str) -> None:
    """Record that this process compiled the library with SHA-256 `library_sha256` from the
    artifact with manifest_sha256 `artifact_sha256` (tickformer.codegen's builder calls it with
    the hash of the bytes its compiler wrote into a private directory): under trust= such a
    library may run (module docstring, "Trust"). Not real-time."""
    _BUILT_HERE.add((str(artifact_sha256), str(library_sha256)))


def read_library(path: "str | os.PathLike[str]") -> bytes:
    """The bytes of the library file at `path`: a regular file (a symlink to one is followed) of
    at most MAX_LIBRARY_BYTES. A FIFO, device or directory is refused without being read (opened
    non-blocking, checked with fstat). Raises ArtifactError."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ArtifactError(
            f"{path}: no such library; build it with `make shared` in a `tickformer codegen` output, or omit library="
        ) from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot open the library ({exc.strerror}); check the path") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO, socket or device"
        raise ArtifactError(
            f"{path} is {kind}, not a library file; pass the libtf_model.so `make shared` built"
        )
    with os.fdopen(fd, "rb") as f:
        if info.st_size > MAX_LIBRARY_BYTES:
            raise ArtifactError(
                f"{path} is {info.st_size} bytes, over the {MAX_LIBRARY_BYTES} a generated library can be; "
                "pass the libtf_model.so `make shared` built"
            )
        data = f.read(MAX_LIBRARY_BYTES + 1)
    if len(data) > MAX_LIBRARY_BYTES:
        raise ArtifactError(f"{path} grew while it was read; pass a library nothing is writing")
    return data


def _read_small(path: Path, what: str) -> bytes | None:
    """The bytes of `path` (a regular file of at most MAX_RECORD_BYTES), or None if it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read the library's {what} ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArtifactError(f"{path}: the library's {what} is not a regular file; build the library again")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise ArtifactError(
            f"{path}: the library's {what} is over {MAX_RECORD_BYTES} bytes; build the library again"
        )
    return data


def build_record(artifact_sha256: str, library_sha256: str, **known: Any) -> bytes:
    """The bytes of a build record (BUILD_RECORD): the artifact, the library's name and SHA-256,
    and what else is known of the build (generator, compiler, flags). Written by the build
    cache and by `tickformer sign --library`; checked by `library_vouched_for`."""
    record = {
        "format": BUILD_FORMAT,
        "version": 1,
        "artifact": artifact_sha256,
        "library_sha256": library_sha256,
        **known,
    }
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()


def _check_record(path: Path, data: bytes, artifact: Artifact, digest: str) -> None:
    """`data` (the build record beside the library at `path`) names this artifact and `digest`."""
    where = path.parent / BUILD_RECORD
    try:
        record = json.loads(data)
    except ValueError:
        raise ArtifactError(f"{where} is not JSON; build the library again") from None
    if not isinstance(record, dict) or record.get("format") != BUILD_FORMAT:
        raise ArtifactError(
            f"{where} is not a {BUILD_FORMAT} record (an older tickformer's, or not ours); build the library again"
        )
    want = str(artifact.manifest.get("manifest_sha256"))
    if record.get("artifact") != want:
        raise ArtifactError(
            f"{path} was generated for artifact {str(record.get('artifact'))[:12]}..., not this one "
            f"({want[:12]}...: its {BUILD_RECORD}); regenerate it with `tickformer codegen`"
        )
    if record.get("library_sha256") != digest:
        raise ArtifactError(
            f"{path} changed after it was built (SHA-256 {digest[:12]}..., its {BUILD_RECORD} says "
            f"{str(record.get('library_sha256'))[:12]}...); build it again, it is not run"
        )


def library_vouched_for(path: "str | os.PathLike[str]", data: bytes, artifact: Artifact) -> str:
    """Check the library bytes `data` read from `path` against its build record, if there is
    one, and, when the artifact was opened with trust=, that its SHA-256 is vouched for (compiled
    by this process from this artifact, or named by a build record signed with the trusted key).
    Returns the SHA-256. Raises ArtifactError (UntrustedArtifact for trust). Not real-time."""
    path = Path(path)
    digest = hashlib.sha256(data).hexdigest()
    record = _read_small(path.parent / BUILD_RECORD, "build record")
    if record is not None:
        _check_record(path, record, artifact, digest)
    if artifact.signed_by is None:  # no trust key: a check against mix-ups, not tampering
        return digest
    want = str(artifact.manifest.get("manifest_sha256"))
    if (want, digest) in _BUILT_HERE:
        return digest
    signature = _read_small(path.parent / BUILD_SIGNATURE, "build signature")
    if record is None or signature is None or artifact.trust_key is None:
        raise UntrustedArtifact(
            f"{path}: under --trust a library runs only if this process built it from the verified artifact "
            f"(omit library=) or its build record is signed (`tickformer sign ART --key KEY --library {path}`)"
        )
    signing.verify_document(record, signature, artifact.trust_key, where=str(path.parent / BUILD_RECORD))
    return digest


def load_library(
    path: "str | os.PathLike[str]", artifact: Artifact, data: bytes | None = None
) -> ctypes.PyDLL:
    """ctypes handle of a library generated for `artifact` (its tf_artifact_sha256 is the
    manifest's manifest_sha256), loaded from a private copy of `data` (default: the file's bytes,
    read and vouched for here: `library_vouched_for`). PyDLL: calls keep the GIL -- a step this
    short gains nothing from releasing it, and a release/reacquire is a chance for another thread
    to run in the middle of a tick. Not real-time."""
    path = Path(path)
    if data is None:
        data = read_library(path)
        library_vouched_for(path, data, artifact)
    try:
        lib = _dlopen_private(path.name, data)
        sha_fn, layout_fn = lib.tf_artifact_sha256, lib.tf_layout
    except (OSError, AttributeError) as exc:
        raise BackendError(f"{path} is not a library generated by tickformer codegen ({exc})") from None
    sha_fn.restype, sha_fn.argtypes = ctypes.c_char_p, []
    layout_fn.restype, layout_fn.argtypes = ctypes.c_int32, [ctypes.c_int32]
    built_for = (sha_fn() or b"").decode(errors="replace")
    want = str(artifact.manifest.get("manifest_sha256"))
    if built_for != want:
        raise ArtifactError(
            f"{path} was generated for artifact {built_for[:12]}..., not this one "
            f"({want[:12]}...); regenerate it with `tickformer codegen`"
        )
    return lib


def _dlopen_private(name: str, data: bytes) -> ctypes.PyDLL:
    """dlopen a copy of `data` no other process can write: an anonymous memory file (memfd,
    Linux; not subject to a noexec /tmp), else a file in a fresh 0700 directory that goes once
    it is loaded. The memfd stays open as long as the library stays mapped (for good: ctypes
    cannot unload), because dlopen matches names first and a closed descriptor's number, hence
    its /proc/self/fd path, would be reused by the next load and answered with this library."""
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create(f"tickformer-{name}", os.MFD_CLOEXEC)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                with os.fdopen(os.dup(fd), "wb") as f:
                    f.write(data)
                return ctypes.PyDLL(f"/proc/self/fd/{fd}")
            except OSError:
                os.close(fd)
                raise
    with tempfile.TemporaryDirectory(prefix="tickformer-lib-") as private:
        copy = Path(private) / name
        copy.write_bytes(data)
        return ctypes.PyDLL(str(copy))
