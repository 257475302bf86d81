"""contracts/state_bound.py: state_excess against a plain numpy statement of the bound (Hypothesis),
its real-time safety (no allocation), and the chain it witnesses: an exported ssm artifact's
state stays within the manifest's BIBO bound over long streams at the domain's corners."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts.state_bound import describe_state_violation, state_excess

states = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3)).flatmap(
    lambda s: st.tuples(
        hnp.arrays(np.float32, s, elements=st.floats(-100, 100, width=32)),
        hnp.arrays(np.float64, (s[1],), elements=st.floats(0.5, 120)),
    )
)


@given(states)
def test_state_excess_is_the_largest_overshoot(case):
    state, bound = case
    per_layer = np.abs(state.astype(np.float64)).max(axis=(0, 2, 3))  # [L]
    want = max(0.0, float((per_layer - bound).max()))
    assert math.isclose(state_excess(state, bound), want, rel_tol=0, abs_tol=1e-9)
    if want > 0:
        assert "over its BIBO bound" in describe_state_violation(state, bound)


@given(states, st.sampled_from([np.nan, np.inf, -np.inf]))
def test_a_non_finite_state_is_infinitely_over(case, bad):
    state, bound = case
    state = state.copy()
    state.flat[-1] = bad
    assert state_excess(state, bound) == math.inf
    assert "non-finite" in describe_state_violation(state, bound)


def test_state_excess_allocates_no_array_data():
    """Per layer one slice view (an ndarray header, no data) and Python floats: a bounded few
    hundred bytes within a call, nothing that grows with the calls."""
    state = np.zeros((1, 2, 64, 16), np.float32)  # the control preset's shape per batch row
    bound = np.array([1.0, 2.0])
    tracemalloc.start()
    try:
        for _ in range(100):  # warm-up under tracing: free lists, numpy's reduction caches
            state_excess(state, bound)
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(100):
            state_excess(state, bound)
        now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Python floats parked on CPython's free list show as a small net rise that does not grow.
    assert now - base < 2048 and peak - base < 2048 + 200 * state.shape[1]


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_an_exported_state_stays_within_the_manifest_bound_at_the_corners(seed, tmp_path_factory):
    """3,000 steps of a constant corner input (it drives h towards r beta) and of random corner
    flips, on the numpy backend of an ssm artifact with random weights: within the manifest's
    bound, and within the exact-arithmetic bound widened by 1e-3 (float rounding is that small)."""
    from tickformer import runtime
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    cfg = preset("tiny").replace(block="ssm", d_state=2, n_layers=1, max_len=4)
    path = tmp_path_factory.mktemp("sb") / "art"
    manifest = export_params(cfg, init_params(cfg, seed=seed % 1000), path, domain=(-2.0, 2.0), lengths=[1])
    bound = np.array(manifest["state_bound"]["layers"])
    session = runtime.load(path, backend="numpy")
    rng = np.random.default_rng(seed)
    corner = np.where(rng.random(cfg.d_in) < 0.5, -2.0, 2.0).astype(np.float32).reshape(1, 1, -1)
    worst = 0.0
    for t in range(3_000):
        x = (
            corner
            if t < 1_500
            else np.where(rng.random((1, 1, cfg.d_in)) < 0.5, -2.0, 2.0).astype(np.float32)
        )
        session.step(x)
        worst = max(worst, float(np.abs(session.state()).max()))
        assert state_excess(session.state(), bound) == 0.0, t
    assert worst <= manifest["state_bound"]["exact"][0] * (1 + 1e-3)
