"""Helpers shared by the reliability tests (imported by tests/reliability/conftest.py, which puts
this folder on sys.path): artifact / checkpoint copies, byte mutations, manifest rewrites with
recomputed hashes, and the outcome recorder whose counts become docs/reliability_report.md.

Not a test module (no `test_` prefix); nothing here is real-time code.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

from tickformer.errors import TickformerError

ART_MANIFEST = "manifest.json"
CKPT_MANIFEST = "checkpoint.json"


# --- copies and mutations -------------------------------------------------------------------------
def fresh_copy(src: Path, dst: Path) -> Path:
    """Replace dst by a copy of the directory src (symlinks copied as links)."""
    if dst.exists() or dst.is_symlink():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def flip(data: bytes, offset: int, mask: int = 0xFF) -> bytes:
    """data with byte `offset` XORed with mask (mask != 0: the byte really changes)."""
    out = bytearray(data)
    out[offset] ^= mask
    return bytes(out)


def offsets(size: int) -> list[int]:
    """First, second, middle, second-to-last and last byte offsets of a file of `size` bytes."""
    return sorted({0, 1, size // 3, size // 2, size - 2, size - 1} & set(range(size)))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, obj: Any) -> None:
    """Write JSON as Python does by default (NaN/Infinity tokens allowed: a hostile writer may)."""
    path.write_text(json.dumps(obj), encoding="utf-8")


def resealed(doc: Any, original: Any | None = None) -> Any:
    """doc with its self-hash ("manifest_sha256", tickformer.sealed.digest) recomputed,
    as whoever rewrites a manifest can do (the hash detects corruption, it is no signature), so
    the *schema* checks behind it are exercised. Left as is when doc has no self-hash, or when
    `original` is given and the mutation changed or removed the self-hash itself."""
    from tickformer.sealed import MANIFEST_HASH
    from tickformer.sealed import seal as seal_manifest

    if not isinstance(doc, dict) or MANIFEST_HASH not in doc:
        return doc
    if original is not None and doc.get(MANIFEST_HASH) != original.get(MANIFEST_HASH):
        return doc
    return seal_manifest(doc)


def rehash(root: Path, manifest_name: str, names: list[str] | None = None) -> None:
    """Recompute sha256 and size of the listed files (all, or `names`) in the manifest, and the
    manifest's self-hash (`resealed`), so a mutated file passes the hash checks and its *parser*
    is exercised."""
    path = root / manifest_name
    manifest = read_json(path)
    for name in names if names is not None else list(manifest["files"]):
        data = (root / name).read_bytes()
        manifest["files"][name] = {"sha256": sha256(data), "bytes": len(data)}
    write_json(path, resealed(manifest))


def json_paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys / indices) to a value inside a JSON document, the root excluded."""
    out: list[tuple] = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        out.append(prefix + (key,))
        out.extend(json_paths(value, prefix + (key,)))
    return out


def json_get(obj: Any, path: tuple) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def json_set(obj: Any, path: tuple, value: Any) -> None:
    json_get(obj, path[:-1])[path[-1]] = value


def json_delete(obj: Any, path: tuple) -> None:
    parent = json_get(obj, path[:-1])
    del parent[path[-1]]


# --- outcome recording ----------------------------------------------------------------------------
class Outcomes:
    """Counts, per class of mutated input, how each case ended: 'success', the TickformerError
    subclass raised, or 'UNEXPECTED <type>' (a defect: the case re-raises so its test fails)."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.seconds: Counter = Counter()
        self.notes: dict[str, str] = {}
        self.tests: dict[str, str] = {}
        self.defects: dict[str, list[str]] = {}

    def describe(self, kind: str, note: str) -> None:
        self.notes.setdefault(kind, note)

    def record(self, kind: str, outcome: str, seconds: float = 0.0) -> None:
        self.counts[kind][outcome] += 1
        self.seconds[kind] += seconds

    def run(self, kind: str, case: Callable[[], Any], *, reraise: bool = False) -> str:
        """Run one case; record and return its outcome ('success' or the TickformerError
        subclass name). reraise: re-raise the TickformerError after recording it (for
        pytest.raises). Any other exception is recorded as UNEXPECTED and re-raised."""
        start = time.perf_counter_ns()
        try:
            case()
            outcome = "success"
        except TickformerError as exc:
            self.record(kind, type(exc).__name__)
            if reraise:
                raise
            return type(exc).__name__
        except Exception as exc:
            self.record(kind, f"UNEXPECTED {type(exc).__name__}")
            raise
        finally:
            self.seconds[kind] += (time.perf_counter_ns() - start) / 1e9
        self.record(kind, outcome)
        return outcome

    def sweep(self, kind: str, case: Callable[[], Any]) -> tuple[str, BaseException | None]:
        """Like run, but an unexpected exception is recorded and returned, not raised, so a
        sweep finishes and reports every defect at once."""
        try:
            return self.run(kind, case), None
        except Exception as exc:
            return f"UNEXPECTED {type(exc).__name__}", exc


OUTCOMES = Outcomes()


# --- a child process that loads artifacts (crash and hang isolation) --------------------------------
class Worker:
    """tests/reliability/load_worker.py in a subprocess. `load(path, backend)` returns its
    reply dict, or {"outcome": "CRASH ..."} if the child died, {"outcome": "HANG"} if it did not
    answer within `timeout` seconds (the child is then killed and restarted)."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.proc: Any = None
        self._buffer = b""
        self._next_id = 0
        self.noise: list[str] = []

    def _start(self) -> None:
        import subprocess
        import sys

        script = Path(__file__).with_name("load_worker.py")
        self.proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        self._buffer = b""
        reply = self._read(120.0)
        if reply is None or not reply.get("ready"):
            raise RuntimeError(f"load worker did not start: {reply}")

    def _read(self, timeout: float) -> dict | None:
        """One JSON line from the child within `timeout` s (None: nothing, or the child died).
        Reads the pipe's file descriptor directly, so no line waits unseen in a Python buffer."""
        import os
        import select

        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not ready:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            self.noise.append(line.decode("utf-8", "replace"))
            return {}

    def load(self, path: Path, backend: str) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self._next_id += 1
        self.proc.stdin.write(
            (json.dumps({"id": self._next_id, "path": str(path), "backend": backend}) + "\n").encode()
        )
        self.proc.stdin.flush()
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(max(0.0, deadline - time.monotonic()))
            if reply is None:
                break
            if reply.get("id") == self._next_id:
                return reply
            self.noise.append(repr(reply))  # printed by a library, or a stale reply: skipped
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return {"outcome": "HANG", "message": f"no answer within {self.timeout} s"}
        code = self.proc.returncode
        self.proc = None
        return {"outcome": f"CRASH (exit {code})", "message": "the loader process died"}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# --- the adversarial rounds (attack_rounds.toml) ----------------------------------------------------
ROUNDS = Path(__file__).with_name("attack_rounds.toml")


def finding_state(tests: list[str], results: dict[str, str]) -> str:
    """defended (every named test ran and passed), broken (one failed), or not run (in part)."""
    met = [[s for n, s in results.items() if n.startswith(t)] for t in tests]
    if any(s in ("failed", "error", "XPASS") for states in met for s in states):
        return "broken"
    if not all(met):
        return "not run"
    return "defended" if all(s == "passed" for states in met for s in states) else "not run"
