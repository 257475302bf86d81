"""`tickformer run ART --backend B --input FILE.npy [--output OUT.npy]`."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer import runtime
from tickformer.cli import main


@pytest.mark.parametrize("backend", ["ort", "numpy"])
def test_run_writes_the_step_outputs(tiny_art, tmp_path, capsys, backend):
    path, _ = tiny_art
    x = np.random.default_rng(0).uniform(-1, 1, (10, 3))  # float64 [T, d_in]: converted, batch added
    np.save(tmp_path / "in.npy", x)
    assert (
        main(
            [
                "run",
                str(path),
                "--backend",
                backend,
                "--input",
                str(tmp_path / "in.npy"),
                "--output",
                str(tmp_path / "out.npy"),
            ]
        )
        == 0
    )
    out = np.load(tmp_path / "out.npy")
    want = runtime.load(path, backend="numpy").run(x[None].astype(np.float32))
    assert out.shape == (1, 10, 2) and np.allclose(out, want, atol=1e-4)
    assert "p50" in capsys.readouterr().out


def test_run_reports_bad_input_in_one_line(tiny_art, tmp_path, capsys):
    path, _ = tiny_art
    x = np.zeros((1, 4, 3))
    x[0, 2, 1] = np.nan
    np.save(tmp_path / "nan.npy", x)
    assert main(["run", str(path), "--input", str(tmp_path / "nan.npy")]) == 1
    err = capsys.readouterr().err
    assert "non-finite" in err and "(0, 0, 1)" in err and err.count("\n") == 1
    np.save(tmp_path / "long.npy", np.zeros((1, 17, 3)))
    assert main(["run", str(path), "--input", str(tmp_path / "long.npy")]) == 1
    assert "max_len 16; re-export with --max-len 17" in capsys.readouterr().err


def test_run_generates_for_seq2seq(seq2seq_art, tmp_path, capsys):
    path, _ = seq2seq_art
    np.save(tmp_path / "src.npy", np.array([1, 2, 3, 4]))
    assert (
        main(
            [
                "run",
                str(path),
                "--input",
                str(tmp_path / "src.npy"),
                "--bos",
                "1",
                "--max-new",
                "5",
                "--output",
                str(tmp_path / "g.npy"),
            ]
        )
        == 0
    )
    got = np.load(tmp_path / "g.npy")
    want = runtime.load(path, backend="numpy").generate(np.array([[1, 2, 3, 4]]), 5, bos=1)
    assert np.array_equal(got, want)
