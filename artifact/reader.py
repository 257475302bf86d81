"""Reading an exported artifact directory: manifest, hashes, config (format: artifact/format.py).

`open_artifact(path, trust=None)` checks, in this order, before any graph or weight is parsed:
1. the directory, opened once without following a link at its name, and listed once; every file
   below is read through it (`tickformer.safe_files`): opened once with O_NOFOLLOW | O_NONBLOCK,
   a regular file with one hard link, its size checked before reading (and, for listed files,
   equal to the manifest's), read exactly once. Those same bytes are hashed, parsed and kept
   (`Artifact.files`): nothing is opened again by path, so a file swapped after the check is
   never used (time of check = time of use);
2. manifest.json: strict JSON (`tickformer.sealed.loads`: no duplicate keys, no NaN/Infinity,
   nesting at most sealed.MAX_DEPTH, at most safe_files.MAX_MANIFEST_BYTES), format, version (an
   `int` equal to VERSION: True and 1.0 are refused);
3. with `trust` (a public key file from `tickformer keygen`): the Ed25519 signature in
   manifest.sig over the canonical manifest (`tickformer.signing`); an unsigned artifact, a
   signature by another key or over other content is refused (`UntrustedArtifact`);
4. its self-hash (`tickformer.sealed`): a flipped digit in a safety value (output_bound,
   input_domain, tolerance) is reported as "manifest.json was modified". The hash detects
   corruption and accidental edits, not a forger: whoever can rewrite the manifest can
   recompute it -- only a signature (3.) defends against that;
5. the schema of every value the runtime uses, and every number's range (`check_schema`,
   artifact/ranges.py: signed or not);
6. the set of files: every listed file present and a regular file, with its size and SHA-256;
   files present but not listed are reported by name, except the unhashed caches of TensorRT
   builds (`format.UNHASHED_CACHES`), the signature and hidden `.tmp` leftovers of an
   interrupted atomic write (`tickformer.durable`), which nothing reads as part of the model;
7. the config: weights.npz must be a zip archive that can hold its parameters
   (`model.checkpoint.check_weights_size`, O(1), so no inflated size makes the checks below
   enumerate without end), the graphs' recorded
   I/O against the config and batch (`format.expected_io`),
   the weights against the config (`model.checkpoint.parse_weights`: npz members by name and
   declared size before decompression), and, when onnx is installed, every graph's operators
   (`graph_rules.check_graph`: no external data, no custom domain, no control flow but what the
   artifact kind allows, with a static trip count).
A failure raises `ArtifactError` naming the file or field and the fix. `verified_graph_bytes`
returns a graph's verified bytes for the backends (checked by graph_rules again if onnx was not
importable at open). That the graphs' initializers equal what export builds from weights.npz is
checked one layer up, where the graph builders live (`tickformer.export.consistency`).

Nothing here is real-time safe (file I/O): load once, before the control loop.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from tickformer import sealed, signing, validation
from tickformer.contracts.input_domain import Columns, check_columns, check_domain
from tickformer.errors import ArtifactError, CheckpointError, ConfigError, FileRefused, UntrustedArtifact
from tickformer.model.checkpoint import check_weights_size, parse_weights
from tickformer.model.config import Config
from tickformer.safe_files import MAX_FILE_BYTES, MAX_MANIFEST_BYTES, Directory, is_plain_name

from . import graph_rules, ranges
from .format import (
    FORMAT,
    GRAPH_FILES,
    MANIFEST,
    READS,
    REQUIRED_GRAPHS,
    SIGNATURE,
    UNHASHED_CACHES,
    WEIGHTS,
    allowed_control_flow,
    artifact_kind,
    artifact_version,
    cache_kind,
    expected_io,
)

MANIFEST_HASH = sealed.MANIFEST_HASH


@dataclass(frozen=True)
class Artifact:
    """A verified artifact: its directory, manifest and model config (as exported), and the
    verified bytes of every listed file (`files`, read once at open: `file_bytes`).
    `signed_by`: the key id that verified its signature when a trust key was given, else None;
    `trust_key`: that public key (the c backend checks signed build records with it).
    `manifest_bytes`: the bytes of manifest.json the checks ran on (certify hashes these, never a
    second read by path); None for an Artifact made by hand."""

    root: Path
    manifest: dict[str, Any] = field(repr=False)
    config: Config
    files: Mapping[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    signed_by: str | None = None
    manifest_bytes: bytes | None = field(default=None, repr=False, compare=False)
    trust_key: Any = field(default=None, repr=False, compare=False)  # the public key that verified it

    @property
    def batch(self) -> int:
        return int(self.manifest["batch"])

    @property
    def max_len(self) -> int:
        return int(self.manifest["max_len"])

    @property
    def input_domain(self) -> tuple[float, float]:
        lo, hi = self.manifest["input_domain"]
        return float(lo), float(hi)

    @property
    def input_domain_columns(self) -> Columns | None:
        """One [lo, hi] per input column ((lows, highs), inside input_domain), or None: every
        column has input_domain (checked at open, inside it)."""
        columns = self.manifest.get("input_domain_columns")
        if columns is None:
            return None
        return tuple(float(p[0]) for p in columns), tuple(float(p[1]) for p in columns)

    @property
    def output_bound(self) -> float | None:
        bound = self.manifest.get("output_bound")
        return None if bound is None else float(bound)

    @property
    def tolerance(self) -> dict[str, Any]:
        return dict(self.manifest["tolerance"])

    def graph_spec(self, name: str) -> dict[str, Any]:
        try:
            return dict(self.manifest["graphs"][name])
        except KeyError:
            raise ArtifactError(
                f"{self.root}: has no {name!r} graph (graphs: {sorted(self.manifest['graphs'])})"
            ) from None

    def graph_path(self, name: str) -> Path:
        """The graph's path, for messages: read its bytes with `verified_graph_bytes`, never by path."""
        return self.root / self.graph_spec(name)["file"]

    def file_bytes(self, name: str) -> bytes:
        """The verified bytes of listed file `name`: those read at open. An Artifact made by hand
        (without `files`) re-reads the file as its listing says (`Directory.read_listed`: no links
        followed, size first, then its SHA-256). Raises ArtifactError."""
        entry = self.manifest["files"].get(name)
        if entry is None:
            raise ArtifactError(f"{self.root}: {name} is not listed in {MANIFEST}; re-export the artifact")
        data = self.files.get(name)
        if data is None:
            try:
                with Directory(self.root) as directory:
                    return directory.read_listed(name, entry, listed_in=MANIFEST)
            except FileRefused as exc:
                raise _fail(self.root, f"{exc}; load the artifact again or re-export it") from None
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ArtifactError(
                f"{self.root / name}: {name} changed after the artifact was opened (SHA-256 does not match "
                f"{MANIFEST}); load it again or re-export"
            )
        return data

    def params(self) -> dict[str, np.ndarray]:
        """The float32 parameter dict from the verified bytes of weights.npz (members checked
        before decompression, no pickle), checked against the config (names, shapes, float32,
        finite). Raises ArtifactError."""
        path = self.root / WEIGHTS
        try:
            return parse_weights(self.file_bytes(WEIGHTS), self.config, where=str(path))
        except CheckpointError as exc:
            raise ArtifactError(f"{exc} (config in {MANIFEST}); re-export the artifact") from None


def _fail(root: Path, what: str) -> ArtifactError:
    return ArtifactError(f"{root}: {what}")


def _parse_manifest(root: Path, directory: Directory) -> tuple[Any, bytes]:
    """(parsed manifest, its bytes), read through `directory` (strict JSON)."""
    if directory.kind(MANIFEST) == "missing":
        raise _fail(
            root,
            f"no {MANIFEST}; not a tickformer artifact (or an interrupted export): run `tickformer "
            f"export CKPT --out {root}`",
        )
    try:
        data = directory.read(MANIFEST, max_bytes=MAX_MANIFEST_BYTES)
    except FileRefused as exc:
        raise _fail(root, f"{exc}; an artifact holds only regular files, re-export it") from None
    try:
        return sealed.loads(data), data
    except ValueError as exc:  # JSONDecodeError is a ValueError; so is everything sealed.loads refuses
        raise _fail(
            root, f"{MANIFEST} is not valid JSON ({str(exc)[:120]}); re-export the artifact"
        ) from None


def check_self_hash(root: Path, manifest: dict[str, Any]) -> None:
    """The manifest's MANIFEST_HASH must equal sealed.digest(manifest)."""
    recorded = manifest.get(MANIFEST_HASH)
    if not isinstance(recorded, str):
        raise _fail(
            root,
            f"{MANIFEST} has no {MANIFEST_HASH} (an older or hand-edited manifest); re-export the artifact",
        )
    digest = sealed.digest(manifest)
    if digest != recorded:
        raise _fail(
            root,
            f"{MANIFEST} was modified after export: its content hashes to {digest[:16]}..., "
            f"{MANIFEST_HASH} says {recorded[:16]}...; restore it or re-export the artifact",
        )


def _check_io_spec(root: Path, graph: str, key: str, spec: Any) -> None:
    ok = isinstance(spec, list) and all(
        isinstance(v, dict)
        and isinstance(v.get("name"), str)
        and isinstance(v.get("dtype"), str)
        and isinstance(v.get("shape"), list)
        and all(validation.is_int(d) or isinstance(d, str) for d in v["shape"])
        for v in spec
    )
    if not ok:
        raise _fail(
            root,
            f"{MANIFEST}: graphs.{graph}.{key} must be a list of {{name, dtype, shape}}; re-export the artifact",
        )


def check_schema(root: Path, manifest: dict[str, Any]) -> None:
    """Types and ranges of every manifest value the runtime reads. Raises ArtifactError naming
    the field. (The config is checked by Config.from_dict, the graphs against it in open_artifact.)"""
    for key in ("config", "graphs", "files", "batch", "max_len", "input_domain", "tolerance"):
        if key not in manifest:
            raise _fail(root, f"{MANIFEST} lacks {key!r}; the manifest is incomplete, re-export the artifact")
    wrong = ranges.problems(manifest)
    if wrong:  # signed or not: a signature says who sealed the numbers, not that they make sense
        raise _fail(root, f"{MANIFEST}: {wrong[0]}; re-export the artifact")
    files = manifest["files"]
    if not isinstance(files, dict) or not all(
        isinstance(v, dict)
        and isinstance(v.get("sha256"), str)
        and validation.is_int(v.get("bytes"))
        and 0 <= v["bytes"] <= MAX_FILE_BYTES
        for v in files.values()
    ):
        raise _fail(
            root, f"{MANIFEST}: 'files' must map file names to {{sha256, bytes}}; re-export the artifact"
        )
    if not isinstance(manifest["config"], dict):
        raise _fail(
            root, f"{MANIFEST}: 'config' must be an object (the model Config); re-export the artifact"
        )
    graphs = manifest["graphs"]
    if not isinstance(graphs, dict):
        raise _fail(
            root,
            f"{MANIFEST}: 'graphs' must map graph names to {{file, inputs, outputs}}, got "
            f"{type(graphs).__name__}; re-export the artifact",
        )
    for name, spec in graphs.items():
        if name not in GRAPH_FILES:
            raise _fail(
                root,
                f"{MANIFEST}: unknown graph {name!r} (known: {sorted(GRAPH_FILES)}); re-export the artifact",
            )
        if not isinstance(spec, dict) or not isinstance(spec.get("file"), str):
            raise _fail(
                root, f"{MANIFEST}: graphs.{name} must be {{file, inputs, outputs}}; re-export the artifact"
            )
        for key in ("inputs", "outputs"):
            _check_io_spec(root, name, key, spec.get(key))
    for key in ("batch", "max_len"):
        value = manifest[key]
        if not validation.is_int(value) or value < 1:
            raise _fail(
                root, f"{MANIFEST}: {key} {value!r} must be a positive integer; re-export the artifact"
            )
    domain = manifest["input_domain"]
    if not isinstance(domain, list) or len(domain) != 2 or not all(validation.is_real(v) for v in domain):
        raise _fail(
            root, f"{MANIFEST}: input_domain {domain!r} must be [lo, hi], two numbers; re-export the artifact"
        )
    try:
        check_domain(*domain)
    except ConfigError:
        raise _fail(
            root,
            f"{MANIFEST}: input_domain {domain} must be two finite float32 numbers with lo <= hi (the run-time "
            f"input check and the score bounds use it); re-export the artifact",
        ) from None
    columns = manifest.get("input_domain_columns")
    if columns is not None:
        cfg = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
        try:
            if cfg.get("inputs") == "tokens":
                raise ConfigError("a token model's domain is its vocabulary")
            check_columns(columns, check_domain(*domain), cfg.get("d_in"))
        except (ConfigError, TypeError) as exc:
            raise _fail(root, f"{MANIFEST}: input_domain_columns: {exc}; re-export the artifact") from None
    tolerance = manifest["tolerance"]
    if not isinstance(tolerance, dict) or not all(
        validation.is_real(tolerance.get(k)) and math.isfinite(tolerance[k]) and tolerance[k] >= 0
        for k in ("atol", "rtol")
    ):
        raise _fail(
            root,
            f"{MANIFEST}: tolerance {str(tolerance)[:80]} must hold finite atol >= 0 and rtol >= 0; "
            "re-export the artifact",
        )
    bound = manifest.get("output_bound")
    if bound is not None and not (validation.is_real(bound) and math.isfinite(bound) and bound > 0):
        raise _fail(
            root,
            f"{MANIFEST}: output_bound {bound!r} must be null or a finite positive number; re-export the artifact",
        )


def _check_header(root: Path, manifest: Any) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _fail(root, f"{MANIFEST} format is not {FORMAT!r}; this is not a tickformer artifact")
    version = manifest.get("version")
    if not validation.is_int(version) or version not in READS:
        shown = version if validation.is_int(version) else f"{version!r} ({type(version).__name__})"
        raise _fail(
            root,
            f"artifact format version {shown} is not supported (this tickformer reads "
            f"{', '.join(map(str, READS))}); re-export it",
        )


def trusted_key(trust: Any) -> tuple[Any, int]:
    """The public key and the lowest accepted release of `trust` (a public key file, a loaded
    key, or a `signing.Trust` policy)."""
    min_release = 0
    if isinstance(trust, signing.Trust):
        trust, min_release = trust.key, trust.min_release
    key = signing.load_public_key(trust) if isinstance(trust, (str, os.PathLike)) else trust
    return key, min_release


def check_signature(root: Path, directory: Directory, manifest: dict[str, Any], trust: Any) -> str:
    """The key id of `trust` (a public key file, a loaded key, or a `signing.Trust` policy: its key
    and the lowest release it accepts) if manifest.sig in `directory` is its valid signature of
    `manifest` (`tickformer.signing`) and the release is not older than the policy's minimum.
    Raises UntrustedArtifact."""
    key, min_release = trusted_key(trust)
    if directory.kind(SIGNATURE) == "missing":
        raise UntrustedArtifact(
            f"{root}: is not signed (no {SIGNATURE}) and a trust key was given; sign it with "
            f"`tickformer sign {root} --key NAME` (or export with --sign NAME), or load it without --trust"
        )
    try:
        document = directory.read(SIGNATURE, max_bytes=signing.MAX_SIGNATURE_BYTES)
    except FileRefused as exc:
        raise UntrustedArtifact(f"{root}: {exc}; sign the artifact again") from None
    signer = signing.verify_document(sealed.canonical(manifest), document, key, where=str(root))
    release = manifest.get("release", 0)  # artifacts written before releases existed: 0
    if validation.is_int(release) and release < min_release:
        raise UntrustedArtifact(
            f"{root}: release {release} is older than {min_release}, the lowest this device accepts "
            f"(--min-release); install a release >= {min_release} (a rollback to an older signed artifact is refused)"
        )
    return signer


def _manifest_of(
    root: Path, directory: Directory, trust: Any
) -> tuple[dict[str, Any], str | None, bytes, Any]:
    """The checked manifest, the key id that verified it (None without trust), its bytes, and
    the public key that verified it (read once: the c backend checks build records with it)."""
    manifest, data = _parse_manifest(root, directory)
    _check_header(root, manifest)
    signer = key = None
    if trust is not None:
        key, minimum = trusted_key(trust)
        signer = check_signature(root, directory, manifest, signing.Trust(key, minimum))
    check_self_hash(root, manifest)
    check_schema(root, manifest)
    return manifest, signer, data, key


def _open_dir(root: Path) -> Directory:
    try:
        return Directory(root)
    except FileRefused as exc:
        if exc.reason in ("missing", "not a directory"):
            what = "does not exist" if exc.reason == "missing" else "is not a directory"
            raise ArtifactError(
                f"artifact {root} {what} (not a directory); pass the directory `tickformer export --out` wrote"
            ) from None
        fix = "" if exc.reason == "symlink" else "; pass the artifact directory itself"
        raise ArtifactError(f"artifact {exc}{fix}") from None


def read_manifest(root: Path, *, trust: Any = None) -> dict[str, Any]:
    """Parse manifest.json (read through `tickformer.safe_files`) and check format, version, the
    signature (with `trust`), self-hash and schema; no file hashing."""
    root = Path(root)
    with _open_dir(root) as directory:
        return _manifest_of(root, directory, trust)[0]


def _unlisted_ok(name: str) -> bool:
    """Files nothing reads as part of the model: TensorRT's caches, the signature, and leftovers
    of an interrupted atomic write."""
    return name in UNHASHED_CACHES or name == SIGNATURE or (name.startswith(".") and name.endswith(".tmp"))


_KIND_WORDS = {
    "symlink": "a symbolic link",
    "fifo": "a FIFO (named pipe)",
    "directory": "a directory",
    "device": "a device file",
    "socket": "a socket",
    "not a regular file": "not a regular file",
}


def verify_files(root: Path, directory: Directory, files: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    """Read every listed file once through `directory` (regular files with one link, size before
    reading) and check its size and SHA-256; report missing, non-regular and unlisted files by
    name. Returns {name: verified bytes}. Raises ArtifactError naming the first bad one."""
    missing, odd = [], []
    for name in sorted(files):
        if not is_plain_name(name) or name in (MANIFEST, SIGNATURE):
            missing.append(name[:80])
            continue
        kind = directory.kind(name)
        if kind == "missing":
            missing.append(name)
        elif kind != "file":
            odd.append(f"{name} is {_KIND_WORDS.get(kind, kind)}")
    unlisted = sorted(
        name for name in directory.names if name not in files and name != MANIFEST and not _unlisted_ok(name)
    )
    if odd:
        raise _fail(
            root,
            f"{'; '.join(odd[:3])}, not a regular file; an artifact holds only its own regular files, "
            "re-export it",
        )
    if missing or unlisted:
        parts = [f"file {name!r} listed in {MANIFEST} is missing" for name in missing[:1]]
        if len(missing) > 1:
            parts = [f"missing files {missing} listed in {MANIFEST}"]
        if unlisted:
            parts.append(
                f"unlisted files {unlisted}" + (" (renamed?)" if missing else " (not written by export)")
            )
        fix = (
            "the artifact is incomplete or altered, re-export it"
            if missing
            else "remove them (or re-export the artifact): an artifact holds only the files export wrote"
        )
        raise _fail(root, "; ".join(parts) + "; " + fix)
    try:
        return directory.read_all_listed(files, listed_in=MANIFEST)
    except FileRefused as exc:
        fix = {"size": "the file is truncated or modified, re-export", "digest": "re-export"}
        raise _fail(
            root,
            f"{exc}; {fix.get(exc.reason, 'an artifact holds only its own regular files, re-export it')}",
        ) from None


def _check_graph_io(root: Path, manifest: dict[str, Any], config: Config) -> None:
    """The graphs' recorded inputs/outputs must be what export writes for this config and batch."""
    batch = manifest["batch"]
    for graph, want in expected_io(config, batch).items():
        spec = manifest["graphs"].get(graph)
        if not isinstance(spec, dict) or spec.get("file") not in manifest["files"]:
            raise _fail(
                root,
                f"{MANIFEST} lists no hashed {graph!r} graph; a {config.arch} artifact needs "
                f"{REQUIRED_GRAPHS[config.arch]}",
            )
        for key in ("inputs", "outputs"):
            have = {v["name"]: (v["dtype"], v["shape"]) for v in spec[key]}
            expected = {name: (dtype, list(shape)) for name, (dtype, shape) in want[key].items()}
            if have != expected:
                bad = sorted(n for n in set(have) | set(expected) if have.get(n) != expected.get(n))
                raise _fail(
                    root,
                    f"{MANIFEST}: graphs.{graph}.{key} {bad}: name, dtype or shape disagrees with the config "
                    f"and batch {batch} (expected "
                    f"{[(n, *expected[n]) for n in bad if n in expected][:2]}); re-export the artifact",
                )


def open_artifact(path: str | os.PathLike[str], *, trust: Any = None) -> Artifact:
    """Verify and open an artifact directory (module docstring: the order of the checks).
    trust: a public key file (NAME.pub of `tickformer keygen`): the artifact must then carry a
    valid signature by that key. Raises ArtifactError (UntrustedArtifact for signatures) saying
    what is wrong. Not real-time safe (file I/O, hashing)."""
    root = Path(path)
    with _open_dir(root) as directory:
        manifest, signer, manifest_bytes, key = _manifest_of(root, directory, trust)
        contents = verify_files(root, directory, manifest["files"])
    try:
        config = Config.from_dict(manifest["config"])
    except (ConfigError, TypeError, ValueError) as exc:
        raise _fail(root, f"invalid config in {MANIFEST}: {exc}") from None
    if config.max_len != manifest["max_len"]:
        raise _fail(
            root, f"config max_len {config.max_len} != manifest max_len {manifest['max_len']}; re-export"
        )
    if manifest["version"] != artifact_version(config):
        raise _fail(
            root,
            f"artifact format version {manifest['version']} does not match its config (a "
            f"{cache_kind(config)}-cache artifact is version {artifact_version(config)}); re-export it",
        )
    if WEIGHTS not in manifest["files"]:
        raise _fail(root, f"{MANIFEST} lists no {WEIGHTS}; re-export the artifact")
    try:  # O(1), before expected_io enumerates the config's layers
        check_weights_size(contents[WEIGHTS], config, where=f"{root / WEIGHTS}")
    except CheckpointError as exc:
        raise ArtifactError(f"{exc} (config in {MANIFEST}); re-export the artifact") from None
    _check_graph_io(root, manifest, config)
    artifact = Artifact(
        root=root,
        manifest=manifest,
        config=config,
        files=contents,
        signed_by=signer,
        manifest_bytes=manifest_bytes,
        trust_key=key,
    )
    artifact.params()  # weights vs config: names, shapes, float32, finite (ArtifactError)
    try:
        import onnx  # noqa: F401  (an optional dependency: without it no graph can run either)
    except ImportError:
        return artifact
    for graph in sorted(manifest["graphs"]):
        _checked_graph(artifact, graph)
    return artifact


def _checked_graph(artifact: Artifact, graph: str) -> bytes:
    """The verified bytes of `graph`, parsed by onnx and checked by `graph_rules.check_graph`."""
    import onnx

    spec = artifact.graph_spec(graph)
    name = spec["file"]
    path = artifact.root / name
    data = artifact.file_bytes(name)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf DecodeError, RecursionError, ...: an unparsable graph
        raise ArtifactError(
            f"{path}: not a valid ONNX model ({type(exc).__name__}: {str(exc)[:100]}); re-export the artifact"
        ) from None
    kind = artifact_kind(artifact.config)
    graph_rules.check_graph(
        model,
        allowed=allowed_control_flow(kind, graph),
        max_trip=artifact.max_len,
        where=str(path),
        what=f"a {kind} artifact's {graph} graph",
    )
    return data


def verified_graph_bytes(artifact: Artifact, graph: str) -> bytes:
    """The bytes of one graph as verified at open (hash-checked against the manifest), parsed
    by onnx and checked by `graph_rules` (no external data, standard operators only, bounded
    control flow). Pass these bytes -- not the path -- to the engine. Raises ArtifactError.
    Not real-time."""
    return _checked_graph(artifact, graph)
