"""The measured loop of a campaign and its conditions (certify/measurement.py)."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import FakeSession, inputs

from tickformer.certify import campaign as C
from tickformer.certify import measurement as M
from tickformer.errors import ConfigError


def test_measure_times_every_position_and_resets_outside_timing() -> None:
    s = FakeSession(max_len=16)
    d, pos = M.measure(s, inputs(), samples=1000, warmup=50, max_len=16)
    assert d.shape == (1000,) and d.dtype == np.int64 and np.all(d > 0)
    assert set(pos.tolist()) == set(range(16))  # constant-time step: every position is sampled
    assert np.bincount(pos).min() >= 1000 // 16 - 1


def test_measure_growing_cache_times_only_the_last_positions() -> None:
    s = FakeSession(max_len=32, growing=True)
    d, pos = M.measure(s, inputs(), samples=1000, warmup=10, max_len=32, start_position=28)
    assert pos.min() == 28 and pos.max() == 31
    assert len(s.visited) > 1000 * 8 - 100  # the 28 untimed fill steps per sequence did run


def test_measure_duty_cycle_idles_between_chunks() -> None:
    import time

    s = FakeSession(max_len=16)
    t0 = time.perf_counter_ns()
    d, _ = M.measure(s, inputs(), samples=2000, warmup=0, max_len=16, chunk=500, duty_cycle=0.25)
    wall = time.perf_counter_ns() - t0
    # busy at most 25% of the time: the wall clock covers at least 4x the timed steps (a lower bound,
    # so machine noise can only make it hold more easily)
    assert wall >= 3 * int(d.sum())
    with pytest.raises(ConfigError, match="duty_cycle"):
        M.measure(s, inputs(), samples=10, warmup=0, max_len=16, duty_cycle=0.0)
    with pytest.raises(ConfigError, match="duty_cycle"):
        C.CampaignConfig(duty_cycle=1.5)


def test_measure_rejects_bad_start_position() -> None:
    with pytest.raises(ConfigError, match="start_position"):
        M.measure(FakeSession(), inputs(), samples=10, warmup=0, max_len=16, start_position=16)


def test_make_inputs_respects_domain_and_dtype() -> None:
    f = M.make_inputs((1, 1, 3), np.float32, (-2.0, 5.0), 100, seed=1)
    assert f.shape == (100, 1, 1, 3) and f.dtype == np.float32 and f.min() >= -2.0 and f.max() <= 5.0
    t = M.make_inputs((1, 1), np.int64, (0, 12), 100, seed=1)
    assert t.dtype == np.int64 and t.min() >= 0 and t.max() <= 12


def test_artifact_hash_is_the_manifest_hash(tmp_path) -> None:
    (tmp_path / "manifest.json").write_text('{"a": 1}')
    import hashlib

    assert M.artifact_hash(tmp_path) == hashlib.sha256(b'{"a": 1}').hexdigest()
