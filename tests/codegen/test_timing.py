"""The programs beside the step that time it where it runs and count its work (codegen/timing.py,
codegen/native.py): the timing program built from the Makefile (the documented route, also for
a cross-compiler) and from Python with the deployment flags; the operation count checked against
a formula derived independently from the kernels; the memory count against the weights' sizes."""

from __future__ import annotations

import json
import struct
import subprocess

import _cgutil
import numpy as np
import pytest

from tickformer.artifact import open_artifact
from tickformer.codegen import native, toolchain, write
from tickformer.codegen.plan import plan_for
from tickformer.codegen.source import _weights

EXP_MULS = 11  # tf_expneg: x log2e, n C1, n C2, r r, 5 Horner steps, poly z, times 2^n


def attention_muls(plan) -> int:
    """Multiplications of one step of a static-cache attention model, from the kernels' text
    (codegen/kernels.py, blocks.py), not from running it: per batch row the input projection,
    per layer QKV (3d^2), the query scale (d), scores (rows d), one exp per head and row and one
    per head for the merge, values (rows d), the own key (d), l (2 per head), the merged output
    (2d), W_o (d^2), two LayerNorms (3d each), the FFN (2 d f); then the output projection."""
    cfg, d, f, h, rows = plan.config, plan.d, plan.config.d_ff, plan.heads, plan.rows
    layer = 4 * d * d + 2 * d * f + 2 * rows * d + EXP_MULS * h * rows + 10 * d + (EXP_MULS + 2) * h
    return plan.batch * (plan.d_in * d + cfg.n_layers * layer + d * plan.d_out)


@pytest.mark.parametrize("name", ["tiny", "odd", "batch2"])
def test_the_operation_count_matches_the_kernels(arts, name, tmp_path, cxx_compiler):
    plan = plan_for(open_artifact(arts[name]))
    work = native.count_work(plan, tmp_path)
    ops = work["operations"]
    assert ops["mul"] == attention_muls(plan), ops
    assert work["constant_work"] and ops["steps_whose_count_differs"] == 0 and ops["refused_steps"] == 0
    assert ops["sqrt"] == 2 * plan.config.n_layers * plan.batch  # one per LayerNorm
    assert work["flops"] == ops["add_sub"] + ops["mul"] + ops["div"] + ops["sqrt"]


def test_the_memory_count_reads_every_weight_once(arts, tmp_path, cxx_compiler):
    """Distinct weight bytes touched = every weight array, of the positional table one row (an
    independent count from the weights the generator emits)."""
    plan = plan_for(open_artifact(arts["tiny"]))
    sizes = {w.name: w.values.size for w in _weights(plan)}
    expected = 4 * (sum(sizes.values()) - sizes["tf_pe"] + plan.d)
    mem = native.count_work(plan, tmp_path)["memory"]["regions"]
    assert mem["weights_and_tables"]["distinct_bytes"] == expected
    assert mem["weights_and_tables"]["reads"] >= expected // 4 and mem["weights_and_tables"]["writes"] == 0
    k_v = 4 * 2 * plan.config.n_layers * plan.heads * plan.rows * plan.dh
    assert mem["state"]["distinct_bytes"] >= k_v  # every cache row read (constant work)


def _read_samples(path, n):
    data = np.fromfile(path, dtype=np.int64)
    return data[:n], data[n:]


def test_the_timing_program_builds_from_the_makefile_and_runs(arts, tmp_path, c_compiler, make_tool):
    """The documented route (docs/codegen.md: `make timing`, CC= a cross-compiler on a host, the
    native compiler on the target), here with the host compiler: one process, every step timed."""
    out = tmp_path / "c"
    write(arts["tiny"], out)
    done = _cgutil.run_make(out, "timing", make_tool, c_compiler)
    assert done.returncode == 0, done.stderr
    run = subprocess.run(
        [str(out / "tf_timing"), "--samples", "2000", "--warmup", "100", "--out", str(tmp_path / "s.bin")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    manifest = json.loads((arts["tiny"] / "manifest.json").read_text())
    assert record["artifact_id"] == manifest["manifest_sha256"] and record["refused_steps"] == 0
    assert record["clock"]["name"] == "clock_gettime(CLOCK_MONOTONIC_RAW)"
    assert (
        record["isolation"]["flush_to_zero"]["granted"] and not record["isolation"]["sched_fifo"]["requested"]
    )
    durations, positions = _read_samples(tmp_path / "s.bin", 2000)
    assert durations.min() > 0 and durations.max() < 10**9
    assert list(positions[:17]) == list(range(16)) + [0]  # reset (untimed) at max_len 16
    bad = subprocess.run([str(out / "tf_timing"), "--samples"], capture_output=True, text=True)
    assert bad.returncode == 2 and "needs a value" in bad.stderr


def test_a_ring_cache_is_timed_as_one_stream(arts, tmp_path, c_compiler):
    plan = plan_for(open_artifact(arts["win4"]))
    build = native.build_timing(plan, tmp_path)
    assert build.flags == toolchain.deployment_flags(toolchain.find_compiler())
    durations, positions, record = native.run_timing(
        build, samples=1000, warmup=10, cpu=None, realtime_priority=None, seed=3, n_inputs=5
    )
    assert list(positions) == list(range(1000))  # never reset: the ring slides
    assert record["inputs"] == {
        "distinct": 5,
        "seed": 3,
        "generator": "splitmix64",
        "order": "drawn once, cycled",
    }


def test_the_peak_measurement_reports_the_machine_model(arts, tmp_path, c_compiler):
    build = native.build_timing(plan_for(open_artifact(arts["tiny"])), tmp_path)
    peaks = native.measure_peaks(build, 20_000)
    assert peaks["working_set_bytes"] == 20_000
    for key in ("peak_flops_per_s", "read_bw_working_set_bytes_per_s", "read_bw_64mib_bytes_per_s"):
        assert peaks[key] > 1e8, peaks  # any CPU of this century
    assert struct.calcsize("q") == 8  # the samples file is int64


@pytest.mark.slow  # a cross build and a run under qemu's emulation, ~10 s
def test_the_timing_program_cross_compiles_for_arm64_and_runs_under_emulation(arts, tmp_path, make_tool):
    """The documented cross build (docs/codegen.md: make timing CC=aarch64-linux-gnu-gcc), run under
    qemu-user: the program builds and runs on ARM64 (FPCR.FZ set; the emulated timings mean nothing)."""
    import shutil

    cross, qemu = shutil.which("aarch64-linux-gnu-gcc"), shutil.which("qemu-aarch64")
    if cross is None or qemu is None:
        pytest.skip("no ARM64 cross-compiler or qemu-user: apt-get install gcc-aarch64-linux-gnu qemu-user")
    out = tmp_path / "c"
    write(arts["tiny"], out)
    done = _cgutil.run_make(out, "timing", make_tool, cross, "OPT=-O3", "ARCH=-mcpu=cortex-a72")
    assert done.returncode == 0, done.stderr
    run = subprocess.run(
        [
            qemu,
            "-L",
            "/usr/aarch64-linux-gnu",
            str(out / "tf_timing"),
            "--samples",
            "1000",
            "--out",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    assert record["target"] == "aarch64" and record["isolation"]["flush_to_zero"]["granted"]
    durations, positions = _read_samples(tmp_path / "s", 1000)
    assert durations.min() > 0 and list(positions[:17]) == list(range(16)) + [0]
