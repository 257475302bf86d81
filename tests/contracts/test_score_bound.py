"""Score bound from the weights (contracts/score_bound.py): Hypothesis searches, guided by
`target()`, for inputs that maximise each layer's largest |score|; it must never exceed the bound.
Scores are observed by wrapping the model's own attention call (no re-implementation)."""

from __future__ import annotations

import contextlib
import importlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings, target
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.export.score_bounds import FP16_MAX, fp16_scores_safe, score_bound_report, score_bounds
from tickformer.model.config import preset
from tickformer.model.transformer import forward, init_params

A = importlib.import_module("tickformer.model.attention")
L = importlib.import_module("tickformer.model.layers")


@contextlib.contextmanager
def observed_scores():
    """Max |q.k|/sqrt(d) per attention call, in call order (= the report's layer order)."""
    seen: list[float] = []

    def recording(real):
        def call(q, k, v, **kw):
            s = A.scaled_scores(q, k)  # [B, H, Tq, Tk]
            seen.append(float(np.abs(s).max()))
            return real(q, k, v, **kw)

        return call

    # the model's two entries to the operator: inference's and the training pass's (forward)
    with (
        mock.patch.object(L, "attention", recording(L.attention)),
        mock.patch.object(L, "attention_parts", recording(L.attention_parts)),
    ):
        yield seen


def scaled_params(name: str, seed: int, gain: float) -> tuple:
    cfg = preset(name)
    params = init_params(cfg, seed=seed)
    rng = np.random.default_rng(seed)
    for key, value in params.items():
        if key.endswith((".w_q", ".w_k", "in_proj.w")):
            params[key] = (value * gain).astype(np.float32)
        elif key.endswith((".g", ".b", "b_q", "b_k")):  # trained-like LN gains/biases, not all 1/0
            params[key] = (value + rng.normal(0, 0.3, value.shape)).astype(np.float32)
    return cfg, params


DOMAIN = (-3.0, 3.0)
edge = st.sampled_from([DOMAIN[0], DOMAIN[1], 0.0])
inside = st.floats(*DOMAIN, width=32)


def _continuous_case(data, t, gain, best=None):
    """One example: the scores of a tiny model (gain-scaled Q/K weights) on a drawn input never
    exceed their bounds; target() steers the search towards large score/bound."""
    cfg, params = scaled_params("tiny", seed=1, gain=gain)
    bounds = score_bounds(cfg, params, DOMAIN)
    x = data.draw(hnp.arrays(np.float32, (1, t, cfg.d_in), elements=st.one_of(edge, inside)))  # [B, T, d_in]
    with observed_scores() as seen:
        forward(params, cfg, x)
    assert len(seen) == len(bounds)
    for i, (s, b) in enumerate(zip(seen, bounds)):
        target(s / b, label=f"score/bound layer {i} gain {gain}")
        assert s <= b, f"layer {i}: observed |score| {s} > bound {b}"
        if best is not None:
            best.append(s / b)


continuous_args = (st.data(), st.integers(1, 16), st.sampled_from([1.0, 4.0]))


@settings(max_examples=80)
@given(*continuous_args)
def test_continuous_scores_never_exceed_bound(data, t, gain):
    _continuous_case(data, t, gain)


# How close the targeted search gets to the bound, with a fixed seed (the CI profile draws new
# examples every run, so its reach varies: 0.067-0.138 over seeds 0-3): seed 0, 80 examples,
# Hypothesis 6.170, measured 0.138 (the README's "reaches 0.14 of the bound"). Asserted within a
# factor 1.15 below it: the bound is about 7x loose on this model, and a bound that became 10x
# looser, or a search that stopped reaching, fails here.
REACH_SEED, REACH_EXAMPLES, REACH_MEASURED = 0, 80, 0.138


def search_reach(seed: int = REACH_SEED, max_examples: int = REACH_EXAMPLES) -> float:
    """Largest observed |score| / bound over a seeded targeted search (every layer, both gains)."""
    import hypothesis

    best: list[float] = []

    @hypothesis.seed(seed)
    @settings(max_examples=max_examples, database=None, derandomize=False, deadline=None)
    @given(*continuous_args)
    def search(data, t, gain):
        _continuous_case(data, t, gain, best)

    search()
    return max(best)


def test_targeted_search_reaches_the_stated_fraction_of_the_bound():
    reach = search_reach()
    assert REACH_MEASURED / 1.15 <= reach <= 1.0, reach


@settings(max_examples=40)
@given(st.data(), st.integers(1, 8))
def test_token_model_scores_never_exceed_bound(data, t):
    cfg, params = scaled_params("tiny-seq2seq", seed=2, gain=3.0)
    bounds = score_bounds(cfg, params, None)
    src = data.draw(hnp.arrays(np.int64, (1, t), elements=st.integers(0, cfg.vocab_size - 1)))
    tgt = data.draw(hnp.arrays(np.int64, (1, t), elements=st.integers(0, cfg.vocab_size - 1)))
    with observed_scores() as seen:
        forward(params, cfg, tgt, src=src)
    assert len(seen) == len(bounds) == 3  # enc.0.self, dec.0.self, dec.0.cross
    for i, (s, b) in enumerate(zip(seen, bounds)):
        target(s / b, label=f"token score/bound layer {i}")
        assert s <= b


def test_bound_is_not_vacuous_on_a_corner():
    """One adversarial corner (every input at the domain's upper edge) reaches a known fraction
    of the bound: measured 0.031 (layer 0, gain 4); asserted within a factor 1.25 of it."""
    cfg, params = scaled_params("tiny", seed=1, gain=4.0)
    bounds = score_bounds(cfg, params, DOMAIN)
    x = np.full((1, cfg.max_len, cfg.d_in), DOMAIN[1], np.float32)
    with observed_scores() as seen:
        forward(params, cfg, x)
    assert 0.0 < seen[0] <= bounds[0]
    assert 0.031 / 1.25 <= seen[0] / bounds[0] <= 0.031 * 1.25, seen[0] / bounds[0]


def test_fp16_decision():
    cfg, params = scaled_params("tiny", seed=0, gain=1.0)
    assert fp16_scores_safe(cfg, params, (-1.0, 1.0))
    assert not fp16_scores_safe(cfg, params, (-1e4, 1e4))  # huge domain: scores can pass 65504
    report = score_bound_report(cfg, params, (-1e4, 1e4))
    assert max(r.score for r in report) > FP16_MAX / 2
    assert [r.layer for r in report] == ["dec.0.self_attn", "dec.1.self_attn"]
    assert set(report[0].to_dict()) == {"layer", "q_norm", "k_norm", "score", "fp16_safe"}


def test_continuous_needs_domain():
    cfg, params = scaled_params("tiny", seed=0, gain=1.0)
    with pytest.raises(ValueError, match="input domain"):
        score_bounds(cfg, params, None)
