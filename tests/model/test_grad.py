"""The hand-written backward against central finite differences (float64), for every
parameter tensor of a tiny model in each architecture/input combination; and the training
forward against the inference forward.

Bound: central differences with step h have truncation error O(h^2 f''') and roundoff
O(eps_64 |f| / h); with h = 1e-5 and losses of order 1 both are ~1e-10, so analytic and numeric
gradients agree to ~1e-8 relative (measured worst 2e-8; we require 1e-6 relative to the
tensor's gradient scale).
ReLU kinks could break this if an entry sits within h of 0; with these seeds none does
(the check would fail loudly if one did).
"""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.model import Config, forward, init_params
from tickformer.model.attention import _safe_max, attention_weights, causal_mask, padding_mask, scaled_scores
from tickformer.model.grad import Batch, backward, cross_entropy, forward_train, loss_and_grads, mse

CONFIGS = {
    "decoder-continuous": Config(
        arch="decoder",
        inputs="continuous",
        d_model=8,
        n_heads=2,
        d_ff=12,
        n_layers=2,
        d_in=3,
        d_out=2,
        max_len=8,
        dropout=0.0,
    ),
    "decoder-tokens": Config(
        arch="decoder",
        inputs="tokens",
        d_model=8,
        n_heads=2,
        d_ff=12,
        n_layers=2,
        vocab_size=7,
        max_len=8,
        dropout=0.0,
    ),
    # Sliding window W = 3 over T = 5: the steady state (all W keys live) is in the batch, every
    # column of the relative-position bias [H, W] is read (finite differences check its backward).
    "decoder-continuous-window": Config(
        arch="decoder",
        inputs="continuous",
        d_model=8,
        n_heads=2,
        d_ff=12,
        n_layers=2,
        d_in=3,
        d_out=2,
        max_len=8,
        dropout=0.0,
        window=3,
    ),
    "decoder-tokens-window": Config(
        arch="decoder",
        inputs="tokens",
        d_model=8,
        n_heads=2,
        d_ff=12,
        n_layers=1,
        vocab_size=7,
        max_len=8,
        dropout=0.0,
        window=2,
    ),
    "encoder-decoder-tokens": Config(
        arch="encoder-decoder",
        inputs="tokens",
        d_model=8,
        n_heads=2,
        d_ff=12,
        n_layers=2,
        n_enc_layers=2,
        vocab_size=7,
        max_len=8,
        dropout=0.0,
    ),
}


def make_batch(config: Config, rng: np.random.Generator, b: int = 2, t: int = 5, s: int = 4) -> Batch:
    weight = np.ones((b, t))
    weight[1, -2:] = 0.0  # padded target positions are ignored
    if config.inputs == "tokens":
        x = rng.integers(0, config.vocab_size, size=(b, t))
        target = rng.integers(0, config.vocab_size, size=(b, t))
    else:
        x = rng.normal(size=(b, t, config.d_in))
        target = rng.normal(size=(b, t, config.d_out))
    src = src_valid = None
    if config.arch == "encoder-decoder":
        src = rng.integers(0, config.vocab_size, size=(b, s))
        src_valid = np.ones((b, s), dtype=bool)
        src_valid[0, -1] = False  # a padded source key
    return Batch(x=x, target=target, weight=weight, src=src, src_valid=src_valid)


def params64(config: Config, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 100)
    params = {k: v.astype(np.float64) for k, v in init_params(config, seed=seed).items()}
    for name in params:  # nonzero biases and non-unit gains, so every path carries gradient
        if params[name].ndim == 1:
            params[name] = params[name] + 0.3 * rng.normal(size=params[name].shape)
    return params


@pytest.mark.parametrize("dropout", [0.0, 0.2])
@pytest.mark.parametrize("name", [*CONFIGS, "encoder-decoder-tokens, one source all padding"])
def test_gradients_match_finite_differences(name: str, dropout: float) -> None:
    """Every parameter tensor; the last case has a batch row whose source is all padding, so
    every encoder and cross-attention query row of it selects no key (zero output, zero
    gradient through it: the operator's fully masked rows)."""
    empty_source = name.endswith("all padding")
    config = CONFIGS["encoder-decoder-tokens" if empty_source else name]
    rng = np.random.default_rng(0)
    batch = make_batch(config, rng)
    if empty_source:
        assert batch.src_valid is not None
        batch.src_valid[1] = False
    params = params64(config, seed=1)

    def loss_at(p: dict[str, np.ndarray]) -> float:
        # A fresh Generator with the same seed draws the same dropout masks every call.
        return loss_and_grads(p, config, batch, rng=np.random.default_rng(7), dropout=dropout)[0]

    _, grads = loss_and_grads(params, config, batch, rng=np.random.default_rng(7), dropout=dropout)
    assert set(grads) == set(params)
    h = 1e-5
    pick = np.random.default_rng(1)
    for pname, value in params.items():
        assert grads[pname].shape == value.shape and grads[pname].dtype == np.float64
        flat = value.reshape(-1)
        idx = pick.choice(flat.size, size=min(4, flat.size), replace=False)
        scale = max(np.abs(grads[pname]).max(), 1e-3)
        for i in idx:
            old = flat[i]
            flat[i] = old + h
            up = loss_at(params)
            flat[i] = old - h
            down = loss_at(params)
            flat[i] = old
            numeric = (up - down) / (2 * h)
            analytic = grads[pname].reshape(-1)[i]
            assert abs(numeric - analytic) <= 1e-6 * scale + 1e-9, (pname, int(i), numeric, analytic)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_parameter_gets_a_nonzero_gradient(name: str) -> None:
    config = CONFIGS[name]
    batch = make_batch(config, np.random.default_rng(0))
    _, grads = loss_and_grads(params64(config, seed=1), config, batch)
    for pname, g in grads.items():
        assert np.any(g != 0), pname


@pytest.mark.parametrize("name", list(CONFIGS))
def test_training_forward_without_dropout_equals_inference_forward(name: str) -> None:
    """One forward: with dropout off, the training forward (which keeps a tape) returns the
    inference forward's output bit for bit, source padding included."""
    config = CONFIGS[name].replace(dropout=0.1)  # rng=None / dropout=0 disables it
    batch = make_batch(config, np.random.default_rng(0))
    x = batch.x if config.inputs == "tokens" else batch.x.astype(np.float32)
    params = init_params(config, seed=2)
    expected = forward(params, config, x, src=batch.src, src_valid=batch.src_valid)
    for kwargs in ({"rng": None}, {"rng": np.random.default_rng(0), "dropout": 0.0}):
        got, tape = forward_train(params, config, x, src=batch.src, src_valid=batch.src_valid, **kwargs)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, expected)
        assert tape.records  # the same pass, with records kept


def test_the_tape_is_typed_records_walked_once() -> None:
    """The backward walks typed records (each with its own backward), no string kinds; walking
    consumes them."""
    config = CONFIGS["encoder-decoder-tokens"]
    batch = make_batch(config, np.random.default_rng(0))
    params = init_params(config, seed=2)
    out, tape = forward_train(params, config, batch.x, src=batch.src, src_valid=batch.src_valid)
    kinds = [type(r).__name__ for r in tape.records]
    n_enc, n_dec = config.n_enc_layers, config.n_layers
    assert kinds == (
        ["TokenEmbedRecord"]
        + ["AttentionRecord", "FeedForwardRecord"] * n_enc
        + ["MemoryRecord", "TokenEmbedRecord"]
        + ["AttentionRecord", "AttentionRecord", "FeedForwardRecord"] * n_dec
        + ["TiedOutputRecord"]
    )
    assert all(callable(r.backward) and not isinstance(r, (str, tuple)) for r in tape.records)
    grads = backward(np.ones_like(out), tape)
    assert set(grads) == set(params) and tape.records == []


def test_dropout_is_seeded_and_changes_output() -> None:
    config = CONFIGS["decoder-continuous"]
    batch = make_batch(config, np.random.default_rng(0))
    params = init_params(config, seed=2)
    x = batch.x.astype(np.float32)
    a, _ = forward_train(params, config, x, rng=np.random.default_rng(5), dropout=0.3)
    b, _ = forward_train(params, config, x, rng=np.random.default_rng(5), dropout=0.3)
    c, _ = forward_train(params, config, x, rng=np.random.default_rng(6), dropout=0.3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_cross_entropy_values() -> None:
    logits = np.zeros((1, 1, 4))
    loss, d = cross_entropy(logits, np.array([[2]]), smoothing=0.0)
    assert loss == pytest.approx(np.log(4))
    np.testing.assert_allclose(d[0, 0], [0.25, 0.25, -0.75, 0.25])
    # With smoothing eps the optimum puts (1 - eps + eps/V) on the target; the loss there is the
    # entropy of the smoothed target.
    eps, v = 0.1, 4
    q = np.full(v, eps / v)
    q[1] += 1 - eps
    loss, d = cross_entropy(np.log(q)[None, None], np.array([[1]]), smoothing=eps)
    assert loss == pytest.approx(-(q * np.log(q)).sum())
    np.testing.assert_allclose(d, 0, atol=1e-12)


def test_weighted_losses_ignore_padding() -> None:
    y = np.array([[[1.0], [5.0]]])
    t = np.array([[[0.0], [0.0]]])
    loss, dy = mse(y, t, weight=np.array([[1.0, 0.0]]))
    assert loss == 1.0
    np.testing.assert_array_equal(dy, [[[2.0], [0.0]]])
    with pytest.raises(ValueError, match="sum to zero"):
        mse(y, t, weight=np.zeros((1, 2)))


def _softmax_cases(dtype: type) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray | None]]:
    rng = np.random.default_rng(3)
    b, h, tq, tk, d = 3, 2, 6, 7, 4
    q: np.ndarray = (3 * rng.normal(size=(b, h, tq, d))).astype(dtype)  # large-ish logits
    k: np.ndarray = (3 * rng.normal(size=(b, h, tk, d))).astype(dtype)
    valid = rng.random((b, tk)) < 0.7
    valid[:, 0] = True
    valid[2] = False  # batch row 2: no real key at all -> every query row fully masked
    causal = causal_mask(tq, tk, offset=-2)  # query rows 0 and 1 see no key
    return [
        ("none", q, k, None),
        ("causal", q, k, causal),
        ("padding", q, k, padding_mask(valid, tq)),
        ("causal & padding", q, k, causal & padding_mask(valid, tq)),
    ]


def _plain_weights(q: np.ndarray, k: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
    """The plain formula attention_weights replaced (a new array per step): the reference."""
    scores = scaled_scores(q, k)  # [..., Tq, Tk]
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, scores.shape), scores, -np.inf)
    p = np.exp(scores - _safe_max(scores.max(axis=-1))[..., None])
    l = p.sum(axis=-1, keepdims=True)
    return np.where(l > 0, p / np.where(l > 0, l, 1), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_in_place_attention_weights_equal_the_plain_formula(dtype: type) -> None:
    """attention_weights works in place but does the plain formula's operations (equal bit for
    bit on our machines; 1e-6 relative allowed), fully masked rows included."""
    for label, q, k, mask in _softmax_cases(dtype):
        got = attention_weights(q, k, mask=mask)
        expected = _plain_weights(q, k, mask=mask)
        assert got.dtype == expected.dtype == dtype, label
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0, err_msg=label)
        assert np.all(np.isfinite(got)), label
        if mask is not None:
            allowed = np.broadcast_to(mask, got.shape)
            assert np.all(got[~allowed] == 0), label
            empty = ~allowed.any(axis=-1)  # fully masked query rows -> all zeros
            assert np.all(got[empty] == 0), label
            np.testing.assert_allclose(got[~empty].sum(axis=-1), 1, rtol=1e-6, err_msg=label)


def test_attention_weights_allocate_one_scores_array() -> None:
    """The point of working in place: peak traced memory is about one [B, H, Tq, Tk] array
    (the plain formula peaks at several; the check can fail)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    q: np.ndarray = rng.normal(size=(2, 4, 64, 16)).astype(np.float32)
    k: np.ndarray = rng.normal(size=(2, 4, 64, 16)).astype(np.float32)
    mask = causal_mask(64)
    one = 2 * 4 * 64 * 64 * 4  # bytes of one float32 scores array

    def peak(fn) -> int:
        tracemalloc.start()
        try:
            fn(q, k, mask=mask)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(attention_weights) < 1.5 * one
    assert peak(_plain_weights) > 2.5 * one
