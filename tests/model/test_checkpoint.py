"""Checkpoint round trip, atomic writes, and the exact error for each kind of damage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tickformer.errors import CheckpointError
from tickformer.model import init_params, preset
from tickformer.model.checkpoint import (
    MANIFEST,
    Checkpoint,
    load_checkpoint,
    read_extra_file,
    save_checkpoint,
)


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, dict]:
    config = preset("tiny")
    params = init_params(config, seed=3)
    meta = {"task": "pendulum", "norm": {"mean": np.arange(3.0), "std": [1.0, 2.0, 3.0]}, "step": np.int64(7)}
    path = save_checkpoint(
        tmp_path / "ckpt", config, params, meta, extra_files={"metrics.json": b'{"rmse": 0.1}\n'}
    )
    return path, params


def _rewrite_manifest(path: Path, edit) -> None:
    """Edit checkpoint.json and recompute its self-hash, so the checks behind it run."""
    from tickformer.sealed import MANIFEST_HASH
    from tickformer.sealed import digest as manifest_digest

    manifest = json.loads((path / MANIFEST).read_text())
    edit(manifest)
    manifest[MANIFEST_HASH] = manifest_digest(manifest)
    (path / MANIFEST).write_text(json.dumps(manifest))


def test_round_trip_is_exact(saved):
    path, params = saved
    ckpt = load_checkpoint(path)
    assert isinstance(ckpt, Checkpoint)
    assert ckpt.config == preset("tiny")
    assert list(ckpt.params) == list(params)
    for name, value in params.items():
        assert ckpt.params[name].dtype == np.float32
        np.testing.assert_array_equal(ckpt.params[name], value)
    assert ckpt.meta["task"] == "pendulum"
    assert ckpt.meta["norm"]["mean"] == [0.0, 1.0, 2.0]
    assert ckpt.meta["step"] == 7
    assert read_extra_file(ckpt, "metrics.json") == b'{"rmse": 0.1}\n'
    with pytest.raises(dataclass_frozen_error()):
        ckpt.meta = {}  # type: ignore[misc]


def dataclass_frozen_error():
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_manifest_lists_sha256_of_every_file(saved):
    path, _ = saved
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["format"] == "tickformer-checkpoint" and manifest["version"] == 1
    assert set(manifest["files"]) == {"config.json", "weights.npz", "metrics.json"}
    import hashlib

    for name, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256((path / name).read_bytes()).hexdigest()


def test_overwrite_replaces_previous_checkpoint_and_leaves_no_temp(saved):
    path, params = saved
    config = preset("tiny")
    new = init_params(config, seed=4)
    save_checkpoint(path, config, new, {"task": "again"})
    ckpt = load_checkpoint(path)
    assert ckpt.meta == {"task": "again"}
    np.testing.assert_array_equal(ckpt.params["in_proj.w"], new["in_proj.w"])
    assert sorted(p.name for p in path.parent.iterdir()) == ["ckpt"]


def test_refuses_to_overwrite_a_non_checkpoint_directory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    config = preset("tiny")
    with pytest.raises(CheckpointError, match="refusing to overwrite"):
        save_checkpoint(tmp_path / "mine", config, init_params(config))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"


def test_failed_write_leaves_nothing_that_loads(tmp_path, monkeypatch):
    config = preset("tiny")
    params = init_params(config)
    real_replace = os.replace

    def crash(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        save_checkpoint(tmp_path / "ckpt", config, params)
    monkeypatch.setattr(os, "replace", real_replace)
    assert list(tmp_path.iterdir()) == []  # temp directory cleaned, no half-written ckpt
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "ckpt")


def test_failed_overwrite_keeps_previous_checkpoint(saved, monkeypatch):
    path, params = saved
    config = preset("tiny")
    real_replace = os.replace
    calls = []

    def second_fails(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # moving the new one into place fails
            raise OSError("simulated")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(OSError):
        save_checkpoint(path, config, init_params(config, seed=9))
    monkeypatch.setattr(os, "replace", real_replace)
    ckpt = load_checkpoint(path)
    np.testing.assert_array_equal(ckpt.params["in_proj.w"], params["in_proj.w"])
    assert sorted(p.name for p in path.parent.iterdir()) == ["ckpt"]


def test_save_rejects_wrong_params(tmp_path):
    config = preset("tiny")
    params = init_params(config)
    bad = dict(params)
    bad["in_proj.w"] = bad["in_proj.w"].astype(np.float64)
    with pytest.raises(CheckpointError, match=r"'in_proj.w' has dtype float64.*astype"):
        save_checkpoint(tmp_path / "a", config, bad)
    bad = dict(params)
    bad["in_proj.w"] = np.full_like(bad["in_proj.w"], np.nan)
    with pytest.raises(CheckpointError, match="NaN or Inf"):
        save_checkpoint(tmp_path / "a", config, bad)
    with pytest.raises(CheckpointError, match="not JSON-serialisable"):
        save_checkpoint(tmp_path / "a", config, params, {"x": object()})
    with pytest.raises(CheckpointError, match="reserved"):
        save_checkpoint(tmp_path / "a", config, params, extra_files={"weights.npz": b""})
    assert not (tmp_path / "a").exists()


def test_missing_directory_and_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no checkpoint.json"):
        load_checkpoint(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="not a directory"):
        load_checkpoint(tmp_path / "file")


def test_missing_file(saved):
    path, _ = saved
    (path / "weights.npz").unlink()
    with pytest.raises(CheckpointError, match=r"missing files \['weights.npz'\]"):
        load_checkpoint(path)


def test_renamed_file(saved):
    path, _ = saved
    (path / "weights.npz").rename(path / "weights-old.npz")
    with pytest.raises(
        CheckpointError,
        match=r"missing files \['weights.npz'\].*unlisted files \['weights-old.npz'\] \(renamed\?\)",
    ):
        load_checkpoint(path)


def test_extra_file(saved):
    path, _ = saved
    (path / "stray.bin").write_bytes(b"x")
    with pytest.raises(CheckpointError, match=r"unlisted files \['stray.bin'\]"):
        load_checkpoint(path)


def test_bad_hash_detected_before_weights_are_parsed(saved, monkeypatch):
    path, _ = saved
    data = bytearray((path / "weights.npz").read_bytes())
    data[-10] ^= 0xFF  # same size, one flipped byte
    (path / "weights.npz").write_bytes(bytes(data))

    def must_not_parse(*args, **kwargs):
        raise AssertionError("weights parsed before the hash check")

    monkeypatch.setattr(np, "load", must_not_parse)
    with pytest.raises(CheckpointError, match=r"weights.npz: SHA-256 .* does not match"):
        load_checkpoint(path)


def test_truncated_file(saved):
    path, _ = saved
    data = (path / "config.json").read_bytes()
    (path / "config.json").write_bytes(data[:-5])
    with pytest.raises(CheckpointError, match="config.json has .* bytes, checkpoint.json says"):
        load_checkpoint(path)


def _replace_file(path: Path, name: str, data: bytes) -> None:
    """Tamper consistently: new content plus a matching manifest entry (so later checks run)."""
    import hashlib

    (path / name).write_bytes(data)
    _rewrite_manifest(
        path,
        lambda m: m["files"].__setitem__(
            name, {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        ),
    )


def _npz(arrays: dict) -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_wrong_shape(saved):
    path, params = saved
    arrays = dict(params)
    arrays["dec.0.ffn.w1"] = np.zeros((16, 33), np.float32)
    _replace_file(path, "weights.npz", _npz(arrays))
    with pytest.raises(
        CheckpointError, match=r"'dec.0.ffn.w1' has shape \(16, 33\), config expects \(16, 32\)"
    ):
        load_checkpoint(path)


def test_wrong_dtype(saved):
    path, params = saved
    arrays = dict(params)
    arrays["dec.1.ln2.g"] = arrays["dec.1.ln2.g"].astype(np.float16)
    _replace_file(path, "weights.npz", _npz(arrays))
    with pytest.raises(CheckpointError, match="'dec.1.ln2.g' has dtype float16"):
        load_checkpoint(path)


def test_missing_and_renamed_parameter(saved):
    path, params = saved
    arrays = dict(params)
    arrays["dec.0.self_attn.W_Q"] = arrays.pop("dec.0.self_attn.w_q")
    _replace_file(path, "weights.npz", _npz(arrays))
    with pytest.raises(
        CheckpointError,
        match=r"missing parameters \['dec.0.self_attn.w_q'\]; unexpected parameters \['dec.0.self_attn.W_Q'\]",
    ):
        load_checkpoint(path)


def test_object_arrays_are_refused(saved):
    path, params = saved
    arrays = dict(params)
    arrays["in_proj.w"] = np.array([{"evil": 1}], dtype=object)
    _replace_file(path, "weights.npz", _npz(arrays))
    with pytest.raises(CheckpointError, match="object arrays are refused"):
        load_checkpoint(path)


def test_config_that_does_not_match_weights(saved):
    path, _ = saved
    config = json.loads((path / "config.json").read_text())
    config["n_layers"] = 3
    _replace_file(path, "config.json", json.dumps(config).encode())
    with pytest.raises(CheckpointError, match=r"missing parameters \['dec.2.self_attn.w_q'"):
        load_checkpoint(path)


def test_invalid_config(saved):
    path, _ = saved
    config = json.loads((path / "config.json").read_text())
    config["n_heads"] = 5
    _replace_file(path, "config.json", json.dumps(config).encode())
    with pytest.raises(CheckpointError, match="invalid config: d_model=16 is not divisible by n_heads=5"):
        load_checkpoint(path)


def test_manifest_format_and_version(saved):
    path, _ = saved
    _rewrite_manifest(path, lambda m: m.__setitem__("version", 99))
    with pytest.raises(CheckpointError, match="version 99 is not supported"):
        load_checkpoint(path)
    _rewrite_manifest(path, lambda m: m.__setitem__("format", "other"))
    with pytest.raises(CheckpointError, match="format 'other'"):
        load_checkpoint(path)
    (path / MANIFEST).write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(path)
