"""Shared fixtures for the export tests: tiny configs, seeded parameters, exported artifacts."""

from __future__ import annotations

import pytest

from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

TINY_TOKENS = preset("tiny").replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)
CONFIGS = {"tiny": preset("tiny"), "tiny-tokens": TINY_TOKENS, "tiny-seq2seq": preset("tiny-seq2seq")}


@pytest.fixture(scope="session")
def configs():
    return CONFIGS


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """name -> (artifact path, params, manifest) for every tiny config, exported once."""
    out = {}
    for i, (name, cfg) in enumerate(CONFIGS.items()):
        params = init_params(cfg, seed=10 + i)
        path = tmp_path_factory.mktemp(name) / "art"
        manifest = export_params(cfg, params, path)
        out[name] = (path, params, manifest)
    return out
