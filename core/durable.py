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
sibling, which no reader accepts (it has no manifest, or a name readers skip).

Not real-time code.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Mapping


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
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
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    old: Path | None = None
    order = [name for name in files if name != last] + ([last] if last is not None and last in files else [])
    try:
        for name in order:
            write(tmp / name, files[name])
        fsync_dir(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.replace(target, old / "previous")  # move the previous directory aside
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "previous").exists() and not target.exists():
            os.replace(old / "previous", target)  # put the previous directory back
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return target
