"""`tickformer export` and `tickformer inspect`: happy paths and one-line errors (exit 1)."""

from __future__ import annotations

import json

import pytest

from tickformer.cli import main
from tickformer.model import init_params, preset
from tickformer.model.checkpoint import save_checkpoint


@pytest.fixture
def ckpt(tmp_path):
    cfg = preset("tiny")
    return save_checkpoint(tmp_path / "ckpt", cfg, init_params(cfg, 0), {"task": "test"})


def test_export_then_inspect(ckpt, tmp_path, capsys):
    out = tmp_path / "art"
    assert main(["export", str(ckpt), "--out", str(out), "--max-len", "8", "--domain=-3:3"]) == 0
    said = capsys.readouterr().out
    assert "exported" in said and "max_len 8" in said and "tolerance" in said
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    for words in (
        "step.onnx",
        "k_cache.1 float32[1, 2, 8, 8]",
        "x float32[1, T, 3]",
        "inputs in [-3.0, 3.0]",
        "step:ort_vs_numpy",
        "atol",
    ):
        assert words in text
    assert main(["inspect", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_len"] == 8


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--max-len", "99"], "--max-len 99 must be an integer in 1..16"),
        (["--opset", "12"], "--opset 12 is not supported"),
        (["--domain", "3:-3"], "is empty"),
        (["--batch", "0"], "--batch 0"),
    ],
)
def test_export_errors_are_one_line(ckpt, tmp_path, capsys, argv, words):
    assert main(["export", str(ckpt), "--out", str(tmp_path / "art"), *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "art").exists()


def test_inspect_refuses_a_tampered_artifact(ckpt, tmp_path, capsys):
    out = tmp_path / "art"
    assert main(["export", str(ckpt), "--out", str(out), "--max-len", "4"]) == 0
    with open(out / "step.onnx", "ab") as handle:
        handle.write(b"\0")
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 1
    assert "step.onnx has" in capsys.readouterr().err


def test_export_missing_checkpoint(tmp_path, capsys):
    assert main(["export", str(tmp_path / "nope"), "--out", str(tmp_path / "art")]) == 1
    assert "does not exist" in capsys.readouterr().err
