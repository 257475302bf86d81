"""Tests that pin the facts of "Attention Is All You Need" (Vaswani et al. 2017) as restated
in MISSION.md: the worked example, order blindness, masking, causality, the 1/sqrt(d_k)
variance argument, chunked == unchunked online softmax, and the parameter counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.model import (
    Config,
    attention,
    attention_weights,
    forward,
    init_params,
    parameter_count,
    parameter_shapes,
    preset,
)
from tickformer.model.attention import scaled_scores
from tickformer.model.layers import multi_head_attention

EPS64 = np.finfo(np.float64).eps


# --- the worked example -------------------------------------------------------------------


def test_worked_example_from_the_mission() -> None:
    q = np.array([[0.0, 1.0]])  # q2
    k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])
    v = np.array([[1.0, 0.0], [0.0, 2.0], [2.0, 1.0]])
    weights = attention_weights(q, k)
    np.testing.assert_allclose(weights[0], [0.284, 0.576, 0.140], atol=5e-4)
    # exact values: softmax([0, 1, -1] / sqrt 2)
    e = np.exp(np.array([0.0, 1.0, -1.0]) / math.sqrt(2))
    np.testing.assert_allclose(weights[0], e / e.sum(), rtol=1e-14)
    for chunk in (None, 1, 2, 3):
        out = attention(q, k, v, chunk=chunk)
        np.testing.assert_allclose(out[0], [0.56, 1.29], atol=5e-3)
        np.testing.assert_allclose(out[0], (e / e.sum()) @ v, rtol=1e-14)


# --- strategies ---------------------------------------------------------------------------


@st.composite
def qkv(draw, *, max_tq: int = 6, max_tk: int = 12, max_d: int = 8, batch: bool = True):
    """Float64 q [B, Tq, d], k [B, Tk, d], v [B, Tk, dv] from a drawn seed (fast to shrink)."""
    b = draw(st.integers(1, 2)) if batch else 1
    tq = draw(st.integers(1, max_tq))
    tk = draw(st.integers(1, max_tk))
    d = draw(st.integers(1, max_d))
    dv = draw(st.integers(1, 5))
    scale = draw(st.sampled_from([0.1, 1.0, 10.0, 100.0]))  # 100: saturated softmax, scores ~1e4
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.normal(size=(b, tq, d)) * scale
    k = rng.normal(size=(b, tk, d)) * scale
    v = rng.normal(size=(b, tk, dv))
    return q, k, v, rng


def random_mask(rng: np.random.Generator, shape: tuple[int, ...], *, full_rows: bool = True) -> np.ndarray:
    mask = rng.random(shape) < 0.6
    if full_rows and shape[-2] > 1:
        mask[..., 0, :] = False  # one fully masked query row
    return mask


# --- order blindness and masking ----------------------------------------------------------


@given(qkv(), st.data())
def test_permuting_keys_and_values_leaves_output_unchanged(operands, data) -> None:
    q, k, v, rng = operands
    perm = np.array(data.draw(st.permutations(range(k.shape[1]))))
    out = attention(q, k, v)
    out_perm = attention(q, k[:, perm], v[:, perm])
    # Only the summation order changes: |error| <= Tk * eps * max|v| (float64).
    bound = 4 * k.shape[1] * EPS64 * np.abs(v).max()
    np.testing.assert_allclose(out_perm, out, rtol=0, atol=bound)
    # Same with a mask permuted along with the keys.
    mask = random_mask(rng, q.shape[:2] + (k.shape[1],))
    np.testing.assert_allclose(
        attention(q, k[:, perm], v[:, perm], mask=mask[..., perm]),
        attention(q, k, v, mask=mask),
        rtol=0,
        atol=bound,
    )


def test_multi_head_attention_without_positions_is_order_blind() -> None:
    rng = np.random.default_rng(0)
    d, h = 8, 2
    w = {f"{p}_{n}": rng.normal(size=(d, d) if p == "w" else (d,)) for p in ("w", "b") for n in "qkvo"}
    x_q = rng.normal(size=(1, 3, d))
    x_kv = rng.normal(size=(1, 7, d))
    perm = rng.permutation(7)
    a = multi_head_attention(x_q, x_kv, **w, n_heads=h)
    b = multi_head_attention(x_q, x_kv[:, perm], **w, n_heads=h)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@given(qkv(), st.integers(1, 13))
def test_masked_keys_get_exactly_zero_weight(operands, chunk) -> None:
    q, k, v, rng = operands
    mask = random_mask(rng, q.shape[:2] + (k.shape[1],))
    weights = attention_weights(q, k, mask=mask)
    assert np.all(weights[~mask] == 0.0)
    assert np.all(np.isfinite(weights))
    rows_with_keys = mask.any(axis=-1)
    np.testing.assert_allclose(weights.sum(axis=-1)[rows_with_keys], 1.0, rtol=0, atol=1e-12)
    # Changing masked keys and values (to huge finite numbers) changes nothing, bit for bit.
    k2, v2 = k.copy(), v.copy()
    hidden = ~mask.any(axis=1)  # keys no query may see  [B, Tk]
    k2[hidden] = 1e6
    v2[hidden] = -1e6
    np.testing.assert_array_equal(
        attention(q, k2, v2, mask=mask, chunk=chunk), attention(q, k, v, mask=mask, chunk=chunk)
    )


def test_fully_masked_rows_are_exactly_zero_never_nan() -> None:
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))
    mask = np.ones((2, 4, 5), dtype=bool)
    mask[:, 1] = False
    mask[1] = False
    for chunk in (None, 1, 2, 5, 9):
        out = attention(q, k, v, mask=mask, chunk=chunk)
        assert not np.any(np.isnan(out))
        assert np.all(out[:, 1] == 0.0) and np.all(out[1] == 0.0)
    for dtype in (np.float16, np.float32):
        out = attention(q.astype(dtype), k.astype(dtype), v.astype(dtype), mask=mask)
        assert np.all(out[1] == 0.0) and not np.any(np.isnan(out))


# --- chunked == unchunked -------------------------------------------------------------------


@given(qkv(), st.integers(1, 15), st.booleans())
def test_chunked_equals_unchunked(operands, chunk, masked) -> None:
    """Bound: every merge rescales by exact powers (the max is exact, exp(m_a - m) <= 1) and
    adds, so each output entry carries <= ~4 eps of relative error per merge; with
    n = ceil(Tk / chunk) merges, |chunked - unchunked| <= 8 n eps max|v| (float64)."""
    q, k, v, rng = operands
    mask = random_mask(rng, q.shape[:2] + (k.shape[1],)) if masked else None
    full = attention(q, k, v, mask=mask)
    pieces = attention(q, k, v, mask=mask, chunk=chunk)
    n = math.ceil(k.shape[1] / chunk)
    bound = 8 * (n + k.shape[1]) * EPS64 * np.abs(v).max()
    np.testing.assert_allclose(pieces, full, rtol=0, atol=bound)
    if mask is not None:
        empty = ~mask.any(axis=-1)  # [B, Tq]
        assert np.all(pieces[empty] == 0.0) and np.all(full[empty] == 0.0)


# --- 1/sqrt(d_k) ------------------------------------------------------------------------------


def test_scaled_scores_of_unit_variance_q_k_have_unit_variance() -> None:
    """q, k with iid N(0, 1) components of width d_k = 64: q.k has variance d_k (std 8), the
    scaled score variance 1. With n = 20000 independent pairs, the sample variance of the scaled
    score has standard error sqrt((E[x^4] - 1) / n) = sqrt((2 + 6/d_k) / n) ~= 0.0102; we allow
    5 standard errors (0.051). Fixed seed, so the test is deterministic."""
    d_k, n = 64, 20000
    rng = np.random.default_rng(2017)
    q = rng.standard_normal((n, 1, d_k))
    k = rng.standard_normal((n, 1, d_k))
    scores = scaled_scores(q, k)[:, 0, 0]  # [n]
    se = math.sqrt((2 + 6 / d_k) / n)
    assert abs(scores.var() - 1.0) <= 5 * se
    raw = (q * k).sum(axis=-1)[:, 0]  # unscaled
    assert abs(raw.var() / d_k - 1.0) <= 5 * se
    assert abs(raw.std() - 8.0) <= 8.0 * 5 * se


# --- causality --------------------------------------------------------------------------------

CAUSAL_CONFIGS = {
    "decoder-continuous": preset("tiny"),
    "decoder-tokens": Config(
        arch="decoder",
        inputs="tokens",
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_layers=2,
        vocab_size=9,
        max_len=12,
        dropout=0.0,
    ),
    "encoder-decoder": preset("tiny-seq2seq"),
}


@pytest.mark.parametrize("name", list(CAUSAL_CONFIGS))
@settings(max_examples=25)
@given(data=st.data())
def test_decoder_is_causal_bit_for_bit(name, data) -> None:
    config = CAUSAL_CONFIGS[name]
    params = init_params(config, seed=data.draw(st.integers(0, 3)))
    t_len = data.draw(st.integers(2, config.max_len))
    t = data.draw(st.integers(0, t_len - 2))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    if config.inputs == "tokens":
        x = rng.integers(0, config.vocab_size, size=(2, t_len))
        x2 = x.copy()
        x2[:, t + 1 :] = rng.integers(0, config.vocab_size, size=(2, t_len - t - 1))
    else:
        x = rng.normal(size=(2, t_len, config.d_in)).astype(np.float32)
        x2 = x.copy()
        x2[:, t + 1 :] = rng.normal(size=(2, t_len - t - 1, config.d_in)) * 100
    src = rng.integers(0, config.vocab_size, size=(2, 5)) if config.arch == "encoder-decoder" else None
    a = forward(params, config, x, src=src)
    b = forward(params, config, x2, src=src)
    np.testing.assert_array_equal(a[:, : t + 1], b[:, : t + 1])


# --- parameter counts ------------------------------------------------------------------------


@pytest.mark.parametrize("name, count", [("paper-base", 63_082_496), ("paper-big", 214_245_376)])
def test_paper_parameter_counts(name, count) -> None:
    config = preset(name)
    assert parameter_count(config) == count
    assert sum(math.prod(shape) for shape in parameter_shapes(config).values()) == count
    assert (
        config.d_model,
        config.n_heads,
        config.d_ff,
        config.n_layers,
        config.n_enc_layers,
        config.vocab_size,
    ) == ((512, 8, 2048, 6, 6, 37000) if name == "paper-base" else (1024, 16, 4096, 6, 6, 37000))


@pytest.mark.parametrize("name", ["tiny", "tiny-seq2seq", "control", "reverse"])
def test_parameter_count_matches_shapes_for_small_presets(name) -> None:
    config = preset(name)
    assert parameter_count(config) == sum(math.prod(s) for s in parameter_shapes(config).values())
