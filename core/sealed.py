"""Sealed JSON manifests: the self-hash shared by checkpoint.json and an artifact's manifest.json.

A sealed manifest carries the SHA-256 of its own canonical JSON (sorted keys, no whitespace,
ASCII, without the `manifest_sha256` key itself). A flipped digit in any value that no file hash
covers -- an input domain, a tolerance, an output bound -- is then refused at load as "modified
after it was written". It is an integrity check against corruption and careless edits, not a
signature: whoever can rewrite the manifest can recompute the hash (signatures: SECURITY.md).

`digest` is the one definition of that hash; `seal` is what every writer calls; `loads` is the
one JSON parser for manifests and the JSON files they list: strict (duplicate keys, NaN /
Infinity, overflowing numbers refused) and depth-limited (MAX_DEPTH, checked before parsing:
hostile nesting raises ValueError, not RecursionError). Not real-time code.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
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


MAX_DEPTH = 32  # nesting levels of arrays and objects a manifest may have (ours have 6)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _depth_exceeds(text: str, limit: int) -> bool:
    """True if `text` nests arrays/objects deeper than `limit`, found without recursion: string
    literals removed, then each round deletes the innermost "[]" / "{}" pairs (one level)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(limit):
        if not brackets:
            return False
        shorter = brackets.replace("[]", "").replace("{}", "")
        if shorter == brackets:
            return True  # unbalanced or mismatched: json.loads would refuse it; refuse it here
        brackets = shorter
    return bool(brackets)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(
                f"duplicate key {key[:40]!r} (a first-wins and a last-wins reader would disagree)"
            )
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (NaN and Infinity literals are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} overflows a double")
    return value


def loads(data: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse manifest bytes as strict JSON (UTF-8). Raises ValueError, naming the problem, for
    anything that is not valid JSON and for: a key repeated in one object, NaN / Infinity
    literals, a number that overflows a double (1e400), nesting deeper than `max_depth` (checked
    before parsing, so hostile nesting never reaches the recursive parser)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason})") from None
    if _depth_exceeds(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_finite_float
        )
    except RecursionError:
        raise ValueError("nested too deeply") from None
