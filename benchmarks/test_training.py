"""Training throughput (tokens/s): tickformer's numpy trainer vs PyTorch CPU eager.

Same model (preset `control`, the same initial weights), same batch, same step: forward, MSE
loss, hand-written backward (numpy) / autograd (torch), global-norm clipping at 1.0, Adam
(0.9, 0.98, 1e-9). One thread each. tokens/s = batch * T / (time of one optimisation step);
each step is timed individually and the median is the headline (the mean is skewed by the
machine's other tenants). Target (report.py): numpy >= 0.5x torch.
"""

from __future__ import annotations

import harness
import numpy as np
import pytest

# (batch, T): the pendulum-sized window and a full-context batch at max_len.
SHAPES = [(16, 64), (4, 256)]
STEPS = 24
WARMUP = 3


def make_batch(config, batch: int, t: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, t, config.d_in)).astype(np.float32)  # [B, T, d_in]
    y = rng.standard_normal((batch, t, config.d_out)).astype(np.float32)  # [B, T, d_out]
    return x, y


def numpy_step_fn(config, params, x, y):
    from tickformer.model import grad, optim

    params = {k: v.copy() for k, v in params.items()}
    opt = optim.Adam(beta1=0.9, beta2=0.98, eps=1e-9)
    batch = grad.Batch(x=x, target=y)

    def step():
        _, grads = grad.loss_and_grads(params, config, batch)
        grads, _ = optim.clip_by_global_norm(grads, 1.0)
        opt.step(params, grads, 1e-3)

    return step


def torch_step_fn(torch, config, params, x, y):
    import torch_reference as tr

    model = tr.build(params, config).train()
    opt = tr.adam(model, lr=1e-3)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    return lambda: tr.train_step(model, opt, tx, ty, clip=1.0)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"B{s[0]}xT{s[1]}")
@pytest.mark.parametrize("impl", ["numpy", "torch"])
def test_training_throughput(benchmark, request, control, impl, shape):
    config, params = control
    batch, t = shape
    x, y = make_batch(config, batch, t)
    if impl == "torch":
        step = torch_step_fn(request.getfixturevalue("torch_mod"), config, params, x, y)
    else:
        step = numpy_step_fn(config, params, x, y)
    stats = harness.measure_calls(
        benchmark,
        f"train/{impl}/B{batch}xT{t}",
        step,
        samples=STEPS,
        warmup=WARMUP,
        blocks=STEPS,
        group="training",
        impl=impl,
        batch=batch,
        T=t,
    )
    tokens = batch * t
    benchmark.extra_info["tokens_per_step"] = tokens
    benchmark.extra_info["tokens_per_s_p50"] = tokens / (stats["p50"] * 1e-6)


def test_training_losses_agree(control, torch_mod):
    """The two trainers do the same work: same initial loss and, after 5 Adam steps with the
    same batch, losses within 1e-3 relative (fp32 roundoff in different orders; Adam's
    normalised update amplifies tiny gradient differences only where |g| ~ eps)."""
    from tickformer.model import grad

    config, params = control
    x, y = make_batch(config, 8, 32, seed=3)
    numpy_params = {k: v.copy() for k, v in params.items()}
    from tickformer.model import optim

    opt = optim.Adam(beta1=0.9, beta2=0.98, eps=1e-9)
    batch = grad.Batch(x=x, target=y)
    numpy_losses = []
    for _ in range(5):
        loss, grads = grad.loss_and_grads(numpy_params, config, batch)
        grads, _ = optim.clip_by_global_norm(grads, 1.0)
        opt.step(numpy_params, grads, 1e-3)
        numpy_losses.append(loss)

    import torch_reference as tr

    model = tr.build(params, config).train()
    topt = tr.adam(model, lr=1e-3)
    tx, ty = torch_mod.from_numpy(x), torch_mod.from_numpy(y)
    torch_losses = [tr.train_step(model, topt, tx, ty, clip=1.0) for _ in range(5)]
    np.testing.assert_allclose(numpy_losses, torch_losses, rtol=1e-3)
