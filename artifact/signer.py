"""Signing an exported artifact: manifest.sig beside manifest.json (`tickformer.signing`).

`sign_artifact(path, key)` verifies the artifact first (every hash: `open_artifact`), signs the
canonical bytes of the manifest it verified, writes manifest.sig atomically and checks the
result loads with the matching public key. Nothing else in the artifact changes. Not real-time.
"""

from __future__ import annotations

import os
from pathlib import Path

from tickformer import sealed, signing
from tickformer.durable import atomic_write

from .format import SIGNATURE
from .reader import open_artifact


def sign_artifact(path: str | os.PathLike[str], key: str | os.PathLike[str]) -> str:
    """Sign the artifact at `path` with the private key file `key` (`tickformer keygen`).
    Returns the key id. Raises ArtifactError (bad artifact) or ConfigError (bad key)."""
    private = signing.load_private_key(key)  # before anything is read: a bad key fails fast
    artifact = open_artifact(path)
    document = signing.signature_document(sealed.canonical(artifact.manifest), private)
    atomic_write(Path(artifact.root) / SIGNATURE, document)
    return open_artifact(path, trust=private.public_key()).signed_by or ""
