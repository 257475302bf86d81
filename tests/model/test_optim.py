"""Adam, the paper's learning-rate schedule, and global-norm clipping."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.errors import ConfigError
from tickformer.model.optim import Adam, clip_by_global_norm, global_norm, noam_lr


def test_schedule_matches_the_paper() -> None:
    # d_model 512, warmup 4000: linear warmup to the peak (512 * 4000)^-0.5 at step 4000.
    peak = (512 * 4000) ** -0.5
    assert noam_lr(4000, d_model=512, warmup=4000) == pytest.approx(peak, rel=1e-12)
    assert peak == pytest.approx(6.9877e-4, rel=1e-4)
    assert noam_lr(1, d_model=512, warmup=4000) == pytest.approx(512**-0.5 * 4000**-1.5, rel=1e-12)
    assert noam_lr(2000, d_model=512, warmup=4000) == pytest.approx(peak / 2, rel=1e-12)  # linear
    assert noam_lr(16000, d_model=512, warmup=4000) == pytest.approx(peak / 2, rel=1e-12)  # 1/sqrt
    assert noam_lr(100, d_model=64, warmup=10, scale=2.0) == pytest.approx(
        2 * 64**-0.5 * 100**-0.5, rel=1e-12
    )
    lrs = [noam_lr(s, d_model=512, warmup=4000) for s in range(1, 20000, 97)]
    assert max(lrs) <= peak * (1 + 1e-12)


def test_schedule_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="step=0"):
        noam_lr(0, d_model=8, warmup=1)
    with pytest.raises(ConfigError, match="warmup=0"):
        noam_lr(1, d_model=8, warmup=0)


def test_adam_decreases_a_quadratic() -> None:
    rng = np.random.default_rng(0)
    a = np.diag(np.array([1.0, 10.0, 100.0]))
    target = rng.normal(size=3)
    params = {"x": np.zeros(3)}

    def loss(x):
        return 0.5 * (x - target) @ a @ (x - target)

    opt = Adam()
    start = loss(params["x"])
    for _ in range(500):
        grad = a @ (params["x"] - target)
        opt.step(params, {"x": grad}, lr=0.05)
    assert loss(params["x"]) < 1e-4 * start
    np.testing.assert_allclose(params["x"], target, atol=2e-2)


def test_adam_first_step_is_lr_times_sign() -> None:
    # With bias correction the first update is lr * g / (|g| + eps) = lr * sign(g).
    params = {"w": np.array([1.0, 1.0, 1.0], dtype=np.float32)}
    Adam().step(params, {"w": np.array([3.0, -0.5, 0.0], dtype=np.float32)}, lr=0.1)
    np.testing.assert_allclose(params["w"], [0.9, 1.1, 1.0], rtol=1e-6)
    assert params["w"].dtype == np.float32


def test_clipping_by_global_norm() -> None:
    grads = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    assert global_norm(grads) == 5.0
    clipped, norm = clip_by_global_norm(grads, 1.0)
    assert norm == 5.0
    assert global_norm(clipped) == pytest.approx(1.0)
    np.testing.assert_allclose(clipped["a"], [0.6, 0.0])
    same, _ = clip_by_global_norm(grads, 10.0)
    assert same["a"] is grads["a"]
    with pytest.raises(FloatingPointError, match="diverged"):
        clip_by_global_norm({"a": np.array([np.nan])}, 1.0)
    with pytest.raises(ConfigError):
        Adam(beta1=1.0)
