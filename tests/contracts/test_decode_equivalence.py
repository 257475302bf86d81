"""Decode equivalence (contracts/decode_equivalence.py): stepping equals the full pass within
decode_tolerance. Operator level: one query at a time against its causal prefix, and keys folded
one piece at a time (chunk), within a bound derived from the case's own scores
(contracts.decode_equivalence.operator_tolerance: decode_tolerance is the model's, for LayerNorm'd
activations, and says nothing about raw scores of thousands). Model level: each position's prefix
pass vs the full pass. The runtime's KV-cache step is compared in tests/verify (needs an exported
artifact)."""

from __future__ import annotations

import importlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts.decode_equivalence import decode_tolerance, equivalence_excess, operator_tolerance
from tickformer.model.config import preset
from tickformer.model.transformer import forward, init_params

A = importlib.import_module("tickformer.model.attention")
elems = st.floats(-30.0, 30.0, width=32)


def _check_operator(q: np.ndarray, k: np.ndarray, v: np.ndarray, chunk: int) -> None:
    """Every position's step over its causal prefix against the full causal pass, within
    operator_tolerance."""
    t = q.shape[0]
    full = A.attention(q, k, v, mask=A.causal_mask(t))  # [T, dv]
    for i in range(t):
        step = A.attention(q[i : i + 1], k[: i + 1], v[: i + 1], chunk=chunk)  # [1, dv] over the cache
        bound = operator_tolerance(q[i], k[: i + 1], v[: i + 1], chunk)  # [dv]
        diff = np.abs(step.astype(np.float64) - full[i : i + 1].astype(np.float64))  # [1, dv]
        assert np.isfinite(step).all() and (diff <= bound).all(), (i, diff, bound)


@given(st.integers(1, 24), st.integers(1, 8), st.data())
def test_operator_step_equals_full(t, chunk, data):
    d = 8
    q = data.draw(hnp.arrays(np.float32, (t, d), elements=elems))  # [T, d]
    k = data.draw(hnp.arrays(np.float32, (t, d), elements=elems))  # [T, d]
    v = data.draw(hnp.arrays(np.float32, (t, d), elements=elems))  # [T, d]
    _check_operator(q, k, v, chunk)


def test_operator_equal_huge_scores_cancelling_values():
    """The case CI's Hypothesis run found against the model's decode_tolerance: three keys with
    equal scores of about 2227 (one ulp is 2.4e-4 there, and the 1-row and 3-row products round
    them differently), values 4, 4, -8 whose exact weighted mean is 0: the step gave 6.5e-4."""
    t, d = 3, 8
    q = np.full((t, d), 30.0, np.float32)  # [T, d]
    k = np.full((t, d), 30.0, np.float32)  # [T, d]
    k[:, 0] = 0.0
    v = np.full((t, d), 4.0, np.float32)  # [T, d]
    v[2, 0] = -8.0
    _check_operator(q, k, v, chunk=1)
    assert operator_tolerance(q[2], k, v, 1)[0] > 6.5e-4  # the case's conditioning admits what it saw


def test_operator_tolerance_catches_a_dropped_key():
    """The bound is not vacuous: a step that forgets the newest key (its own) is caught on a
    case of ordinary magnitude."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(-3, 3, (6, 8)).astype(np.float32) for _ in range(3))  # [T, d] each
    full = A.attention(q, k, v, mask=A.causal_mask(6))  # [T, d]
    i = 5
    wrong = A.attention(q[i : i + 1], k[:i], v[:i], chunk=2)  # [1, d]: key i left out
    assert (np.abs(wrong - full[i : i + 1]) > operator_tolerance(q[i], k[: i + 1], v[: i + 1], 2)).any()


@settings(max_examples=20)
@given(st.integers(1, 16), st.integers(0, 2**32 - 1), st.sampled_from(["tiny", "control"]))
def test_model_prefix_equals_full(t, seed, name):
    cfg = preset(name)
    params = init_params(cfg, seed=seed % 5)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, t, cfg.d_in)).astype(np.float32)  # [B, T, d_in]
    full = forward(params, cfg, x)  # [B, T, d_out]
    rtol, atol = decode_tolerance(cfg)
    for i in range(t):
        prefix = forward(params, cfg, x[:, : i + 1])[:, i]  # [B, d_out]
        assert equivalence_excess(prefix, full[:, i], rtol, atol) <= 0.0


def test_tolerance_values_are_stated():
    rtol, atol = decode_tolerance(preset("control"))
    assert 4e-4 < rtol == atol < 6e-4
    assert equivalence_excess(np.array([1.0]), np.array([np.nan]), rtol, atol) == float("inf")
