"""Issue 20: signed artifacts. The self-hash stops accidents; an Ed25519 signature of the sealed
manifest (manifest.sig, `tickformer.signing`) stops whoever can write the directory but does
not hold the private key: with a trust key, an unsigned, re-sealed, re-signed-by-another-key or
replayed-signature artifact is refused. Without one, the same re-sealed artifact loads: what
hashing alone does not defend (SECURITY.md)."""

from __future__ import annotations

import os
import stat

import _relutil as ru
import numpy as np
import pytest

from tickformer import runtime, signing
from tickformer.artifact.reader import open_artifact
from tickformer.artifact.signer import sign_artifact
from tickformer.errors import ConfigError, UntrustedArtifact

KIND = "signing: tampered / unsigned / foreign-key artifact loaded with a trust key"
NOTE = (
    "manifest edited and re-sealed, weights replaced with every hash recomputed, no manifest.sig, a signature by "
    "another key, a signature replayed from another artifact, a garbage or linked manifest.sig; all must be "
    "UntrustedArtifact with --trust (and the re-sealed ones load without it: hashes are no defence)"
)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    return signing.generate_key(root / "pub"), signing.generate_key(root / "other")


@pytest.fixture()
def signed(art_src, tmp_path, keys):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    sign_artifact(art, keys[0][0])
    return art


@pytest.mark.timeout(30)
def test_keygen_writes_a_private_key_0600_and_refuses_to_overwrite(tmp_path):
    private, public = signing.generate_key(tmp_path / "k")
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600 and public.name == "k.pub"
    assert b"PRIVATE KEY" in private.read_bytes() and b"PUBLIC KEY" in public.read_bytes()
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        signing.generate_key(tmp_path / "k")
    with pytest.raises(ConfigError, match="not an unencrypted PEM private key"):
        signing.load_private_key(public)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["numpy", "ort"])
def test_a_signed_artifact_loads_with_its_key(signed, keys, backend):
    key_id = signing.key_id(signing.load_public_key(keys[0][1]))
    assert open_artifact(signed, trust=keys[0][1]).signed_by == key_id
    with runtime.load(signed, backend=backend, trust=keys[0][1]) as session:
        session.step(np.zeros(session.input_shape, np.float32))
    assert open_artifact(signed).signed_by is None  # no trust key: not checked


@pytest.mark.timeout(120)
def test_export_sign_writes_a_signed_artifact(ckpt_src, tmp_path, keys):
    from tickformer.export.writer import export_artifact

    out = export_artifact(ckpt_src[0], tmp_path / "art", lengths=[1, 4], sign=keys[0][0])
    assert (out / "manifest.sig").is_file()
    open_artifact(out, trust=keys[0][1])


def _edit_and_reseal(art):
    manifest = ru.read_json(art / ru.ART_MANIFEST)
    manifest["output_bound"] *= 1000  # a safety value widened
    ru.write_json(art / ru.ART_MANIFEST, ru.resealed(manifest))


def _weights_replaced(art):
    data = bytearray((art / "weights.npz").read_bytes())
    data[-200] ^= 1
    (art / "weights.npz").write_bytes(bytes(data))
    ru.rehash(art, ru.ART_MANIFEST, ["weights.npz"])


def _unsigned(art):
    (art / "manifest.sig").unlink()


def _other_key(art, keys):
    sign_artifact(art, keys[1][0])


def _replayed(art, art_src, tmp_path, keys):
    """The signature of another artifact signed by the same key, copied in."""
    other = ru.fresh_copy(art_src[0], tmp_path / "other")
    manifest = ru.read_json(other / ru.ART_MANIFEST)
    manifest["created_utc"] = "2000-01-01T00:00:00+00:00"
    ru.write_json(other / ru.ART_MANIFEST, ru.resealed(manifest))
    sign_artifact(other, keys[0][0])
    (art / "manifest.sig").write_bytes((other / "manifest.sig").read_bytes())
    _edit_and_reseal(art)


CASES = {
    "manifest edited and re-sealed": (
        lambda art, **kw: _edit_and_reseal(art),
        "does not match the manifest",
        True,
    ),
    "weights replaced, every hash recomputed": (
        lambda art, **kw: _weights_replaced(art),
        "does not match",
        False,
    ),
    "unsigned": (lambda art, **kw: _unsigned(art), "is not signed", True),
    "signed by another key": (lambda art, keys, **kw: _other_key(art, keys), "not by the trusted key", True),
    "signature replayed from another artifact": (
        lambda art, keys, art_src, tmp_path: _replayed(art, art_src, tmp_path, keys),
        "does not match the manifest",
        True,
    ),
    "garbage manifest.sig": (
        lambda art, **kw: (art / "manifest.sig").write_bytes(b"{"),
        "not valid JSON",
        True,
    ),
    "manifest.sig a symlink": (
        lambda art, tmp_path, **kw: (
            os.replace(art / "manifest.sig", tmp_path / "sig"),
            os.symlink(tmp_path / "sig", art / "manifest.sig"),
        ),
        "symbolic link",
        True,
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(CASES))
def test_with_a_trust_key_every_forgery_is_refused(signed, keys, art_src, tmp_path, outcomes, case):
    mutate, words, loads_without_trust = CASES[case]
    mutate(signed, keys=keys, art_src=art_src, tmp_path=tmp_path)
    outcomes.describe(KIND, NOTE)
    with pytest.raises(UntrustedArtifact, match=words) as info:
        outcomes.run(KIND, lambda: runtime.load(signed, backend="ort", trust=keys[0][1]), reraise=True)
    assert "\n" not in str(info.value)
    if loads_without_trust:  # what the hashes alone let through
        runtime.load(signed, backend="numpy").close()


@pytest.mark.timeout(60)
def test_a_manifest_rewrite_by_a_tensorrt_build_drops_the_stale_signature(signed, keys):
    from tickformer.export.engines import update_manifest

    update_manifest(signed, lambda m: m.setdefault("engines", {}))
    assert not (signed / "manifest.sig").exists()
    with pytest.raises(UntrustedArtifact, match="is not signed.*tickformer sign"):
        open_artifact(signed, trust=keys[0][1])
    sign_artifact(signed, keys[0][0])
    open_artifact(signed, trust=keys[0][1])
