"""One timing of the numpy training step (loss_and_grads + clip + Adam), shared by
`diagnose.py train` and `compare_commits.py --train` (which imports this file by path into a
child running an older commit's tickformer: it uses only APIs every commit has). Two models: the
control preset on random continuous data (`train_step_ms`, the benchmark's shapes) and the
reverse preset on the reverse task's own batches (`reverse_step_ms`, batch 64 of 9 tokens: the
encoder-decoder path, cross-attention and padding masks). Each step runs as that tree's trainer
runs it: with `train.keep_freed_memory()` where the tree has it. Not real-time."""

from __future__ import annotations

import time

import numpy as np

SHAPES = ((16, 64), (4, 256))  # (batch, T): the benchmark's two training shapes


def _median_step_ms(config, batches, steps: int, warmup: int) -> float:
    from tickformer.model import grad, init_params, optim, train

    if hasattr(train, "keep_freed_memory"):  # the trainer's own allocator setting, where it has one
        train.keep_freed_memory()

    params = init_params(config, 0)
    opt = optim.Adam(beta1=0.9, beta2=0.98, eps=1e-9)
    times = []
    for i in range(warmup + steps):
        b = batches[i % len(batches)]
        t0 = time.perf_counter_ns()
        _, g = grad.loss_and_grads(params, config, b)
        g, _ = optim.clip_by_global_norm(g, 1.0)
        opt.step(params, g, 1e-3)
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times[warmup:])) / 1e6


def train_step_ms(batch: int, t: int, steps: int = 10, warmup: int = 2) -> float:
    """Median wall time of one control-preset training step in ms over `steps` steps after `warmup`."""
    from tickformer.model import grad, preset

    config = preset("control")
    rng = np.random.default_rng(0)
    b = grad.Batch(
        x=rng.standard_normal((batch, t, config.d_in)).astype(np.float32),
        target=rng.standard_normal((batch, t, config.d_out)).astype(np.float32),
    )
    return _median_step_ms(config, [b], steps, warmup)


def reverse_step_ms(steps: int = 20, warmup: int = 3) -> float:
    """Median wall time of one reverse-task training step (preset reverse, batch 64) in ms."""
    from tickformer.model import preset
    from tickformer.model.tasks import get_task

    config, task = preset("reverse"), get_task("reverse")
    data = task.hooks.prepare(config, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    batches = [task.hooks.batch(data, rng, task.settings.batch_size) for _ in range(warmup + steps)]
    return _median_step_ms(config, batches, steps, warmup)
