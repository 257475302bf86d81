"""The SSM backward trains: a one-layer post-LN residual SSM with linear read-in and read-out
(only model/ssm.py and model/layers.py, Adam from model/optim.py) fits a filtered sequence, and
the same run with a broken backward does not.

Task: white noise x_t ~ N(0, 1) in, y_t = sum_k g_k x_{t-k} out, with the band-pass kernel
g_k = e^{-k/4} - e^{-k/1.5} (k < 16), normalised to unit output variance. g_0 = 0, so no
memoryless model beats MSE ~1 (the variance of y): the loss can fall well below 1 only through the
state. Model: h = x W_in + b_in [B, T, D]; z = LN(h + SSM(h)); y_hat = z W_out + b_out; D = 8,
N = 4, T = 64, batch 16, 200 Adam steps (lr 2e-2, beta2 0.999), float32, seeds fixed.

Measured (`pytest tests/model/test_ssm_train.py -s`, OPENBLAS_NUM_THREADS=1): the loss over the
first 10 steps against the last 10 falls by a factor printed there (>= 5 required; 9-16 for seeds
0-3 when this was written), while the mutants (the reverse-time state gradient without its
carry lam_{t+1} g_{t+1}, i.e. no gradient through time; and run forward in time instead of
reversed) fall by less than 2 (the check can fail).
"""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.model import ssm
from tickformer.model.layers import layer_norm_backward, layer_norm_forward, linear_backward, linear_forward
from tickformer.model.optim import Adam

D, N, T, BATCH, STEPS, LR = 8, 4, 64, 16, 200, 2e-2
WARM = 16  # steps of input history before the scored window (the kernel's length)
REQUIRED_FACTOR = 5.0


def kernel() -> np.ndarray:
    k = np.arange(WARM, dtype=np.float64)  # [K]
    g = np.exp(-k / 4.0) - np.exp(-k / 1.5)  # [K], g_0 = 0
    return g / np.sqrt((g * g).sum())  # [K] unit output variance for unit white noise


def batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(size=(BATCH, T + WARM))  # [B, W + T]
    g = kernel()
    y = np.stack([np.convolve(row, g)[: T + WARM] for row in x])  # [B, W + T] causal filter
    return x[:, WARM:, None].astype(np.float32), y[:, WARM:, None].astype(np.float32)  # [B, T, 1]


def init(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    limit = np.sqrt(6.0 / (D + 1))
    p = {
        "in.w": rng.uniform(-1.0, 1.0, size=(1, D)),
        "in.b": np.zeros(D),
        "ln.g": np.ones(D),
        "ln.b": np.zeros(D),
        "out.w": rng.uniform(-limit, limit, size=(D, 1)),
        "out.b": np.zeros(1),
    }
    p.update({"ssm." + k: v for k, v in ssm.ssm_init(D, N, rng).items()})
    return {k: np.asarray(v, dtype=np.float32) for k, v in p.items()}


def loss_and_grads(
    p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray
) -> tuple[float, dict[str, np.ndarray]]:
    h, c_in = linear_forward(x, w=p["in.w"], b=p["in.b"])  # [B, T, 1] -> [B, T, D]
    mixed, c_ssm = ssm.ssm_forward(h, **{k[4:]: v for k, v in p.items() if k.startswith("ssm.")})  # [B, T, D]
    z, c_ln = layer_norm_forward(h + mixed, g=p["ln.g"], b=p["ln.b"], eps=1e-5)  # [B, T, D]
    y_hat, c_out = linear_forward(z, w=p["out.w"], b=p["out.b"])  # [B, T, 1]
    err = y_hat - y  # [B, T, 1]
    loss = float((err * err).mean())
    dz, g_out = linear_backward(2.0 * err / err.size, c_out)  # [B, T, D]
    dsum, g_ln = layer_norm_backward(dz, c_ln)  # [B, T, D]
    dh, g_ssm = ssm.ssm_backward(dsum, c_ssm)  # [B, T, D]
    dh += dsum  # the residual path
    _, g_in = linear_backward(dh, c_in)
    grads = {"in.w": g_in["w"], "in.b": g_in["b"], "ln.g": g_ln["g"], "ln.b": g_ln["b"]}
    grads.update({"out.w": g_out["w"], "out.b": g_out["b"]})
    grads.update({"ssm." + k: v for k, v in g_ssm.items()})
    return loss, grads


def train(seed: int) -> tuple[float, float]:
    """-> (mean loss of the first 10 steps, of the last 10)."""
    params = init(seed)
    opt = Adam(beta2=0.999)
    rng = np.random.default_rng(seed + 1)
    losses = []
    for _ in range(STEPS):
        x, y = batch(rng)
        loss, grads = loss_and_grads(params, x, y)
        opt.step(params, grads, LR)
        losses.append(loss)
    return float(np.mean(losses[:10])), float(np.mean(losses[-10:]))


def _no_carry(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    return q.copy()  # g_t = C_t dy_t only: the gradient stops at one step


def _forward_in_time(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    return ssm.linear_scan(a, q)  # the carry from the past instead of the future


def test_the_backward_trains_a_filter_and_the_loss_drops(capsys):
    first, last = train(seed=0)
    with capsys.disabled():
        print(
            f"\nssm smoke: loss {first:.4f} -> {last:.4f}, factor {first / last:.1f} (>= {REQUIRED_FACTOR})"
        )
    assert first / last >= REQUIRED_FACTOR
    assert last < 0.3  # far below the ~1 any memoryless model is left with


@pytest.mark.parametrize("mutant", [_no_carry, _forward_in_time], ids=["no carry", "forward in time"])
def test_a_broken_state_gradient_fails_the_smoke(monkeypatch, capsys, mutant):
    monkeypatch.setattr(ssm, "reverse_linear_scan", mutant)
    first, last = train(seed=0)
    with capsys.disabled():
        print(
            f"\nssm smoke, mutant {mutant.__name__}: loss {first:.4f} -> {last:.4f}, factor {first / last:.1f}"
        )
    assert first / last < REQUIRED_FACTOR
