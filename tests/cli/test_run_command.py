"""`tickformer run` leaves the input checks to the session (before, the command repeated the
session's shape and length check, and its copy refused a windowed artifact's stream past
max_len, which the session itself slides over)."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer import runtime
from tickformer.cli import main
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset


@pytest.fixture(scope="module")
def windowed_art(tmp_path_factory):
    cfg = preset("tiny").replace(window=4, max_len=8)
    art = tmp_path_factory.mktemp("windowed") / "art"
    export_params(cfg, init_params(cfg, 0), art, lengths=[1, 8])
    return art


def test_a_windowed_stream_longer_than_max_len_runs(windowed_art, tmp_path, capsys):
    x = np.random.default_rng(0).uniform(-1, 1, (30, 3)).astype(np.float32)  # T = 30 > max_len 8
    np.save(tmp_path / "in.npy", x)
    argv = [
        "run",
        str(windowed_art),
        "--input",
        str(tmp_path / "in.npy"),
        "--output",
        str(tmp_path / "o.npy"),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    with runtime.load(windowed_art, backend="numpy") as s:
        want = np.concatenate([s.step(x[None, t : t + 1]).copy() for t in range(30)], axis=1)
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), want, atol=1e-4)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (np.zeros((4, 5), np.float32), "(shape (1, 4, 5)), position 0: step input must be"),
        (np.zeros(3, np.float32), "is not a sequence [1, T, 3]"),
        (np.full((2, 3), 99.0, np.float32), "outside the declared domain"),
    ],
    ids=["width", "1-D", "domain"],
)
def test_the_sessions_error_names_the_file_and_position(windowed_art, tmp_path, capsys, data, words):
    np.save(tmp_path / "in.npy", data)
    assert main(["run", str(windowed_art), "--input", str(tmp_path / "in.npy")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "in.npy" in err and words in err, err
