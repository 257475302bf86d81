"""Which artifact folder a path is, or lies inside: the tools' rule that nothing but export, sign
and build writes into an artifact (SECURITY.md, core/commands/args.py). Not real-time."""

from __future__ import annotations

import os
from pathlib import Path

from tickformer import sealed
from tickformer.errors import FileRefused
from tickformer.safe_files import MAX_MANIFEST_BYTES, read_path

from .format import FORMAT, MANIFEST


def artifact_containing(path: str | os.PathLike[str]) -> Path | None:
    """The artifact folder that `path` is, or lies inside (its manifest.json names FORMAT), else
    None. For the tools' rule that nothing but export, sign and build writes into an artifact
    (SECURITY.md). Reads at most one small manifest per folder up to the root; a manifest that
    cannot be read or parsed is not taken for an artifact's (then nothing is protected there)."""
    here = Path(path).resolve()  # a symlink into an artifact is inside it
    for folder in (here, *here.parents):
        candidate = folder / MANIFEST
        if not candidate.is_file():
            continue
        try:
            manifest = sealed.loads(read_path(candidate, max_bytes=MAX_MANIFEST_BYTES))
        except (FileRefused, ValueError):
            continue
        if isinstance(manifest, dict) and manifest.get("format") == FORMAT:
            return folder
    return None
