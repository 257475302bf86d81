"""Scaling: per-token cost at the last position vs max_len (64..2048) and vs d_model (32..256).

What the paper's complexity table predicts (Vaswani et al. 2017, Table 1): a cached step does
O(t d) attention work at position t (plus O(d^2 + d d_ff) for the projections and FFN), a full
recompute of the prefix O(t^2 d) per token. tickformer's static-cache step always spans all
max_len rows, so its cost is O(N d) at *every* position: flat in the position, linear in N.
Each point: p50 of the steps in the last max(4, N/32) positions of a few full sequences
(stateful subjects) or of repeated calls on the whole N-long prefix (recomputes).
"""

from __future__ import annotations

import math

import harness
import numpy as np
import pytest
import subjects

MAX_LENS = [64, 128, 256, 512, 1024, 2048]
D_MODELS = [32, 64, 128, 256]
STATEFUL = ["ort", "numpy", "numpy-growing", "ort-grow", "torch"]
RECOMPUTE = ["ort-recompute", "torch-recompute"]
STEP_BUDGET = 3072  # steps per stateful point (whole sequences, at least 2)


def scaled_config(control_config, *, max_len: int | None = None, d_model: int | None = None):
    d = control_config.d_model if d_model is None else d_model
    return control_config.replace(max_len=max_len or control_config.max_len, d_model=d, d_ff=4 * d)


def run_point(benchmark, request, artifact_for, config, name: str, axis: str, value: int) -> None:
    art, params = artifact_for(config)
    n = config.max_len
    x = np.random.default_rng(7).standard_normal((1, 1, config.d_in)).astype(np.float32)  # [1, 1, d_in]
    extra = {"group": f"scaling-{axis}", "impl": name, axis: value, "max_len": n, "d_model": config.d_model}
    if name in RECOMPUTE:
        prefix = (
            np.random.default_rng(8).standard_normal((1, n, config.d_in)).astype(np.float32)
        )  # [1, N, d_in]
        if name == "ort-recompute":
            call = subjects.ort_recompute(subjects.full_graph(config, params), prefix)
        else:
            call = subjects.torch_recompute(request.getfixturevalue("torch_mod"), config, params, prefix)
        samples = int(min(200, max(10, 4e5 / (n * math.sqrt(n)))))
        harness.measure_calls(
            benchmark,
            f"scale-{axis}/{name}/{value}",
            call,
            samples=samples,
            warmup=3,
            blocks=min(10, samples),
            **extra,
        )
        return
    if name == "torch":
        subject = subjects.torch_subject(request.getfixturevalue("torch_mod"), config, params, x)
    elif name == "ort-grow":
        subject = subjects.growing_subject(config, params, x)
    else:
        subject = subjects.session_subject(name, subjects.open_session(art, name), x)
    tail = max(4, n // 32)
    try:
        harness.measure_sequences(
            benchmark,
            f"scale-{axis}/{name}/{value}",
            subject.reset,
            subject.step,
            length=n,
            reps=max(2, STEP_BUDGET // n),
            positions={"N": (n - tail, n)},
            warmup_reps=1,
            **extra,
        )
    finally:
        subject.close()


@pytest.mark.parametrize("n", MAX_LENS)
@pytest.mark.parametrize("name", STATEFUL + RECOMPUTE)
def test_scaling_max_len(benchmark, request, control, artifact_for, name, n):
    run_point(benchmark, request, artifact_for, scaled_config(control[0], max_len=n), name, "max_len", n)


@pytest.mark.parametrize("d", D_MODELS)
@pytest.mark.parametrize("name", STATEFUL + RECOMPUTE)
def test_scaling_d_model(benchmark, request, control, artifact_for, name, d):
    run_point(benchmark, request, artifact_for, scaled_config(control[0], d_model=d), name, "d_model", d)
