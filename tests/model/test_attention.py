"""Training calls the operator itself: `attention_parts` returns what
`attention` returns, bit for bit, plus the p and l it came from."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.model.attention import (
    attention,
    attention_parts,
    attention_weights,
    causal_mask,
    chunk_state,
    normalise_weights,
    padding_mask,
)


def _case(dtype: type):
    rng = np.random.default_rng(4)
    q = (3 * rng.normal(size=(2, 3, 5, 4))).astype(dtype)
    k = (3 * rng.normal(size=(2, 3, 6, 4))).astype(dtype)
    v = rng.normal(size=(2, 3, 6, 4)).astype(dtype)
    valid = np.ones((2, 6), dtype=bool)
    valid[1] = False  # batch row 1: every query row fully masked
    mask = causal_mask(5, 6, offset=-1) & padding_mask(valid, 5)  # query row 0 sees no key either
    return q, k, v, mask


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_parts_is_attention_plus_its_weights(dtype: type) -> None:
    q, k, v, mask = _case(dtype)
    out, p, l = attention_parts(q, k, v, mask=mask)
    np.testing.assert_array_equal(out, attention(q, k, v, mask=mask))
    allowed = np.broadcast_to(mask, p.shape)
    assert np.all(p[~allowed] == 0) and np.all(out[l == 0] == 0)
    np.testing.assert_array_equal(l, p.sum(axis=-1))
    weights = normalise_weights(p.copy(), l)
    np.testing.assert_array_equal(weights, attention_weights(q, k, mask=mask))
    np.testing.assert_allclose(weights @ v, out, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_chunk_state_leaves_its_scores_alone() -> None:
    q, k, v, mask = _case(np.float32)
    s = q @ np.swapaxes(k, -1, -2)
    before = s.copy()
    chunk_state(s, np.broadcast_to(mask, s.shape), v)
    np.testing.assert_array_equal(s, before)


def test_chunk_argument_is_checked() -> None:
    q, k, v, _ = _case(np.float32)
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="chunk="):
            attention(q, k, v, chunk=bad)  # type: ignore[arg-type]


def test_one_piece_is_finalize_of_chunk_state_bit_for_bit() -> None:
    """The in-place one-piece path does the state arithmetic of chunk_state + finalize (the
    runtime's path), masked keys holding huge values included."""
    from tickformer.model.attention import finalize, scaled_scores

    q, k, v, mask = _case(np.float32)
    v = v.copy()
    v[..., -1, :] = -3e38  # a key that only some rows may see
    allowed = np.broadcast_to(mask, q.shape[:-1] + (k.shape[-2],))
    expected = finalize(chunk_state(scaled_scores(q, k), allowed, v))
    got = attention(q, k, v, mask=mask)
    np.testing.assert_array_equal(got, expected)
    assert not np.signbit(got[~allowed.any(axis=-1)]).any()  # +0, not -0, on fully masked rows
