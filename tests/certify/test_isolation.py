"""Isolation around the measured loop (certify/isolation.py): requested, granted or refused, restored."""

from __future__ import annotations

import gc
import os

from tickformer.certify.isolation import Isolation


def test_isolation_records_and_restores() -> None:
    before_aff = os.sched_getaffinity(0)
    before_sched = os.sched_getscheduler(0)
    cpu = min(before_aff)
    with Isolation(cpu=cpu, realtime=True, rt_priority=10) as iso:
        assert not gc.isenabled()
        flushed_inside = __import__("tickformer.runtime.denormals", fromlist=["x"]).denormals_flushed()
        assert os.sched_getaffinity(0) == {cpu}
    assert gc.isenabled()
    assert os.sched_getaffinity(0) == before_aff
    assert os.sched_getscheduler(0) == before_sched
    from tickformer.runtime.denormals import denormals_flushed

    assert not denormals_flushed()  # restored on exit
    assert iso.granted["flush_to_zero"]["requested"] is True
    assert flushed_inside == iso.granted["flush_to_zero"]["granted"]
    for key in ("flush_to_zero", "gc_disabled", "cpu_affinity", "sched_fifo", "mlockall"):
        assert set(iso.granted[key]) == {"requested", "granted", "detail"}
    assert iso.granted["cpu_affinity"]["granted"] is True
    assert iso.granted["sched_fifo"]["requested"] is True  # granted or refused, never silent


def test_isolation_records_a_refused_cpu() -> None:
    with Isolation(cpu=10_000) as iso:
        pass
    assert iso.granted["cpu_affinity"] == {
        "requested": True,
        "granted": False,
        "detail": iso.granted["cpu_affinity"]["detail"],
    }
    assert "refused" in iso.granted["cpu_affinity"]["detail"]
