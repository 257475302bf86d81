"""Training on a user's data, at size: reading and windowing a 1-million-row CSV beside
pandas.read_csv of the same file, and the peak resident memory of `tickformer train --data` on a
10-million-row, 8-column Parquet file against the file's float32 size (target: about 2x).

Both files are generated here (random walks under random inputs, 100 runs). The CSV comparison
is interleaved: each round reads with tickformer (TimeSeries.from_file, then the task's prepare:
the split, the statistics, the sample index) and with pandas, in turns, and the medians are
compared. The memory run is one fresh process (`tickformer train --data ... --steps 20`, its own
peak, VmHWM), beside a process that only imports the same modules. Results:
benchmarks/results/data.json, summarised by report.py in benchmarks/README.md. Not timed tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="the data extra (pyarrow) reads CSV and Parquet")
pd = pytest.importorskip("pandas", reason="pandas is the comparator (the data extra brings it)")

RESULTS = Path(__file__).resolve().parent / "results" / "data.json"
COLUMNS = 8
ROUNDS = 3
CSV_ROWS = 1_000_000
BIG_ROWS = 10_000_000
RUNS = 100
_results: dict = {}


def _columns(rows: int, seed: int, *, start: int = 0, total: int | None = None) -> dict[str, np.ndarray]:
    """Rows start .. start + rows of a file of `total` rows in RUNS equal runs."""
    rng = np.random.default_rng(seed)
    out = {"run": np.arange(start, start + rows) * RUNS // (total or rows)}
    for i in range(COLUMNS // 2):
        out[f"u{i}"] = rng.normal(size=rows).astype(np.float32)
    for i in range(COLUMNS // 2):
        out[f"y{i}"] = np.cumsum(rng.normal(size=rows)).astype(np.float32) * 0.01
    return out


def _write_csv(path: Path) -> None:
    import pyarrow.csv as pacsv

    pacsv.write_csv(pa.table(_columns(CSV_ROWS, 0)), path)


def _write_parquet(path: Path) -> None:
    """In chunks of a million rows: the generator never holds the file."""
    import pyarrow.parquet as pq

    chunk = 1_000_000
    writer = None
    for i in range(BIG_ROWS // chunk):
        table = pa.table(_columns(chunk, i, start=i * chunk, total=BIG_ROWS))
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    assert writer is not None
    writer.close()


ARGS = {"inputs": ["u0", "u1", "u2", "u3"], "outputs": ["y0", "y1", "y2", "y3"], "episode": "run"}


def test_csv_read_and_window_beside_pandas(tmp_path):
    from tickformer.model.forecast import forecast_config, forecast_task
    from tickformer.model.series import TimeSeries

    path = tmp_path / "million.csv"
    _write_csv(path)
    ours, theirs = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        series = TimeSeries.from_file(path, **ARGS)
        task = forecast_task(series, horizon=1)
        task.hooks.prepare(forecast_config(series, 1), np.random.default_rng(0))
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        frame = pd.read_csv(path)
        theirs.append(time.perf_counter() - t0)
        del series, task, frame
    _results["csv"] = {
        "rows": CSV_ROWS,
        "columns": COLUMNS + 1,
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "tickformer_read_and_window_s": ours,
        "pandas_read_csv_s": theirs,
        "median_tickformer_s": float(np.median(ours)),
        "median_pandas_s": float(np.median(theirs)),
        "ratio": float(np.median(ours) / np.median(theirs)),
        "rounds": ROUNDS,
        "interleaved": True,
    }
    _write()


# VmHWM, the peak resident memory of this process image; not getrusage's ru_maxrss, which on
# Linux carries over the forking parent's peak across exec (the pytest process's, here)
_PEAK = (
    "import json\n"
    "{body}\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
    "print(json.dumps({{'peak_rss_bytes': int(hwm) * 1024}}))\n"
)


def _peak(body: str, env: dict) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK.format(body=body)], capture_output=True, text=True, env=env, check=True
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_bytes"])


@pytest.mark.slow  # minutes: 10 million rows
def test_ten_million_rows_train_within_twice_their_float32_size(tmp_path):
    path = tmp_path / "ten_million.parquet"
    _write_parquet(path)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    imports = (
        "import numpy, pyarrow.parquet, pandas, nfoursid.nfoursid, scipy.linalg\n"
        "import tickformer.commands.train, tickformer.model.forecast, tickformer.model.series"
    )
    base = _peak(imports, env)
    t0 = time.perf_counter()
    train = (
        f"{imports}\n"
        "from tickformer.cli import main\n"
        f"code = main(['train', '--data', {str(path)!r}, '--inputs', 'u0,u1,u2,u3', '--outputs', 'y0,y1,y2,y3', "
        f"'--episode', 'run', '--steps', '20', '--quiet', '--out', {str(tmp_path / 'ckpt')!r}])\n"
        "assert code == 0, code"
    )
    peak = _peak(train, env)
    wall = time.perf_counter() - t0
    float32 = BIG_ROWS * COLUMNS * 4
    _results["memory"] = {
        "rows": BIG_ROWS,
        "columns": COLUMNS,
        "float32_bytes": float32,
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "peak_rss_bytes": peak,
        "imports_only_peak_rss_bytes": base,
        "peak_over_float32": peak / float32,
        "above_imports_over_float32": (peak - base) / float32,
        "wall_s": round(wall, 1),
        "command": "tickformer train --data ten_million.parquet --inputs u0,u1,u2,u3 --outputs y0,y1,y2,y3 "
        "--episode run --steps 20",
    }
    _write()
    assert peak > base  # the measurement measured something


def _write() -> None:
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    old.update(_results)
    old["utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(old, indent=2) + "\n")
