"""The parallel form (model/ssm.py's blocked scan, used in training) against the recurrence (the
step, used at inference), in float32, within the stated bounds:

  scan vs recurrence, per element:  |scan - rec| <= gamma_k h_hat_t,  k = 4(t + 1) + 6 ceil(log2 T) + 4
      (h_hat = the recurrence on |b|; both forms also within it of the float64 reference)
  the whole mixer, per output channel: |ssm_forward - ssm_recurrent| <= ssm_parallel_recurrent_bound

Hypothesis draws lengths 1..300, eigenvalues from lam = 0 to lam within 1e-8 of 1 (float32 then
rounds it to exactly 1), inputs at the corners of their box, zeros and mixed scales. The measured
worst ratio to each bound is printed by `pytest tests/model/test_ssm_scan.py -s -k margins`.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.model import ssm

U32 = 2.0**-24


@st.composite
def scan_inputs(draw, *, max_len: int = 300):
    """(a, b) [B, T, K] float32: a = exp(-s) with log s uniform in [-18, 3] (lam from ~0 to
    1 - 1.5e-8), b normal at scales e^-3..e^3 or at the corners +-r of a box, some zeros."""
    t = draw(st.integers(1, max_len))
    seed = draw(st.integers(0, 2**32 - 1))
    corners = draw(st.booleans())
    rng = np.random.default_rng(seed)
    s = np.exp(rng.uniform(-18.0, 3.0, size=(2, t, 3)))  # [B, T, K]
    a = np.exp(-s).astype(np.float32)  # [B, T, K]
    if corners:
        b = (rng.choice([-1.0, 1.0], size=(2, t, 3)) * np.array([0.5, 1.0, 3.0])).astype(np.float32)
    else:
        b = (rng.normal(size=(2, t, 3)) * np.exp(rng.uniform(-3, 3, size=(2, t, 3)))).astype(np.float32)
    b[rng.random(b.shape) < 0.1] = 0.0
    return a, b


def scan_ratios(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """max over elements of |error| / bound for: scan vs rec, scan vs float64, rec vs float64."""
    bound = ssm.scan_error_bound(a, b, np.float32)  # [B, T, K]
    scan, rec = ssm.linear_scan(a, b), ssm.recurrence(a, b)  # [B, T, K] float32
    ref = ssm.recurrence(a.astype(np.float64), b.astype(np.float64))  # [B, T, K]
    tiny = np.finfo(np.float32).smallest_normal  # 0 / 0 where h_hat = 0 (b = 0 so far): count as 0

    def ratio(x: np.ndarray, y: np.ndarray) -> float:
        return float((np.abs(x.astype(np.float64) - y) / np.maximum(bound, tiny)).max())

    return ratio(scan, rec), ratio(scan, ref), ratio(rec, ref)


@given(scan_inputs())
def test_scan_equals_the_recurrence_within_the_bound(ab):
    a, b = ab
    assert all(r <= 1.0 for r in scan_ratios(a, b))


@given(scan_inputs(max_len=120), st.integers(1, 130))
def test_any_block_length_is_within_the_bound(ab, block):
    """The bound's count holds for every block length (1: all carries; >= T: one recurrence)."""
    a, b = ab
    bound = ssm.scan_error_bound(a, b, np.float32)
    err = np.abs(ssm.linear_scan(a, b, block=block).astype(np.float64) - ssm.recurrence(a, b))
    assert np.all(err <= bound)


@settings(max_examples=20)
@given(t=st.integers(1, 200), seed=st.integers(0, 2**32 - 1))
def test_initial_state_folds_into_the_first_step(t, seed):
    """linear_scan(a, b, h0) is the recurrence from h0 (float64: 1e-12 relative)."""
    rng = np.random.default_rng(seed)
    a, b, h0 = rng.uniform(0, 1, size=(2, t, 3)), rng.normal(size=(2, t, 3)), rng.normal(size=(2, 3))
    np.testing.assert_allclose(ssm.linear_scan(a, b, h0), ssm.recurrence(a, b, h0), rtol=0, atol=1e-12 * 4)


def test_scan_handles_underflow_and_exact_ones():
    """Products of small a underflow to 0 (no 0/0: the scan never divides); a = 1 and a = 0
    exactly; a long run of a = 1 is a running sum, exact for integer b."""
    t = 257
    a = np.full((1, t, 4), 1e-30, dtype=np.float32)  # [1, T, 4]
    a[..., 1] = 0.0
    a[..., 2] = 1.0
    a[..., 3] = 0.5
    b = np.ones((1, t, 4), dtype=np.float32)
    h = ssm.linear_scan(a, b)
    assert np.all(np.isfinite(h))
    np.testing.assert_array_equal(h[..., 1], 1.0)  # a = 0: h_t = b_t
    np.testing.assert_array_equal(h[0, :, 2], np.arange(1, t + 1))  # a = 1: running sum
    np.testing.assert_allclose(h[0, :, 0], 1.0, rtol=2e-7)  # 1 + 1e-30 h_{t-1}: products underflow to 0
    np.testing.assert_allclose(h[0, -1, 3], 2.0, rtol=1e-6)  # geometric series -> 1 / (1 - 1/2)


@st.composite
def mixer_case(draw, *, max_len: int = 300):
    """(weights, x) float32 for one mixer: D 1..6, N 1..5, T 1..max_len; a_log in [-12, 3] and
    b_delta in [-15, 5] (so lam ranges from ~0 to within ~1e-11 of 1, i.e. exactly 1 in float32),
    nonzero biases; inputs normal, or at the corners of the box |x| <= r."""
    t = draw(st.integers(1, max_len))
    d, n = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    corners = draw(st.booleans())
    rng = np.random.default_rng(seed)
    w = ssm.ssm_init(d, n, rng)
    w["a_log"] = rng.uniform(-12.0, 3.0, size=(d, n)).astype(np.float32)
    w["b_delta"] = rng.uniform(-15.0, 5.0, size=d).astype(np.float32)
    for leaf in ("b_b", "b_c", "b_o"):
        w[leaf] = rng.normal(size=w[leaf].shape).astype(np.float32)
    r = rng.uniform(0.5, 3.0, size=d).astype(np.float32).astype(np.float64)  # [D], exact in float32
    if corners:
        x = (rng.choice([-1.0, 1.0], size=(2, t, d)) * r).astype(np.float32)  # [B, T, D]
    else:
        x = np.clip(rng.normal(size=(2, t, d)) * r, -r, r).astype(np.float32)  # [B, T, D]
    return w, x, r


def mixer_ratio(w: dict, x: np.ndarray, r: np.ndarray) -> float:
    par, _ = ssm.ssm_forward(x, **w)  # [B, T, D]
    rec, _ = ssm.ssm_recurrent(x, **w)  # [B, T, D]
    assert par.dtype == rec.dtype == np.float32
    bound = ssm.ssm_parallel_recurrent_bound(steps=x.shape[1], x_max=r, **w)  # [D]
    return float((np.abs(par.astype(np.float64) - rec) / bound).max())


@given(mixer_case())
def test_the_mixer_parallel_form_equals_the_recurrence_within_the_bound(case):
    assert mixer_ratio(*case) <= 1.0


def test_margins(capsys):
    """The measured worst ratios to both bounds on a fixed sample (what docs/ssm.md states)."""
    rng = np.random.default_rng(0)
    worst = [0.0, 0.0, 0.0]
    worst_u = 0.0  # |scan - rec| in units of u h_hat (T + 1): the constant c of "c T u"
    for _ in range(200):
        a, b = _scan_sample(rng)
        worst = [max(w, r) for w, r in zip(worst, scan_ratios(a, b))]
        h_hat = ssm.recurrence(a.astype(np.float64), np.abs(b).astype(np.float64))
        err = np.abs(ssm.linear_scan(a, b).astype(np.float64) - ssm.recurrence(a, b))
        worst_u = max(worst_u, float((err / np.maximum(U32 * h_hat * (a.shape[1] + 1), 1e-300)).max()))
    mixer = max(mixer_ratio(*_mixer_sample(rng)) for _ in range(40))
    with capsys.disabled():
        print(
            f"\nscan vs recurrence: worst / bound {worst[0]:.3f} (scan vs float64 {worst[1]:.3f}, "
            f"recurrence vs float64 {worst[2]:.3f}); worst |scan - rec| / (u h_hat (T+1)) {worst_u:.3f}; "
            f"mixer parallel vs recurrent: worst / bound {mixer:.1e}"
        )
    assert max(worst) <= 1.0 and mixer <= 1.0


def _scan_sample(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One draw of scan_inputs' distribution from a numpy Generator (fixed seeds for the margins)."""
    t = int(rng.integers(1, 301))
    s = np.exp(rng.uniform(-18.0, 3.0, size=(2, t, 3)))
    a = np.exp(-s).astype(np.float32)
    b = (rng.normal(size=(2, t, 3)) * np.exp(rng.uniform(-3, 3, size=(2, t, 3)))).astype(np.float32)
    return a, b


def _mixer_sample(rng: np.random.Generator) -> tuple[dict, np.ndarray, np.ndarray]:
    t, d, n = int(rng.integers(1, 301)), int(rng.integers(1, 7)), int(rng.integers(1, 6))
    w = ssm.ssm_init(d, n, rng)
    w["a_log"] = rng.uniform(-12.0, 3.0, size=(d, n)).astype(np.float32)
    w["b_delta"] = rng.uniform(-15.0, 5.0, size=d).astype(np.float32)
    for leaf in ("b_b", "b_c", "b_o"):
        w[leaf] = rng.normal(size=w[leaf].shape).astype(np.float32)
    r = rng.uniform(0.5, 3.0, size=d).astype(np.float32).astype(np.float64)
    x = (rng.choice([-1.0, 1.0], size=(2, t, d)) * r).astype(np.float32)
    return w, x, r


def test_one_mixer_two_forms_of_its_state_update():
    """ssm_forward and ssm_step are the one mixer (`ssm_mixer`) with the form of its state update
    as a parameter: step form at t == scan form at t (the same operations, so bit for bit on one
    step); an unknown form, or the step form without a state, is refused in one line."""
    import pytest

    rng = np.random.default_rng(3)
    w = ssm.ssm_init(4, 3, rng)
    x = rng.normal(size=(2, 1, 4)).astype(np.float32)  # [B, 1, D]
    h0 = rng.normal(size=(2, 4, 3)).astype(np.float32)  # [B, D, N]
    scan, h_scan, cache = ssm.ssm_mixer(x, h0, form="scan", **w)
    step, h_step, none = ssm.ssm_mixer(x[:, 0], h0, form="step", **w)
    assert none is None and cache is not None
    np.testing.assert_array_equal(h_step, h_scan[:, 0])
    np.testing.assert_allclose(step, scan[:, 0], rtol=1e-6, atol=1e-6)  # [B, D] and [B, 1, D] products
    for form, h in (("bogus", h0), ("step", None)):
        with pytest.raises(ValueError, match="must be one of"):
            ssm.ssm_mixer(x[:, 0], h, form=form, **w)
