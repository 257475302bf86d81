"""The artifact directory: manifest contents, hashes verified before anything loads, atomic
writes (a failed or killed export leaves nothing that loads), export from a checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest

from tickformer import runtime
from tickformer.artifact.reader import open_artifact
from tickformer.errors import ArtifactError, ExportError
from tickformer.export import writer as export_mod
from tickformer.export.writer import export_artifact, export_params
from tickformer.model import init_params, preset
from tickformer.model.checkpoint import save_checkpoint


def test_manifest_describes_every_graph_and_file(exported):
    path, params, manifest = exported["tiny"]
    assert manifest["format"] == "tickformer-artifact" and manifest["version"] == 2
    assert set(manifest["files"]) == {"manifest.json"} ^ {p.name for p in path.iterdir()}
    assert set(manifest["versions"]) >= {"numpy", "onnx", "onnxruntime", "python", "tickformer"}
    assert manifest["input_domain"] == [-10.0, 10.0] and manifest["output_bound"] > 0
    for spec in manifest["graphs"].values():
        model = onnx.load(str(path / spec["file"]))
        assert [i["name"] for i in spec["inputs"]] == [i.name for i in model.graph.input]
        assert [o["name"] for o in spec["outputs"]] == [o.name for o in model.graph.output]
    step = manifest["graphs"]["step"]
    # Format 2: one cache input and one new-row output per layer; 2-D x / y (docs/artifact_format.md).
    assert step["inputs"][0] == {"name": "x", "dtype": "float32", "shape": [1, 3]}
    assert [i["name"] for i in step["inputs"][2:]] == ["k_cache.0", "v_cache.0", "k_cache.1", "v_cache.1"]
    assert step["inputs"][2] == {
        "name": "k_cache.0",
        "dtype": "float32",
        "shape": [1, 2, 8, 16],
    }  # K transposed [B, H, dh, N]
    assert step["inputs"][3] == {"name": "v_cache.0", "dtype": "float32", "shape": [1, 2, 16, 8]}
    assert [o["name"] for o in step["outputs"]] == ["y", "k_new.0", "v_new.0", "k_new.1", "v_new.1"]
    assert step["outputs"][1] == {"name": "k_new.0", "dtype": "float32", "shape": [1, 2, 1, 8]}
    assert manifest["graphs"]["model"]["inputs"][0]["shape"] == [1, "T", 3]


def test_manifest_is_sealed_and_engine_build_rewrites_reseal_it(exported, tmp_path):
    """The written manifest carries its own SHA-256 (tickformer.sealed.digest, the one
    definition); export/engine_build.update_manifest recomputes it, so its rewrites load."""
    import shutil

    from tickformer.export.engines import update_manifest
    from tickformer.sealed import MANIFEST_HASH
    from tickformer.sealed import digest as manifest_digest

    src, _, manifest = exported["tiny"]
    written = json.loads((src / "manifest.json").read_text())
    assert written == manifest and written[MANIFEST_HASH] == manifest_digest(written)
    art = tmp_path / "art"
    shutil.copytree(src, art)
    update_manifest(art, lambda m: m["source"].__setitem__("note", "rewritten"))
    rewritten = json.loads((art / "manifest.json").read_text())
    assert rewritten[MANIFEST_HASH] == manifest_digest(rewritten) != written[MANIFEST_HASH]
    assert open_artifact(art).manifest["source"]["note"] == "rewritten"


def test_weights_npz_has_no_pickle_and_equals_params(exported):
    path, params, _ = exported["tiny"]
    with np.load(path / "weights.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(params)
        for name in params:
            assert archive[name].dtype == np.float32 and np.array_equal(archive[name], params[name])


@pytest.mark.parametrize("victim", ["step.onnx", "model.onnx", "weights.npz"])
def test_tampered_file_is_refused_before_any_graph_loads(exported, tmp_path, monkeypatch, victim):
    import shutil

    import onnxruntime

    src, _, _ = exported["tiny"]
    art = tmp_path / "art"
    shutil.copytree(src, art)
    data = bytearray((art / victim).read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit, same size
    (art / victim).write_bytes(bytes(data))

    def forbidden(*args, **kwargs):
        raise AssertionError("a graph was loaded before the hashes were verified")

    monkeypatch.setattr(onnxruntime, "InferenceSession", forbidden)
    with pytest.raises(ArtifactError, match=f"{victim}: SHA-256"):
        runtime.load(art, backend="ort")


def test_missing_or_truncated_files_and_bad_manifest(exported, tmp_path):
    import shutil

    src, _, _ = exported["tiny"]
    cases = {
        "missing": lambda a: (a / "step.onnx").unlink(),
        "truncated": lambda a: (a / "model.onnx").write_bytes((a / "model.onnx").read_bytes()[:-10]),
        "version": lambda a: _edit_manifest(a, version=1),
        "no manifest": lambda a: (a / "manifest.json").unlink(),
        "not json": lambda a: (a / "manifest.json").write_text("{"),
    }
    words = {
        "missing": "missing",
        "truncated": "bytes",
        "version": "version 1 is not supported",
        "no manifest": "no manifest.json",
        "not json": "not valid JSON",
    }
    for name, damage in cases.items():
        art = tmp_path / name.replace(" ", "_")
        shutil.copytree(src, art)
        damage(art)
        with pytest.raises(ArtifactError, match=words[name]):
            open_artifact(art)


def _edit_manifest(art, **changes):
    manifest = json.loads((art / "manifest.json").read_text())
    manifest.update(changes)
    (art / "manifest.json").write_text(json.dumps(manifest))


def test_failed_export_leaves_no_directory_and_keeps_the_old_one(tmp_path, monkeypatch):
    cfg = preset("tiny")
    params = init_params(cfg, 0)
    out = tmp_path / "art"
    real_write = export_mod._write
    calls = []

    def failing_write(path, data):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full (simulated)")
        real_write(path, data)

    monkeypatch.setattr(export_mod, "_write", failing_write)
    with pytest.raises(OSError, match="disk full"):
        export_params(cfg, params, out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    # with a previous artifact in place, a failed re-export leaves it intact and loadable
    monkeypatch.setattr(export_mod, "_write", real_write)
    export_params(cfg, params, out)
    before = (out / "manifest.json").read_bytes()
    calls.clear()
    monkeypatch.setattr(export_mod, "_write", failing_write)
    with pytest.raises(OSError):
        export_params(cfg, init_params(cfg, 1), out)
    assert (out / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]
    open_artifact(out)


def test_killed_export_leaves_nothing_that_loads(tmp_path):
    """A process killed (os._exit, no cleanup) in the middle of writing leaves only a hidden temp
    directory without a manifest; open_artifact refuses it and the target does not exist."""
    out = tmp_path / "art"
    script = textwrap.dedent(f"""
        import os
        from tickformer.export import writer as a
        from tickformer.model import init_params, preset
        real = a._write
        n = [0]
        def dying(path, data):
            n[0] += 1
            if n[0] == 3:
                os._exit(9)
            real(path, data)
        a._write = dying
        cfg = preset("tiny")
        a.export_params(cfg, init_params(cfg, 0), {str(out)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()
    assert not out.exists()
    leftovers = list(tmp_path.iterdir())
    assert leftovers and all(p.name.startswith(".art.tmp-") for p in leftovers)
    for p in leftovers:
        assert not (p / "manifest.json").exists()
        with pytest.raises(ArtifactError, match="no manifest.json"):
            open_artifact(p)


def test_refuses_to_overwrite_a_non_artifact_directory(tmp_path):
    cfg = preset("tiny")
    out = tmp_path / "important"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ExportError, match="not an artifact"):
        export_params(cfg, init_params(cfg, 0), out, lengths=[1])
    assert (out / "notes.txt").read_text() == "keep me"


def test_export_from_checkpoint_uses_its_domain_and_max_len(tmp_path):
    cfg = preset("tiny")
    ckpt = save_checkpoint(tmp_path / "ckpt", cfg, init_params(cfg, 0), {"input_domain": [-2.0, 2.0]})
    out = export_artifact(ckpt, tmp_path / "art", max_len=8, batch=2)
    art = open_artifact(out)
    assert art.input_domain == (-2.0, 2.0)
    assert art.max_len == 8 and art.config.max_len == 8 and art.batch == 2
    assert art.manifest["graphs"]["step"]["inputs"][3]["shape"] == [2, 2, 8, 8]  # v_cache.0 [B, H, N, dh]
    assert art.manifest["source"]["checkpoint_meta"] == {"input_domain": [-2.0, 2.0]}
    with pytest.raises(ExportError, match="--max-len 17"):
        export_artifact(ckpt, tmp_path / "art2", max_len=17)
    with pytest.raises(ExportError, match="--batch"):
        export_artifact(ckpt, tmp_path / "art2", batch=0)
    assert not (tmp_path / "art2").exists()


def test_batch_two_runs_rows_independently(tmp_path):
    """Batch rows share the position but nothing else: each row equals a batch-1 run."""
    cfg = preset("tiny")
    params = init_params(cfg, 4)
    export_params(cfg, params, tmp_path / "b2", batch=2, lengths=[1, 16])
    export_params(cfg, params, tmp_path / "b1", lengths=[1, 16])
    s2, s1 = runtime.load(tmp_path / "b2", backend="ort"), runtime.load(tmp_path / "b1", backend="ort")
    x = np.random.default_rng(0).uniform(-10, 10, (2, 16, 3)).astype(np.float32)
    for t in range(16):
        y2 = s2.step(x[:, t : t + 1].copy()).copy()
        y1 = s1.step(x[1:2, t : t + 1].copy())
        assert np.allclose(y2[1:2], y1, atol=1e-5, rtol=1e-5)


def test_domain_is_refused_for_token_models(tmp_path):
    cfg = preset("tiny-seq2seq")
    with pytest.raises(ExportError, match="vocabulary"):
        export_params(cfg, init_params(cfg, 0), tmp_path / "art", domain=(-1.0, 1.0))
