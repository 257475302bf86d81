"""A user's logged time series, read and checked: the columns a model takes (inputs, then outputs),
split into runs, as float32, without holding the file twice.

    TimeSeries.from_file(path, inputs=[...], outputs=[...], episode=None, time=None)   .csv .parquet .npz
    TimeSeries.from_arrays({"u": u, "y": y, ...}, inputs=[...], outputs=[...], ...)

Rows are read in columnar batches (pyarrow for CSV and Parquet, the `data` extra) and written as
float32 to a temporary file that is memory-mapped afterwards (`values`, [rows, inputs + outputs]):
the peak memory is one batch, not the file, and what training touches of the map is paged in on
demand. Small data (under `IN_MEMORY_BYTES`) stays an ordinary array.

Runs: consecutive rows with the same value of the `episode` column are one run (a run must not
come back later: its rows must be contiguous); with a `time` column instead, a step over 1.5 sample
periods starts a new run; with neither, the file is one run. The sample period is the median step
of the time column; a step that is neither within 1% of it nor a gap (> 1.5 periods) is irregular
sampling and is refused with its row: resampling is the user's choice, not ours to guess.

Every problem is a `DataError` naming the column or the row and the fix, raised before anything is
returned (a half-read series is never handed on). Rows are numbered from 1, the header not
counted (in a CSV file, data row r is line r + 1). Not real-time code.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from tickformer.errors import DataError

SUFFIXES = (".csv", ".parquet", ".npz")
BATCH_ROWS = 1 << 16  # rows per columnar batch
BLOCK_BYTES = 1 << 22  # pyarrow CSV block size (bytes)
IN_MEMORY_BYTES = 64 << 20  # below this the float32 values stay an ordinary array
DEFAULT_MEMORY_BUDGET = 4 << 30  # bytes of float32 values; --memory-budget raises it
GAP_PERIODS = 1.5  # a time step over this many sample periods starts a new run
PERIOD_TOLERANCE = 0.01  # a step within 1% of the sample period is regular
_UNIT = re.compile(r"^(?P<name>.*?)\s*[\[(](?P<unit>[^\])]+)[\])]\s*$")


@dataclass(frozen=True)
class Column:
    """One signal: its name in the file, its base name (without a unit suffix) and its unit."""

    header: str
    name: str
    unit: str | None

    @classmethod
    def parse(cls, header: str, unit: str | None = None) -> "Column":
        """`torque [N m]` or `torque (N m)`: name `torque`, unit `N m`; a unit given (Parquet field
        metadata) wins over none in the header."""
        m = _UNIT.match(header)
        if m is not None:
            return cls(header, m.group("name"), unit or m.group("unit").strip())
        return cls(header, header, unit)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "header": self.header, "unit": self.unit}


@dataclass
class TimeSeries:
    """The checked series: `values` [rows, n_in + n_out] float32 (inputs, then outputs, in the
    order asked), `runs` [(start, stop)] row ranges, the columns, and where they came from."""

    values: np.ndarray
    inputs: tuple[Column, ...]
    outputs: tuple[Column, ...]
    runs: tuple[tuple[int, int], ...]
    source: dict[str, Any] = field(default_factory=dict)
    sample_period: float | None = None
    dropped_rows: int = 0

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.inputs + self.outputs

    @property
    def rows(self) -> int:
        return int(self.values.shape[0])

    def column_ranges(self) -> np.ndarray:
        """[C, 2] min and max of every column over all rows (in batches: a memory map stays mapped)."""
        lo = np.full(self.values.shape[1], np.inf)
        hi = np.full(self.values.shape[1], -np.inf)
        for a in range(0, self.rows, BATCH_ROWS):
            block = self.values[a : a + BATCH_ROWS]
            lo = np.minimum(lo, block.min(axis=0))
            hi = np.maximum(hi, block.max(axis=0))
        return np.stack([lo, hi], axis=1)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        inputs: Sequence[str],
        outputs: Sequence[str],
        episode: str | None = None,
        time: str | None = None,
        drop_nan: bool = False,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ) -> "TimeSeries":
        """Read `path` (.csv, .parquet, .npz), keeping the named columns (a column may be named
        by its header or by its base name without the unit suffix)."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in SUFFIXES:
            raise DataError(
                f"{path}: unsupported file type {suffix or '(none)'}; give a .csv, .parquet or .npz file"
            )
        if not path.is_file():
            raise DataError(f"{path}: no such file; check the path given to --data")
        if suffix == ".npz":
            return _from_npz(path, inputs, outputs, episode, time, drop_nan, memory_budget)
        reader = _ArrowReader(path, suffix)
        return _assemble(reader, inputs, outputs, episode, time, drop_nan, memory_budget)

    @classmethod
    def from_arrays(
        cls,
        arrays: Mapping[str, Any],
        *,
        inputs: Sequence[str],
        outputs: Sequence[str],
        episode: str | None = None,
        time: str | None = None,
        units: Mapping[str, str] | None = None,
        drop_nan: bool = False,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ) -> "TimeSeries":
        """Named 1-D arrays of equal length (numbers; the episode column may hold any values)."""
        reader = _ArraysReader(dict(arrays), dict(units or {}), "arrays")
        return _assemble(reader, inputs, outputs, episode, time, drop_nan, memory_budget)


# ---------------------------------------------------------------------------------------------
# readers: the header, then batches of the named columns as numpy arrays
# ---------------------------------------------------------------------------------------------


class _ArrowReader:
    def __init__(self, path: Path, suffix: str) -> None:
        try:
            import pyarrow  # noqa: F401
        except ImportError:  # pragma: no cover - the lock installs it
            raise DataError(
                "reading CSV or Parquet needs pyarrow: pip install 'tickformer[data]' (or give an .npz file)"
            ) from None
        self.path, self.suffix = path, suffix
        self.what = str(path)
        self.units: dict[str, str] = {}
        if suffix == ".csv":
            import pyarrow.csv as pacsv

            try:
                with pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES)) as r:
                    self.headers = list(r.schema.names)
            except Exception as exc:  # pyarrow's errors for an empty or malformed file
                raise DataError(
                    f"{path}: not a readable CSV file ({_first_line(exc)}); check the file"
                ) from None
            self.num_rows: int | None = None
        else:
            import pyarrow.parquet as pq

            try:
                pf = pq.ParquetFile(path)
            except Exception as exc:
                raise DataError(
                    f"{path}: not a readable Parquet file ({_first_line(exc)}); check the file"
                ) from None
            schema = pf.schema_arrow
            self.headers = list(schema.names)
            for f in schema:
                meta = f.metadata or {}
                unit = meta.get(b"unit") or meta.get(b"units")
                if unit:
                    self.units[f.name] = unit.decode("utf-8", "replace")
            self.types = {f.name: f.type for f in schema}
            self.num_rows = pf.metadata.num_rows

    def batches(self, numeric: Sequence[str], other: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        """Batches of the columns. pyarrow's default allocator keeps what it frees for reuse (about
        450 MB after a 10-million-row file, measured): reading goes through the system allocator,
        which returns it, and the default is restored afterwards."""
        import pyarrow as pa

        previous = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())
        try:
            yield from self._batches(numeric, other)
        finally:
            pa.set_memory_pool(previous)

    def _batches(self, numeric: Sequence[str], other: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        import pyarrow as pa

        if self.suffix == ".csv":
            import pyarrow.csv as pacsv

            types = {c: pa.float64() for c in numeric}
            types.update({c: pa.string() for c in other})
            opts = pacsv.ConvertOptions(include_columns=[*numeric, *other], column_types=types)
            try:
                with pacsv.open_csv(
                    self.path, read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES), convert_options=opts
                ) as r:
                    for batch in r:
                        yield {c: _to_numpy(batch.column(c)) for c in (*numeric, *other)}
            except pa.ArrowInvalid as exc:
                raise _csv_conversion_error(self.path, self.headers, exc) from None
        else:
            import pyarrow.parquet as pq

            for c in numeric:
                t = self.types[c]
                if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
                    raise DataError(
                        f"{self.path}: column {c!r} is not numeric (Parquet type {t}); give numeric columns "
                        f"to --inputs/--outputs"
                    )
            # a small read buffer and no pre-buffering: a row group is read in pieces, not whole
            # (a 1-million-row group: 185 MB peak instead of 510, measured)
            pf = pq.ParquetFile(self.path, buffer_size=1 << 20, pre_buffer=False)
            for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=[*numeric, *other]):
                out = {}
                for c in numeric:
                    out[c] = _to_numpy(batch.column(c).cast(pa.float64()))
                for c in other:
                    out[c] = _to_numpy(batch.column(c))
                yield out


class _ArraysReader:
    def __init__(self, arrays: dict[str, Any], units: dict[str, str], what: str) -> None:
        self.what = what
        self.headers = list(arrays)
        self.units = units
        lengths = {}
        for name, a in arrays.items():
            a = np.asarray(a)
            if a.ndim != 1:
                raise DataError(f"{what}: {name!r} has shape {a.shape}; give one 1-D array per column")
            arrays[name] = a
            lengths[name] = a.shape[0]
        if len(set(lengths.values())) > 1:
            raise DataError(
                f"{what}: the columns have different lengths {lengths}; give equally long columns"
            )
        self.arrays = arrays
        self.num_rows = next(iter(lengths.values()), 0)

    def batches(self, numeric: Sequence[str], other: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        for c in numeric:
            a = self.arrays[c]
            if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
                raise DataError(f"{self.what}: column {c!r} is not numeric (dtype {a.dtype}); give numbers")
        for a in range(0, self.num_rows, BATCH_ROWS):
            out = {c: self.arrays[c][a : a + BATCH_ROWS].astype(np.float64) for c in numeric}
            out.update({c: self.arrays[c][a : a + BATCH_ROWS] for c in other})
            yield out


def _from_npz(path: Path, inputs, outputs, episode, time, drop_nan, budget) -> TimeSeries:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except ValueError as exc:  # object arrays need pickle: refused
        raise DataError(f"{path}: {exc}; save plain numeric arrays (np.savez with numbers)") from None
    except Exception as exc:
        raise DataError(f"{path}: not a readable .npz file ({_first_line(exc)}); check the file") from None
    reader = _ArraysReader(arrays, {}, str(path))
    return _assemble(reader, inputs, outputs, episode, time, drop_nan, budget)


def _to_numpy(col: Any) -> np.ndarray:
    return col.to_numpy(zero_copy_only=False)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _csv_conversion_error(path: Path, headers: Sequence[str], exc: BaseException) -> DataError:
    """pyarrow names the column (by its index in the file) and the value, not the row: find the
    row by reading that column as text (the error path only)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    m = re.search(r"column #(\d+)", str(exc))
    value = re.search(r"invalid value '([^']*)'", str(exc))
    col = headers[int(m.group(1))] if m and int(m.group(1)) < len(headers) else None
    if col is None:
        return DataError(f"{path}: {_first_line(exc)}; every --inputs/--outputs column must hold numbers")
    opts = pacsv.ConvertOptions(include_columns=[col], column_types={col: pa.string()})
    row = 0
    with pacsv.open_csv(
        path, read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES), convert_options=opts
    ) as r:
        for batch in r:
            for text in batch.column(col).to_pylist():
                row += 1
                if text is not None and text.strip() != "":
                    try:
                        float(text)
                    except ValueError:
                        return DataError(
                            f"{path}: row {row} (line {row + 1}): column {col!r} holds {text!r}, not a number; "
                            f"fix the value or drop the row"
                        )
    bad = value.group(1) if value else "?"
    return DataError(f"{path}: column {col!r} holds {bad!r}, not a number; fix the value or drop the row")


# ---------------------------------------------------------------------------------------------
# assembly: resolve the columns, stream the rows into float32, split into runs, check
# ---------------------------------------------------------------------------------------------


def _resolve(reader: Any, wanted: Sequence[str], what: str) -> list[str]:
    headers = reader.headers
    dups = sorted({h for h in headers if headers.count(h) > 1})
    if dups:
        raise DataError(
            f"{reader.what}: duplicate column names {dups}; rename them so each column is named once"
        )
    by_base: dict[str, list[str]] = {}
    for h in headers:
        by_base.setdefault(Column.parse(h).name, []).append(h)
    out = []
    for name in wanted:
        if name in headers:
            out.append(name)
        elif len(by_base.get(name, [])) == 1:
            out.append(by_base[name][0])
        else:
            raise DataError(
                f"{reader.what}: no column {name!r} for {what}; the columns are {headers} (a name without "
                f"its [unit] suffix matches too)"
            )
    return out


def _assemble(reader, inputs, outputs, episode, time, drop_nan, budget) -> TimeSeries:
    if not inputs or not outputs:
        raise DataError(
            "give at least one input column and one output column (--inputs COL,.. --outputs COL,..)"
        )
    ins = _resolve(reader, inputs, "--inputs")
    outs = _resolve(reader, outputs, "--outputs")
    signal = ins + outs
    if len(set(signal)) != len(signal):
        raise DataError(f"a column is named twice in --inputs/--outputs ({signal}); name each column once")
    ep = _resolve(reader, [episode], "--episode")[0] if episode is not None else None
    tm = _resolve(reader, [time], "--time")[0] if time is not None else None
    for extra in (ep, tm):
        if extra is not None and extra in signal:
            raise DataError(f"column {extra!r} is both a signal and --episode/--time; it can be only one")
    n_cols = len(signal)
    if reader.num_rows is not None and reader.num_rows * n_cols * 4 > budget:
        raise DataError(_over_budget(reader.what, reader.num_rows, n_cols, budget))
    numeric = signal + ([tm] if tm is not None else [])
    other = [ep] if ep is not None else []
    sink = _Sink(n_cols)
    rows = kept = 0
    run_breaks: list[int] = []  # kept-row indices where a run starts (besides 0)
    ep_seen: dict[Any, int] = {}
    last_ep: Any = object()
    times: list[np.ndarray] = []
    dropped = 0
    try:
        for batch in reader.batches(numeric, other):
            block = np.stack([batch[c] for c in signal], axis=1)  # [b, C] float64
            b = block.shape[0]
            bad = ~np.isfinite(block).all(axis=1)
            if tm is not None:
                bad |= ~np.isfinite(batch[tm])
            if bad.any():
                if not drop_nan:
                    i = int(np.flatnonzero(bad)[0])
                    cols = [c for c in numeric if not math.isfinite(float(batch[c][i]))]
                    v = float(batch[cols[0]][i])
                    what = "missing" if math.isnan(v) else f"{v}, not finite"
                    raise DataError(
                        f"{reader.what}: row {rows + i + 1}: {cols[0]!r} is {what}; fix the data, or pass "
                        f"--drop-nan to drop such rows (each ends its run)"
                    )
                # a dropped row ends its run: the rows around it are not consecutive samples
                for i in np.flatnonzero(bad):
                    run_breaks.append(kept + int(i) - int(np.count_nonzero(bad[:i])))
                dropped += int(bad.sum())
            good = ~bad
            if ep is not None:
                labels = np.asarray(batch[ep])[good]
                for i, lab in enumerate(labels.tolist()):
                    if lab != last_ep:
                        if lab in ep_seen:
                            raise DataError(
                                f"{reader.what}: the rows of episode {lab!r} are not contiguous (again at row "
                                f"{rows + int(np.flatnonzero(good)[i]) + 1}); sort the file by --episode"
                            )
                        ep_seen[lab] = kept + i
                        if kept + i > 0:
                            run_breaks.append(kept + i)
                        last_ep = lab
            if tm is not None:
                times.append(np.asarray(batch[tm], dtype=np.float64)[good])
            n = int(good.sum())
            if (kept + n) * n_cols * 4 > budget:
                raise DataError(_over_budget(reader.what, kept + n, n_cols, budget, more=True))
            sink.write(block[good].astype(np.float32))
            rows += b
            kept += n
        values = sink.finish()
    except BaseException:
        sink.discard()
        raise
    period = None
    if tm is not None:
        t = np.concatenate(times) if times else np.zeros(0)
        period, gaps = _time_breaks(t, sorted(set(run_breaks)), reader.what, dropped > 0)
        run_breaks += gaps
    bounds = [0, *sorted(set(b for b in run_breaks if 0 < b < kept)), kept]
    runs = tuple((a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a)
    if kept == 0:
        raise DataError(f"{reader.what}: no rows to train on; check the file (and --drop-nan)")
    units = reader.units
    return TimeSeries(
        values=values,
        inputs=tuple(Column.parse(h, units.get(h)) for h in ins),
        outputs=tuple(Column.parse(h, units.get(h)) for h in outs),
        runs=runs,
        source={"data": reader.what, "rows": rows, "episode": ep, "time": tm},
        sample_period=period,
        dropped_rows=dropped,
    )


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} bytes"


def _over_budget(what: str, rows: int, cols: int, budget: int, more: bool = False) -> str:
    need = rows * cols * 4
    return (
        f"{what}: {'at least ' if more else ''}{rows:,} rows x {cols} columns need {_size(need)} as float32, over "
        f"the memory budget of {_size(budget)}; raise --memory-budget (GiB), or train on fewer rows or columns"
    )


def _time_breaks(t: np.ndarray, breaks: list[int], what: str, dropped: bool) -> tuple[float, list[int]]:
    """The sample period (median step within runs) and the rows where a gap starts a new run;
    irregular steps and time going backwards are refused with their row."""
    if t.size < 2:
        return math.nan, []
    step = np.diff(t)  # step[i] = t[i + 1] - t[i]
    within = np.ones(step.size, dtype=bool)
    for b in breaks:
        if 0 < b <= step.size:
            within[b - 1] = False  # the step into a new run is no sampling step
    steps = step[within]
    if steps.size == 0:
        return math.nan, []
    back = np.flatnonzero(within & (step <= 0))
    if back.size:
        i = int(back[0])
        raise DataError(
            f"{what}: row {i + 2}: time {float(t[i + 1])} does not increase (previous row: {float(t[i])}); "
            f"sort the file by time within each run"
        )
    period = float(np.median(steps))
    gap = within & (step > GAP_PERIODS * period)
    irregular = within & ~gap & (np.abs(step - period) > PERIOD_TOLERANCE * period)
    if irregular.any():
        i = int(np.flatnonzero(irregular)[0])
        raise DataError(
            f"{what}: row {i + 2}: time step {step[i]:.6g} differs from the sample period {period:.6g} (irregular "
            f"sampling); resample the data to a fixed period first (tickformer does not guess how)"
        )
    return period, [int(i) + 1 for i in np.flatnonzero(gap)]


class _Sink:
    """float32 rows, in memory while small, else appended to an unnamed temporary file that is
    memory-mapped at the end (deleted when the map is)."""

    def __init__(self, cols: int) -> None:
        self.cols = cols
        self.parts: list[np.ndarray] = []
        self.nbytes = 0
        self.file: Any = None

    def write(self, block: np.ndarray) -> None:
        if self.file is None and self.nbytes + block.nbytes > IN_MEMORY_BYTES:
            self.file = tempfile.TemporaryFile(prefix="tickformer-series-")
            for part in self.parts:
                self.file.write(part.tobytes())
            self.parts = []
        if self.file is not None:
            self.file.write(np.ascontiguousarray(block).tobytes())
        else:
            self.parts.append(block)
        self.nbytes += block.nbytes

    def finish(self) -> np.ndarray:
        rows = self.nbytes // (4 * self.cols)
        if self.file is None:
            if not self.parts:
                return np.zeros((0, self.cols), dtype=np.float32)
            return np.concatenate(self.parts).reshape(rows, self.cols)
        self.file.flush()
        if rows == 0:  # pragma: no cover - an empty file is refused before
            return np.zeros((0, self.cols), dtype=np.float32)
        return np.memmap(self.file, dtype=np.float32, mode="r", shape=(rows, self.cols))

    def discard(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        self.parts = []
