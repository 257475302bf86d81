"""Durable file writes, the one definition shared by every atomic writer (checkpoints,
artifacts, TensorRT engines): write-then-fsync a file, and fsync its directory so that a rename
into it survives a power cut (POSIX: the rename is recorded in the directory, not the file).
The atomicity itself (temp name, os.replace, manifest last) belongs to each writer.

Not real-time code.
"""

from __future__ import annotations

import os
from pathlib import Path


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
