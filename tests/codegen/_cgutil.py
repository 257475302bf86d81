"""Helpers for the codegen tests (imported as `_cgutil`; conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import subprocess

import numpy as np

DECODERS = ("tiny", "tokens", "batch2", "odd", "narrow")
WINDOWED = ("win1", "win4", "winfull", "wintokens")  # ring caches: W = 1, 4, max_len; tokens
SSM = ("ssm", "ssmtokens")  # the state-space block: continuous; tokens with batch 2


def sequence(config, batch, length, domain=(-10.0, 10.0), seed=0):
    """Seeded step inputs [T] of [B, 1, d_in] float32 (tokens: [B, 1] int64), inside `domain`."""
    rng = np.random.default_rng(seed)
    if config.inputs == "tokens":
        seq = rng.integers(0, config.vocab_size, size=(length, batch, 1), dtype=np.int64)
    else:
        lo, hi = np.float32(domain[0]), np.float32(domain[1])
        lo = np.nextafter(lo, np.float32(np.inf)) if lo < domain[0] else lo
        hi = np.nextafter(hi, np.float32(-np.inf)) if hi > domain[1] else hi
        seq = np.clip(rng.uniform(lo, hi, size=(length, batch, 1, config.d_in)).astype(np.float32), lo, hi)
    return [np.ascontiguousarray(x) for x in seq]


def run_make(directory, target, make, cc, *extra):
    """`make -C directory target`; returns the CompletedProcess (stdout + stderr as text)."""
    return subprocess.run(
        [make, "-C", str(directory), target, f"CC={cc}", *extra], capture_output=True, text=True, timeout=600
    )
