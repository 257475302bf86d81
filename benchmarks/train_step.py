"""One timing of the numpy training step (loss_and_grads + clip + Adam, control preset), shared
by `diagnose.py train` and `compare_commits.py --train` (which imports this file by path into a
child running an older commit's tickformer: it uses only APIs every commit has). Not real-time."""

from __future__ import annotations

import time

import numpy as np

SHAPES = ((16, 64), (4, 256))  # (batch, T): the benchmark's two training shapes


def train_step_ms(batch: int, t: int, steps: int = 10, warmup: int = 2) -> float:
    """Median wall time of one training step in ms over `steps` steps after `warmup`."""
    from tickformer.model import grad, init_params, optim, preset

    config = preset("control")
    params = init_params(config, 0)
    rng = np.random.default_rng(0)
    b = grad.Batch(x=rng.standard_normal((batch, t, config.d_in)).astype(np.float32),
                   target=rng.standard_normal((batch, t, config.d_out)).astype(np.float32))
    opt = optim.Adam(beta1=0.9, beta2=0.98, eps=1e-9)
    times = []
    for _ in range(warmup + steps):
        t0 = time.perf_counter_ns()
        _, g = grad.loss_and_grads(params, config, b)
        g, _ = optim.clip_by_global_norm(g, 1.0)
        opt.step(params, g, 1e-3)
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times[warmup:])) / 1e6
