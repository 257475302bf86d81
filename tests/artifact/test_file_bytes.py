"""Artifact.file_bytes: the bytes read and verified at open; for an Artifact made by hand
(without `files`) a fresh read through safe_files.Directory.read_listed -- the listed size, then
the listed SHA-256 -- never the bytes on disk unchecked."""

from __future__ import annotations

import pytest

from tickformer.artifact.reader import Artifact, open_artifact
from tickformer.errors import ArtifactError
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

WEIGHTS = "weights.npz"


@pytest.fixture
def art(tmp_path):
    config = preset("tiny")
    export_params(config, init_params(config, 0), tmp_path / "art")
    return tmp_path / "art"


def _by_hand(opened: Artifact) -> Artifact:
    return Artifact(root=opened.root, manifest=opened.manifest, config=opened.config)


def test_a_hand_made_artifact_reads_each_file_as_listed(art):
    opened = open_artifact(art)
    original = (art / WEIGHTS).read_bytes()
    assert _by_hand(opened).file_bytes(WEIGHTS) == opened.file_bytes(WEIGHTS) == original

    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0xFF  # same size: only the digest can tell
    (art / WEIGHTS).write_bytes(bytes(flipped))
    with pytest.raises(ArtifactError, match=f"{WEIGHTS}: SHA-256 .* does not match manifest.json"):
        _by_hand(opened).file_bytes(WEIGHTS)
    with pytest.raises(ArtifactError, match="SHA-256"):
        _by_hand(opened).params()
    assert opened.file_bytes(WEIGHTS) == original  # the opened artifact keeps the bytes it verified

    (art / WEIGHTS).write_bytes(original[:-1])
    with pytest.raises(ArtifactError, match=f"{WEIGHTS} has {len(original) - 1} bytes, manifest.json says"):
        _by_hand(opened).file_bytes(WEIGHTS)
