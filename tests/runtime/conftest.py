"""Artifacts shared by the runtime tests: tiny configs exported once per session (seconds)."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

TINY_TOKENS = preset("tiny").replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)


def _export(tmp_path_factory, config, name, seed=0, **kwargs):
    params = init_params(config, seed)
    out = tmp_path_factory.mktemp(name) / "art"
    export_params(config, params, out, **kwargs)
    return out, params


@pytest.fixture(scope="session")
def tiny_art(tmp_path_factory):
    """Decoder-only, continuous (d_in 3 -> d_out 2), max_len 16, domain [-10, 10]."""
    return _export(tmp_path_factory, preset("tiny"), "tiny", seed=1)


@pytest.fixture(scope="session")
def tokens_art(tmp_path_factory):
    """Decoder-only over tokens (V = 11), max_len 16."""
    return _export(tmp_path_factory, TINY_TOKENS, "tokens", seed=2)


@pytest.fixture(scope="session")
def seq2seq_art(tmp_path_factory):
    """Encoder-decoder over tokens (V = 7), max_len 12."""
    return _export(tmp_path_factory, preset("tiny-seq2seq"), "seq2seq", seed=3)


def _seq_for(config, batch, length, seed, domain=(-10.0, 10.0)):
    """A seeded input sequence for a decoder-only config: [B, T, d_in] float32 or [B, T] int64."""
    rng = np.random.default_rng(seed)
    if config.inputs == "tokens":
        return rng.integers(0, config.vocab_size, size=(batch, length), dtype=np.int64)
    return rng.uniform(*domain, size=(batch, length, config.d_in)).astype(np.float32)


@pytest.fixture(scope="session")
def seq_for():
    """seq_for(config, batch, length, seed) -> seeded input sequence (see _seq_for)."""
    return _seq_for


@pytest.fixture(scope="session")
def window_art(tmp_path_factory):
    """Windowed decoder-only, continuous, window 4, max_len 16 (ring caches of 4 rows)."""
    return _export(tmp_path_factory, preset("tiny").replace(window=4), "window", seed=6)


@pytest.fixture(scope="session")
def window_tokens_art(tmp_path_factory):
    """Windowed decoder-only over tokens (V = 11), window 3, max_len 16."""
    return _export(tmp_path_factory, TINY_TOKENS.replace(window=3), "window-tokens", seed=7)
