"""Input-domain contract and the run-time ContractMonitor (off / check / monitor)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts.input_domain import check_domain, domain_excess, parse_domain, validate_input
from tickformer.errors import ConfigError, ContractViolation, InputError
from tickformer.runtime.monitor import ContractMonitor

LO, HI = -2.0, 3.0


def test_inside_passes_and_edges_are_inside():
    validate_input(np.array([[LO, 0.0, HI]], dtype=np.float32), LO, HI)
    validate_input(np.zeros((0, 3), np.float32), LO, HI)


def test_nan_names_first_bad_index():
    x = np.zeros((2, 3), np.float32)
    x[1, 2] = np.nan
    x[1, 0] = np.inf
    with pytest.raises(InputError, match=r"non-finite value inf at index \(1, 0\)"):
        validate_input(x, LO, HI)


def test_out_of_domain_names_worst_value():
    x = np.array([0.0, 3.5, -9.0, 4.0], np.float64)
    with pytest.raises(InputError, match=r"-9\.0 at index \(2,\).*3 value\(s\) outside"):
        validate_input(x, LO, HI)


def test_rejects_non_float():
    with pytest.raises(InputError, match="floating-point"):
        validate_input(np.zeros(3, np.int64), LO, HI)
    with pytest.raises(InputError, match="floating-point"):
        validate_input([0.0], LO, HI)  # type: ignore[arg-type]


@pytest.mark.parametrize("lo,hi", [(math.nan, 1.0), (0.0, math.inf), (2.0, 1.0)])
def test_domain_must_be_finite_and_nonempty(lo, hi):
    with pytest.raises(ConfigError):
        check_domain(lo, hi)


def test_parse_domain():
    assert parse_domain("-1e3:2") == (-1000.0, 2.0)
    for bad in ("1", "a:b", "1:2:3", "3:1"):
        with pytest.raises(ConfigError):
            parse_domain(bad)


values = st.one_of(st.floats(width=32), st.floats(LO, HI, width=32))


@given(hnp.arrays(np.float32, hnp.array_shapes(max_dims=3, max_side=5), elements=values))
def test_validate_agrees_with_elementwise_definition(x):
    """The two-reduction fast path decides exactly the elementwise contract."""
    ok = bool(np.all(np.isfinite(x) & (x >= LO) & (x <= HI)))
    assert (domain_excess(x, LO, HI) == 0.0) == ok
    if ok:
        validate_input(x, LO, HI)
    else:
        with pytest.raises(InputError):
            validate_input(x, LO, HI)


def test_monitor_off_checks_nothing():
    mon = ContractMonitor("off", input_domain=(LO, HI), output_bound=1.0, budget_ns=10)
    mon.check_step(np.array([np.nan]), np.array([np.inf]), 10**9)
    assert mon.summary()["steps"] == 0
    assert all(c["violations"] == 0 for c in mon.summary()["contracts"].values())


def test_monitor_check_raises_per_contract():
    mon = ContractMonitor("check", input_domain=(LO, HI), output_bound=1.0, budget_ns=1000)
    ok_x, ok_y = np.zeros(3, np.float32), np.zeros(2, np.float32)
    mon.check_step(ok_x, ok_y, 999)
    with pytest.raises(ContractViolation, match="^input_domain:"):
        mon.check_step(np.array([9.0], np.float32), ok_y, 1)
    with pytest.raises(ContractViolation, match="^output_bound: .*non-finite"):
        mon.check_step(ok_x, np.array([np.nan], np.float32), 1)
    with pytest.raises(ContractViolation, match="^output_bound: .*exceeds"):
        mon.check_step(ok_x, np.array([-1.5], np.float32), 1)
    with pytest.raises(ContractViolation, match="^latency: .*by 1 ns"):
        mon.check_step(ok_x, ok_y, 1001)


def test_monitor_counts_and_keeps_worst():
    mon = ContractMonitor("monitor", input_domain=(LO, HI), output_bound=None, budget_ns=100)
    x_ok, y_ok = np.zeros(2), np.zeros(2)
    mon.check_step(np.array([4.0]), y_ok, 50)  # step 0: input 1 over
    mon.check_step(np.array([-12.0]), y_ok, 150)  # step 1: input 10 under, 50 ns late
    mon.check_step(x_ok, np.array([1e30, np.nan]), 120)  # step 2: NaN out, 20 ns late
    mon.check_step(x_ok, y_ok, 100)  # step 3: clean
    s = mon.summary()
    assert s["steps"] == 4
    c = s["contracts"]
    assert c["input_domain"] == {"violations": 2, "worst_excess": 10.0, "worst_step": 1}
    assert c["output_bound"] == {"violations": 1, "worst_excess": "inf", "worst_step": 2}
    assert c["latency"] == {"violations": 2, "worst_excess": 50.0, "worst_step": 1}
    mon.reset()
    assert mon.summary()["contracts"]["latency"]["violations"] == 0


def test_monitor_rejects_bad_configuration():
    with pytest.raises(ConfigError, match="contract mode"):
        ContractMonitor("loud", input_domain=(0, 1))
    with pytest.raises(ConfigError, match="budget"):
        ContractMonitor("check", input_domain=(0, 1), budget_ns=0)
    with pytest.raises(ConfigError, match="output_bound"):
        ContractMonitor("check", input_domain=(0, 1), output_bound=-1.0)
