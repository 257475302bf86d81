"""Export-time three-way equivalence (numpy / onnx.reference / onnxruntime) and the two numbers
the manifest states with their reasons: the fp32 tolerance and the analytic output bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.errors import ExportError
from tickformer.export import equivalence
from tickformer.export.bounds import fp32_tolerance, output_bound
from tickformer.export.graphs import build_graphs
from tickformer.model import forward, init_params, preset


@pytest.mark.parametrize("name", ["tiny", "tiny-tokens", "tiny-seq2seq"])
def test_measured_errors_are_within_the_stated_fp32_tolerance(exported, name):
    """Every pair (ort/reference/numpy) on every graph stays within atol = rtol =
    max(1e-5, 8 S sqrt(n) 2^-24): same float32 math in different summation orders (reason in
    the manifest). Measured errors are ~1e-6; the stated tolerance leaves an order of margin."""
    _, _, manifest = exported[name]
    tol = manifest["tolerance"]
    assert "float32" in tol["reason"] and tol["atol"] >= 1e-5
    pairs = manifest["equivalence"]["pairs"]
    graphs = ("model", "step") if name != "tiny-seq2seq" else ("encoder", "step")
    for g in graphs:
        for pair in ("ort_vs_numpy", "reference_vs_numpy", "ort_vs_reference"):
            e = pairs[f"{g}:{pair}"]
            assert 0 <= e["max_abs"] <= tol["atol"] * 4, (
                f"{g}:{pair} = {e}"
            )  # atol + rtol*|ref|, |ref| <= 3 here
            assert e["max_rel"] <= tol["rtol"] * 4
    assert manifest["equivalence"]["step_positions"] == manifest["max_len"]


def test_equivalence_check_fails_when_a_graph_is_wrong(configs):
    """The check can fail: graphs built from slightly different weights are refused."""
    cfg = configs["tiny"]
    params = init_params(cfg, 0)
    wrong = dict(params)
    wrong["out_proj.b"] = params["out_proj.b"] + np.float32(1e-3)  # ~30x the tolerance
    graphs = build_graphs(wrong, cfg, 1, 17)
    with pytest.raises(ExportError, match="beyond the stated tolerance"):
        equivalence.check(graphs, params, cfg, 1, (-10.0, 10.0), fp32_tolerance(cfg), lengths=[1, 4])


def _with_nonzero_biases(params, seed):
    """init_params zeroes every bias and LayerNorm beta, so every shift of the step's bias
    folding (export/graphs.py build_step) would be 0; give every 1-D parameter an offset."""
    rng = np.random.default_rng(seed)
    return {
        k: (v + rng.normal(0.0, 0.5, v.shape).astype(np.float32)) if v.ndim == 1 else v
        for k, v in params.items()
    }


@pytest.mark.parametrize("name", ["tiny", "tiny-tokens", "tiny-seq2seq"])
def test_step_bias_folding_is_exact_with_nonzero_biases(configs, name):
    """Each residual bias rides in the preceding LayerNorm's beta and is subtracted again by every
    other reader (the fused QKV, the cross-attention query, the FFN's first layer); with every
    bias and beta non-zero the step graph still matches numpy within the stated tolerance on
    every engine and position (a shift on the wrong LayerNorm, or one not subtracted, is off by
    the bias itself: ~0.5)."""
    cfg = configs[name]
    params = _with_nonzero_biases(init_params(cfg, 0), seed=3)
    graphs = build_graphs(params, cfg, 1, 17)
    record = equivalence.check(
        graphs, params, cfg, 1, (-10.0, 10.0), fp32_tolerance(cfg), lengths=[1, cfg.max_len]
    )
    assert record["pairs"]["step:ort_vs_numpy"]["max_abs"] < fp32_tolerance(cfg)["atol"] * 4


def test_step_bias_folding_test_can_fail(configs, monkeypatch):
    """Control for the test above: a build_step that forgets to subtract the shift is refused."""
    from tickformer.export import graphs as gr

    cfg = configs["tiny-seq2seq"]
    params = _with_nonzero_biases(init_params(cfg, 0), seed=3)
    real = gr._bias_for
    monkeypatch.setattr(
        gr, "_bias_for", lambda g, p, h, w, b: real(g, p, gr._Shifted(h.name, np.zeros_like(h.shift)), w, b)
    )
    graphs = build_graphs(params, cfg, 1, 17)
    with pytest.raises(ExportError, match="beyond the stated tolerance"):
        equivalence.check(
            graphs, params, cfg, 1, (-10.0, 10.0), fp32_tolerance(cfg), lengths=[1, cfg.max_len]
        )


def test_equivalence_inputs_include_the_domain_edges():
    cfg = preset("tiny")
    uniform, edges = equivalence.sample_inputs(cfg, 1, (-2.0, 3.0), seed=0)
    assert uniform.min() >= -2.0 and uniform.max() <= 3.0
    assert set(np.unique(edges)) == {np.float32(-2.0), np.float32(3.0)}


def test_tolerance_grows_with_length_and_depth():
    small = fp32_tolerance(preset("tiny"))["atol"]
    big = fp32_tolerance(preset("paper-base"))["atol"]
    assert 1e-5 <= small < big < 1e-3


BOUND_CFG = preset("tiny")


@settings(max_examples=30)
@given(
    seed=st.integers(0, 2**16),
    magnitude=st.sampled_from([1.0, 10.0, 1e3, 1e6]),
    length=st.integers(1, BOUND_CFG.max_len),
    gain=st.floats(0.1, 5.0),
)
def test_output_bound_holds_for_any_finite_input(seed, magnitude, length, gain):
    """|y| <= output_bound for inputs far outside the declared domain too (the bound comes from
    the final LayerNorm: |z_i| / sqrt(var + eps) < sqrt(D - 1)), with random non-unit LN gains."""
    params = init_params(BOUND_CFG, seed % 7)
    rng = np.random.default_rng(seed)
    params["dec.1.ln2.g"] = (gain * rng.standard_normal(BOUND_CFG.d_model)).astype(np.float32)
    params["dec.1.ln2.b"] = rng.standard_normal(BOUND_CFG.d_model).astype(np.float32)
    x = (magnitude * rng.standard_normal((1, length, BOUND_CFG.d_in))).astype(np.float32)
    y = forward(params, BOUND_CFG, x)
    assert np.all(np.isfinite(y))
    assert np.abs(y).max() <= output_bound(params, BOUND_CFG)


def test_output_bound_is_attained_up_to_a_factor():
    """The bound is not vacuous: an input that saturates the LayerNorm comes within 3x of it."""
    params = init_params(BOUND_CFG, 0)
    bound = output_bound(params, BOUND_CFG)
    rng = np.random.default_rng(0)
    worst = max(
        np.abs(forward(params, BOUND_CFG, (100 * rng.standard_normal((1, 16, 3))).astype(np.float32))).max()
        for _ in range(20)
    )
    assert bound / 50 < worst <= bound


@pytest.mark.parametrize("bad", [[0, 4], [1, 17], []])
def test_full_pass_lengths_outside_1_to_max_len_are_refused_by_both_kinds(bad):
    """equivalence.model_lengths, the one check `check` calls for both block kinds: lengths
    outside 1..max_len (or none) are an ExportError before any graph runs; inside, sorted and
    without repeats, and None is the default {1, 2, N/2, N}."""
    with pytest.raises(ExportError, match="must lie in 1..max_len 16"):
        equivalence.model_lengths(bad, 16)
    for cfg in (preset("tiny"), preset("tiny").replace(block="ssm", d_state=3)):
        with pytest.raises(ExportError, match="must lie in 1..max_len 16"):  # before its graphs are touched
            equivalence.check({}, {}, cfg, 1, (-1.0, 1.0), {"atol": 1e-5, "rtol": 1e-5}, lengths=bad)
    assert equivalence.model_lengths([16, 1, 16, 3], 16) == [1, 3, 16]
    assert equivalence.model_lengths(None, 16) == [1, 2, 8, 16]
