"""Helpers the serving tests import (tests/serve/conftest.py puts this folder on sys.path: pytest
runs with --import-mode=importlib): the servable kinds and seeded inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tickformer.model import preset

ROOT = Path(__file__).resolve().parents[2]
TINY = preset("tiny")  # d_in 3 -> d_out 2, max_len 16, domain [-10, 10]
KINDS = {
    "static": TINY,
    "windowed": TINY.replace(window=4),
    "ssm": TINY.replace(block="ssm", d_state=3),
    "tokens": TINY.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11, window=3),
}


def inputs(config, streams: int, length: int, seed: int) -> np.ndarray:
    """Seeded inputs [streams, length, d_in] float32 in [-1, 1] (tokens: [streams, length] int64)."""
    rng = np.random.default_rng(seed)
    if config.inputs == "tokens":
        return rng.integers(0, config.vocab_size, size=(streams, length), dtype=np.int64)
    return rng.uniform(-1, 1, size=(streams, length, config.d_in)).astype(np.float32)
