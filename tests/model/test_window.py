"""Sliding-window models (config.window): the mask and bias index are the contract predicates on
index arrays, the config/checkpoint round trip keeps W, and the full pass is shift invariant
(no absolute positions: the output at the end of a stream depends only on its last L (W - 1) + 1
inputs, wherever the stream started)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.contracts import masking as M
from tickformer.contracts import ring_buffer as R
from tickformer.errors import ConfigError
from tickformer.model import Config, forward, init_params, names, preset
from tickformer.model.checkpoint import load_checkpoint, save_checkpoint
from tickformer.model.config import parameter_count
from tickformer.model.transformer import parameter_shapes, window_distances, window_mask

CFG = Config(
    arch="decoder", inputs="continuous", d_model=8, n_heads=2, d_ff=12, n_layers=2, d_in=3, d_out=2,
    max_len=16, dropout=0.0, window=4,
)  # fmt: skip


@given(st.integers(1, 40), st.integers(1, 12))
@settings(max_examples=40, deadline=None)
def test_window_mask_is_the_predicate(t, w):
    assert np.array_equal(window_mask(t, w), M.window_mask_spec(t, w))
    d = window_distances(t, w)
    for i in range(t):
        for j in range(t):
            assert d[i, j] == R.window_distance(i, j, w)
            if M.window_allowed(i, j, w):
                assert d[i, j] == i - j  # the true distance inside the window


@pytest.mark.parametrize("bad", [0, -1, 17, 2.5, True, "4"])
def test_window_out_of_range_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="window"):
        CFG.replace(window=bad)


def test_window_is_decoder_only():
    with pytest.raises(ConfigError, match="decoder-only"):
        preset("reverse").replace(window=4)


def test_config_and_checkpoint_round_trip(tmp_path):
    assert "window" not in CFG.replace(window=None).to_dict()  # unwindowed configs are written as before
    assert Config.from_dict(CFG.to_dict()) == CFG
    params = init_params(CFG, seed=0)
    shapes = parameter_shapes(CFG)
    assert shapes["dec.1.self_attn.rel_bias"] == (2, 4)
    assert sum(int(np.prod(s)) for s in shapes.values()) == parameter_count(CFG)
    assert set(params) == set(names.parameter_names(CFG))
    save_checkpoint(tmp_path / "ck", CFG, params, {"task": "test"})
    back = load_checkpoint(tmp_path / "ck")
    assert back.config == CFG
    for name, value in params.items():
        np.testing.assert_array_equal(back.params[name], value)


def test_full_pass_takes_any_length():
    x = np.random.default_rng(0).normal(size=(1, 3 * CFG.max_len, 3)).astype(np.float32)
    assert forward(init_params(CFG, seed=0), CFG, x).shape == (1, 48, 2)


@given(st.integers(0, 60), st.integers(1, 6), st.integers(1, 2))
@settings(max_examples=25, deadline=None)
def test_shift_invariance_of_the_full_pass(offset, w, layers):
    """The last output of a stream equals the last output of its last L (W - 1) + 1 inputs alone,
    whatever came before (offset) -- the same function at position 10 and at 10^7."""
    cfg = CFG.replace(window=w, n_layers=layers)
    params = init_params(cfg, seed=3)
    span = layers * (w - 1) + 1  # receptive field of the last position
    rng = np.random.default_rng(offset)
    x = rng.normal(size=(1, offset + span, 3)).astype(np.float32)
    whole = forward(params, cfg, x)[0, -1]
    tail = forward(params, cfg, x[:, -span:])[0, -1]
    np.testing.assert_allclose(whole, tail, rtol=0, atol=2e-5)
    if offset and span > 1:  # the receptive field is tight: one more input back changes nothing,
        x2 = x.copy()  # but changing an input inside it does
        x2[:, -span] += 1.0
        assert not np.allclose(forward(params, cfg, x2)[0, -1], whole, atol=1e-6)
