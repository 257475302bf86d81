"""Contract groundwork for the recurrent block: the state stays bounded (BIBO), at the edges.

The bound (model/ssm.py, ssm_bounds; derived in docs/ssm.md): for |x_t[d]| <= r[d] and
|h_0| <= H0, h_t = lam h_{t-1} + (1 - lam) u_t with lam in [0, 1] is a convex combination, so
|h_t[d, n]| <= max(H0, r[d] beta[n]), beta = |b_b| + |W_b|^T r, for every t, Delta and a_log.
In float32 the step's rounding adds a factor (ssm_float_state_bound): uniform in t where the
rounded recurrence still contracts, growing as rho^t (rho ~ 1 + 10 u) where lam is within ~10 u
of 1 (there float32 may round lam to exactly 1).

Edges exercised: inputs at the corners of the box (random sign every step, and the constant
corner that attains the bound), streams of 50 000 steps, eigenvalues from ~0 to exactly 1 in
float32, and wild parameters (a_log to +-80, step-size biases to +-1e4). The measured margins are
printed by `pytest tests/model/test_ssm_bounds.py -s -k margins`.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.model import names, ssm

U32 = 2.0**-24


def random_weights(d: int, n: int, rng: np.random.Generator, *, b_delta=(-15.0, 5.0), a_log=(-12.0, 3.0)):
    w = ssm.ssm_init(d, n, rng)
    w["a_log"] = rng.uniform(*a_log, size=(d, n)).astype(np.float32)
    w["b_delta"] = rng.uniform(*b_delta, size=d).astype(np.float32)
    for leaf in ("b_b", "b_c", "b_o"):
        w[leaf] = rng.normal(size=w[leaf].shape).astype(np.float32)
    return w


def box(rng: np.random.Generator, d: int, lo: float, hi: float) -> np.ndarray:
    """Per-channel input bounds r [D], float32-representable (so the corners +-r are exact)."""
    return rng.uniform(lo, hi, size=d).astype(np.float32).astype(np.float64)


def corner_inputs(rng: np.random.Generator, b: int, t: int, r: np.ndarray) -> np.ndarray:
    return (rng.choice([-1.0, 1.0], size=(b, t, r.size)) * r).astype(np.float32)  # [B, T, D]


def worst_corner(w: dict, r: np.ndarray, n: int) -> np.ndarray:
    """The corner of |x| <= r where |B_t[n]| = beta[n] (x[e] = r[e] sign(W_b[e, n]) sign(b_b[n]));
    held constant it drives every h[:, n] to r[d] beta[n]."""
    sign_b = 1.0 if w["b_b"][n] >= 0 else -1.0
    return r * np.where(w["w_b"][:, n] >= 0, 1.0, -1.0) * sign_b  # [D], float32-representable


def float_states(w: dict, x: np.ndarray, h0: np.ndarray | None = None) -> np.ndarray:
    """Every state as the step computes it (fl(fl(lam h) + fl((1 - lam) u)), model.ssm.recurrence
    does ssm_step's update), coefficients from one batched pass: x [B, T, D] -> h [B, T, D, N]."""
    co = ssm.coefficients(x, **{k: w[k] for k in ("w_delta", "b_delta", "w_b", "b_b", "w_c", "b_c", "a_log")})
    return ssm.recurrence(co.lam, co.keep * co.u, h0)


def test_elementary_functions_are_within_the_assumed_error(capsys):
    """The float bound assumes exp, one_minus_exp_neg (1 - lam) and logaddexp (softplus) within
    ELEMENTARY_ERROR_U u of exact
    (relative, where the result is a normal number); measured here on 4M+ arguments each."""
    rng = np.random.default_rng(0)
    s = np.concatenate(
        [
            np.exp(rng.uniform(np.log(1.2e-38), np.log(87.0), size=2_000_000)),
            rng.uniform(0, 87, size=1_000_000),
        ]
    ).astype(np.float32)
    z = rng.uniform(-87.0, 88.0, size=2_000_000).astype(np.float32)

    def rel(f32: np.ndarray, f64: np.ndarray) -> float:
        return float((np.abs(f32.astype(np.float64) - f64) / np.abs(f64)).max() / U32)

    errors = {
        "exp": max(
            rel(np.exp(-s), np.exp(-s.astype(np.float64))), rel(np.exp(z), np.exp(z.astype(np.float64)))
        ),
        "one_minus_exp_neg": rel(ssm.one_minus_exp_neg(s), -np.expm1(-s.astype(np.float64))),
        "logaddexp": rel(np.logaddexp(np.float32(0), z), np.logaddexp(0.0, z.astype(np.float64))),
    }
    with capsys.disabled():
        shown = ", ".join(f"{k} {v:.2f} u" for k, v in errors.items())
        print(
            f"\nfloat32 elementary functions, worst relative error: {shown} (assumed <= {ssm.ELEMENTARY_ERROR_U:g} u)"
        )
    assert all(e <= ssm.ELEMENTARY_ERROR_U for e in errors.values()), errors


@settings(max_examples=40)
@given(
    t=st.integers(1, 2000),
    d=st.integers(1, 5),
    n=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    h0_scale=st.sampled_from([0.0, 0.5, 3.0]),
)
def test_the_state_stays_within_the_exact_bound(t, d, n, seed, h0_scale):
    """Float64 (exact up to 1e-12): corners with random signs, any length, any initial state
    within h0_max; lam from ~0 to 1 - 1e-11."""
    rng = np.random.default_rng(seed)
    w = {k: v.astype(np.float64) for k, v in random_weights(d, n, rng).items()}
    r = box(rng, d, 0.2, 3.0)
    bound = ssm.ssm_bounds(x_max=r, h0_max=h0_scale, **w)
    h0 = rng.uniform(-h0_scale, h0_scale, size=(2, d, n))
    x = corner_inputs(rng, 2, t, r).astype(np.float64)
    out, cache = ssm.ssm_forward(x, **w, h0=h0)
    assert np.all(np.abs(cache.h) <= bound.state * (1 + 1e-12))
    assert np.all(np.abs(out) <= bound.out * (1 + 1e-12))


@settings(max_examples=30)
@given(t=st.integers(1, 3000), d=st.integers(1, 5), n=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_the_float32_step_stays_within_the_float_bound(t, d, n, seed):
    """The step's arithmetic in float32 at the corners: states within ssm_float_state_bound
    (with steps=T), outputs within ssm_float_out_bound; lam within ssm_lambda_max (1 + 8 u)."""
    rng = np.random.default_rng(seed)
    w = random_weights(d, n, rng)
    r = box(rng, d, 0.2, 3.0)
    x = corner_inputs(rng, 2, t, r)
    h = float_states(w, x)  # [B, T, D, N]
    state = ssm.ssm_float_state_bound(x_max=r, steps=t, **w)  # [D, N]
    assert np.all(np.abs(h) <= state)
    co = ssm.coefficients(x, **{k: w[k] for k in ("w_delta", "b_delta", "w_b", "b_b", "w_c", "b_c", "a_log")})
    assert np.all(co.lam <= ssm.ssm_lambda_max(x_max=r, **w) * (1 + ssm.ELEMENTARY_ERROR_U * U32))
    out, _ = ssm.ssm_recurrent(x[:, : min(t, 300)], **w)
    assert np.all(np.abs(out) <= ssm.ssm_float_out_bound(state, x_max=r, **w))


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), t=st.integers(1, 400))
def test_stable_by_construction_for_wild_parameters(seed, t):
    """lam and 1 - lam stay in [0, 1] and nothing is NaN for a_log in [-80, 80], step-size
    biases in [-1e4, 1e4], large W_delta (Delta from 0 to 1e4: lam from exactly 1 to exactly 0)."""
    rng = np.random.default_rng(seed)
    d, n = 3, 4
    w = random_weights(d, n, rng, b_delta=(-1e4, 1e4), a_log=(-80.0, 80.0))
    w["w_delta"] = (w["w_delta"] * 100).astype(np.float32)
    r = np.full(d, 5.0)
    x = corner_inputs(rng, 2, t, r)
    co = ssm.coefficients(x, **{k: w[k] for k in ("w_delta", "b_delta", "w_b", "b_b", "w_c", "b_c", "a_log")})
    for arr in (co.lam, co.keep):
        assert np.all((arr >= 0) & (arr <= 1))
    out, cache = ssm.ssm_forward(x, **w)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(cache.h))
    assert np.all(np.abs(cache.h) <= ssm.ssm_float_state_bound(x_max=r, steps=t, **w))


def test_lam_rounded_to_one_needs_the_step_count():
    """Where float32 rounds lam to 1 (s = delta a < u) the rounded recurrence need not contract:
    the bound without `steps` is inf there, with it rho^T max(h0, U~); a = 0 freezes the state."""
    rng = np.random.default_rng(0)
    w = random_weights(2, 2, rng)
    w["a_log"][:] = -30.0  # a ~ 1e-13: lam = 1 in float32 for any delta up to ~1e5
    r = np.ones(2)
    assert np.all(np.isinf(ssm.ssm_float_state_bound(x_max=r, **w)))
    finite = ssm.ssm_float_state_bound(x_max=r, steps=1000, **w)
    exact = ssm.ssm_bounds(x_max=r, **w).state
    assert np.all(np.isfinite(finite)) and np.all(finite <= exact * 1.001)
    h0 = np.full((1, 2, 2), 0.25, dtype=np.float32)
    h = float_states(w, corner_inputs(rng, 1, 50, r), h0)
    np.testing.assert_array_equal(h, np.broadcast_to(h0[:, None], h.shape))  # lam = 1, 1 - lam = 1e-13 u ~ 0


def test_the_state_bound_is_attained_at_the_worst_corner():
    """Constant worst-corner input: h[d, n] -> r[d] beta[n] (float64: within 1e-9 after 400
    steps with lam <= e^-0.1), so the state bound cannot be lowered for these weights."""
    rng = np.random.default_rng(3)
    d, n = 4, 3
    w = {
        k: v.astype(np.float64)
        for k, v in random_weights(d, n, rng, b_delta=(1.0, 2.0), a_log=(-1.0, 1.0)).items()
    }
    r = box(rng, d, 0.5, 2.0)
    bound = ssm.ssm_bounds(x_max=r, **w).state
    for j in range(n):
        x = np.broadcast_to(worst_corner(w, r, j).astype(np.float64), (1, 400, d))
        _, cache = ssm.ssm_forward(np.ascontiguousarray(x), **w)
        np.testing.assert_allclose(np.abs(cache.h[0, -1, :, j]), bound[:, j], rtol=1e-9)


def test_bounds_take_the_groups_weights():
    """ssm_bounds(**group.take(params), x_max=r): every leaf of names.SSM_NAMES is accepted."""
    group = names.ssm_group(0)
    params = {group[k]: v for k, v in ssm.ssm_init(3, 2, np.random.default_rng(0)).items()}
    b = ssm.ssm_bounds(**group.take(params), x_max=1.0)
    assert b.state.shape == (3, 2) and b.out.shape == (3,)
    assert ssm.ssm_float_state_bound(**group.take(params), x_max=1.0).shape == (3, 2)


@pytest.mark.parametrize("steps", [50_000])
def test_margins(capsys, steps):
    """Long float32 streams at the corners with slow modes (b_delta = -12: lam from exactly 1 to
    1 - 1e-4), and the worst corner with fast modes: the measured max |h| / bound, both bounds."""
    rng = np.random.default_rng(7)
    d, n = 4, 4
    w = random_weights(d, n, rng, b_delta=(-12.0, -12.0), a_log=(-8.0, 3.0))
    r = box(rng, d, 0.5, 2.0)
    exact = ssm.ssm_bounds(x_max=r, **w).state
    flt = ssm.ssm_float_state_bound(x_max=r, steps=steps, **w)
    h = np.abs(float_states(w, corner_inputs(rng, 1, steps, r))).max(axis=(0, 1))  # [D, N]
    long_exact, long_float = float((h / exact).max()), float((h / flt).max())
    # the same slow modes under the constant worst corner: h creeps up to the bound over ~1e4 steps
    slow = []
    for j in range(n):
        x = np.ascontiguousarray(np.broadcast_to(worst_corner(w, r, j).astype(np.float32), (1, steps, d)))
        hj = np.abs(float_states(w, x)[0, :, :, j]).max(axis=0)  # [D]
        slow.append((hj / exact[:, j], hj / flt[:, j]))
    slow_exact = float(max(e.max() for e, _ in slow))
    slow_float = float(max(f.max() for _, f in slow))
    growth = float((flt / exact).max())
    # worst corner, fast modes: how close the float32 state comes to the exact bound
    w2 = random_weights(d, n, rng, b_delta=(1.0, 2.0), a_log=(-1.0, 1.0))
    tight = []
    for j in range(n):
        x = np.ascontiguousarray(np.broadcast_to(worst_corner(w2, r, j).astype(np.float32), (1, 2000, d)))
        hj = np.abs(float_states(w2, x)[0, :, :, j]).max(axis=0)  # [D]
        tight.append(hj / ssm.ssm_bounds(x_max=r, **w2).state[:, j])
    attained = float(np.min(tight))
    over = float(np.max(tight))
    flt2 = ssm.ssm_float_state_bound(x_max=r, **w2)
    with capsys.disabled():
        print(
            f"\n{steps}-step float32 stream, slow modes: max |h| / exact bound {long_exact:.3f}, "
            f"/ float bound {long_float:.3f} (float bound / exact {growth:.4f}); constant worst corner: "
            f"/ exact {slow_exact:.4f}, / float {slow_float:.4f}; fast modes, worst corner, 2000 steps: "
            f"|h| / exact bound in [{attained:.6f}, {over:.7f}], float bound / exact "
            f"{float((flt2 / ssm.ssm_bounds(x_max=r, **w2).state).max()):.7f}"
        )
    assert (
        long_float <= 1.0
        and slow_float <= 1.0
        and over <= float((flt2 / ssm.ssm_bounds(x_max=r, **w2).state).min())
    )
