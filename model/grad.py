"""Training: the forward pass with a tape, the hand-written backward pass, and the losses.

No autograd library. `forward_train` is `model.transformer.forward` with a `Tape`: the same
layer functions in the same order (so with dropout 0 its output equals the inference forward
bit for bit), and each block appends a typed record of what its backward needs. `backward`
walks those records in reverse, each record running its own backward (the layer backward
functions of model/layers.py, beside their forwards) on a `Flow`: the stream gradient, the
gradient reaching the encoder output, the parameter gradients. Parameter names come from
model/names.py.

Dropout (Vaswani et al. 2017, section 5.4) is applied to the sum of embeddings and positional
encodings and to each sub-layer's output before the residual add. Its masks are drawn from the
numpy Generator passed in, so a seed fixes them; with rate 0 or no Generator nothing is drawn.

Losses: label-smoothed cross entropy (Szegedy et al. 2016: target (1-eps) one-hot + eps/V
uniform) for tokens, mean squared error for continuous outputs, both averaged over the
positions whose weight is nonzero.

Checked against central finite differences in float64 for every parameter tensor
(tests/model/test_grad.py). Gradient formulas: layer norm as in Ba et al. 2016; softmax
backward dS = P * (dP - rowsum(dP * P)), P = p / l from the attention operator, in
FlashAttention-2's form (model/layers.py, mha_backward); exactly zero at masked keys (p = 0)
and on fully masked rows.

Roundoff: training amplifies last-bit differences into different runs. The same code and seed
ends differently on machines whose BLAS kernels differ, and computing `x @ w` as one 2-D
product instead of one per batch row moves every run; the recipes are therefore judged by
margins that hold over such perturbations, not by one trajectory (docs/training.md).

Nothing here is real-time safe: training allocates freely. This file imports numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import Config
from .transformer import Flow, Tape, forward

Params = dict[str, np.ndarray]
Grads = dict[str, np.ndarray]


def forward_train(
    params: Params,
    config: Config,
    x: np.ndarray,
    *,
    src: np.ndarray | None = None,
    src_valid: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
    dropout: float | None = None,
) -> tuple[np.ndarray, Tape]:
    """`transformer.forward` with a tape: dropout at rate `dropout` (default config.dropout;
    masks drawn from `rng`, none if rng is None) and the records `backward` needs.
    Returns (outputs [B, T, V|d_out], tape)."""
    rate = config.dropout if dropout is None else dropout
    tape = Tape(params, dropout=rate, rng=rng)
    return forward(params, config, x, src=src, src_valid=src_valid, tape=tape), tape


def backward(dout: np.ndarray, tape: Tape) -> Grads:
    """Gradients of every parameter given d(loss)/d(outputs) [B, T, V|d_out].

    Walks the tape's records last to first, then empties the tape (a tape is walked once). The
    records are released together at the end, not one by one as they are walked: freeing the
    caches early shrinks the heap mid-step and the allocator hands those pages back to the
    system, to fault them in again on the next step (see train.keep_freed_memory)."""
    flow = Flow(dh=dout)
    for record in reversed(tape.records):
        record.backward(flow)
    tape.records.clear()
    return {name: np.asarray(flow.grads[name], dtype=p.dtype) for name, p in tape.params.items()}


# ---------------------------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------------------------


def _weights(weight: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, float]:
    w = np.ones(shape, dtype=dtype) if weight is None else weight.astype(dtype)  # [B, T]
    total = float(w.sum())
    if total <= 0:
        raise ValueError("loss weights sum to zero: the batch has no position to learn from")
    return w, total


def cross_entropy(
    logits: np.ndarray, target: np.ndarray, *, weight: np.ndarray | None = None, smoothing: float = 0.1
) -> tuple[float, np.ndarray]:
    """Label-smoothed cross entropy averaged over weighted positions.

    logits [B, T, V], target int [B, T], weight [B, T] (0 = ignore) -> (loss, dlogits [B, T, V]).
    """
    v = logits.shape[-1]
    z = logits - logits.max(axis=-1, keepdims=True)  # [B, T, V]
    logz = np.log(np.exp(z).sum(axis=-1, keepdims=True))  # [B, T, 1]
    logp = z - logz  # [B, T, V]
    q = np.full(logits.shape, smoothing / v, dtype=logits.dtype)  # [B, T, V]
    np.put_along_axis(q, target[..., None], 1.0 - smoothing + smoothing / v, axis=-1)
    w, total = _weights(weight, target.shape, logits.dtype)
    per_position = -(q * logp).sum(axis=-1)  # [B, T]
    loss = float((per_position * w).sum() / total)
    dlogits = (np.exp(logp) - q) * (w / total)[..., None]  # [B, T, V]
    return loss, dlogits.astype(logits.dtype, copy=False)


def mse(y: np.ndarray, target: np.ndarray, *, weight: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Mean squared error over weighted positions and output channels.

    y, target [B, T, d_out], weight [B, T] -> (loss, dy)."""
    w, total = _weights(weight, y.shape[:-1], y.dtype)
    n = total * y.shape[-1]
    err = y - target  # [B, T, d_out]
    loss = float((w[..., None] * err * err).sum() / n)
    dy = (2.0 / n) * w[..., None] * err
    return loss, dy.astype(y.dtype, copy=False)


@dataclass(frozen=True)
class Batch:
    """One training batch. x: decoder input (int [B, T] tokens or [B, T, d_in]); target:
    int [B, T] or [B, T, d_out]; weight [B, T] (0 = padding, ignored); src/src_valid for
    encoder-decoder models."""

    x: np.ndarray
    target: np.ndarray
    weight: np.ndarray | None = None
    src: np.ndarray | None = None
    src_valid: np.ndarray | None = None


def loss_and_grads(
    params: Params,
    config: Config,
    batch: Batch,
    *,
    rng: np.random.Generator | None = None,
    dropout: float | None = None,
    label_smoothing: float = 0.1,
) -> tuple[float, Grads]:
    """Training loss (label-smoothed CE for tokens, MSE for continuous) and its gradient for
    every parameter. Dropout masks come from `rng` (None: no dropout)."""
    out, tape = forward_train(
        params, config, batch.x, src=batch.src, src_valid=batch.src_valid, rng=rng, dropout=dropout
    )
    if config.inputs == "tokens":
        loss, dout = cross_entropy(out, batch.target, weight=batch.weight, smoothing=label_smoothing)
    else:
        loss, dout = mse(out, batch.target.astype(out.dtype, copy=False), weight=batch.weight)
    return loss, backward(dout, tape)
