"""Decode equivalence (contracts/decode_equivalence.py): stepping equals the full pass within
decode_tolerance. Operator level: one query at a time against its causal prefix, and keys folded
one piece at a time (chunk). Model level: each position's prefix pass vs the full pass. The
runtime's KV-cache step is compared in tests/verify (needs an exported artifact)."""

from __future__ import annotations

import importlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts.decode_equivalence import decode_tolerance, equivalence_excess
from tickformer.model.config import preset
from tickformer.model.transformer import forward, init_params

A = importlib.import_module("tickformer.model.attention")
elems = st.floats(-30.0, 30.0, width=32)


@given(st.integers(1, 24), st.integers(1, 8), st.data())
def test_operator_step_equals_full(t, chunk, data):
    d = 8
    q = data.draw(hnp.arrays(np.float32, (t, d), elements=elems))  # [T, d]
    k = data.draw(hnp.arrays(np.float32, (t, d), elements=elems))  # [T, d]
    v = data.draw(hnp.arrays(np.float32, (t, d), elements=elems))  # [T, d]
    full = A.attention(q, k, v, mask=A.causal_mask(t))  # [T, d]
    rtol, atol = decode_tolerance(preset("control"))
    for i in range(t):
        step = A.attention(q[i : i + 1], k[: i + 1], v[: i + 1], chunk=chunk)  # [1, d] over the cache
        assert equivalence_excess(step, full[i : i + 1], rtol, atol) <= 0.0


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
