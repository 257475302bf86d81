"""Durable, atomic writes: the one definition shared by every writer (checkpoints, artifacts,
TensorRT engines, certificates, reports).

    write_synced(path, data)        write + fsync one file (the building block)
    fsync_dir(path)                 fsync a directory, so a rename into it survives a power cut
                                    (POSIX records the rename in the directory, not the file)
    atomic_write(path, data)        a file appears complete or not at all: hidden temp sibling,
                                    fsync, os.replace, fsync of the directory
    replace_dir(target, files, ...) a directory appears complete or not at all: every file into a
                                    hidden temp sibling directory, the `last` file (the manifest)
                                    written last, fsync, and an os.replace onto `target`; a
                                    previous directory there is moved aside first and put back if
                                    the move fails

A failure or an interruption (any BaseException) leaves the previous file or directory in place
and removes the temporary one; what is left after a kill -9 is at most a hidden `.NAME.tmp-*`
sibling, which no reader accepts (it has no manifest, or a name readers skip). An OSError (disk
full, a file-size limit, permissions, a name too long) is raised as `tickformer.errors.WriteError`
(a TickformerError and an OSError) whose one-line message names the target, the cause, says that
the previous version is intact, and how to fix it.

Not real-time code.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Mapping

from tickformer.errors import WriteError


def write_error(target: Path, exc: OSError) -> WriteError:
    """The one-line WriteError for an OSError met while writing `target` atomically."""
    cause = exc.strerror or str(exc) or type(exc).__name__
    fix = {
        errno.ENOSPC: "free disk space and run again",
        errno.EDQUOT: "free space within your disk quota and run again",
        errno.EFBIG: "raise the file-size limit (ulimit -f) or write elsewhere",
        errno.EACCES: "choose a writable location",
        errno.EPERM: "choose a writable location",
        errno.EROFS: "choose a writable location",
        errno.ENAMETOOLONG: "choose a shorter name",
    }.get(exc.errno if exc.errno is not None else -1, "check the path and run again")
    error = WriteError(
        f"cannot write {str(target)[:200]}: {cause}; nothing was replaced (the previous version, if any, is "
        f"intact): {fix}"
    )
    error.target, error.cause_errno = target, exc.errno  # not .errno/.filename: they change str(error)
    return error


def write_synced(path: Path, data: bytes) -> None:
    """Write `data` to `path` (created or truncated) and fsync it before returning."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    """fsync a directory, best effort: some filesystems refuse to open or sync a directory, and
    the data files themselves are already synced by `write_synced`."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` by a file holding `data`, all or nothing (module docstring). `mode`: the
    new file's permissions (mkstemp would leave 0600; reports and engines are meant to be read)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:
        os.fchmod(fd, mode)  # before any byte is written: a private key is never readable by others
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise write_error(path, exc) from exc
        raise
    fsync_dir(path.parent)


def replace_dir(
    target: Path,
    files: Mapping[str, bytes],
    *,
    last: str | None = None,
    writer: Callable[[Path, bytes], None] | None = None,
) -> Path:
    """Write `files` ({plain name: bytes}) as the directory `target`, all or nothing.

    `last` names the file written after all others (a manifest: a directory without it is never
    valid); `writer` replaces `write_synced` (tests inject faults through it). The caller decides
    beforehand whether an existing `target` may be replaced. Returns `target`."""
    target = Path(target)
    write = write_synced if writer is None else writer
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name[:64]}.tmp-", dir=target.parent))
    except OSError as exc:
        raise write_error(target, exc) from exc
    old: Path | None = None
    order = [name for name in files if name != last] + ([last] if last is not None and last in files else [])
    try:
        for name in order:
            write(tmp / name, files[name])
        fsync_dir(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name[:64]}.old-", dir=target.parent))
            os.replace(target, old / "previous")  # move the previous directory aside
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "previous").exists() and not target.exists():
            os.replace(old / "previous", target)  # put the previous directory back
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise write_error(target, exc) from exc
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return target
