"""Input-domain contract (contracts/input_domain.py): the allocation-free check of small arrays.

The step input [B, 1, d_in] is checked value by value (`x.item(i)`), larger arrays by min/max
reductions (per-column domains: by column i % d, or a [n, d] comparison); both must decide the
same contract with the same message, and the small path must
allocate nothing (tracemalloc peak, deterministic). The shared contract tests (messages, domain
parsing, monitor) are in test_monitor_input_domain.py.
"""

from __future__ import annotations

import gc
import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts.input_domain import (
    SMALL,
    check_columns,
    check_values,
    column_excess,
    column_outside,
    describe_violation,
    domain_excess,
    parse_columns,
    validate_input,
)
from tickformer.errors import ConfigError, InputError

LO, HI = -2.0, 3.0


def peak_bytes(fn, calls=200):
    """Rise of traced memory's peak over `calls` calls of fn after a warm-up (any allocation,
    even one freed before fn returns). The loop allocates nothing itself (calls <= 256)."""
    assert calls <= 256  # the loop counter stays a cached small int
    get, reset_peak = tracemalloc.get_traced_memory, tracemalloc.reset_peak
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        i = 0
        while i < 20:  # warm-up under tracing: first calls, free lists
            fn()
            i += 1
        base = get()[0]
        base = get()[0]  # replaces an int of the same size: traced memory is back to the value read
        reset_peak()
        i = 0
        while i < calls:
            fn()
            i += 1
        return get()[1] - base
    finally:
        tracemalloc.stop()
        gc.enable()


# --- allocation ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_validate_input_success_allocates_zero_bytes(dtype):
    x = np.linspace(LO, HI, 8).astype(dtype).reshape(1, 1, 8)  # [1, 1, 8], both edges included
    assert peak_bytes(lambda: validate_input(x, LO, HI)) == 0


def test_validate_input_success_allocates_zero_bytes_up_to_small():
    x = np.full((2, 1, SMALL // 2), 0.5, np.float32)  # SMALL values
    y = x[:, :, ::2]  # a strided view: item(i) reads any layout
    assert peak_bytes(lambda: validate_input(x, LO, HI)) == 0
    assert peak_bytes(lambda: validate_input(y, LO, HI)) == 0


def test_domain_excess_inside_allocates_zero_bytes():
    x = np.full((1, 1, 8), 0.5, np.float32)
    assert peak_bytes(lambda: domain_excess(x, LO, HI)) == 0


def test_probe_detects_an_allocation():
    """The probe can fail: the reductions of a large array allocate (numpy scalars, ~1 KB)."""
    x = np.zeros(SMALL + 1, np.float32)
    assert peak_bytes(lambda: validate_input(x, LO, HI)) > 0


# --- every bad value at every index is rejected ----------------------------------------------
BAD = {
    "nan": np.nan,
    "+inf": np.inf,
    "-inf": -np.inf,
    "lo-eps": float(np.nextafter(np.float32(LO), np.float32(-np.inf))),
    "hi+eps": float(np.nextafter(np.float32(HI), np.float32(np.inf))),
}


@pytest.mark.parametrize("index", range(8))
@pytest.mark.parametrize("bad", BAD, ids=list(BAD))
def test_rejects_bad_value_at_every_index(bad, index):
    x = np.zeros((1, 1, 8), np.float32)
    x[0, 0, index] = BAD[bad]
    with pytest.raises(InputError) as err:
        validate_input(x, LO, HI)
    assert str(err.value) == describe_violation(x, LO, HI)  # the message of the reduction path
    assert f"index (0, 0, {index})" in str(err.value)
    assert domain_excess(x, LO, HI) > 0


def reference_inside(x: np.ndarray, lo: float, hi: float) -> bool:
    """The contract as the reductions state it."""
    # float(...): compare as Python floats; `x.max() <= hi` would round hi to x's dtype (NumPy 2
    # promotion), calling a float16 32.625 inside [0, 32.609375].
    return x.size == 0 or bool(np.isfinite(x).all() and lo <= float(x.min()) and float(x.max()) <= hi)


def test_float16_value_just_above_hi_is_outside_and_counted():
    """Regression (found by the random CI profile): hi = 32.609375 written into a float16 array
    rounds up to 32.625, outside the domain; the message counted 0 values outside because its
    gaps were computed in float16."""
    x = np.array([32.609375], dtype=np.float16)
    assert float(x[0]) == 32.625
    with pytest.raises(InputError, match=r"32\.625 at index \(0,\).*\(1 value\(s\) outside\)"):
        validate_input(x, 0.0, 32.609375)
    assert domain_excess(x, 0.0, 32.609375) == 32.625 - 32.609375


domains = st.tuples(st.floats(-100, 100, width=32), st.floats(-100, 100, width=32)).map(sorted)
arrays = hnp.arrays(
    st.sampled_from([np.float16, np.float32, np.float64]),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
    elements=st.one_of(st.floats(-100, 100, width=16), st.sampled_from([math.nan, math.inf, -math.inf])),
)


@given(x=arrays, domain=domains, index=st.integers(0, 2**16))
def test_small_path_decides_as_the_reductions(x, domain, index):
    lo, hi = domain
    if x.size:  # put an edge value in, so edges are exercised
        x.flat[index % x.size] = (lo, hi)[index % 2]
    inside = reference_inside(x, lo, hi)
    if inside:
        validate_input(x, lo, hi)
        assert domain_excess(x, lo, hi) == 0.0
    else:
        with pytest.raises(InputError) as err:
            validate_input(x, lo, hi)
        assert str(err.value) == describe_violation(x, lo, hi)
        assert domain_excess(x, lo, hi) > 0


@given(x=arrays, domain=domains)
def test_domain_excess_equals_the_reduction_formula(x, domain):
    lo, hi = domain
    if x.size == 0:
        assert domain_excess(x, lo, hi) == 0.0
        return
    mn, mx = float(x.min()), float(x.max())
    if lo <= mn and mx <= hi:
        expected = 0.0
    elif not (math.isfinite(mn) and math.isfinite(mx)):
        expected = math.inf
    else:
        expected = max(lo - mn, mx - hi, 0.0)
    assert domain_excess(x, lo, hi) == expected


def test_masked_array_keeps_its_own_min_max():
    """An ndarray subclass is not read value by value: a masked NaN is skipped as before."""
    x = np.ma.masked_invalid(np.array([0.0, np.nan, 1.0], np.float32))
    validate_input(x, LO, HI)


# --- per-column domains (issue 35): one interval per input column inside the envelope -------------
# A model trained on logged signals declares them; the check must refuse exactly the inputs with
# some x[..., j] outside column j's interval, on both paths, and name the column.
ENVELOPE = (-10.0, 10.0)
COLUMNS = check_columns([(-1.0, 1.0), (0.0, 5.0), (-10.0, 10.0)], ENVELOPE, 3)


def test_columns_are_validated_against_the_envelope_and_the_width():
    with pytest.raises(ConfigError, match="must be 3 \\[lo, hi\\] pairs"):
        check_columns([(-1, 1)], ENVELOPE, 3)
    with pytest.raises(ConfigError, match="input column 1's domain \\[0.0, 11.0\\] is not inside"):
        check_columns([(-1, 1), (0, 11), (0, 1)], ENVELOPE, 3)
    with pytest.raises(ConfigError, match="input column 2: input domain \\[1.0, 0.0\\] is empty"):
        check_columns([(-1, 1), (0, 1), (1, 0)], ENVELOPE, 3)
    with pytest.raises(ConfigError, match="input column 0: input domain .* must be finite"):
        check_columns([(float("nan"), 1), (0, 1), (0, 1)], ENVELOPE, 3)
    assert parse_columns("-1:1,0:5") == [(-1.0, 1.0), (0.0, 5.0)]
    with pytest.raises(ConfigError, match="--domain '-1:1,0'"):
        parse_columns("-1:1,0")


def _reference(x: np.ndarray) -> bool:
    """Inside every column's interval (the contract, written with numpy)."""
    lo, hi = np.asarray(COLUMNS[0]), np.asarray(COLUMNS[1])
    return bool(np.all((x >= lo) & (x <= hi)))


values = st.one_of(
    st.floats(-12, 12, width=32),
    st.sampled_from([-1.0, 1.0, 0.0, 5.0, -10.0, 10.0, np.nextafter(np.float32(1), np.float32(2))]),
)


@given(rows=st.integers(1, 40), data=st.data())
def test_the_check_refuses_exactly_the_values_outside_their_column(rows, data):
    """Both paths: rows * 3 <= SMALL values are looped (0 bytes), more take the [n, d] comparison."""
    x = data.draw(hnp.arrays(np.float32, (rows, 1, 3), elements=values))
    inside = _reference(x)
    assert (column_outside(x, COLUMNS) < 0) == inside
    if inside:
        check_values(x, *ENVELOPE, COLUMNS)
        assert column_excess(x, COLUMNS) == 0.0
    else:
        with pytest.raises(InputError, match=r"outside (input column \d's|the) declared domain"):
            check_values(x, *ENVELOPE, COLUMNS)
        assert column_excess(x, COLUMNS) > 0.0


def test_the_message_names_the_column_and_its_interval():
    x = np.array([[[0.5, 6.0, 0.0]]], np.float32)
    with pytest.raises(InputError) as info:
        check_values(x, *ENVELOPE, COLUMNS)
    assert "input value 6.0 at index (0, 0, 1) is outside input column 1's declared domain [0.0, 5.0]" in str(
        info.value
    )


def test_the_step_input_check_allocates_nothing():
    x = np.zeros((4, 1, 3), np.float32)
    x[..., 1] = 2.5
    assert x.size <= SMALL
    assert peak_bytes(lambda: check_values(x, -10.0, 10.0, COLUMNS)) == 0
