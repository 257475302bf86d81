"""`tickformer train` and `tickformer info` end to end (tiny step counts)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tickformer.cli import main
from tickformer.model.checkpoint import load_checkpoint


@pytest.mark.parametrize("name, count", [("paper-base", "63,082,496"), ("paper-big", "214,245,376")])
def test_info_preset_prints_paper_parameter_counts(capsys, name, count) -> None:
    assert main(["info", "--preset", name]) == 0
    out = capsys.readouterr().out
    assert f"parameters {count}" in out
    assert "d_model" in out and "vocab_size    37000" in out


def test_info_json_and_list(capsys) -> None:
    assert main(["info", "--preset", "paper-base", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parameters"] == 63_082_496 and data["config"]["n_heads"] == 8
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    big = next(line for line in out.splitlines() if line.startswith("paper-big "))
    assert big.split()[1:3] == ["214,245,376", "parameters"] and "control-hidden" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["info", "--preset", "nope"], "unknown preset 'nope'"),
        (["info", "somewhere", "--preset", "tiny"], "not both"),
        (["info", "does-not-exist"], "does not exist"),
        (["train", "--task", "nope", "--out", "x"], "unknown task 'nope'"),
        (
            [
                "train",
                "--task",
                "pendulum",
                "--preset",
                "reverse",
                "--out",
                "{tmp}/p",
                "--steps",
                "1",
                "--quiet",
            ],
            "use --preset control",
        ),
        (
            ["train", "--task", "reverse", "--out", "{tmp}", "--steps", "1", "--quiet"],
            "refusing to overwrite",
        ),
        (
            ["train", "--task", "reverse", "--out", "{tmp}/r", "--steps", "0", "--quiet"],
            "--steps 0 must be a positive integer",
        ),
    ],
)
def test_user_errors_print_one_line_and_exit_1(capsys, tmp_path, argv, message) -> None:
    (tmp_path / "precious.txt").write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (tmp_path / "precious.txt").read_text() == "x"


@pytest.mark.parametrize("task", ["reverse", "pendulum"])
def test_train_then_info(capsys, tmp_path, task) -> None:
    out_dir = tmp_path / task
    assert (
        main(["train", "--task", task, "--out", str(out_dir), "--steps", "2", "--seed", "3", "--quiet"]) == 0
    )
    printed = capsys.readouterr().out
    assert f"trained {task}" in printed and "target" in printed and "NOT met" in printed  # 2 steps
    ckpt = load_checkpoint(out_dir)
    assert ckpt.meta["task"] == task and ckpt.meta["seed"] == 3 and ckpt.meta["steps"] == 2
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert metrics["settings"]["steps"] == 2 and metrics["held_out"]["target_met"] is False
    assert main(["info", str(out_dir)]) == 0
    info = capsys.readouterr().out
    assert "SHA-256 ok" in info and f"task {task}" in info and "metrics.json" in info
    # --require-target turns a missed target into a non-zero exit
    assert (
        main(["train", "--task", task, "--out", str(out_dir), "--steps", "1", "--quiet", "--require-target"])
        == 3
    )


def test_info_reports_a_corrupted_checkpoint(capsys, tmp_path) -> None:
    out_dir = tmp_path / "ckpt"
    assert main(["train", "--task", "pendulum", "--out", str(out_dir), "--steps", "1", "--quiet"]) == 0
    capsys.readouterr()
    data = bytearray((out_dir / "weights.npz").read_bytes())
    data[100] ^= 1
    (out_dir / "weights.npz").write_bytes(bytes(data))
    assert main(["info", str(out_dir)]) == 1
    assert "SHA-256" in capsys.readouterr().err


@pytest.mark.timeout(30)
def test_info_shows_the_verified_manifest_not_a_file_swapped_in_after(capsys, tmp_path, monkeypatch) -> None:
    """Before: info re-read checkpoint.json by path after load_checkpoint verified it, so a FIFO
    swapped in between hung it (and a swapped file would have been shown as verified)."""
    import os

    import tickformer.model.checkpoint as ckpt_module
    from tickformer.model import init_params, preset
    from tickformer.model.checkpoint import save_checkpoint

    root = tmp_path / "ck"
    cfg = preset("tiny")
    save_checkpoint(root, cfg, init_params(cfg, 3), {"task": "pendulum"})
    listed = json.loads((root / "checkpoint.json").read_text())["files"]
    real = ckpt_module.load_checkpoint

    def load_then_swap(path):
        loaded = real(path)
        (root / "checkpoint.json").unlink()
        os.mkfifo(root / "checkpoint.json")
        return loaded

    monkeypatch.setattr(ckpt_module, "load_checkpoint", load_then_swap)
    assert main(["info", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == listed


def test_entry_point_runs(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tickformer", "info", "--preset", "paper-base"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "parameters 63,082,496" in proc.stdout
