"""Sealed JSON manifests: the self-hash shared by checkpoint.json and an artifact's manifest.json.

A sealed manifest carries the SHA-256 of its own canonical JSON (sorted keys, no whitespace,
ASCII, without the `manifest_sha256` key itself). A flipped digit in any value that no file hash
covers -- an input domain, a tolerance, an output bound -- is then refused at load as "modified
after it was written". It is an integrity check against corruption and careless edits, not a
signature: whoever can rewrite the manifest can recompute the hash (signatures: SECURITY.md).

`digest` is the one definition of that hash; `seal` is what every writer calls; `loads` is the
one JSON parser for manifests (depth-limited: hostile nesting raises ValueError, not
RecursionError). Not real-time code.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

MANIFEST_HASH = "manifest_sha256"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical(obj: Any) -> bytes:
    """The canonical JSON encoding the self-hash is computed over."""
    # NaN/Infinity are encoded (deterministically) rather than refused: hashing is not validation.
    # Writers refuse them when they serialize; readers refuse them in their schema checks.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def digest(manifest: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of `manifest` without its MANIFEST_HASH key."""
    return sha256_bytes(canonical({key: value for key, value in manifest.items() if key != MANIFEST_HASH}))


def seal(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-normalised copy of `manifest` (tuples -> lists, keys -> str) with MANIFEST_HASH set
    to its `digest`: exactly what a reader computes from the written file. Idempotent."""
    body = json.loads(json.dumps({k: v for k, v in manifest.items() if k != MANIFEST_HASH}))
    body[MANIFEST_HASH] = digest(body)
    return body


def is_sealed(manifest: Mapping[str, Any]) -> bool | None:
    """True when the recorded self-hash matches, False when it does not, None when there is none."""
    recorded = manifest.get(MANIFEST_HASH)
    if not isinstance(recorded, str):
        return None
    return recorded == digest(manifest)


def loads(data: bytes) -> Any:
    """Parse manifest bytes (UTF-8 JSON). Raises ValueError for anything that is not valid JSON,
    including nesting deep enough to exhaust the parser's recursion."""
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason})") from None
