"""`tickformer certify --check CERT ART [--trust KEY.pub]`: a certificate checked later.

    check_certificate("rep/certificate.json", "ART", trust=None) -> CheckResult

What it checks, in this order, each a line of the result:
  1. integrity: certificate.json is the certificate that was written -- the SHA-256 of its
     canonical JSON without `integrity` (report.certificate_body) is `integrity.body_sha256`, and
     samples_ns.npy is the one it names (`samples_sha256`, inside what that hash covers);
  2. signature: with --trust, certificate.sig must be an Ed25519 signature of that body by the
     trusted key (tickformer.signing: the key that signs the artifact); without --trust a
     signature is reported, not verified;
  3. the artifact: ART is opened as every command opens it (hashes, and its own signature with
     --trust) and its id (manifest_sha256; of a bare ONNX model, the SHA-256 of its bytes) must
     be the certificate's `conditions.artifact_id`;
  4. the verdict: recomputed from the stored samples with the stored budget and EVT settings
     (decision.analyze: the bootstrap is seeded, so the same numbers come out on the same
     library versions, recorded in the environment) -- verdict, statistics and pWCET must be the
     certificate's. A sliding stream's ring coverage is taken from the certificate (it rests on
     positions, which are not stored) and applied by the same rule as the campaign.

Not real-time code.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tickformer import sealed, signing
from tickformer.artifact import open_artifact
from tickformer.errors import ConfigError, TickformerError
from tickformer.safe_files import read_path

from .decision import ADVICE, EXIT_CODES, INCONCLUSIVE, PASS, EvtConfig, analyze
from .report import CERTIFICATE, SIGNATURE, certificate_body

MAX_CERTIFICATE_BYTES = 64 << 20


@dataclass
class CheckResult:
    ok: bool = True
    verdict: str | None = None
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def good(self, line: str) -> None:
        self.lines.append(f"ok: {line}")

    def bad(self, line: str) -> None:
        self.ok = False
        self.problems.append(line)
        self.lines.append(f"FAILED: {line}")


def _public_key(trust: Any) -> Any:
    key = trust.key if isinstance(trust, signing.Trust) else trust
    if isinstance(key, (str, os.PathLike)):
        return signing.load_public_key(key)
    return key


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def check_certificate(
    cert: str | os.PathLike[str], artifact: str | os.PathLike[str], *, trust: Any = None
) -> CheckResult:
    """Check the certificate `cert` (certificate.json of a `tickformer certify` report) against
    `artifact` (module docstring). Raises ConfigError only when `cert` cannot be read at all."""
    path = Path(cert)
    if path.is_dir():
        path = path / CERTIFICATE
    try:
        raw = read_path(path, max_bytes=MAX_CERTIFICATE_BYTES)
    except (OSError, TickformerError) as exc:
        raise ConfigError(f"cannot read the certificate {path}: {exc}; pass DIR/certificate.json") from None
    try:
        data = sealed.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{path} is not a certificate (not strict JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != "tickformer-latency-certificate":
        raise ConfigError(f"{path} is not a tickformer latency certificate (its format key says otherwise)")
    result = CheckResult()
    directory = path.parent
    body = certificate_body(data)
    integrity = data.get("integrity") or {}
    # 1. integrity
    if hashlib.sha256(body).hexdigest() != integrity.get("body_sha256"):
        result.bad(f"{path.name} changed after it was written (its sha256 is not integrity.body_sha256)")
    else:
        result.good(f"{path.name} is as written (sha256 {integrity['body_sha256'][:16]}...)")
    samples_name = (data.get("files") or {}).get("samples", "samples_ns.npy")
    samples = None
    try:
        samples_bytes = read_path(directory / samples_name, max_bytes=MAX_CERTIFICATE_BYTES * 16)
    except (OSError, TickformerError) as exc:
        result.bad(f"the samples {samples_name} cannot be read ({exc})")
    else:
        if hashlib.sha256(samples_bytes).hexdigest() != data.get("samples_sha256"):
            result.bad(f"{samples_name} is not the file the certificate names (samples_sha256 differs)")
        else:
            samples = np.load(io.BytesIO(samples_bytes), allow_pickle=False)
            result.good(f"{samples_name} is the one the certificate names ({samples.size} samples)")
    # 2. signature
    sig = directory / SIGNATURE
    if trust is not None:
        if not sig.is_file():
            result.bad(
                f"--trust given but the certificate is not signed (no {SIGNATURE}); certify again with --sign"
            )
        else:
            try:
                kid = signing.verify_document(body, read_path(sig), _public_key(trust), where=str(path))
            except TickformerError as exc:
                result.bad(f"signature: {exc}")
            else:
                result.good(f"signed by the trusted key {kid}")
    elif sig.is_file():
        result.lines.append(f"note: {SIGNATURE} present, not verified (pass --trust KEY.pub to verify it)")
    # 3. the artifact
    want = (data.get("conditions") or {}).get("artifact_id")
    try:
        if Path(artifact).is_dir():
            have = str(open_artifact(artifact, trust=trust).manifest["manifest_sha256"])
        else:
            have = hashlib.sha256(read_path(Path(artifact))).hexdigest()
    except (OSError, TickformerError) as exc:
        result.bad(f"the artifact {artifact} does not open: {exc}")
    else:
        if have != want:
            result.bad(f"the artifact's id {have[:16]}... is not the certificate's {str(want)[:16]}...")
        else:
            result.good(f"artifact id {have[:16]}... is the certificate's")
    # 4. the verdict, recomputed
    if samples is not None:
        _recompute(data, samples, result)
    return result


def _recompute(data: dict[str, Any], samples: np.ndarray, result: CheckResult) -> None:
    try:
        evt_config = EvtConfig(**data["evt_config"])
        again = analyze(samples, budget_ns=data["budget_ns"], evt_config=evt_config)
    except (KeyError, TypeError, TickformerError) as exc:
        result.bad(f"the verdict cannot be recomputed from the stored settings: {exc}")
        return
    ring = (data.get("campaign") or {}).get("ring")
    if ring is not None and not ring.get("covered") and again["verdict"] == PASS:
        again.update(verdict=INCONCLUSIVE, exit_code=EXIT_CODES[INCONCLUSIVE], advice=ADVICE)
    result.verdict = again["verdict"]
    stored = data.get("stats") or {}
    stats_same = all(_same(stored.get(k), v) for k, v in again["stats"].items())
    pw, pw_stored = again["pwcet"], data.get("pwcet") or {}
    pw_same = pw["estimated"] == pw_stored.get("estimated") and _same(
        pw.get("value_ns"), pw_stored.get("value_ns")
    )
    if again["verdict"] != data.get("verdict"):
        result.bad(f"the samples give {again['verdict']}, the certificate says {data.get('verdict')}")
    elif not stats_same:
        result.bad("the statistics recomputed from the samples differ from the certificate's")
    elif not pw_same:
        result.bad(
            f"the pWCET recomputed ({pw.get('text') or pw.get('value_ns')}) differs from the certificate's"
        )
    else:
        result.good(
            f"verdict {again['verdict']} recomputed from the samples (statistics and pWCET as stored: "
            f"{pw.get('text') or _ns(pw.get('value_ns'))})"
        )


def _ns(v: Any) -> str:
    return "-" if v is None else f"{float(v) / 1e3:.1f} us"
