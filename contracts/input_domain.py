"""Contract: input domain.

Statement
    Every value the runtime feeds the model is finite and lies in the declared closed interval
    [lo, hi] (recorded in the artifact manifest at export; `--domain LO:HI` on the CLI).
Bound
    lo <= x <= hi elementwise, lo and hi finite, lo <= hi.
Reason
    Every other numerical promise (the score bound of `contracts.score_bound`, fp16 safety,
    finiteness of outputs) is derived from a *finite* input domain. An input outside it voids
    them, so the runtime checks it by policy (contract mode `check` raises, `monitor` counts).

Implementation note (real-time safety, measured with tracemalloc: experiments/diagnose.py allocs,
tests/contracts/test_input_domain.py): a small plain ndarray (size <= SMALL, the step input
[B, 1, d_in]) is scanned by `value_range`, a `while` loop over `x.item(i)`: each value comes back
as a Python float from CPython's float free list -- 0 bytes traced on the success path. Its time
grows per value while min+max costs about the same for any small array, so the loop wins only
for small arrays (measured by `python experiments/diagnose.py allocs`; figures in
benchmarks/ANALYSIS.md), hence the bound SMALL. (A `for i in range(n)` loop would allocate
its range iterator, 96 B; numpy's reduction machinery behind `x.min()` / `x.max()` allocates
~1 KB per call, all freed.) Larger arrays keep the two bounded reductions `x.min()` and `x.max()`:
O(x.size) work, no array allocation, ~1 KB of transient Python objects. Either way one test
decides the contract: NaN fails every comparison (`lo <= v <= hi`, `lo <= min`), +-inf lies
outside any finite interval. Only the failure path allocates, to name the first bad index and
the worst value.

Per column (`Columns`): a model trained on logged signals declares one interval per input
column (min/max of the data widened by a margin, model/forecast.py), inside the envelope
[lo, hi] that the score bound is derived from. Column j of x is x[..., j]. The check is then the
envelope scan above followed by a per-column pass -- for a small plain ndarray the same kind of
`while` loop, comparing x.item(i) with the bounds of column i % d (Python floats held in tuples:
0 bytes); larger arrays compare a [n, d] view against the [d] bounds (allocates).

Referenced by: runtime sessions, `runtime.monitor.ContractMonitor`,
tests/contracts/test_input_domain.py, `tickformer verify` (domain strategy).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tickformer.errors import ConfigError, InputError

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = "x finite and lo <= x <= hi elementwise (lo <= hi, both finite)"

# Arrays up to this many values are checked value by value (allocation-free); larger ones by
# min/max reductions (faster per value, ~1 KB of transient Python objects). At most 256 so that
# the loop counter stays a cached small int.
SMALL = 64


FLOAT32_MAX = 3.4028234663852886e38  # np.finfo(np.float32).max: inputs are float32


Columns = tuple[tuple[float, ...], tuple[float, ...]]  # (lows, highs), one per input column


def check_columns(columns: Any, envelope: tuple[float, float], d_in: int) -> Columns:
    """Validate per-column domains: `d_in` pairs [lo_j, hi_j], each a valid domain
    (`check_domain`) inside the envelope [lo, hi]. Returns (lows, highs) as tuples of Python
    floats (what the real-time loop indexes). Raises ConfigError naming the column. Not real-time."""
    if not isinstance(columns, (list, tuple)) or len(columns) != d_in:
        raise ConfigError(
            f"per-column input domain {columns!r:.120} must be {d_in} [lo, hi] pairs, one per input column"
        )
    lows, highs = [], []
    lo_env, hi_env = envelope
    for j, pair in enumerate(columns):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ConfigError(f"input column {j}'s domain {pair!r:.60} must be [lo, hi], two numbers")
        try:
            lo, hi = check_domain(*pair)
        except ConfigError as exc:
            raise ConfigError(f"input column {j}: {exc}") from None
        if lo < lo_env or hi > hi_env:
            raise ConfigError(
                f"input column {j}'s domain [{lo}, {hi}] is not inside the declared domain [{lo_env}, {hi_env}] "
                "the bounds are derived from; widen --domain or narrow the column"
            )
        lows.append(lo)
        highs.append(hi)
    return tuple(lows), tuple(highs)


def parse_columns(text: str) -> list[tuple[float, float]]:
    """'LO:HI,LO:HI,...' (one pair per input column) -> [(lo, hi), ...], each validated."""
    pairs = text.split(",")
    try:
        return [parse_domain(part) for part in pairs]
    except ConfigError as exc:
        raise ConfigError(f"--domain {text!r}: {exc}") from None


def check_domain(lo: float, hi: float) -> tuple[float, float]:
    """Validate a declared domain: finite float32 bounds, lo <= hi. Returns (float(lo), float(hi)).

    Not on the hot path (call once, at load/construction)."""
    try:
        lo_f, hi_f = float(lo), float(hi)
    except (TypeError, ValueError):
        raise ConfigError(f"input domain ({lo!r}, {hi!r}) must be two numbers, e.g. --domain=-1:1") from None
    if not (math.isfinite(lo_f) and math.isfinite(hi_f)):
        raise ConfigError(
            f"input domain [{lo_f}, {hi_f}] must be finite: the score bound and fp16 safety are derived from it; "
            f"declare the real range of your signals, e.g. --domain=-10:10"
        )
    if lo_f > hi_f:
        raise ConfigError(f"input domain [{lo_f}, {hi_f}] is empty (lo > hi); swap the bounds")
    if max(abs(lo_f), abs(hi_f)) > FLOAT32_MAX:
        raise ConfigError(
            f"input domain [{lo_f:g}, {hi_f:g}] must be float32 numbers (|bound| <= {FLOAT32_MAX:.4g}): the "
            "inputs are float32; declare the real range of your signals, e.g. --domain=-10:10"
        )
    return lo_f, hi_f


def parse_domain(text: str) -> tuple[float, float]:
    """'LO:HI' -> (lo, hi), validated. '-1:1', '-1e3:1e3'."""
    parts = text.split(":")
    if len(parts) != 2:
        raise ConfigError(
            f"--domain {text!r} must look like LO:HI, e.g. --domain=-1:1 (use = when LO is negative)"
        )
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise ConfigError(f"--domain {text!r}: LO and HI must be numbers, e.g. -1:1") from None
    return check_domain(lo, hi)


def value_range(x: np.ndarray) -> tuple[float, float]:
    """(min, max) of a non-empty numeric array as Python numbers; NaN anywhere gives (nan, nan),
    as numpy's min/max do. The one value scan of the run-time contracts (this module and
    contracts.output_bound).

    A small plain ndarray (size <= SMALL) is scanned by a `while` loop over `x.item(i)`: Python
    floats from CPython's free list, a loop counter that stays a cached small int, no iterator
    (`for ... range` would allocate one): 0 bytes traced. Anything else -- large arrays, ndarray
    subclasses with their own min/max (masked arrays) -- takes the two bounded reductions."""
    if type(x) is not np.ndarray or x.size > SMALL or x.dtype.kind not in "fiu":
        return x.min().item(), x.max().item()
    n = x.size
    mn = mx = x.item(0)  # flat C-order index, any strides
    i = 1
    while i < n:
        v = x.item(i)
        if v != v:  # NaN
            return v, v
        if v < mn:
            mn = v
        elif v > mx:
            mx = v
        i += 1
    return mn, mx


def domain_excess(x: np.ndarray, lo: float, hi: float) -> float:
    """How far x leaves [lo, hi]: 0.0 inside, max(lo - min, max - hi) outside, inf for any
    non-finite value. Never raises on values (used by the `monitor` mode).

    Real-time safe: one `value_range` scan, no array allocation.
    """
    if x.size == 0:
        return 0.0
    mn, mx = value_range(x)
    if lo <= mn and mx <= hi:  # False for NaN
        return 0.0
    if not (math.isfinite(mn) and math.isfinite(mx)):
        return math.inf
    return max(lo - mn, mx - hi, 0.0)


def describe_violation(x: np.ndarray, lo: float, hi: float) -> str:
    """Name the problem with x (first non-finite index, or the worst value outside [lo, hi]).

    Failure path only: allocates."""
    finite = np.isfinite(x)  # [*x.shape] bool
    if not finite.all():
        idx = tuple(int(i) for i in np.argwhere(~finite)[0])
        return (
            f"input has a non-finite value {float(x[idx])!r} at index {idx}; the model's domain is "
            f"[{lo}, {hi}]: replace NaN/Inf before the step (e.g. hold the last good sample)"
        )
    # In float64, as check_values compares (Python floats): numpy would subtract a float16 x and
    # lo/hi rounded to float16, and count a value just above hi as inside.
    xd = x.astype(np.float64)  # [*x.shape]
    lo_gap = lo - xd  # [*x.shape] how far below lo
    hi_gap = xd - hi  # [*x.shape] how far above hi
    gap = np.maximum(lo_gap, hi_gap)  # [*x.shape]
    flat = int(np.argmax(gap))
    idx = tuple(int(i) for i in np.unravel_index(flat, x.shape))
    worst = float(x[idx])
    count = int((gap > 0).sum())
    return (
        f"input value {worst!r} at index {idx} is outside the declared domain [{lo}, {hi}] "
        f"({count} value(s) outside); clip or scale the input, or re-export with a wider --domain"
    )


def validate_input(x: np.ndarray, lo: float, hi: float, columns: Columns | None = None) -> None:
    """Raise `InputError` unless x is a floating array whose values are all finite and in [lo, hi].

    lo, hi: a finite domain (validate it once with `check_domain`); columns: per-column domains
    inside it (`check_columns`), or None.
    Real-time safe on the success path: a dtype check and `check_values`. The failure path
    allocates to build the message.
    """
    if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
        kind = type(x).__name__ if not isinstance(x, np.ndarray) else f"ndarray of {x.dtype}"
        raise InputError(
            f"input must be a floating-point numpy array, got {kind}; convert with np.asarray(x, np.float32)"
        )
    check_values(x, lo, hi, columns)


def check_values(x: np.ndarray, lo: float, hi: float, columns: Columns | None = None) -> None:
    """`validate_input` for a caller that has already checked x's type and dtype (the session
    checks them exactly, once per step): one `value_range` scan, 0 bytes for a small plain
    ndarray; with `columns` (`check_columns`), then the per-column pass (`column_outside`).
    NaN fails both comparisons; +-inf lies outside any finite interval."""
    if x.size == 0:
        return
    mn, mx = value_range(x)
    if not (lo <= mn and mx <= hi):
        raise InputError(describe_violation(x, lo, hi))
    if columns is not None and column_outside(x, columns) >= 0:
        raise InputError(describe_column_violation(x, columns))


def column_outside(x: np.ndarray, columns: Columns) -> int:
    """The flat index of the first value of x outside its column's interval, else -1 (x's last
    axis is the column; NaN counts as outside). A small plain ndarray: a `while` loop over
    x.item(i) against the bounds of column i % d, 0 bytes; otherwise a [n, d] comparison."""
    lows, highs = columns
    d = len(lows)
    if type(x) is np.ndarray and x.size <= SMALL and x.dtype.kind in "fiu":
        n = x.size
        i = 0
        while i < n:
            v = x.item(i)
            j = i % d
            if not (lows[j] <= v <= highs[j]):
                return i
            i += 1
        return -1
    rows = np.asarray(x, np.float64).reshape(-1, d)  # [n, d]
    bad = ~((rows >= np.asarray(lows)) & (rows <= np.asarray(highs)))  # [n, d]
    return int(np.argmax(bad)) if bad.any() else -1


def column_excess(x: np.ndarray, columns: Columns) -> float:
    """How far x leaves its columns' intervals: 0.0 inside, inf for a non-finite value, else the
    largest distance outside. Failure path of the monitor (allocates only when outside)."""
    if x.size == 0 or column_outside(x, columns) < 0:
        return 0.0
    rows = np.asarray(x, np.float64).reshape(-1, len(columns[0]))  # [n, d]
    if not np.isfinite(rows).all():
        return math.inf
    return float(np.max(np.maximum(np.asarray(columns[0]) - rows, rows - np.asarray(columns[1]))))


def describe_column_violation(x: np.ndarray, columns: Columns) -> str:
    """Name the first value of x outside its column's interval. Failure path only: allocates."""
    flat = column_outside(x, columns)
    idx = tuple(int(i) for i in np.unravel_index(flat, x.shape))
    j = flat % len(columns[0])
    lo, hi = columns[0][j], columns[1][j]
    return (
        f"input value {float(x[idx])!r} at index {idx} is outside input column {j}'s declared domain "
        f"[{lo}, {hi}] (the range of that signal in the training data, widened by the export's margin); "
        "clip or scale the input, or re-export with a wider --domain"
    )
