"""Argument validation: one small vocabulary for every configuration check in the package.

Modelled on Hypothesis's `internal/validation.py`: each checker takes the value, the name the
user knows it by (a CLI flag or a keyword argument) and an optional hint saying how to fix it,
and either returns the value (normalised) or raises an error whose message names all three.
`bool` is refused where an integer is expected: `True` is an `int` in Python, and a flag set to
True by mistake must not silently mean 1.

The error class defaults to `ConfigError`; pass `error=ExportError` (or any `TickformerError`
subclass) where a command's own error type reads better. Not real-time code: validate once, at
construction or load.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, TypeVar

from tickformer.errors import ConfigError, TickformerError

T = TypeVar("T")


def _fail(error: type[TickformerError], name: str, value: Any, must: str, hint: str) -> TickformerError:
    shown = f"{name} {value!r}" if name.startswith("--") else f"{name}={value!r}"  # a flag reads as typed
    return error(f"{shown} {must}" + (f"; {hint}" if hint else ""))


def is_int(value: Any) -> bool:
    """An integer, numpy integers included, that is not a bool."""
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    """A real number, int or float (numpy scalars included), that is not a bool; finiteness is
    the caller's check."""
    import numpy as np

    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def integer(
    value: Any,
    name: str,
    *,
    min_value: int | None = None,
    max_value: int | None = None,
    hint: str = "",
    error: type[TickformerError] = ConfigError,
) -> int:
    """An int in [min_value, max_value] (either bound may be None). Returns a Python int."""
    if not is_int(value):
        must = "must be an integer" + _range_text(min_value, max_value)
        raise _fail(error, name, value, must, hint)
    v = int(value)
    if (min_value is not None and v < min_value) or (max_value is not None and v > max_value):
        raise _fail(error, name, value, "must be an integer" + _range_text(min_value, max_value), hint)
    return v


def positive_int(value: Any, name: str, *, hint: str = "", error: type[TickformerError] = ConfigError) -> int:
    """An int >= 1 (not a bool)."""
    if not is_int(value) or int(value) < 1:
        raise _fail(error, name, value, "must be a positive integer", hint)
    return int(value)


def nonneg_int(value: Any, name: str, *, hint: str = "", error: type[TickformerError] = ConfigError) -> int:
    """An int >= 0 (not a bool)."""
    if not is_int(value) or int(value) < 0:
        raise _fail(error, name, value, "must be a non-negative integer", hint)
    return int(value)


def optional_positive_int(
    value: Any, name: str, *, hint: str = "", error: type[TickformerError] = ConfigError
) -> int | None:
    """None, or an int >= 1."""
    return None if value is None else positive_int(value, name, hint=hint, error=error)


def real(
    value: Any,
    name: str,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    exclude_min: bool = False,
    exclude_max: bool = False,
    hint: str = "",
    error: type[TickformerError] = ConfigError,
) -> float:
    """A finite real number (int or float, not a bool) in the given interval. Returns a float."""
    ok = is_real(value)
    v = float(value) if ok else math.nan
    if ok and math.isfinite(v):
        low_ok = min_value is None or (v > min_value if exclude_min else v >= min_value)
        high_ok = max_value is None or (v < max_value if exclude_max else v <= max_value)
        if low_ok and high_ok:
            return v
    interval = _interval_text(min_value, max_value, exclude_min, exclude_max)
    raise _fail(error, name, value, f"must be a finite number{interval}", hint)


def positive_real(
    value: Any, name: str, *, hint: str = "", error: type[TickformerError] = ConfigError
) -> float:
    """A finite number > 0."""
    return real(value, name, min_value=0.0, exclude_min=True, hint=hint, error=error)


def probability(
    value: Any, name: str, *, hint: str = "", error: type[TickformerError] = ConfigError
) -> float:
    """A number strictly between 0 and 1 (an exceedance probability, a tail fraction)."""
    return real(
        value, name, min_value=0.0, max_value=1.0, exclude_min=True, exclude_max=True, hint=hint, error=error
    )


def one_of(
    value: T, name: str, choices: Iterable[T], *, hint: str = "", error: type[TickformerError] = ConfigError
) -> T:
    """`value` if it is one of `choices` (compared with ==, bools never match ints)."""
    options = tuple(choices)
    if isinstance(value, bool) != any(isinstance(c, bool) for c in options) or value not in options:
        raise _fail(error, name, value, f"is not one of {options}", hint)
    return value


def boolean(value: Any, name: str, *, error: type[TickformerError] = ConfigError) -> bool:
    """Exactly True or False (not 0/1, not None)."""
    if not isinstance(value, bool):
        raise _fail(error, name, value, "must be True or False", "")
    return value


def _range_text(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f" in {lo}..{hi}"
    if lo is not None:
        return f" >= {lo}"
    if hi is not None:
        return f" <= {hi}"
    return ""


def _interval_text(lo: float | None, hi: float | None, open_lo: bool, open_hi: bool) -> str:
    if lo is None and hi is None:
        return ""
    left = ("(" if open_lo else "[") + ("-inf" if lo is None else f"{lo:g}")
    right = ("inf" if hi is None else f"{hi:g}") + (")" if open_hi else "]")
    return f" in {left}, {right}"
