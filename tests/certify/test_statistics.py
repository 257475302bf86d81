"""Statistics of a campaign's latencies (certify/statistics.py): percentiles, histogram, worst samples."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.certify import statistics as S


def test_latency_stats_on_known_data() -> None:
    x = np.arange(1, 100_001)
    st = S.latency_stats(x)
    assert st["min"] == 1 and st["max"] == 100_000 and st["n"] == 100_000
    # "higher": the sample at index ceil(q (n - 1)), never an interpolation below it
    assert st["p50"] == 50_001 and st["p99"] == 99_001 and st["p99.99"] == 99_991
    assert st["mean"] == pytest.approx(50_000.5)
    assert st["std"] == pytest.approx(np.std(x, ddof=1))
    for a, b in zip(S.PERCENTILES, S.PERCENTILES[1:]):
        assert st[a[0]] <= st[b[0]]


def test_histogram_has_explicit_overflow_and_counts_everything() -> None:
    x = np.r_[np.full(90, 100), np.full(9, 150), [10_000]]
    h = S.histogram(x, bins=10, hi_ns=200)
    assert h["overflow"] == 1
    assert sum(h["counts"]) + h["overflow"] == 100
    assert len(h["edges_ns"]) == 11 and h["edges_ns"][-1] == 200


def test_worst_indices_in_order() -> None:
    x = np.array([5, 1, 9, 3, 7])
    assert S.worst_indices(x, 3) == [{"index": 2, "ns": 9}, {"index": 4, "ns": 7}, {"index": 0, "ns": 5}]
