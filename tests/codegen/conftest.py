"""Artifacts and build helpers shared by the codegen tests: tiny configs exported once per
session, a private build cache, and helpers that compile generated C (skipped, with the
package to install, when this machine has no C compiler)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # for `import _cgutil` (importlib import mode)

from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

TINY_TOKENS = preset("tiny").replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)
# d_head 4 (not a power of 4: 1/sqrt(dh) inexact), 3 layers, max_len 13 (not a multiple of 8)
ODD = preset("tiny").replace(d_model=12, n_heads=3, d_ff=20, n_layers=3, max_len=13, d_in=2, d_out=3)


def _export(tmp_path_factory, config, name, seed, **kwargs):
    out = tmp_path_factory.mktemp(name) / "art"
    params = init_params(config, seed)
    rng = np.random.default_rng(seed)
    for key in params:  # windowed: a trained-looking bias (the ALiBi init's distance-0 column is 0)
        if key.endswith(".rel_bias"):
            params[key] = (params[key] + rng.normal(0.0, 0.5, params[key].shape)).astype(np.float32)
    export_params(config, params, out, **kwargs)
    return out


@pytest.fixture(scope="session")
def c_compiler():
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or shutil.which(cc) is None:
        pytest.skip("no C compiler on this machine: apt-get install gcc")
    return shutil.which(cc)


@pytest.fixture(scope="session")
def cxx_compiler(c_compiler):
    """The C++ compiler tf_count needs (codegen/native.py count_work); skipped when there is none."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None or shutil.which(cxx) is None:
        pytest.skip("no C++ compiler on this machine (counting the step's operations): apt-get install g++")
    return shutil.which(cxx)


@pytest.fixture(scope="session")
def make_tool():
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on this machine: apt-get install make")
    return make


@pytest.fixture(scope="session")
def arts(tmp_path_factory):
    """name -> artifact directory: continuous (d_in 3 -> d_out 2), tokens (V = 11), batch 2,
    odd shapes, a narrow domain, an encoder-decoder (which codegen refuses), and windowed ones
    (ring caches): W = 1, W = 4, W = max_len = 16, and tokens with W = 5; ssm blocks: continuous
    (d_state 4) and tokens with batch 2 (d_state 3)."""
    tiny = preset("tiny")
    ssm = tiny.replace(block="ssm", d_state=4)
    return {
        "ssm": _export(tmp_path_factory, ssm, "ssm", 15),
        "ssmtokens": _export(
            tmp_path_factory,
            TINY_TOKENS.replace(block="ssm", d_state=3, max_len=12),
            "ssmtokens",
            16,
            batch=2,
        ),
        "win1": _export(tmp_path_factory, tiny.replace(window=1), "win1", 11),
        "win4": _export(tmp_path_factory, tiny.replace(window=4), "win4", 12),
        "winfull": _export(tmp_path_factory, tiny.replace(window=tiny.max_len), "winfull", 13),
        "wintokens": _export(tmp_path_factory, TINY_TOKENS.replace(window=5), "wintokens", 14),
        "tiny": _export(tmp_path_factory, preset("tiny"), "tiny", 1),
        "tokens": _export(tmp_path_factory, TINY_TOKENS, "tokens", 2),
        "batch2": _export(tmp_path_factory, preset("tiny"), "batch2", 3, batch=2),
        "odd": _export(tmp_path_factory, ODD, "odd", 4),
        "narrow": _export(tmp_path_factory, preset("tiny"), "narrow", 5, domain=(-0.1, 0.3)),
        "seq2seq": _export(tmp_path_factory, preset("tiny-seq2seq"), "seq2seq", 6),
    }
