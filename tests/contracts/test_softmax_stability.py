"""Softmax stability (contracts/softmax_stability.py) on the numpy operator, fp32 and fp16 inputs,
at the edges: 1e30 logits, ulp spreads, ties, length-1 and long rows, fully masked rows."""

from __future__ import annotations

import contextlib
import importlib
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts import softmax_stability as ss
from tickformer.verify.properties.strategies import score_rows

A = importlib.import_module("tickformer.model.attention")  # the module (the package re-exports the function)


def weights_of(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Softmax weights of one row through the operator: d = 1, q = 1 so s_j = k_j exactly."""
    q = np.ones((1, 1), dtype=scores.dtype)  # [Tq=1, d=1]
    k = scores[:, None]  # [n, 1]
    return A.attention_weights(q, k, mask=None if mask is None else mask[None, :])[0]  # [n]


@contextlib.contextmanager
def recorded_exp_args():
    """Record the largest argument (NaN if any) the operator passes to np.exp (S4)."""
    seen: list[float] = []
    real_exp = np.exp

    def recording_exp(x, *a, **kw):
        arr = np.asarray(x)
        if arr.size:
            seen.append(float(arr.max()))  # NaN propagates; -inf for fully masked rows
        return real_exp(x, *a, **kw)

    with mock.patch.object(A.np, "exp", recording_exp):
        yield seen


@given(score_rows(dtype=np.float32, max_size=300))
def test_weights_fp32(scores):
    p = weights_of(scores)
    assert p.dtype == np.float32
    assert ss.weight_violations(p) == []


@given(score_rows(dtype=np.float16, max_size=300))
def test_weights_fp16_inputs_computed_in_fp32(scores):
    p = weights_of(scores)
    assert p.dtype == np.float32  # fp16 inputs are widened: fp16 sums of exponentials lose l
    assert ss.weight_violations(p) == []


@given(score_rows(max_size=64), st.data())
def test_masked_weights_exactly_zero(scores, data):
    mask = data.draw(hnp.arrays(np.bool_, scores.shape[0]))
    p = weights_of(scores, mask)
    assert ss.weight_violations(p, mask) == []
    assert np.all(p[~mask] == 0.0)
    if not mask.any():
        assert np.all(p == 0.0)  # fully masked row: exactly zero, never NaN


@given(score_rows(max_size=64), st.data())
def test_every_exponent_argument_nonpositive(scores, data):
    n = scores.shape[0]
    mask = data.draw(hnp.arrays(np.bool_, n))
    chunk = data.draw(st.integers(1, max(1, n)))
    v = np.ones((n, 2), np.float32)  # [n, dv]
    with recorded_exp_args() as exp_args:
        A.attention(np.ones((1, 1), np.float32), scores[:, None], v, mask=mask[None, :], chunk=chunk)
        weights_of(scores, mask)
    assert exp_args, "the operator must call np.exp"
    assert all(a <= 0.0 for a in exp_args), f"exp argument > 0 or NaN: {max(exp_args)}"


def state_of(scores: np.ndarray, v: np.ndarray) -> A.SoftmaxState:
    return A.chunk_state(scores[None, :], None, v)  # one query row: m [1], l [1], acc [1, dv]


pieces = st.tuples(score_rows(max_size=40), score_rows(max_size=40), score_rows(max_size=40))
values = st.floats(-1000.0, 1000.0, width=32)


@given(pieces, st.data())
def test_merge_commutative_bitwise_and_max_exact(rows, data):
    a_s, b_s, _ = rows
    va = data.draw(hnp.arrays(np.float32, (a_s.shape[0], 3), elements=values))
    vb = data.draw(hnp.arrays(np.float32, (b_s.shape[0], 3), elements=values))
    a, b = state_of(a_s, va), state_of(b_s, vb)
    ab, ba = A.merge(a, b), A.merge(b, a)
    for x, y in zip(ab, ba):
        assert np.array_equal(x, y)  # IEEE max and + are commutative: exactly equal
    assert ab.m[0] in (a.m[0], b.m[0]) and ab.m[0] == max(a.m[0], b.m[0])
    assert ab.l[0] >= 1.0  # S6: non-empty state


@given(pieces, st.data())
def test_merge_associative_within_bound(rows, data):
    vs = [data.draw(hnp.arrays(np.float32, (r.shape[0], 2), elements=values)) for r in rows]
    states = [state_of(r, v) for r, v in zip(rows, vs)]
    abs_states = [state_of(r, np.abs(v)) for r, v in zip(rows, vs)]  # scale for acc: sum e^(s-m)|v|
    a, b, c = states
    left, right = A.merge(A.merge(a, b), c), A.merge(a, A.merge(b, c))
    scale = A.merge(A.merge(abs_states[0], abs_states[1]), abs_states[2])
    n = sum(r.shape[0] for r in rows)
    bound = ss.merge_assoc_bound(n, np.float32)
    assert left.m[0] == right.m[0]  # max is exact, any grouping
    assert abs(float(left.l[0]) - float(right.l[0])) <= bound * max(float(left.l[0]), float(right.l[0]))
    gap = np.abs(left.acc.astype(np.float64) - right.acc.astype(np.float64))  # [1, dv]
    assert np.all(gap <= bound * scale.acc.astype(np.float64) + np.finfo(np.float32).smallest_subnormal)


@given(
    st.lists(st.floats(-50.0, 50.0).map(float) | st.just(-math.inf), min_size=2, max_size=2),
    st.lists(st.floats(1.0, 1e6), min_size=2, max_size=2),
)
def test_numpy_merge_agrees_with_scalar_spec(ms, ls):
    """The CrossHair-checked scalar spec is the operator's merge (float64, one row)."""
    (ma, mb), (la, lb) = ms, ls
    la = 0.0 if ma == -math.inf else la
    lb = 0.0 if mb == -math.inf else lb
    a = A.SoftmaxState(np.array([ma]), np.array([la]), np.zeros((1, 1)))
    b = A.SoftmaxState(np.array([mb]), np.array([lb]), np.zeros((1, 1)))
    got = A.merge(a, b)
    m, l = ss.merge_scalar(ma, la, mb, lb)
    assert got.m[0] == m
    assert got.l[0] == pytest.approx(l, rel=4 * 2.0**-53 * 4, abs=0.0)
    assert (got.l[0] >= 1.0) == (la > 0 or lb > 0)


# ---- named edge cases (the onnx reference evaluator's style) ----


def test_huge_logits_fp32():
    p = weights_of(np.array([1e30, -1e30, 1e30, 3.4e38], np.float32))
    np.testing.assert_array_equal(p, [0.0, 0.0, 0.0, 1.0])
    p = weights_of(np.array([1e30, -1e30, 1e30], np.float32))
    np.testing.assert_array_equal(p, [0.5, 0.0, 0.5])


def test_fp16_extremes():
    p = weights_of(np.array([65504.0, -65504.0, 65504.0], np.float16))
    np.testing.assert_array_equal(p, [0.5, 0.0, 0.5])


def test_length_one_row_is_exactly_one():
    for s in (0.0, 1e30, -1e30, 3.4e38):
        assert weights_of(np.array([s], np.float32))[0] == 1.0


def test_fully_masked_row_is_zero_not_nan():
    out = A.attention(
        np.ones((2, 1), np.float32),
        np.ones((3, 1), np.float32),
        np.ones((3, 2), np.float32),
        mask=np.array([[True, False, True], [False, False, False]]),
    )
    assert np.all(out[1] == 0.0) and np.all(np.isfinite(out))


@pytest.mark.parametrize("n", [1, 2, 1000, 4096])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_bound_at_the_edge_equal_scores(n, dtype):
    """Equal scores: every e_j = 1, l = n, p_j = fl(1/n); the sum's error is the worst case for
    the division rounding. The measured |sum - 1| must sit below the derived bound."""
    p = weights_of(np.full(n, 7.0, dtype))
    err = abs(float(p.astype(np.float64).sum()) - 1.0)
    assert err <= ss.weight_sum_bound(n, dtype)


@settings(max_examples=15)
@given(st.integers(2000, 8192), st.integers(0, 2**32 - 1))
def test_sum_bound_long_rows(n, seed):
    rng = np.random.default_rng(seed)
    scores = (rng.standard_normal(n) * 3).astype(np.float32)  # [n]
    p = weights_of(scores)
    assert ss.weight_violations(p) == []


def test_bound_functions_reject_bad_arguments():
    with pytest.raises(ValueError):
        ss.weight_sum_bound(0)
    with pytest.raises(ValueError):
        ss.gamma(2**24, 2.0**-24)
    assert ss.weight_sum_bound(1) < ss.weight_sum_bound(1000) < 1e-3
