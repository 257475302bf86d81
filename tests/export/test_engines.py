"""Engine build and its manifest bookkeeping (`tickformer.export.engines`, `tickformer build`),
and the loading side it records for (`tickformer.runtime.backends.tensorrt_engine`).

Everything here runs without TensorRT or a GPU: the pure decisions (precision plan, profiles,
compatibility), the atomic manifest bookkeeping (with stand-in engine bytes: the manifest does
not care what the bytes are, only their hash), and the one-line failure without TensorRT.
The real build runs in benchmarks/gpu_check.sh on a GPU machine.
"""

from __future__ import annotations

import json

import pytest

from tickformer.artifact.reader import open_artifact
from tickformer.cli import main
from tickformer.errors import ArtifactError, BackendUnavailable, ConfigError, ExportError
from tickformer.export import engines as eb
from tickformer.export.writer import export_artifact
from tickformer.model.config import preset
from tickformer.model.transformer import init_params
from tickformer.runtime.backends.cuda import DeviceInfo, require_tensorrt
from tickformer.runtime.backends.tensorrt_engine import engine_bytes, engine_entry


def make_artifact(root, preset_name="tiny"):
    """Export a seeded, untrained model with the project's exporter."""
    from tickformer.model.checkpoint import Checkpoint

    cfg = preset(preset_name)
    export_artifact(Checkpoint(config=cfg, params=init_params(cfg, seed=0), meta={}), root)
    return root


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    return make_artifact(tmp_path_factory.mktemp("build") / "art")


def test_precision_plan_table():
    # fp32: always strongly typed, TF32 off.
    assert eb.precision_plan(10, False, "fp32") == eb.PrecisionPlan(True, False, False, True)
    assert eb.precision_plan(11, False, "fp32") == eb.PrecisionPlan(True, False, False, True)
    # fp16 graph: the precision is in the graph, on both majors.
    assert eb.precision_plan(10, True, "fp16") == eb.PrecisionPlan(True, False, False, True)
    assert eb.precision_plan(11, True, "fp16") == eb.PrecisionPlan(True, False, False, True)
    # fp32 graph, fp16 wanted: builder flag on 10.x, conversion on 11.x (no flag exists there).
    assert eb.precision_plan(10, False, "fp16") == eb.PrecisionPlan(False, True, False, False)
    assert eb.precision_plan(10, False, "fp16", convert=True) == eb.PrecisionPlan(True, False, True, True)
    assert eb.precision_plan(11, False, "fp16") == eb.PrecisionPlan(True, False, True, True)
    with pytest.raises(ConfigError, match="TensorRT 11 has no fp16 builder flag"):
        eb.precision_plan(11, False, "fp16", convert=False)
    with pytest.raises(ConfigError, match="fp32 engine needs an fp32 export"):
        eb.precision_plan(10, True, "fp32")
    with pytest.raises(ConfigError):
        eb.precision_plan(10, False, "int8")


def test_build_options_are_validated():
    with pytest.raises(ConfigError, match="--workspace"):
        eb.BuildOptions(workspace_mib=0)
    with pytest.raises(ConfigError, match="--hardware-compat"):
        eb.BuildOptions(hardware_compat="turing+")
    with pytest.raises(ConfigError, match="--precision"):
        eb.BuildOptions(precision="bf16")


def test_static_profile_pins_T_to_max_len():
    io = [
        {"name": "x", "dtype": "float32", "shape": [1, "T", 3]},
        {"name": "pos", "dtype": "int64", "shape": [1]},
    ]
    assert eb.static_profile(io, 16) == {"x": (1, 16, 3), "pos": (1,)}
    with pytest.raises(ExportError, match="only 'T'"):
        eb.static_profile([{"name": "x", "shape": [1, "S"]}], 16)


def entry(**over):
    base = {
        "tensorrt": "10.3.0.30",
        "gpu": "Orin",
        "compute_capability": "8.7",
        "version_compatible": False,
        "hardware_compat": "same",
    }
    base.update(over)
    return base


def tensorrt_installed() -> bool:
    try:
        require_tensorrt()
        return True
    except BackendUnavailable:
        return False


needs_no_tensorrt = pytest.mark.skipif(
    tensorrt_installed(), reason="TensorRT is installed here: the refusal path is unreachable"
)


@needs_no_tensorrt
def test_stub_only_tensorrt_is_reported_missing():
    # tensorrt-stubs installs a `tensorrt/` folder of .pyi files: importable, but not TensorRT.
    with pytest.raises(BackendUnavailable, match="TensorRT is not installed"):
        require_tensorrt()


@needs_no_tensorrt
def test_build_without_tensorrt_is_one_line_no_traceback(artifact, capsys):
    before = (artifact / "manifest.json").read_bytes()
    assert main(["build", str(artifact), "--backend", "tensorrt", "--precision", "fp16"]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "TensorRT is not installed" in lines[0] and "tickformer[tensorrt]" in lines[0]
    assert "Traceback" not in captured.err
    assert (artifact / "manifest.json").read_bytes() == before  # nothing written


def test_build_rejects_bad_options_in_one_line(artifact, capsys):
    assert main(["build", str(artifact), "--backend", "tensorrt", "--workspace", "1"]) == 1
    assert (
        "--workspace 1 must be an integer in 16..1048576; the workspace limit in MiB"
        in capsys.readouterr().err
    )


def fake_entry(name, data, **over):
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    e = entry(
        file=eb.engine_file_name(name, "fp16", digest),
        sha256=digest,
        bytes=len(data),
        precision="fp16",
        **over,
    )
    return e


def test_recorded_engine_is_hashed_and_verified_and_replaced(tmp_path):
    root = make_artifact(tmp_path / "art")
    stand_in = b"stand-in engine bytes #1"  # the bookkeeping never interprets the bytes
    e1 = fake_entry("step", stand_in)
    eb.atomic_write(root / e1["file"], stand_in)
    eb.record_engines(root, "fp16", {"step": e1})
    art = open_artifact(root)  # verifies the engine's hash with every other file
    prec, got = engine_entry(art.manifest, "step", None)
    assert prec == "fp16" and got["file"] == e1["file"]
    here = DeviceInfo("10.3.0.30", "Orin", (8, 7))
    assert engine_bytes(root, art.manifest, got, here) == stand_in

    # Wrong GPU: refused from the manifest alone, before the file is even read.
    (root / e1["file"]).unlink()
    with pytest.raises(BackendUnavailable, match="rebuild it on this GPU"):
        engine_bytes(root, art.manifest, got, DeviceInfo("10.3.0.30", "NVIDIA H100", (9, 0)))
    eb.atomic_write(root / e1["file"], stand_in)

    # Tampered engine: the artifact no longer opens, and engine_bytes refuses the bytes.
    (root / e1["file"]).write_bytes(b"stand-in engine bytes #X")
    with pytest.raises(ArtifactError):
        open_artifact(root)
    with pytest.raises(ArtifactError, match="SHA-256 .* does not match manifest.json .*rebuild it"):
        engine_bytes(root, art.manifest, got, here)

    # Rebuild: the new entry replaces the old one, whose file is deleted.
    new = b"stand-in engine bytes #2"
    e2 = fake_entry("step", new)
    eb.atomic_write(root / e2["file"], new)
    manifest = eb.record_engines(root, "fp16", {"step": e2})
    assert e1["file"] not in manifest["files"] and not (root / e1["file"]).exists()
    assert manifest["engines"]["fp16"]["step"]["sha256"] == e2["sha256"]
    open_artifact(root)


def test_engine_entry_names_the_build_command(artifact):
    manifest = json.loads((artifact / "manifest.json").read_text())
    with pytest.raises(ArtifactError, match="tickformer build ART --backend tensorrt"):
        engine_entry(manifest, "step", None)
    with pytest.raises(ArtifactError, match="--precision fp32"):
        engine_entry(manifest, "step", "fp32")


def test_write_atomic_leaves_nothing_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "x.engine"
    target.write_bytes(b"old")

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(eb.os, "replace", boom)
    with pytest.raises(OSError):
        eb.atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.engine"]
