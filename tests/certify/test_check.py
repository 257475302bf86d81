"""`tickformer certify --check CERT ART` (certify/check.py): the record's integrity, its signature
by the artifact's key, the artifact's id, and the verdict recomputed from the stored samples --
each shown to fail on the tampering it guards against."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from tickformer import sealed, signing
from tickformer.certify.check import check_certificate
from tickformer.certify.report import certificate_body
from tickformer.cli import main
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A tiny artifact signed with a key, and a certificate of it signed with the same key (numpy
    backend, 1000 steps)."""
    base = tmp_path_factory.mktemp("check")
    cfg = preset("tiny")
    export_params(cfg, init_params(cfg, 0), base / "art")
    private, public = signing.generate_key(base / "key")
    assert main(["sign", str(base / "art"), "--key", str(private)]) == 0  # the artifact's key signs both
    args = ["certify", str(base / "art"), "--backend", "numpy", "--budget-us", "100000", "--samples", "1000"]
    main(
        [
            *args,
            "--warmup",
            "10",
            "--n-boot",
            "20",
            "--sign",
            str(private),
            "--out",
            str(base / "rep"),
            "--quiet",
        ]
    )
    return base, public


def _copy(signed, tmp_path):
    import shutil

    base, public = signed
    shutil.copytree(base / "rep", tmp_path / "rep")
    return tmp_path / "rep" / "certificate.json", base / "art", public


def test_a_genuine_certificate_checks(signed, capsys) -> None:
    base, public = signed
    cert = base / "rep" / "certificate.json"
    assert main(["certify", "--check", str(cert), str(base / "art"), "--trust", str(public)]) == 0
    out = capsys.readouterr().out
    assert "certificate CHECKED" in out and "signed by the trusted key" in out
    assert "recomputed from the samples" in out
    result = check_certificate(cert, base / "art")  # without --trust: the signature is noted, not verified
    assert result.ok and any("not verified" in line for line in result.lines)


def test_an_edited_certificate_fails(signed, tmp_path) -> None:
    cert, art, public = _copy(signed, tmp_path)
    data = json.loads(cert.read_text())
    data["stats"]["p99.9"] = data["stats"]["p50"]  # a nicer tail
    cert.write_text(json.dumps(data, indent=2))
    result = check_certificate(cert, art)
    assert not result.ok and "changed after it was written" in result.problems[0]


def _reseal(cert, change) -> None:
    data = json.loads(cert.read_text())
    change(data)
    data["integrity"]["body_sha256"] = hashlib.sha256(certificate_body(data)).hexdigest()
    cert.write_text(json.dumps(data, indent=2))


def test_a_resealed_certificate_fails_its_signature_and_its_recomputed_verdict(signed, tmp_path) -> None:
    cert, art, public = _copy(signed, tmp_path)
    verdict = json.loads(cert.read_text())["verdict"]
    other = "FAIL" if verdict != "FAIL" else "PASS"
    _reseal(cert, lambda d: d.update(verdict=other))  # a forger who knows the hash, not the key
    with_key = check_certificate(cert, art, trust=public)
    assert not with_key.ok and any("signature" in p for p in with_key.problems)
    without = check_certificate(cert, art)  # no key: the samples still give the true verdict
    assert not without.ok and f"the samples give {verdict}, the certificate says {other}" in without.problems


def test_other_samples_fail(signed, tmp_path) -> None:
    cert, art, _ = _copy(signed, tmp_path)
    samples = cert.parent / "samples_ns.npy"
    x = np.load(samples)
    np.save(samples, x // 2)
    result = check_certificate(cert, art)
    assert not result.ok and "is not the file the certificate names" in " ".join(result.problems)


def test_another_artifact_fails(signed, tmp_path) -> None:
    cert, _, _ = _copy(signed, tmp_path)
    cfg = preset("tiny")
    export_params(cfg, init_params(cfg, 1), tmp_path / "other")
    result = check_certificate(cert, tmp_path / "other")
    assert not result.ok and "is not the certificate's" in " ".join(result.problems)


def test_an_unsigned_certificate_fails_with_trust(signed, tmp_path) -> None:
    cert, art, public = _copy(signed, tmp_path)
    (cert.parent / "certificate.sig").unlink()
    result = check_certificate(cert, art, trust=public)
    assert not result.ok and "not signed" in result.problems[0]
    assert sealed.loads(cert.read_bytes())["integrity"]["signature"] == "certificate.sig"


def test_check_refuses_campaign_flags(signed, tmp_path, capsys) -> None:
    base, _ = signed
    cert = base / "rep" / "certificate.json"
    assert main(["certify", "--check", str(cert), str(base / "art"), "--budget-us", "5"]) == 1
    assert "belong to a campaign" in capsys.readouterr().err
