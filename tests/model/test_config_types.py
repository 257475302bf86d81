"""Regression (found by tests/reliability/test_fuzz_loaders.py): a config field that must be 0
but holds another falsy value ([] or "") passed validation and failed later with a TypeError
(unhashable list) instead of a ConfigError."""

from __future__ import annotations

import pytest

from tickformer.errors import ConfigError
from tickformer.model import preset


@pytest.mark.parametrize("bad", [[], "", 0.0, None])
def test_unused_size_fields_must_be_integer_zero(bad):
    with pytest.raises(ConfigError, match="vocab_size"):
        preset("tiny").replace(vocab_size=bad)
    tokens = preset("tiny").replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)
    with pytest.raises(ConfigError, match="d_in/d_out"):
        tokens.replace(d_in=bad)
