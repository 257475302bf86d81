"""C constants are exact: every float32 the generator writes parses back to the same bits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickformer.codegen import c_text


def parse(literal: str) -> np.float32:
    """What a C99 compiler makes of a hex float constant with suffix f (exact by C99 6.4.4.2)."""
    assert literal.endswith("f")
    return np.float32(float.fromhex(literal[:-1]))


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_hex_constant_is_exact(value):
    v = np.float32(value)
    assert parse(c_text.f32(float(v))).tobytes() == v.tobytes()


def test_signed_zero_and_subnormals():
    assert c_text.f32(-0.0) == "-0.0f" and c_text.f32(0.0) == "0.0f"
    tiny = np.float32(1e-45)  # the smallest subnormal
    assert parse(c_text.f32(float(tiny))) == tiny


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_non_finite_constants_are_refused(bad):
    with pytest.raises(ValueError, match="non-finite"):
        c_text.f32(bad)


@given(st.floats(min_value=-1e30, max_value=1e30, allow_nan=False))
def test_bounds_round_outwards(value):
    up, down = c_text.up(value), c_text.down(value)
    assert float(down) <= value <= float(up)
    assert (
        float(np.nextafter(up, np.float32(-np.inf))) < value or float(up) == value
    )  # the smallest such float32
    assert float(np.nextafter(down, np.float32(np.inf))) > value or float(down) == value


def test_array_is_flat_c_order_and_exact():
    values = np.arange(12, dtype=np.float32).reshape(3, 4) / np.float32(7)
    text = c_text.array("w", values, comment="test")
    assert "static const float w[12]" in text and "[3x4]" in text
    body = text[text.index("{") + 1 : text.rindex("}")]
    parsed = np.array([parse(t.strip()) for t in body.split(",")], dtype=np.float32)
    assert parsed.tobytes() == values.ravel().tobytes()
