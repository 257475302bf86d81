"""Tampered artifacts and checkpoints are refused, by name, before any file is parsed.

Must hold (issue 8): any single byte flipped in any artifact file is detected before the file is
parsed (manifest hashes); a missing, extra or renamed file is reported by name; the manifest is
validated against a schema with clear errors; versions from the future are refused.

"Before parsing" is checked by replacing every parser the loaders use (numpy.load,
onnxruntime.InferenceSession, onnx.load*, Config.from_dict) by a function that fails the test.
Complementary to tests/export/test_artifact.py and tests/model/test_checkpoint.py (one flip in
the middle of each file, one missing/renamed/extra file): here every file, many offsets
including the first and last byte, both bit and byte flips, both loaders, and the schema.
"""

from __future__ import annotations

import json
import math

import _relutil as ru
import numpy as np
import onnx
import onnxruntime
import pytest

from tickformer import runtime
from tickformer.artifact.reader import open_artifact
from tickformer.errors import ArtifactError, CheckpointError, TickformerError
from tickformer.model.checkpoint import load_checkpoint
from tickformer.model.config import Config

STRIDE = 251  # besides the first/last/middle bytes, every 251st byte of every file is flipped
MANIFEST_STRIDE = 3  # every 3rd byte of a manifest (all its lines and fields)


@pytest.fixture()
def no_parsing(monkeypatch):
    """Fail the test if any graph, weight or config parser runs."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a file was parsed before its hash was verified")

    monkeypatch.setattr(np, "load", forbidden)
    monkeypatch.setattr(onnxruntime, "InferenceSession", forbidden)
    for name in ("load", "load_model", "load_from_string", "load_model_from_string"):
        monkeypatch.setattr(onnx, name, forbidden)
    monkeypatch.setattr(Config, "from_dict", classmethod(lambda cls, data: forbidden()))


def _offsets(size: int) -> list[int]:
    return sorted(set(ru.offsets(size)) | set(range(0, size, STRIDE)))


def _hashed_files(root, manifest_name):
    return sorted(ru.read_json(root / manifest_name)["files"])


# --- many bytes of every hashed file ------------------------------------------------------------
def test_every_flip_in_every_artifact_file_is_refused_before_parsing(art_src, tmp_path, no_parsing, outcomes):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    backend = "ort"
    kind = "artifact: one byte flipped in a hashed file, runtime.load(ort)"
    outcomes.describe(
        kind,
        "XOR 0x01 and 0xFF at the first, last, middle and every 251st byte of weights.npz, model.onnx, "
        "step.onnx; must be ArtifactError naming the file, raised before any parser runs",
    )
    files = _hashed_files(art, ru.ART_MANIFEST)
    assert set(files) >= {"weights.npz", "model.onnx", "step.onnx"}
    for name in files:
        original = (art / name).read_bytes()
        for offset in _offsets(len(original)):
            for mask in (0x01, 0xFF):
                (art / name).write_bytes(ru.flip(original, offset, mask))
                with pytest.raises(ArtifactError, match=rf"{name}: SHA-256 .* does not match") as info:
                    outcomes.run(kind, lambda: runtime.load(art, backend=backend), reraise=True)
                assert "\n" not in str(info.value)
        (art / name).write_bytes(original)


def test_every_flip_in_every_checkpoint_file_is_refused_before_parsing(
    ckpt_src, tmp_path, no_parsing, outcomes
):
    ckpt = ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt")
    kind = "checkpoint: one byte flipped in a hashed file, load_checkpoint"
    outcomes.describe(
        kind,
        "XOR 0x01 and 0xFF at the first, last, middle and every 251st byte of config.json, weights.npz, "
        "metrics.json; must be CheckpointError naming the file, before parsing",
    )
    files = _hashed_files(ckpt, ru.CKPT_MANIFEST)
    assert set(files) == {"config.json", "weights.npz", "metrics.json"}
    for name in files:
        original = (ckpt / name).read_bytes()
        for offset in _offsets(len(original)):
            for mask in (0x01, 0xFF):
                (ckpt / name).write_bytes(ru.flip(original, offset, mask))
                with pytest.raises(CheckpointError, match=rf"{name}: SHA-256 .* does not match"):
                    outcomes.run(kind, lambda: load_checkpoint(ckpt), reraise=True)
        (ckpt / name).write_bytes(original)


def test_truncated_or_grown_files_are_refused_by_size(art_src, ckpt_src, tmp_path, no_parsing, outcomes):
    kind = "artifact/checkpoint: file truncated, emptied or grown"
    outcomes.describe(
        kind,
        "every hashed file cut to 0, 1 and n-1 bytes or grown by 1 byte; must be refused by size, before parsing",
    )
    cases = [
        (ru.fresh_copy(art_src[0], tmp_path / "art"), ru.ART_MANIFEST, open_artifact, ArtifactError),
        (ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt"), ru.CKPT_MANIFEST, load_checkpoint, CheckpointError),
    ]
    for root, manifest, loader, error in cases:
        for name in _hashed_files(root, manifest):
            original = (root / name).read_bytes()
            for damaged in (b"", original[:1], original[:-1], original + b"\0"):
                (root / name).write_bytes(damaged)
                with pytest.raises(error, match=rf"{name}.*{len(damaged)} bytes"):
                    outcomes.run(kind, lambda loader=loader, root=root: loader(root), reraise=True)
            (root / name).write_bytes(original)


# --- the manifest itself ---------------------------------------------------------------------------
def _flip_manifest_everywhere(root, manifest_name, loader, kind, outcomes):
    """Flip every MANIFEST_STRIDE-th byte of the manifest (XOR 0x01), load each; returns
    {offset: unexpected exception}."""
    path = root / manifest_name
    original = path.read_bytes()
    defects = {}
    for offset in range(0, len(original), MANIFEST_STRIDE):
        path.write_bytes(ru.flip(original, offset, 0x01))
        _, exc = outcomes.sweep(kind, lambda: loader(root))
        if exc is not None:
            defects[offset] = exc
    path.write_bytes(original)
    return original, defects


def _describe_defects(original, defects):
    return "; ".join(
        f"byte {off} ({original[max(0, off - 12) : off + 12]!r}): {type(exc).__name__}: {str(exc)[:80]}"
        for off, exc in list(defects.items())[:5]
    )


def _load_and_step(root):
    with runtime.load(root, backend="numpy") as session:
        session.step(np.zeros(session.input_shape, session.input_dtype))


def test_every_flip_of_the_artifact_manifest_ends_in_our_error_or_a_valid_load(art_src, tmp_path, outcomes):
    """Every 3rd byte of manifest.json flipped (XOR 0x01), then load + one step on the numpy backend:
    each case ends in a TickformerError or success, never another exception. Since the manifest
    carries its own SHA-256, a flip may load only if it changed no value (e.g. the 17th digit of
    a float, which parses to the same double): checked."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    kind = "artifact: one bit flipped in manifest.json, load + step (numpy)"
    outcomes.describe(
        kind,
        "XOR 0x01 at every 3rd byte of manifest.json; must end in TickformerError, or success only if "
        "every parsed value is unchanged",
    )
    values = ru.read_json(art / ru.ART_MANIFEST)

    def load_step_and_compare(root):
        _load_and_step(root)
        assert ru.read_json(root / ru.ART_MANIFEST) == values, "a flip that changed a value loaded"

    original, defects = _flip_manifest_everywhere(art, ru.ART_MANIFEST, load_step_and_compare, kind, outcomes)
    assert outcomes.counts[kind]["ArtifactError"] > 0
    if defects:
        outcomes.defects[kind] = [_describe_defects(original, {k: v}) for k, v in defects.items()]
    assert not defects, (
        f"{len(defects)} flips ended in another exception: {_describe_defects(original, defects)}"
    )


def test_every_flip_of_the_checkpoint_manifest_ends_in_our_error_or_a_valid_load(
    ckpt_src, tmp_path, outcomes
):
    ckpt = ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt")
    kind = "checkpoint: one bit flipped in checkpoint.json, load_checkpoint"
    outcomes.describe(
        kind, "XOR 0x01 at every 3rd byte of checkpoint.json; must end in TickformerError or success"
    )
    original, defects = _flip_manifest_everywhere(ckpt, ru.CKPT_MANIFEST, load_checkpoint, kind, outcomes)
    assert outcomes.counts[kind]["CheckpointError"] > 0
    assert not defects, (
        f"{len(defects)} flips ended in another exception: {_describe_defects(original, defects)}"
    )


def _flip_value_digit(root, manifest_name, key_path):
    """Change one digit of a numeric manifest value in place (one byte of the file)."""
    manifest = ru.read_json(root / manifest_name)
    value = ru.json_get(manifest, key_path)
    text = (root / manifest_name).read_text()
    needle = json.dumps({key_path[-1]: value}, indent=2, sort_keys=True).splitlines()[1].strip()
    assert text.count(needle) >= 1, needle
    start = text.index(needle) + needle.index(":") + 2
    digit = next(i for i in range(start, len(text)) if text[i] in "123456789")
    changed = text[:digit] + str((int(text[digit]) % 9) + 1) + text[digit + 1 :]
    (root / manifest_name).write_text(changed)
    return ru.read_json(root / manifest_name)


def test_a_flipped_digit_in_a_safety_value_of_the_manifest_is_detected(art_src, tmp_path):
    """output_bound and input_domain drive the run-time contracts: a corrupted digit must not
    silently widen them (regression: the manifest now carries its own SHA-256)."""
    for key_path in (("output_bound",), ("tolerance", "atol")):
        art = ru.fresh_copy(art_src[0], tmp_path / "art")
        changed = _flip_value_digit(art, ru.ART_MANIFEST, key_path)
        assert ru.json_get(changed, key_path) != ru.json_get(
            ru.read_json(art_src[0] / ru.ART_MANIFEST), key_path
        )
        with pytest.raises(ArtifactError, match="manifest.json was modified"):
            open_artifact(art)


def test_an_edited_manifest_is_refused_unless_resealed(art_src, tmp_path):
    """A schema-valid edit (output_bound widened 1000x) without the self-hash recomputed is refused
    by the self-hash; recomputed (`_relutil.resealed`, what a forger could do) it loads -- the hash
    is an integrity check, not a signature."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    manifest = ru.read_json(art / ru.ART_MANIFEST)
    manifest["output_bound"] *= 1000
    ru.write_json(art / ru.ART_MANIFEST, manifest)
    with pytest.raises(ArtifactError, match="manifest.json was modified.*re-export"):
        open_artifact(art)
    ru.write_json(art / ru.ART_MANIFEST, ru.resealed(manifest))
    assert open_artifact(art).output_bound == manifest["output_bound"]


def test_a_flipped_digit_in_checkpoint_meta_is_detected(ckpt_src, tmp_path):
    ckpt = ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt")
    text = (ckpt / ru.CKPT_MANIFEST).read_text()
    assert '"input_domain": [\n      -10.0' in text
    (ckpt / ru.CKPT_MANIFEST).write_text(
        text.replace('"input_domain": [\n      -10.0', '"input_domain": [\n      -90.0')
    )
    with pytest.raises(CheckpointError, match="checkpoint.json"):
        load_checkpoint(ckpt)


# --- missing, extra, renamed files ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["weights.npz", "model.onnx", "step.onnx", "manifest.json"])
def test_missing_artifact_file_is_named(art_src, tmp_path, no_parsing, name):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    (art / name).unlink()
    with pytest.raises(ArtifactError, match=name) as info:
        runtime.load(art, backend="ort")
    assert "re-export" in str(info.value) or "tickformer export" in str(info.value)


def test_renamed_artifact_file_names_the_missing_file(art_src, tmp_path, no_parsing):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    (art / "step.onnx").rename(art / "step2.onnx")
    with pytest.raises(ArtifactError, match="'step.onnx'.*missing"):
        runtime.load(art, backend="ort")


def test_extra_and_renamed_artifact_files_are_named(art_src, tmp_path):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    (art / "evil.onnx").write_bytes((art / "step.onnx").read_bytes())
    with pytest.raises(ArtifactError, match="evil.onnx"):
        open_artifact(art)
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    (art / "step.onnx").rename(art / "step2.onnx")
    with pytest.raises(ArtifactError, match="step.onnx.*step2.onnx|step2.onnx.*step.onnx"):
        open_artifact(art)


def test_unhashed_caches_and_interrupted_write_leftovers_are_not_reported(art_src, tmp_path):
    """What TensorRT builds and atomic writes leave inside an artifact, and nothing reads, does not
    block loading; the names are the ones those modules use."""
    from tickformer.artifact.format import TIMING_CACHE
    from tickformer.artifact.reader import UNHASHED_CACHES
    from tickformer.runtime.backends.ort_gpu import ORT_TRT_CACHE

    assert UNHASHED_CACHES == {TIMING_CACHE, ORT_TRT_CACHE}
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    (art / TIMING_CACHE).write_bytes(b"cache")
    (art / ORT_TRT_CACHE).mkdir()
    (art / ".manifest.json.abc123.tmp").write_bytes(b"{")
    open_artifact(art)
    (art / ".hidden").write_bytes(b"x")
    with pytest.raises(ArtifactError, match=r"unlisted files \['.hidden'\]"):
        open_artifact(art)


@pytest.mark.parametrize(
    "damage, words",
    [
        ("missing", r"missing files \['weights.npz'\]"),
        ("renamed", r"missing files \['weights.npz'\].*unlisted files \['weights2.npz'\].*renamed"),
        ("extra", r"unlisted files \['extra.bin'\]"),
        ("extra hidden", r"unlisted files \['.hidden'\]"),
        ("no manifest", r"no checkpoint.json"),
    ],
)
def test_missing_extra_renamed_checkpoint_files_are_named(ckpt_src, tmp_path, no_parsing, damage, words):
    ckpt = ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt")
    if damage == "missing":
        (ckpt / "weights.npz").unlink()
    elif damage == "renamed":
        (ckpt / "weights.npz").rename(ckpt / "weights2.npz")
    elif damage == "extra":
        (ckpt / "extra.bin").write_bytes(b"x")
    elif damage == "extra hidden":
        (ckpt / ".hidden").write_bytes(b"x")
    else:
        (ckpt / "checkpoint.json").unlink()
    with pytest.raises(CheckpointError, match=words):
        load_checkpoint(ckpt)


# --- the manifest schema -----------------------------------------------------------------------------
def _set(path, value):
    return lambda m: ru.json_set(m, path, value)


def _del(path):
    return lambda m: ru.json_delete(m, path)


def _ids(cases):
    """Every case as a pytest.param with its name as id (pytest.param cases keep their marks)."""
    out = []
    for case in cases:
        if hasattr(case, "marks"):
            out.append(pytest.param(*case.values, marks=case.marks, id=case.values[0]))
        else:
            out.append(pytest.param(*case, id=case[0]))
    return out


ARTIFACT_SCHEMA_CASES = [
    ("format other", _set(("format",), "tickformer-checkpoint"), "format"),
    ("format missing", _del(("format",)), "format"),
    ("version from the future", _set(("version",), 3), "version 3"),
    ("version from the past", _set(("version",), 1), "version 1 is not supported"),
    ("version far future", _set(("version",), 10**30), "version"),
    ("version string", _set(("version",), "2"), "version"),
    ("version missing", _del(("version",)), "version"),
    *[
        (f"missing {key}", _del((key,)), key)
        for key in ("config", "graphs", "files", "batch", "max_len", "input_domain", "tolerance")
    ],
    ("files not a dict", _set(("files",), []), "files"),
    ("files entry not a dict", _set(("files", "step.onnx"), "abc"), "files"),
    ("files sha256 not a string", _set(("files", "step.onnx", "sha256"), 5), "files"),
    (
        "files path traversal",
        _set(("files", "../../etc/passwd"), {"sha256": "0" * 64, "bytes": 1}),
        "etc/passwd",
    ),
    ("files absolute path", _set(("files", "/etc/passwd"), {"sha256": "0" * 64, "bytes": 1}), "etc/passwd"),
    ("graph file outside", _set(("graphs", "step", "file"), "../step.onnx"), "step"),
    ("graph missing", _del(("graphs", "step")), "step"),
    ("config not a dict", _set(("config",), []), "config"),
    ("config wrong type", _set(("config", "d_model"), "16"), "d_model"),
    ("config unknown field", _set(("config", "evil"), 1), "evil"),
    ("config max_len disagrees", _set(("config", "max_len"), 8), "max_len"),
    ("self-hash missing", _del(("manifest_sha256",)), "manifest_sha256"),
    ("self-hash wrong", _set(("manifest_sha256",), "0" * 64), "was modified"),
    ("self-hash not a string", _set(("manifest_sha256",), 5), "manifest_sha256"),
    ("unknown graph", _set(("graphs", "evil"), {"file": "step.onnx", "inputs": [], "outputs": []}), "evil"),
    (
        "graph input shape disagrees",
        _set(("graphs", "step", "inputs", 0, "shape"), [1, 1, 4]),
        "graphs.step.inputs",
    ),
    ("max_len bool", _set(("max_len",), True), "max_len"),
    ("tolerance negative", _set(("tolerance", "atol"), -1e-5), "tolerance"),
    ("tolerance infinite", _set(("tolerance", "rtol"), math.inf), "Infinity literals are refused"),
    ("output_bound negative", _set(("output_bound",), -1.0), "output_bound"),
    ("output_bound NaN", _set(("output_bound",), math.nan), "NaN is not JSON"),
    ("input_domain bools", _set(("input_domain",), [False, True]), "input_domain"),
    ("version true", _set(("version",), True), "version"),
    ("version float", _set(("version",), 2.0), "version"),
    ("input_domain string", _set(("input_domain",), "ab"), "input_domain"),
    ("input_domain 3 numbers", _set(("input_domain",), [1, 2, 3]), "input_domain"),
    ("input_domain empty interval", _set(("input_domain",), [5, -5]), "input_domain"),
    ("input_domain NaN", _set(("input_domain",), [math.nan, 1.0]), "NaN is not JSON"),
    ("graphs not a dict", _set(("graphs",), []), "graphs"),
    ("batch string", _set(("batch",), "x"), "batch"),
    ("batch zero", _set(("batch",), 0), "batch"),
    ("batch disagrees with graphs", _set(("batch",), 2), "batch"),
    ("tolerance not a dict", _set(("tolerance",), []), "tolerance"),
    ("output_bound string", _set(("output_bound",), "x"), "output_bound"),
    ("config d_model disagrees with weights", _set(("config", "d_model"), 32), "d_model|weights|shape"),
]


@pytest.mark.parametrize("name, mutate, words", _ids(ARTIFACT_SCHEMA_CASES))
def test_manifest_schema_violations_are_refused_at_load_with_a_clear_error(
    art_src, tmp_path, name, mutate, words
):
    """A malformed manifest raises ArtifactError at load (not later, not another exception),
    naming the bad field; a numpy load + step is the proof that nothing slipped through. The
    self-hash is recomputed after the edit (unless the edit is to the self-hash), so the schema
    check behind it is what refuses the value."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    original = ru.read_json(art / ru.ART_MANIFEST)
    manifest = ru.read_json(art / ru.ART_MANIFEST)
    mutate(manifest)
    ru.write_json(art / ru.ART_MANIFEST, ru.resealed(manifest, original))
    with pytest.raises(ArtifactError, match=words) as info:
        try:
            session = runtime.load(art, backend="numpy")
        except ArtifactError:
            raise
        except Exception as exc:  # anything else, also a later failure, is a defect of the check
            raise AssertionError(f"load raised {type(exc).__name__}: {exc}") from exc
        try:
            session.step(np.zeros(session.input_shape, session.input_dtype))
        except TickformerError as exc:
            raise AssertionError(
                f"schema violation slipped through load and failed in step: {exc!r}"
            ) from exc
        raise AssertionError("schema violation loaded and ran")
    message = str(info.value)
    assert "\n" not in message and len(message) < 400


def test_future_version_message_names_both_versions(art_src, tmp_path):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    manifest = ru.read_json(art / ru.ART_MANIFEST)
    manifest["version"] = 7
    ru.write_json(art / ru.ART_MANIFEST, manifest)
    with pytest.raises(ArtifactError, match=r"version 7 .*reads 2"):
        open_artifact(art)


CHECKPOINT_SCHEMA_CASES = [
    ("format other", _set(("format",), "tickformer-artifact"), "format"),
    ("version from the future", _set(("version",), 3), "version 3"),
    ("version string", _set(("version",), "2"), "version"),
    ("files not a dict", _set(("files",), []), "files"),
    ("files entry without bytes", _del(("files", "weights.npz", "bytes")), "files"),
    ("config.json not listed", _del(("files", "config.json")), "config.json"),
    ("meta not a dict", _set(("meta",), [1]), "meta"),
    ("version true", _set(("version",), True), "version"),
    ("version float", _set(("version",), 2.0), "version"),
    ("self-hash missing", _del(("manifest_sha256",)), "manifest_sha256"),
    ("self-hash wrong", _set(("manifest_sha256",), "0" * 64), "was modified"),
]


@pytest.mark.parametrize("name, mutate, words", _ids(CHECKPOINT_SCHEMA_CASES))
def test_checkpoint_manifest_schema_violations_are_refused(ckpt_src, tmp_path, name, mutate, words):
    ckpt = ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt")
    original = ru.read_json(ckpt / ru.CKPT_MANIFEST)
    manifest = ru.read_json(ckpt / ru.CKPT_MANIFEST)
    mutate(manifest)
    ru.write_json(ckpt / ru.CKPT_MANIFEST, ru.resealed(manifest, original))
    with pytest.raises(CheckpointError, match=words):
        load_checkpoint(ckpt)
