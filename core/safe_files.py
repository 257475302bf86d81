"""The one way tickformer reads the files of an artifact or a checkpoint: every file opened once,
without following links, checked for what it is before a byte is read, read in full from that
one file descriptor.

    d = Directory(path)             the directory opened with O_NOFOLLOW | O_DIRECTORY, listed once
    d.names                         its entries (sorted), from that one listing
    d.kind(name)                    "file", "symlink", "fifo", "directory", "device", "socket", "missing"
    d.read(name, size=n)            the bytes of one entry (below), read once
    d.read_listed(name, entry)      read at a manifest's listed size, then its SHA-256 compared
    d.read_all_listed(listed)       every file of a manifest's listing, each through read_listed
    read_path(path)                 the same checks for a file named by a path (a user's input file,
                                    a bare .onnx), links followed only when asked

`read` refuses, before reading: a name that is not a plain file name (a "/", ".", "..", NUL,
more than NAME_MAX bytes); an entry that is not a regular file, looked at with lstat first
(nothing is opened that could block, like a FIFO, or act, like a device); then it opens the
name relative to the directory's descriptor with O_NOFOLLOW | O_NONBLOCK (a symbolic link gives
ELOOP, a FIFO swapped in meanwhile does not block) and fstats *that* descriptor: a regular file,
one hard link (st_nlink == 1: a file linked from elsewhere could be changed through its other
name), at most `max_bytes`, exactly `size` bytes when the caller knows the size (the manifest
does). It then reads exactly st_size bytes from the descriptor and checks that the file ends
there. `read_listed` hashes those bytes against the listing and the caller parses the same
bytes: nothing is opened twice, so a file swapped after the check is never read (time of check
= time of use).

A refusal raises `tickformer.errors.FileRefused` with `.name` and `.reason` (one of REASONS);
the artifact and checkpoint loaders turn it into their own error with their fix. Not real-time
code (file I/O).

Sources: open(2) (O_NOFOLLOW, O_NONBLOCK on FIFOs), fstat(2), openat(2) (dir_fd), Linux.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from tickformer.errors import FileRefused

MAX_FILE_BYTES = 4 << 30  # the largest single file of an artifact or checkpoint we read (4 GiB)
MAX_MANIFEST_BYTES = 16 << 20  # manifest.json / checkpoint.json / config.json (ours are a few KiB)
NAME_MAX = 255  # bytes in one file name (Linux NAME_MAX)
CHUNK = 1 << 24  # bytes per read(2)

REASONS = (
    "missing",
    "not a plain name",
    "symlink",
    "not a regular file",
    "hard links",
    "too large",
    "size",
    "digest",
    "changed",
    "unreadable",
    "not a directory",
)

_KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFLNK: "symlink",
    stat.S_IFIFO: "fifo",
    stat.S_IFDIR: "directory",
    stat.S_IFCHR: "device",
    stat.S_IFBLK: "device",
    stat.S_IFSOCK: "socket",
}
_WORDS = {
    "symlink": "a symbolic link",
    "fifo": "a FIFO (named pipe)",
    "directory": "a directory",
    "device": "a device file",
    "socket": "a socket",
}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_FLAGS |= getattr(os, "O_NOCTTY", 0)


def _refuse(name: str, reason: str, text: str) -> FileRefused:
    exc = FileRefused(text)
    exc.name, exc.reason = name, reason
    return exc


def is_plain_name(name: object) -> bool:
    """A single file name: a non-empty str without "/" or NUL, not "." or "..", <= NAME_MAX bytes."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name:
        return False
    try:
        return len(os.fsencode(name)) <= NAME_MAX
    except UnicodeError:
        return False


def _os_problem(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long"
    return exc.strerror or type(exc).__name__


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _read_fd(
    fd: int,
    name: str,
    st: os.stat_result,
    *,
    size: int | None,
    max_bytes: int,
    listed_in: str,
    one_link: bool,
) -> bytes:
    """Checks on the open descriptor (regular, one link, size), then exactly st_size bytes."""
    if not stat.S_ISREG(st.st_mode):
        what = _WORDS.get(kind_of(st.st_mode), "not a regular file")
        raise _refuse(name, "not a regular file", f"{name} is {what}, not a regular file")
    if one_link and st.st_nlink != 1:
        raise _refuse(
            name,
            "hard links",
            f"{name} has {st.st_nlink} hard links (it is also reachable under another name, where it "
            "could be changed); copy the directory with `cp -r` so each file is its own",
        )
    if st.st_size > max_bytes:
        raise _refuse(name, "too large", f"{name} has {st.st_size} bytes, more than the limit of {max_bytes}")
    if size is not None and st.st_size != size:
        exc = _refuse(name, "size", f"{name} has {st.st_size} bytes, {listed_in} says {size}")
        exc.actual = st.st_size
        raise exc
    chunks = []
    left = st.st_size
    while left > 0:
        chunk = os.read(fd, min(left, CHUNK))
        if not chunk:
            raise _refuse(name, "changed", f"{name} shrank while it was being read")
        chunks.append(chunk)
        left -= len(chunk)
    if os.read(fd, 1):
        raise _refuse(name, "changed", f"{name} grew while it was being read")
    return b"".join(chunks)


class Directory:
    """A directory opened once without following a link at its own name (module docstring).
    Use as a context manager, or call close()."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        shown = str(self.path)
        try:
            self.fd = os.open(
                self.path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
            )
        except OSError as exc:
            raise self._root_problem(shown, exc) from None
        try:
            self.names: list[str] = sorted(os.listdir(self.fd))
        except OSError as exc:
            os.close(self.fd)
            raise _refuse(shown, "unreadable", f"{shown} cannot be listed ({_os_problem(exc)})") from None
        self._listed = set(self.names)

    def _root_problem(self, shown: str, exc: OSError) -> FileRefused:
        if exc.errno == errno.ENOENT:
            return _refuse(shown, "missing", f"{shown} does not exist")
        try:
            mode = os.lstat(self.path).st_mode
        except OSError:
            mode = None
        if mode is not None and stat.S_ISLNK(mode):
            return _refuse(
                shown,
                "symlink",
                f"{shown} is a symbolic link (directories are opened without following links); pass the "
                f"directory it points to: {os.path.realpath(self.path)}",
            )
        if exc.errno == errno.ENOTDIR or (mode is not None and not stat.S_ISDIR(mode)):
            return _refuse(shown, "not a directory", f"{shown} is not a directory")
        return _refuse(shown, "unreadable", f"{shown} cannot be opened ({_os_problem(exc)})")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Directory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kind(self, name: str) -> str:
        """What `name` is in this directory (lstat: links are not followed); "missing" if absent
        from the one listing or gone since."""
        if not is_plain_name(name) or name not in self._listed:
            return "missing"
        try:
            return kind_of(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except OSError:
            return "missing"

    def read(
        self,
        name: str,
        *,
        size: int | None = None,
        max_bytes: int = MAX_FILE_BYTES,
        listed_in: str = "the manifest",
    ) -> bytes:
        """The bytes of entry `name`, read once from one descriptor (module docstring). Raises
        FileRefused (reasons: REASONS)."""
        if not is_plain_name(name):
            raise _refuse(str(name), "not a plain name", f"{str(name)[:80]!r} is not a plain file name")
        kind = self.kind(name)
        if kind == "missing":
            raise _refuse(name, "missing", f"{name} is missing")
        if kind == "symlink":
            raise _refuse(name, "symlink", f"{name} is a symbolic link, not a regular file")
        if kind != "file":
            raise _refuse(
                name, "not a regular file", f"{name} is {_WORDS.get(kind, kind)}, not a regular file"
            )
        try:
            fd = os.open(name, _FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(name, "symlink", f"{name} is a symbolic link, not a regular file") from None
            if exc.errno == errno.ENOENT:
                raise _refuse(name, "missing", f"{name} is missing") from None
            raise _refuse(name, "unreadable", f"{name} cannot be read ({_os_problem(exc)})") from None
        try:
            st = os.fstat(fd)
            return _read_fd(fd, name, st, size=size, max_bytes=max_bytes, listed_in=listed_in, one_link=True)
        except OSError as exc:
            raise _refuse(name, "unreadable", f"{name} cannot be read ({_os_problem(exc)})") from None
        finally:
            os.close(fd)

    def read_listed(self, name: str, entry: dict, *, listed_in: str) -> bytes:
        """The bytes of `name` as the listing `entry` ({"bytes": n, "sha256": hex}) of `listed_in`
        describes them: read at that size (`read`), then their SHA-256 compared with the listed
        one -- the check every manifest-listed file of an artifact or checkpoint passes. Raises
        FileRefused: reason "digest" for another SHA-256, else `read`'s reasons."""
        data = self.read(name, size=entry["bytes"], listed_in=listed_in)
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            raise _refuse(
                name,
                "digest",
                f"{name}: SHA-256 {digest[:16]}... does not match {listed_in} ({entry['sha256'][:16]}...); "
                "the file was modified",
            )
        return data

    def read_all_listed(self, listed: dict[str, dict], *, listed_in: str) -> dict[str, bytes]:
        """{name: bytes} of every file of `listed` ({name: {"bytes", "sha256"}}), each through
        `read_listed`, in name order. Raises the first FileRefused."""
        return {
            name: self.read_listed(name, entry, listed_in=listed_in) for name, entry in sorted(listed.items())
        }


def read_path(
    path: str | os.PathLike[str],
    *,
    follow_symlinks: bool = True,
    max_bytes: int = MAX_FILE_BYTES,
    allow_links: bool = True,
) -> bytes:
    """The bytes of the regular file at `path` (a user's input, a bare .onnx), opened once with
    O_NONBLOCK (a FIFO never blocks) and checked on its descriptor before reading: regular,
    at most max_bytes. follow_symlinks=False adds O_NOFOLLOW; allow_links=False refuses hard
    links. Raises FileRefused."""
    shown = str(path)
    flags = _FLAGS if not follow_symlinks else _FLAGS & ~_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise _refuse(shown, "missing", f"{shown} does not exist") from None
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise _refuse(shown, "symlink", f"{shown} is a symbolic link, not a regular file") from None
        raise _refuse(shown, "unreadable", f"{shown} cannot be read ({_os_problem(exc)})") from None
    try:
        st = os.fstat(fd)
        return _read_fd(fd, shown, st, size=None, max_bytes=max_bytes, listed_in="", one_link=not allow_links)
    except OSError as exc:
        raise _refuse(shown, "unreadable", f"{shown} cannot be read ({_os_problem(exc)})") from None
    finally:
        os.close(fd)
