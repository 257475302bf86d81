"""Reading a user's logged time series (model/series.py): the three formats agree, runs split by
episode or time gaps, units from headers and Parquet metadata, and every bad input is one
DataError naming the column or the row and the fix."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tickformer.errors import DataError
from tickformer.model import series as S
from tickformer.model.series import TimeSeries


def _columns(runs=3, rows=50, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = runs * rows
    return {
        "t [s]": np.tile(np.arange(rows) * 0.5, runs),
        "run": np.repeat(np.arange(runs), rows),
        "u [V]": rng.normal(size=n),
        "y [cm]": rng.normal(size=n),
        "z": rng.normal(size=n),
    }


def _write(tmp_path, cols, kind: str):
    path = tmp_path / f"d.{kind}"
    if kind == "csv":
        pacsv.write_csv(pa.table(cols), path)
    elif kind == "parquet":
        pq.write_table(pa.table(cols), path)
    else:
        np.savez(path, **cols)
    return path


KW = dict(inputs=["u"], outputs=["y", "z"], episode="run", time="t")


@pytest.mark.parametrize("kind", ["csv", "parquet", "npz"])
def test_the_three_formats_read_the_same_series(tmp_path, kind):
    cols = _columns()
    ts = TimeSeries.from_file(_write(tmp_path, cols, kind), **KW)
    want = np.stack([cols["u [V]"], cols["y [cm]"], cols["z"]], axis=1).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ts.values), want)
    assert ts.runs == ((0, 50), (50, 100), (100, 150))
    assert [c.name for c in ts.columns] == ["u", "y", "z"]
    assert [c.unit for c in ts.columns] == (["V", "cm", None] if kind != "npz" else ["V", "cm", None])
    assert ts.sample_period == 0.5


def test_from_arrays_matches_from_file(tmp_path):
    cols = _columns()
    a = TimeSeries.from_arrays(cols, **KW)
    b = TimeSeries.from_file(_write(tmp_path, cols, "npz"), **KW)
    np.testing.assert_array_equal(np.asarray(a.values), np.asarray(b.values))
    assert a.runs == b.runs


def test_parquet_field_metadata_gives_the_unit(tmp_path):
    cols = _columns()
    schema = pa.schema(
        [pa.field(k, pa.float64(), metadata={"unit": "N m"} if k == "z" else None) for k in cols]
    )
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({k: pa.array(v, pa.float64()) for k, v in cols.items()}, schema=schema), path)
    ts = TimeSeries.from_file(path, **KW)
    assert ts.outputs[1].unit == "N m"


def test_time_gaps_split_runs_and_a_window_never_spans_them():
    t = np.concatenate([np.arange(40), 100 + np.arange(30), 200 + np.arange(20)]).astype(float)
    ts = TimeSeries.from_arrays(
        {"t": t, "u": np.ones(90), "y": np.arange(90.0)}, inputs=["u"], outputs=["y"], time="t"
    )
    assert ts.runs == ((0, 40), (40, 70), (70, 90))


def test_irregular_sampling_is_refused_with_its_row():
    t = np.arange(100, dtype=float)
    t[60:] += 0.2  # one step of 1.2 periods: neither regular nor a gap
    with pytest.raises(
        DataError, match=r"row 61: time step 1\.2 differs from the sample period 1 .*resample"
    ):
        TimeSeries.from_arrays({"t": t, "u": t, "y": t}, inputs=["u"], outputs=["y"], time="t")


def test_time_going_back_within_a_run_is_refused():
    t = np.arange(100, dtype=float)
    t[30] = 5.0
    with pytest.raises(DataError, match="row 31: time 5.0 does not increase"):
        TimeSeries.from_arrays({"t": t, "u": t, "y": t}, inputs=["u"], outputs=["y"], time="t")


def test_a_missing_column_lists_the_columns():
    with pytest.raises(DataError, match=r"no column 'pmp' for --inputs; the columns are \['t \[s\]', 'run'"):
        TimeSeries.from_arrays(_columns(), inputs=["pmp"], outputs=["y"])


def test_a_non_numeric_csv_value_names_its_row_and_line(tmp_path):
    cols = {k: v.astype(object) for k, v in _columns().items()}
    cols["y [cm]"][41] = "abc"
    path = tmp_path / "bad.csv"
    pacsv.write_csv(pa.table({k: pa.array([str(x) for x in v]) for k, v in cols.items()}), path)
    with pytest.raises(DataError, match=r"row 42 \(line 43\): column 'y \[cm\]' holds 'abc', not a number"):
        TimeSeries.from_file(path, **KW)


def test_nan_names_the_row_and_drop_nan_drops_it_and_ends_the_run():
    cols = _columns(runs=2, rows=40)
    cols["z"][10] = np.nan
    with pytest.raises(DataError, match=r"row 11: 'z' is missing; .*--drop-nan"):
        TimeSeries.from_arrays(cols, **KW)
    cols = _columns(runs=2, rows=40)
    cols["z"][10] = np.nan
    kw = {k: v for k, v in KW.items() if k != "time"}  # without time: the drop alone splits the run
    ts = TimeSeries.from_arrays(cols, drop_nan=True, **kw)
    assert ts.rows == 79 and ts.dropped_rows == 1
    assert ts.runs == ((0, 10), (10, 39), (39, 79))
    cols["u [V]"][5] = np.inf
    with pytest.raises(DataError, match=r"row 6: 'u \[V\]' is inf, not finite"):
        TimeSeries.from_arrays(cols, **kw)


def test_duplicate_columns_are_refused(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("u,y,u\n1,2,3\n4,5,6\n")
    with pytest.raises(DataError, match=r"duplicate column names \['u'\]"):
        TimeSeries.from_file(path, inputs=["u"], outputs=["y"])


def test_episodes_must_be_contiguous():
    cols = _columns(runs=2, rows=10)
    cols["run"] = np.array([0] * 5 + [1] * 10 + [0] * 5)
    with pytest.raises(DataError, match=r"rows of episode 0 are not contiguous \(again at row 16\); sort"):
        TimeSeries.from_arrays(cols, inputs=["u"], outputs=["y"], episode="run")


def test_over_the_memory_budget_is_refused_before_and_while_reading(tmp_path):
    cols = _columns(runs=3, rows=100)
    need = 300 * 2 * 4
    with pytest.raises(
        DataError, match=r"300 rows x 2 columns need .* over the memory budget .*--memory-budget"
    ):
        TimeSeries.from_file(
            _write(tmp_path, cols, "parquet"), inputs=["u"], outputs=["y"], memory_budget=need - 1
        )
    with pytest.raises(DataError, match=r"at least .* over the memory budget"):
        TimeSeries.from_file(
            _write(tmp_path, cols, "csv"), inputs=["u"], outputs=["y"], memory_budget=need - 1
        )
    assert (
        TimeSeries.from_file(
            _write(tmp_path, cols, "csv"), inputs=["u"], outputs=["y"], memory_budget=need
        ).rows
        == 300
    )


def test_wrong_files_and_columns_are_one_line_errors(tmp_path):
    with pytest.raises(DataError, match="unsupported file type .txt; give a .csv, .parquet or .npz"):
        TimeSeries.from_file(tmp_path / "x.txt", inputs=["u"], outputs=["y"])
    with pytest.raises(DataError, match="no such file"):
        TimeSeries.from_file(tmp_path / "x.csv", inputs=["u"], outputs=["y"])
    with pytest.raises(DataError, match="both a signal and --episode"):
        TimeSeries.from_arrays(_columns(), inputs=["u"], outputs=["y"], episode="u")
    with pytest.raises(DataError, match="named twice"):
        TimeSeries.from_arrays(_columns(), inputs=["u"], outputs=["u"])
    with pytest.raises(DataError, match="not numeric"):
        TimeSeries.from_arrays({"u": np.array(["a", "b"]), "y": np.zeros(2)}, inputs=["u"], outputs=["y"])
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="not a readable CSV"):
        TimeSeries.from_file(tmp_path / "empty.csv", inputs=["u"], outputs=["y"])


def test_large_data_is_memory_mapped_and_equal(tmp_path, monkeypatch):
    """Over IN_MEMORY_BYTES the float32 rows go to a temporary file and come back as a memory map
    (the file's rows are never held twice); the values are the in-memory ones."""
    cols = _columns(runs=4, rows=3000)
    path = _write(tmp_path, cols, "csv")
    small = TimeSeries.from_file(path, **KW)
    monkeypatch.setattr(S, "IN_MEMORY_BYTES", 1000)
    monkeypatch.setattr(S, "BLOCK_BYTES", 1 << 14)  # many batches
    mapped = TimeSeries.from_file(path, **KW)
    assert isinstance(mapped.values, np.memmap) and not isinstance(small.values, np.memmap)
    np.testing.assert_array_equal(np.asarray(mapped.values), np.asarray(small.values))
    assert mapped.runs == small.runs
    np.testing.assert_array_equal(mapped.column_ranges(), small.column_ranges())
