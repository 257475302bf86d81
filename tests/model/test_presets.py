"""The named configurations are data (model/presets.toml), read through Config's own checks."""

from __future__ import annotations

import pytest

from tickformer.errors import ConfigError
from tickformer.model import PRESETS, parameter_count
from tickformer.model.config import _read_presets


def test_presets_file_gives_the_papers_models_and_the_control_window():
    assert parameter_count(PRESETS["paper-base"]) == 63_082_496  # Table 3's base (65M rounded)
    assert parameter_count(PRESETS["paper-big"]) == 214_245_376
    assert PRESETS["control-hidden"].window == 32
    assert all(PRESETS[name].window is None for name in PRESETS if name != "control-hidden")


def test_a_preset_with_an_unknown_or_bad_field_is_refused_by_name(tmp_path):
    path = tmp_path / "presets.toml"
    path.write_text('[x]\narch = "decoder"\nd_modle = 8\n')
    with pytest.raises(ConfigError, match="d_modle"):
        _read_presets(path)
    path.write_text('[x]\narch = "decoder"\nd_model = 6\nn_heads = 4\nd_in = 1\nd_out = 1\n')
    with pytest.raises(ConfigError, match="divisible"):
        _read_presets(path)
