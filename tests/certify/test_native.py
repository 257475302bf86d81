"""`tickformer certify ART --backend c --native` (certify/native.py): the generated C step timed in
its own process with the deployment flags, the same statistics and verdict, the static bound
beside the measured figures, and the flags it refuses."""

from __future__ import annotations

import json
import shutil

import pytest

from tickformer.certify.campaign import CampaignConfig
from tickformer.certify.decision import EvtConfig
from tickformer.certify.native import certify_native, static_bound
from tickformer.certify.report import summary, write_report
from tickformer.cli import main
from tickformer.codegen import toolchain
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: apt-get install gcc")
    cfg = preset("tiny")
    out = tmp_path_factory.mktemp("native") / "art"
    export_params(cfg, init_params(cfg, 0), out)
    return out


def test_the_native_campaign_times_the_deployed_step_in_its_own_process(art, tmp_path, capsys) -> None:
    report, durations = certify_native(
        art,
        budget_ns=100e6,
        campaign=CampaignConfig(samples=2000, warmup=100, cpu=0),
        evt_config=EvtConfig(n_boot=20),
    )
    cond = report["conditions"]
    assert cond["backend"] == "c-native"
    assert cond["artifact_id"] == json.loads((art / "manifest.json").read_text())["manifest_sha256"]
    native = cond["native"]
    assert native["step_flags"] == list(toolchain.deployment_flags(toolchain.find_compiler()))
    assert native["build_commands"][0].endswith("-c tf_model.c -o tf_model.o")
    assert cond["clock"]["name"] == "clock_gettime(CLOCK_MONOTONIC_RAW)"
    assert cond["isolation"]["cpu_affinity"]["granted"] and cond["input_distribution"]["kind"] == "uniform"
    assert report["stats"]["n"] == durations.size == 2000
    assert report["campaign"]["timed_positions"] == [0, 15]
    assert report["verdict"] in ("PASS", "INCONCLUSIVE")  # nothing near 100 ms; FAIL only on an observation
    static = report["static_bound"]
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        assert not static["computed"] and "apt-get install g++" in static["reason"]
        return
    assert static["computed"] and static["kind"] == "lower bound"
    assert 0 < static["value_ns"] <= static["observed_min_ns"] and static["consistent_with_measurement"]
    assert static["value_ns"] == max(static["compute_ns"], static["memory_ns"])
    write_report(tmp_path / "rep", report, durations)
    summary(report)
    assert "static LOWER bound" in capsys.readouterr().out


def test_the_static_bound_is_the_larger_of_compute_and_memory() -> None:
    work = {"flops": 1000, "bytes_touched": 8000, "constant_work": True}
    peaks = {
        "peak_flops_per_s": 1e9,
        "read_bw_working_set_bytes_per_s": 4e9,
        "read_bw_64mib_bytes_per_s": 1e9,
    }
    stats = {"min": 2500.0, "p50": 3000.0, "p99.9": 5000.0, "max": 9000.0}
    b = static_bound(work, peaks, stats)
    assert b["compute_ns"] == 1000 and b["memory_ns"] == 2000 and b["value_ns"] == 2000
    assert b["bound_by"] == "memory bandwidth" and b["consistent_with_measurement"]
    assert "LOWER bound" in b["meaning"] and "not a WCET" in b["meaning"]
    assert not static_bound({**work, "constant_work": False}, peaks, stats)["computed"]


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--backend", "ort", "--native"], "use it with --backend c"),
        (["--backend", "c", "--cc", "gcc"], "--cc names the compiler of --native"),
    ],
)
def test_native_flag_errors_name_the_fix(art, tmp_path, capsys, extra, message) -> None:
    args = ["certify", str(art), "--budget-us", "1000", "--samples", "1000", "--out", str(tmp_path / "o")]
    assert main([*args, *extra]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_native_on_a_bare_onnx_model_is_refused(tmp_path, capsys) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not really")
    args = [
        "certify",
        str(model),
        "--backend",
        "c",
        "--native",
        "--budget-us",
        "1",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(args) == 2  # a bare model: every failure exits 2 (issue 37), 1 is FAIL
    assert "has no C step: drop --native" in capsys.readouterr().err
