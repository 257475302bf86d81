"""`tickformer log` and `tickformer train --data` end to end: a logged plant trained on, its
checkpoint exported and stepped in the data's units by a Session and the generated C; bad input
is one line, exit non-zero, nothing written."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tickformer.cli import main
from tickformer.control.tanks import TwoTanks, log_runs
from tickformer.model import forecast as F
from tickformer.model.checkpoint import load_checkpoint
from tickformer.model.series import TimeSeries

ARGS = [
    "--inputs",
    "pump",
    "--outputs",
    "level1,level2",
    "--episode",
    "run",
    "--time",
    "time",
    "--horizon",
    "3",
]


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "tanks.parquet"
    assert main(["log", "tanks", "--out", str(path), "--runs", "4", "--rows", "400", "--seed", "1"]) == 0
    return path


@pytest.fixture(scope="module")
def trained(logged, tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "ckpt"
    code = main(["train", "--data", str(logged), *ARGS, "--steps", "40", "--quiet", "--out", str(out)])
    assert code == 0
    return out


def test_log_writes_what_the_plant_simulates(logged):
    ts = TimeSeries.from_file(
        logged, inputs=["pump"], outputs=["level1", "level2"], episode="run", time="time"
    )
    again = log_runs(TwoTanks(), runs=4, rows=400, seed=1)
    np.testing.assert_array_equal(np.asarray(ts.values)[:, 2], again["level2 [cm]"].astype(np.float32))
    assert len(ts.runs) == 4 and ts.sample_period == 1.0
    assert [c.unit for c in ts.columns] == ["V", "cm", "cm"]


def test_train_on_data_writes_metrics_with_baselines_and_the_signals(trained, capsys):
    ckpt = load_checkpoint(trained)
    meta = ckpt.meta
    assert [c["name"] for c in meta["signals"]["inputs"]] == ["pump", "level1", "level2"]
    assert [c["unit"] for c in meta["signals"]["inputs"]] == ["V", "cm", "cm"]
    assert len(meta["signals"]["outputs"]) == 6 and meta["horizon"] == 3
    lo, hi = meta["input_domain"]
    for col in meta["signals"]["inputs"]:
        assert lo <= col["domain"][0] < col["min"] <= col["max"] < col["domain"][1] <= hi
    held = json.loads((trained / "metrics.json").read_text())["held_out"]
    assert set(held["rmse"]) == {"model", "persistence", "arx", "n4sid"}
    assert set(held["rmse"]["arx"]) == {"level1", "level2"} and len(held["rmse"]["arx"]["level1"]) == 3
    assert meta["data"]["held_out_runs"] and meta["data"]["train_runs"]
    assert ckpt.config.d_in == 3 and ckpt.config.d_out == 6


def test_a_session_steps_a_held_out_run_in_the_data_units(trained, tmp_path):
    """The exported artifact, stepped tick by tick on raw values, returns the deltas y_{t+h} - y_t
    in the data's units that the folded model computes (model.forecast.predict_run)."""
    import tickformer.codegen  # noqa: F401  (the c backend builds through codegen when it is loaded)
    from tickformer import runtime
    from tickformer.export.writer import export_artifact

    ckpt = load_checkpoint(trained)
    art = export_artifact(trained, tmp_path / "art")
    values = np.asarray(
        TimeSeries.from_file(
            ckpt.meta["data"]["data"],
            inputs=["pump"],
            outputs=["level1", "level2"],
            episode="run",
            time="time",
        ).values
    )
    a, b = ckpt.meta["data"]["held_out_runs"][0]
    b = a + 150
    want = F.predict_run(ckpt.params, ckpt.config, values, (a, b))
    backends = ["ort", "numpy"] + (["c"] if shutil.which("cc") or shutil.which("gcc") else [])
    for backend in backends:
        with runtime.load(art, backend=backend) as s:
            got = np.stack(
                [s.step(values[t][None, None, :].astype(np.float32))[0, 0].copy() for t in range(a, b)]
            )
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=backend)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--inputs", "pmp"], "no column 'pmp' for --inputs; the columns are"),
        (["--episode", "nope"], "no column 'nope' for --episode"),
        (["--horizon", "0"], "--horizon 0 must be a whole number >= 1"),
        (["--memory-budget", "0.0000001"], "over the memory budget"),
        (["--task", "pendulum"], "give --task or --data, not both"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(logged, tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    args = dict(zip(ARGS[::2], ARGS[1::2]))
    for flag, value in zip(extra[::2], extra[1::2]):
        args[flag] = value
    argv = [
        "train",
        "--data",
        str(logged),
        *[x for kv in args.items() for x in kv],
        "--steps",
        "5",
        "--out",
        str(out),
    ]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_data_flags_without_data_are_refused(capsys):
    assert main(["train", "--task", "pendulum", "--horizon", "3", "--out", "/tmp/never-x"]) != 0
    assert "--horizon and --drop-nan are for --data FILE" in capsys.readouterr().err


def test_log_refuses_an_unknown_plant_and_a_bad_suffix(tmp_path, capsys):
    assert main(["log", "nope", "--out", str(tmp_path / "x.csv")]) != 0
    assert "unknown plant 'nope'; choose one of tanks" in capsys.readouterr().err
    assert main(["log", "tanks", "--out", str(tmp_path / "x.txt")]) != 0
    assert "give a .csv or .parquet file name" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
