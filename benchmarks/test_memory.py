"""Python allocations per step (tracemalloc) and resident memory of a session vs max_len.

Allocations: steady state (after warm-up), 10,000 steps for the ORT sessions (fewer for the slow
subjects, tracemalloc slows Python code), reset() at max_len included. The probe is calibrated
in the same run: an empty call must read zero and a call that allocates one small array must
not, or the numbers are not trusted (that test fails). Target (report.py): zero for the ORT step.

Resident memory: one fresh process per (subject, max_len), see rss_probe.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import harness
import numpy as np
import pytest
import subjects

CALLS = {
    "ort": 10000,
    "ort-run": 10000,
    "numpy": 2000,
    "numpy-growing": 2000,
    "ort-grow": 3000,
    "torch": 2000,
}
RSS_LENGTHS = [64, 128, 256, 512, 1024, 2048]
RSS_KINDS = ["ort", "numpy", "ort-grow", "torch"]


def wrap(subject: subjects.Stateful, max_len: int):
    """One call = one step; reset() when the context is full (small ints only: no allocation)."""
    reset, step = subject.reset, subject.step
    state = [0]

    def call() -> None:
        if state[0] == max_len:
            reset()
            state[0] = 0
        step()
        state[0] += 1

    return call


def test_allocation_probe_is_calibrated(memory_results):
    """The probe reads zero for in-place numpy work and non-zero for one small array."""
    buf = np.zeros(16)
    out = np.zeros(16)
    in_place = harness.python_allocations(lambda: np.add(buf, buf, out), calls=1000, warmup=10)
    allocating = harness.python_allocations(lambda: np.zeros(16), calls=1000, warmup=10)
    memory_results["calibration"] = {"np.add(a, b, out)": in_place, "np.zeros(16)": allocating}
    assert in_place["loop_check"] == [0, 0], in_place
    assert (
        in_place["peak_bytes_per_call"] == 0
        and in_place["net_blocks"] <= 0
        and in_place["calls_with_alloc"] == 0
    ), in_place
    assert allocating["peak_bytes_per_call"] >= 16 * 8 and allocating["calls_with_alloc"] == 1000, allocating


@pytest.mark.parametrize("name", list(CALLS))
def test_python_allocations_per_step(request, control, artifact_for, memory_results, name):
    config, params = control
    x = np.random.default_rng(7).standard_normal((1, 1, config.d_in)).astype(np.float32)
    if name == "torch":
        subject = subjects.torch_subject(request.getfixturevalue("torch_mod"), config, params, x)
    elif name == "ort-grow":
        subject = subjects.growing_subject(config, params, x)
    else:
        subject = subjects.session_subject(name, subjects.open_session(artifact_for(config)[0], name), x)
    subject.reset()
    result = harness.python_allocations(
        wrap(subject, config.max_len), calls=CALLS[name], warmup=2 * config.max_len
    )
    memory_results["allocations"][name] = result
    subject.close()


@pytest.mark.parametrize("n", RSS_LENGTHS)
def test_resident_memory_vs_max_len(control, artifact_for, memory_results, n):
    config, _ = control
    art, _ = artifact_for(config.replace(max_len=n))
    memory_results["kv_layers"] = config.n_layers
    memory_results["kv_width"] = config.d_model
    probe = Path(__file__).with_name("rss_probe.py")
    for kind in RSS_KINDS:
        if kind == "torch":
            pytest.importorskip("torch", reason="torch comparator not installed")
        done = subprocess.run(
            [sys.executable, str(probe), kind, str(art)], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"rss_probe {kind} max_len {n} failed:\n{done.stderr[-2000:]}"
        memory_results["rss"].append(json.loads(done.stdout.strip().splitlines()[-1]))
