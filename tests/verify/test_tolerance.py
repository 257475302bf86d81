"""The normwise tolerance of comparisons that may reassociate float sums (verify/properties/
tolerance.py): what the graph profile counts, and how the gap treats NaN, inf and subnormals."""

from __future__ import annotations

import numpy as np
import onnx
from foreign_models import lm_pair, signal_model

from tickformer.verify.properties.tolerance import Profile, normwise_gap, profile, tolerance


def test_profile_counts_reductions_transcendentals_and_the_longest_extent(tmp_path):
    p = profile(onnx.load(signal_model(tmp_path / "c.onnx", "causal")), {"x": (1, 16, 3)})
    assert p == Profile(n=16, reductions=2, transcendentals=1)  # CumSum over T = 16, MatMul over 3, Tanh
    full, _ = lm_pair(tmp_path / "lm")
    q = profile(onnx.load(full), {"input_ids": (1, 12), "attention_mask": (1, 12)})
    assert q.n == 12 and q.reductions >= 6  # the attention reduces over the 12 keys


def test_tolerance_formula():
    t = tolerance(Profile(n=10, reductions=3, transcendentals=2), "float32", factor=2.0)
    assert t.rel == 2.0 * (2 * 3 * 10 + 4 * 2) * 2.0**-24
    assert "2 x R 3 x n 10 + 4 x E 2" in t.formula() and t.to_dict()["reason"]


def test_normwise_gap():
    a = np.array([1.0, -2.0, 0.5], np.float32)
    assert normwise_gap(a, a) == 0.0
    b = a + np.float32([0, 2e-6, 0])
    assert normwise_gap(a, b) == abs(float(b[1]) - float(a[1])) / 2.0  # relative to max |.| = 2
    assert normwise_gap(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])) == 0.0  # NaN where both are
    assert normwise_gap(np.array([np.nan, 1.0]), np.array([0.0, 1.0])) == float("inf")
    assert normwise_gap(np.array([np.inf]), np.array([np.inf])) == 0.0
    assert normwise_gap(np.zeros(2), np.zeros(3)) == float("inf")  # shapes differ


def test_subnormal_outputs_are_compared_absolutely():
    """ONNX Runtime flushes subnormals to zero, onnx.reference does not: 0 vs 1.2e-43 is a 100 %
    relative gap, and nothing a reassociated sum does; the floor makes it a negligible one."""
    gap = normwise_gap(np.array([0.0], np.float32), np.array([1.2e-43], np.float32))
    assert gap < 1e-9  # far below any tolerance (>= u = 6e-8)
