"""model/ssm.py's hand-written backward against float64 central finite differences, for every
parameter tensor and the input, at random shapes; the step unrolled against the parallel form;
the reverse scan as the adjoint of the scan.

Bound (as tests/model/test_grad.py): central differences with h = 1e-5 have truncation error
O(h^2 f''') and roundoff O(eps_64 |f| / h), both ~1e-10 for losses of order 1, so analytic and
numeric gradients agree to ~1e-8 relative; we require 1e-6 relative to the tensor's gradient
scale (measured worst: `pytest tests/model/test_ssm_grad.py -s -k worst` prints it). The layer is
smooth everywhere (no kinks), so no entry can sit on a kink.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.model import names, ssm

FD_STEP = 1e-5
FD_RTOL = 1e-6


def weights64(d: int, n: int, rng: np.random.Generator, *, b_delta: float | None = None) -> dict:
    """Mamba-initialised weights moved off their init (nonzero biases, spread eigenvalues), so
    every path carries gradient; b_delta fixes the step-size bias (lam near 0 or near 1)."""
    w = {k: v.astype(np.float64) for k, v in ssm.ssm_init(d, n, rng).items()}
    for k in w:
        w[k] = w[k] + 0.3 * rng.normal(size=w[k].shape)
    w["a_log"] = rng.uniform(-2.0, 1.5, size=(d, n))
    if b_delta is not None:
        w["b_delta"] = np.full(d, b_delta) + 0.1 * rng.normal(size=d)
    return w


def fd_check(
    shape: tuple[int, int, int, int], seed: int, *, b_delta: float | None = None, with_h0: bool = True
):
    """-> (worst |numeric - analytic| / tolerance, worst |numeric - analytic| / scale) over every
    entry checked; asserts the first <= 1 entry by entry."""
    b, t, d, n = shape
    rng = np.random.default_rng(seed)
    w = weights64(d, n, rng, b_delta=b_delta)
    x = rng.normal(size=(b, t, d))
    h0 = rng.normal(size=(b, d, n)) if with_h0 else None
    target = rng.normal(size=(b, t, d))

    def loss(w: dict, x: np.ndarray) -> float:
        out, _ = ssm.ssm_forward(x, **w, h0=h0)
        return 0.5 * float(((out - target) ** 2).sum())

    out, cache = ssm.ssm_forward(x, **w, h0=h0)
    roundoff = 1e-10 * max(1.0, 0.5 * float(((out - target) ** 2).sum()))
    dx, grads = ssm.ssm_backward(out - target, cache)
    assert list(grads) == list(names.SSM_NAMES)
    pick = np.random.default_rng(seed + 1)
    worst = worst_rel = 0.0
    for label, value, grad in [*((k, w[k], grads[k]) for k in w), ("x", x, dx)]:
        assert grad.shape == value.shape and grad.dtype == np.float64, label
        flat = value.reshape(-1)
        scale = max(float(np.abs(grad).max()), 1e-3)
        for i in pick.choice(flat.size, size=min(5, flat.size), replace=False):
            old = flat[i]
            flat[i] = old + FD_STEP
            up = loss(w, x)
            flat[i] = old - FD_STEP
            down = loss(w, x)
            flat[i] = old
            numeric = (up - down) / (2 * FD_STEP)
            analytic = grad.reshape(-1)[i]
            err = abs(numeric - analytic) / (FD_RTOL * scale + roundoff)
            worst = max(worst, err)
            worst_rel = max(worst_rel, abs(numeric - analytic) / scale)
            assert err <= 1.0, (label, int(i), numeric, analytic)
    return worst, worst_rel


@settings(max_examples=12)
@given(
    b=st.integers(1, 3),
    t=st.integers(1, 19),
    d=st.integers(1, 5),
    n=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    with_h0=st.booleans(),
)
def test_gradients_match_finite_differences_at_random_shapes(b, t, d, n, seed, with_h0):
    fd_check((b, t, d, n), seed, with_h0=with_h0)


@pytest.mark.parametrize(
    "b_delta, where",
    [(-12.0, "lam ~ 1 - 6e-6 a: slow modes, long memory"), (6.0, "lam ~ exp(-6 a): the state forgets")],
)
def test_gradients_match_finite_differences_at_the_eigenvalue_edges(b_delta, where):
    fd_check((2, 11, 3, 3), seed=5, b_delta=b_delta)


def test_worst_finite_difference_error(capsys):
    """Prints the worst relative error over fixed shapes (the number docs/ssm.md states)."""
    cases = [((2, 1, 3, 2), 0), ((2, 7, 4, 3), 1), ((3, 16, 5, 4), 2), ((1, 33, 2, 5), 3)]
    runs = [fd_check(shape, seed) for shape, seed in cases]
    runs += [fd_check((2, 11, 3, 3), 5, b_delta=-12.0), fd_check((2, 11, 3, 3), 5, b_delta=6.0)]
    worst, worst_rel = max(r[0] for r in runs), max(r[1] for r in runs)
    with capsys.disabled():
        print(
            f"\nssm finite differences over {len(runs)} cases: worst error / tolerance {worst:.2f}, "
            f"worst error / gradient scale {worst_rel:.1e}"
        )
    assert worst <= 1.0


def test_every_parameter_gets_a_nonzero_gradient():
    rng = np.random.default_rng(0)
    w = weights64(4, 3, rng)
    out, cache = ssm.ssm_forward(rng.normal(size=(2, 6, 4)), **w)
    _, grads = ssm.ssm_backward(rng.normal(size=out.shape), cache)
    for leaf, g in grads.items():
        assert np.any(g != 0), leaf


@settings(max_examples=20)
@given(t=st.integers(1, 70), seed=st.integers(0, 2**16), with_h0=st.booleans())
def test_the_step_unrolled_equals_the_parallel_form(t, seed, with_h0):
    """ssm_step over T (the inference recurrence) against ssm_forward (the training scan) in
    float64: equal to 1e-12 relative to the output's scale; the final states too."""
    rng = np.random.default_rng(seed)
    w = weights64(3, 4, rng)
    x = rng.normal(size=(2, t, 3))
    h0 = rng.normal(size=(2, 3, 4)) if with_h0 else None
    par, cache = ssm.ssm_forward(x, **w, h0=h0)
    rec, h_last = ssm.ssm_recurrent(x, h0, **w)
    scale = float(np.abs(par).max())
    np.testing.assert_allclose(rec, par, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(h_last, cache.h[:, -1], rtol=0, atol=1e-12 * float(np.abs(cache.h).max()))
    y0, h_first = ssm.ssm_step(x[:, 0], np.zeros((2, 3, 4)) if h0 is None else h0, **w)
    np.testing.assert_allclose(y0, par[:, 0], rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(h_first, cache.h[:, 0], rtol=0, atol=1e-12 * float(np.abs(cache.h).max()))


@settings(max_examples=30)
@given(t=st.integers(1, 130), seed=st.integers(0, 2**16))
def test_the_reverse_scan_is_the_adjoint_of_the_scan(t, seed):
    """<scan(a, b), q> = <b, reverse_scan(a, q)> for the linear map b -> h (float64)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 1.0, size=(2, t, 3))
    b = rng.normal(size=(2, t, 3))
    q = rng.normal(size=(2, t, 3))
    lhs = float((ssm.linear_scan(a, b) * q).sum())
    rhs = float((b * ssm.reverse_linear_scan(a, q)).sum())
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs))
