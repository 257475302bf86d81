"""Masking contract (contracts/masking.py): the operator's mask builders agree with the proven
integer predicates; masked keys weigh exactly 0; causality of the model is exact; stale cache
rows never influence an output."""

from __future__ import annotations

import importlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts import masking as M
from tickformer.model.config import preset
from tickformer.model.transformer import forward, init_params

A = importlib.import_module("tickformer.model.attention")

finite32 = st.floats(-1e4, 1e4, width=32)


@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 12))
def test_causal_mask_matches_predicate(tq, tk, offset):
    np.testing.assert_array_equal(A.causal_mask(tq, tk, offset=offset), M.causal_mask_spec(tq, tk, offset))


@given(st.lists(st.integers(0, 9), min_size=1, max_size=4), st.integers(1, 9), st.integers(1, 9))
def test_padding_mask_matches_predicate(n_valid, tk, tq):
    valid = M.padding_mask_spec(n_valid, tk)  # [B, Tk]
    mask = A.padding_mask(valid, tq)  # [B, 1, Tq, Tk]
    expect = np.array([[[[M.padding_allowed(j, n) for j in range(tk)]] * tq] for n in n_valid])
    np.testing.assert_array_equal(mask, expect)


@given(st.integers(1, 10), st.integers(1, 10))
def test_window_is_causal_and_w_wide(t, w):
    win = M.window_mask_spec(t, w)  # [T, T]
    assert not (win & ~M.causal_mask_spec(t, t)).any()
    np.testing.assert_array_equal(win.sum(axis=1), np.minimum(np.arange(t) + 1, w))


@st.composite
def qkv_mask(draw):
    tq, tk, d, dv = (draw(st.integers(1, 6)) for _ in range(4))
    q = draw(hnp.arrays(np.float32, (tq, d), elements=finite32))
    k = draw(hnp.arrays(np.float32, (tk, d), elements=finite32))
    v = draw(hnp.arrays(np.float32, (tk, dv), elements=finite32))
    mask = draw(hnp.arrays(np.bool_, (tq, tk)))
    return q, k, v, mask


@given(qkv_mask(), st.integers(1, 6))
def test_masked_keys_have_no_influence(qkvm, chunk):
    """M2/M3: changing a masked key or value (even to huge values) changes nothing, bitwise;
    fully masked rows are exactly zero."""
    q, k, v, mask = qkvm
    out = A.attention(q, k, v, mask=mask, chunk=chunk)  # [Tq, dv]
    never = ~mask.any(axis=0)  # keys no query may see
    k2, v2 = k.copy(), v.copy()
    k2[never] = 3e38
    v2[never] = -3e38
    with np.errstate(over="ignore", invalid="ignore"):  # masked scores overflow: selection discards them
        out2 = A.attention(q, k2, v2, mask=mask, chunk=chunk)
    np.testing.assert_array_equal(out, out2)
    assert np.all(out[~mask.any(axis=1)] == 0.0)
    w = A.attention_weights(q, k, mask=mask)
    assert np.all(w[~mask] == 0.0)


@settings(max_examples=25)
@given(st.integers(1, 8), st.integers(0, 7), st.integers(0, 2**32 - 1))
def test_model_is_exactly_causal(t, cut, seed):
    """M4 on the reference model: outputs at positions <= cut do not change, bitwise, when every
    input after cut is replaced."""
    cfg = preset("tiny")
    params = init_params(cfg, seed=seed % 7)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, t, cfg.d_in)).astype(np.float32)  # [B, T, d_in]
    cut = min(cut, t - 1)
    x2 = x.copy()
    x2[:, cut + 1 :] = rng.uniform(-1e3, 1e3, x2[:, cut + 1 :].shape)
    y, y2 = forward(params, cfg, x), forward(params, cfg, x2)  # [B, T, d_out]
    np.testing.assert_array_equal(y[:, : cut + 1], y2[:, : cut + 1])


@given(st.integers(1, 16), st.data())
def test_stale_cache_rows_never_influence(n_slots, data):
    """M7 at the operator: a static cache of n_slots rows whose query is at position pos selects
    slots `causal_allowed(0, slot, pos)` (the live rows and its own); whatever finite garbage the
    other rows hold (a previous run before reset), the output is bitwise the same as with zeroed
    rows."""
    pos = data.draw(st.integers(0, n_slots - 1))
    d = 4
    q = data.draw(hnp.arrays(np.float32, (1, d), elements=finite32))  # [1, d] query at pos
    k = data.draw(hnp.arrays(np.float32, (n_slots, d), elements=finite32))  # [N, d]
    v = data.draw(hnp.arrays(np.float32, (n_slots, d), elements=finite32))  # [N, d]
    visible = np.array([M.causal_allowed(0, s, pos) for s in range(n_slots)])[None, :]  # [1, N]
    garbage_k, garbage_v = k.copy(), v.copy()
    garbage_k[~visible[0]] = data.draw(st.sampled_from([3e38, -3e38, 1e30, 0.0]))
    garbage_v[~visible[0]] = data.draw(st.sampled_from([3e38, -3e38, 1e30, 0.0]))
    clean_k, clean_v = k.copy(), v.copy()
    clean_k[~visible[0]] = 0.0
    clean_v[~visible[0]] = 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # stale scores may overflow: never selected
        a = A.attention(q, garbage_k, garbage_v, mask=visible)
    b = A.attention(q, clean_k, clean_v, mask=visible)
    np.testing.assert_array_equal(a, b)
