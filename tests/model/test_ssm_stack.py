"""The SSM block as a model setting (Config.block = "ssm"): validation with one-line errors,
the parameter count against the shapes, checkpoint round trip, no positional encoding and no
max_len in the forward, causality, and `tickformer train --block ssm` end to end. The
gradients of the whole stack are checked in test_grad.py (its "ssm-*" configs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tickformer.cli import main
from tickformer.errors import ConfigError
from tickformer.model import Config, forward, init_params, names, parameter_count
from tickformer.model.checkpoint import load_checkpoint, save_checkpoint
from tickformer.model.config import preset
from tickformer.model.transformer import parameter_shapes

SSM = Config(
    arch="decoder", inputs="continuous", d_model=8, n_heads=2, d_ff=12, n_layers=2, d_in=3, d_out=2,
    max_len=8, dropout=0.0, block="ssm", d_state=4,
)  # fmt: skip


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"block": "lstm"}, "block 'lstm' is not one of ('attention', 'ssm')"),
        ({"d_state": 0}, "d_state=0 must be an integer in 1..1024"),
        ({"d_state": -2}, "d_state=-2 must be an integer in 1..1024"),
        ({"d_state": 2**31}, "d_state=2147483648 must be an integer in 1..1024"),
        ({"block": "attention"}, "d_state=4 given for an attention block; set it to 0"),
        ({"window": 4}, "window is for attention blocks"),
        ({"arch": "encoder-decoder", "n_enc_layers": 1, "inputs": "tokens", "vocab_size": 5, "d_in": 0, "d_out": 0},
         "block 'ssm' is for decoder-only models"),
    ],
)  # fmt: skip
def test_invalid_block_settings_give_one_line_errors(changes, message):
    with pytest.raises(ConfigError) as info:
        SSM.replace(**changes)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "config",
    [
        SSM,
        SSM.replace(inputs="tokens", vocab_size=5, d_in=0, d_out=0),
        preset("control").replace(block="ssm", d_state=16),
    ],
)
def test_parameter_count_is_the_sum_of_the_shapes(config):
    shapes = parameter_shapes(config)
    assert parameter_count(config) == sum(int(np.prod(s)) for s in shapes.values())
    assert tuple(shapes) == names.parameter_names(config)
    assert {f"dec.{i}.ssm.a_log" for i in range(config.n_layers)} <= set(shapes)
    assert not any(".self_attn." in name for name in shapes)


def test_attention_configs_serialise_as_before():
    data = preset("control").to_dict()
    assert "block" not in data and "d_state" not in data  # their config.json stays byte-identical
    assert Config.from_dict(data) == preset("control")
    assert SSM.to_dict()["block"] == "ssm" and Config.from_dict(SSM.to_dict()) == SSM


def test_attention_code_refuses_an_ssm_config():
    with pytest.raises(ValueError, match="'ssm' blocks, not attention"):
        names.decoder_layers(SSM)


def test_checkpoint_round_trip(tmp_path):
    params = init_params(SSM, seed=3)
    meta = {"task": "none"}
    ckpt = load_checkpoint(save_checkpoint(tmp_path / "ck", SSM, params, meta))
    assert ckpt.config == SSM
    assert set(ckpt.params) == set(params)
    for name, value in params.items():
        np.testing.assert_array_equal(ckpt.params[name], value)


def test_no_positions_no_max_len_and_causal():
    """Longer than max_len runs (no positional table, no cache); the output at t depends on
    inputs <= t only; and a prefix's outputs equal the full run's (no positional encoding)."""
    params = init_params(SSM, seed=1)
    x = np.random.default_rng(0).normal(size=(2, 3 * SSM.max_len, SSM.d_in)).astype(np.float32)
    y = forward(params, SSM, x)
    assert y.shape == (2, 3 * SSM.max_len, SSM.d_out) and np.all(np.isfinite(y))
    x2 = x.copy()
    x2[:, 10:] += 5.0
    y2 = forward(params, SSM, x2)
    np.testing.assert_allclose(y2[:, :10], y[:, :10], rtol=1e-5, atol=1e-6)
    assert np.abs(y2[:, 10:] - y[:, 10:]).max() > 1e-3
    np.testing.assert_allclose(forward(params, SSM, x[:, :7]), y[:, :7], rtol=1e-5, atol=1e-6)


def test_init_draws_the_ssm_initialisation_and_leaves_attention_draws_alone():
    params = init_params(SSM, seed=0)
    np.testing.assert_array_equal(params["dec.1.ssm.a_log"][0], np.log(np.arange(1, 5, dtype=np.float32)))
    attention = SSM.replace(block="attention", d_state=0)
    a, s = init_params(attention, seed=0), params
    np.testing.assert_array_equal(a["in_proj.w"], s["in_proj.w"])  # same draws before the mixers


def test_cli_train_block_ssm(tmp_path, capsys):
    out = tmp_path / "ck"
    assert main(["train", "--task", "pendulum", "--block", "ssm", "--d-state", "4", "--steps", "2",
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    ckpt = load_checkpoint(out)
    assert ckpt.config.block == "ssm" and ckpt.config.d_state == 4
    assert json.loads((out / "metrics.json").read_text())["settings"]["steps"] == 2
    assert main(["info", str(out)]) == 0
    assert f"{parameter_count(ckpt.config):,}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--block", "lstm"], "--block 'lstm' is not one of"),
        (["--d-state", "3"], "--d-state is for --block ssm"),
        (["--block", "ssm", "--d-state", "0"], "d_state=0 must be an integer in 1..1024"),
    ],
)
def test_cli_train_bad_block_flags(tmp_path, capsys, argv, message):
    assert main(["train", "--task", "pendulum", "--out", str(tmp_path / "x"), "--steps", "1", *argv]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
