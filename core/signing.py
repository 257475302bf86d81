"""Ed25519 signatures of sealed manifests: who made an artifact, not only whether it is intact.

The self-hash of a manifest (`tickformer.sealed`) detects corruption; anyone who can write the
directory can recompute it. A signature made with a private key that only the publisher holds
cannot be recomputed: a reader that trusts the matching public key refuses an artifact that was
changed and re-sealed, or not signed at all (SECURITY.md, threat model).

    generate_key(out)                 out (private key, PEM PKCS#8, mode 0600) and out.pub (public
                                      key, PEM SubjectPublicKeyInfo), both written atomically
    signature_document(body, key)     the bytes of a signature file over `body`
    verify_document(body, doc, pub)   the signer's key id if `doc` is a valid signature of `body`
                                      by the key in `pub`; UntrustedArtifact otherwise

What is signed is `tickformer.sealed.canonical(manifest)`: the canonical JSON of the sealed
manifest as parsed (sorted keys, no whitespace, its self-hash included), so a signature does not
depend on the file's formatting, and the strict parser (`sealed.loads`: no duplicate keys, no
NaN) makes "as parsed" unambiguous. The signature lives in its own file beside the manifest
(`artifact.format.SIGNATURE`, manifest.sig) rather than inside it: signing an existing artifact
or re-signing with another key then changes no byte of the manifest, its self-hash or any file
it lists, and there is no key to exclude from both the self-hash and the signature.

Keys: Ed25519 through `cryptography` (pyca; OpenSSL underneath), a well-kept library; nothing
here implements cryptography. Private keys are not encrypted (protect them with file
permissions, or keep them on the build machine only). Not real-time code.
Sources: RFC 8032 (Ed25519); cryptography.io, "Ed25519 signing".
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tickformer import safe_files
from tickformer.durable import atomic_write
from tickformer.errors import ConfigError, FileRefused, UntrustedArtifact

SIGNATURE_FORMAT = "tickformer-signature"
SIGNATURE_VERSION = 1
ALGORITHM = "Ed25519"
MAX_KEY_BYTES = 64 << 10
MAX_SIGNATURE_BYTES = 64 << 10
PUBLIC_SUFFIX = ".pub"


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise ConfigError(
            "signatures need the `cryptography` package, which is not installed: pip install cryptography"
        ) from None
    return serialization, ed25519


def key_id(public_key: Any) -> str:
    """The first 16 hex digits of the SHA-256 of the raw 32-byte public key (names a key in messages)."""
    serialization, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True)
class Trust:
    """A device's trust policy: the public key an artifact must be signed with, and the lowest
    release number it accepts (anti-rollback: an older, genuinely signed artifact is refused)."""

    key: Any  # a public key file (NAME.pub) or a loaded public key
    min_release: int = 0

    def __post_init__(self) -> None:
        if (
            isinstance(self.min_release, bool)
            or not isinstance(self.min_release, int)
            or self.min_release < 0
        ):
            raise ConfigError(f"min_release {self.min_release!r} must be a whole number >= 0")

    def __str__(self) -> str:  # messages that name the trusted key name the file, as before
        return str(self.key)


def generate_key(out: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: `out` (private, 0600) and `out`.pub (public, 0644), each
    atomically. Refuses to overwrite an existing key. Returns (private path, public path)."""
    serialization, ed25519 = _crypto()
    private_path = Path(out)
    public_path = private_path.with_name(private_path.name + PUBLIC_SUFFIX)
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise ConfigError(f"{path} exists; refusing to overwrite a key, choose another --out")
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    atomic_write(private_path, private_pem, mode=0o600)
    atomic_write(public_path, public_pem, mode=0o644)
    return private_path, public_path


def _read_key(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        return safe_files.read_path(path, max_bytes=MAX_KEY_BYTES)
    except FileRefused as exc:
        raise ConfigError(f"{what} {exc}; pass the key file `tickformer keygen --out NAME` wrote") from None


def public_key_file(private: str | os.PathLike[str]) -> str:
    """What to pass as --trust for the private key file `private`: NAME.pub beside it when that
    file exists, else a sentence saying it is missing (messages name only files that exist)."""
    public = Path(str(private) + PUBLIC_SUFFIX)
    if public.is_file():
        return str(public)
    return f"<its public key: {public} is not there; use the .pub `tickformer keygen` wrote with it>"


def load_private_key(path: str | os.PathLike[str]) -> Any:
    """The Ed25519 private key in the PEM file at `path`, which only its owner may read or write
    (mode 0600 or narrower, as `tickformer keygen` writes it: a key others can read is no longer
    secret, as ssh also refuses). Raises ConfigError."""
    serialization, ed25519 = _crypto()
    data = _read_key(path, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"private key {path} is not an unencrypted PEM private key ({str(exc)[:80]}); pass the file "
            "`tickformer keygen --out NAME` wrote as NAME (not NAME.pub)"
        ) from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise ConfigError(
            f"private key {path} is a {type(key).__name__}, not Ed25519; make one with tickformer keygen"
        )
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        mode = 0
    if mode & 0o077:
        raise ConfigError(
            f"private key {path} has mode {mode:04o}: others can read or change it; `chmod 600 {path}`, "
            "and make a new key pair if anyone else could have read it"
        )
    return key


def load_public_key(path: str | os.PathLike[str]) -> Any:
    """The Ed25519 public key in the PEM file at `path`. Raises ConfigError."""
    serialization, ed25519 = _crypto()
    data = _read_key(path, "trust key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"trust key {path} is not a PEM public key ({str(exc)[:80]}); pass NAME.pub from `tickformer keygen`"
        ) from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise ConfigError(
            f"trust key {path} is a {type(key).__name__}, not Ed25519; make one with tickformer keygen"
        )
    return key


def signature_document(body: bytes, private_key: Any) -> bytes:
    """The signature file over `body` (the canonical manifest): JSON with the algorithm, the
    signer's key id, the SHA-256 of `body` (for people; not what is verified) and the signature."""
    doc = {
        "format": SIGNATURE_FORMAT,
        "version": SIGNATURE_VERSION,
        "algorithm": ALGORITHM,
        "key_id": key_id(private_key.public_key()),
        "signed_sha256": hashlib.sha256(body).hexdigest(),
        "signature": base64.b64encode(private_key.sign(body)).decode("ascii"),
    }
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("ascii")


def verify_document(body: bytes, document: bytes, public_key: Any, *, where: str) -> str:
    """The signer's key id if `document` is a signature of `body` by `public_key`. Raises
    UntrustedArtifact naming what is wrong (`where`: the artifact, for messages)."""
    from tickformer import sealed

    trusted = key_id(public_key)
    try:
        doc = sealed.loads(document)
    except ValueError as exc:
        raise UntrustedArtifact(
            f"{where}: the signature file is not valid JSON ({exc}); sign the artifact again"
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != SIGNATURE_FORMAT
        or doc.get("version") != SIGNATURE_VERSION
    ):
        raise UntrustedArtifact(
            f"{where}: the signature file is not a {SIGNATURE_FORMAT} v{SIGNATURE_VERSION}; sign it again"
        )
    if doc.get("algorithm") != ALGORITHM or not isinstance(doc.get("signature"), str):
        raise UntrustedArtifact(
            f"{where}: the signature is not an {ALGORITHM} signature; sign the artifact again"
        )
    try:
        signature = base64.b64decode(doc["signature"], validate=True)
    except ValueError:
        raise UntrustedArtifact(f"{where}: the signature is not base64; sign the artifact again") from None
    from cryptography.exceptions import InvalidSignature

    try:
        public_key.verify(signature, body)
    except InvalidSignature:
        signer = doc.get("key_id")
        if isinstance(signer, str) and signer != trusted:
            raise UntrustedArtifact(
                f"{where}: signed by key {signer[:16]}, not by the trusted key {trusted}; pass the "
                "publisher's key to --trust, or re-sign it (tickformer sign) if you vouch for it"
            ) from None
        raise UntrustedArtifact(
            f"{where}: the signature does not match the manifest (the manifest changed after it was signed, "
            f"or the signature is forged); do not run it: get the artifact again from its publisher, or "
            f"re-sign it (tickformer sign) if you changed it yourself"
        ) from None
    return trusted
