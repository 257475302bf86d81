"""`tickformer certify` on a real tiny artifact (ONNX Runtime CPU and numpy backends)."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from tickformer.certify.decision import EXIT_CODES
from tickformer.cli import main
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset


@pytest.fixture(scope="module")
def tiny_artifact(tmp_path_factory):
    cfg = preset("tiny")
    out = tmp_path_factory.mktemp("certify") / "art"
    export_params(cfg, init_params(cfg, 0), out)
    return out


@pytest.mark.parametrize("backend", ["ort", "numpy"])
def test_certify_cli_writes_certificate_and_exit_code_matches_verdict(
    tiny_artifact, tmp_path, backend
) -> None:
    out = tmp_path / "rep"
    code = main(
        [
            "certify",
            str(tiny_artifact),
            "--backend",
            backend,
            "--budget-us",
            "100000",
            "--samples",
            "3000",
            "--warmup",
            "200",
            "--n-boot",
            "20",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    cert = json.loads((out / "certificate.json").read_text())
    assert code == EXIT_CODES[cert["verdict"]]
    assert cert["conditions"]["backend"] == backend
    manifest = json.loads((tiny_artifact / "manifest.json").read_text())
    assert cert["conditions"]["artifact_id"] == manifest["manifest_sha256"]
    # the reproduction command parses to the same settings as the command that ran
    from tickformer.cli import build_parser

    words = shlex.split(cert["conditions"]["command_line"])
    assert words[:2] == ["tickformer", "certify"]
    again = vars(build_parser().parse_args(words[1:]))
    assert again["samples"] == 3000 and again["backend"] == backend and again["n_boot"] == 20
    assert str(again["out"]) == str(out) and again["budget_us"] == 100000
    env = cert["conditions"]["environment"]
    assert env["host"] and env["libraries"]["packages"]["numpy"]["locked"]
    assert cert["conditions"]["input_distribution"]["kind"] == "uniform"
    assert cert["campaign"]["timed_positions"] == [0, 15]  # static cache: every position is timed
    profile = cert["campaign"]["position_profile"]["groups"]
    assert sum(g["n"] for g in profile) == 3000
    assert cert["campaign"]["position_check"]["claim"] == "constant cost at every position"
    samples = np.load(out / "samples_ns.npy")
    assert samples.shape == (3000,) and samples.min() > 0
    assert cert["stats"]["max"] == samples.max()
    assert (out / "latency_hist.png").exists() and (out / "exceedance.png").exists()


def test_certify_cli_fails_when_budget_is_below_every_step(tiny_artifact, tmp_path) -> None:
    code = main(
        [
            "certify",
            str(tiny_artifact),
            "--budget-us",
            "0.001",
            "--samples",
            "2000",
            "--warmup",
            "10",
            "--n-boot",
            "20",
            "--out",
            str(tmp_path / "r"),
            "--quiet",
        ]
    )
    assert code == 1
    cert = json.loads((tmp_path / "r" / "certificate.json").read_text())
    assert cert["verdict"] == "FAIL" and cert["over_budget"] == 2000


def test_certify_cli_user_errors_are_one_line(tiny_artifact, tmp_path, capsys) -> None:
    assert main(["certify", str(tiny_artifact), "--budget-us", "-5", "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "--budget-us" in err and "Traceback" not in err and err.count("\n") == 1
    assert main(["certify", str(tmp_path / "missing"), "--budget-us", "5", "--out", str(tmp_path / "r")]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert (
        main(
            [
                "certify",
                str(tiny_artifact),
                "--budget-us",
                "5",
                "--samples",
                "10",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 1
    )
    assert "samples" in capsys.readouterr().err
    assert not (tmp_path / "r" / "certificate.json").exists()


def test_certify_growing_cache_sweeps_and_times_the_worst_positions(tiny_artifact, tmp_path) -> None:
    out = tmp_path / "grow"
    main(
        [
            "certify",
            str(tiny_artifact),
            "--backend",
            "numpy-growing",
            "--budget-us",
            "100000",
            "--samples",
            "2000",
            "--warmup",
            "50",
            "--n-boot",
            "20",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["campaign"]["static_cache"] is False
    assert cert["campaign"]["timed_positions"] == [14, 15]  # the last eighth of max_len 16
    check = cert["campaign"]["position_check"]
    assert sum(g["n"] for g in check["sweep"]["groups"]) >= 8 * 16  # every position was swept
    assert check["timed_from"] == 14


def test_certify_windowed_artifact_times_one_stream_across_wraparound(tmp_path) -> None:
    """A windowed artifact (ring of 5 slots, max_len 16): one stream of 3000 timed steps past
    warm-up, never reset, 600 wraps; every slot timed, and the certificate says so."""
    cfg = preset("tiny").replace(window=5)
    art = tmp_path / "art"
    export_params(cfg, init_params(cfg, 0), art, lengths=[1, 16])
    out = tmp_path / "rep"
    args = ["certify", str(art), "--budget-us", "100000", "--samples", "3000", "--warmup", "200"]
    code = main([*args, "--n-boot", "20", "--out", str(out), "--quiet"])
    cert = json.loads((out / "certificate.json").read_text())
    assert code == EXIT_CODES[cert["verdict"]]
    ring = cert["campaign"]["ring"]
    assert ring["window"] == 5 and ring["every_slot_timed"] and ring["timed_per_slot"] == [600, 600]
    assert ring["positions"] == [0, 2999] and ring["wraps"] == 599
    assert cert["campaign"]["timed_positions"] == [0, 2999]  # past max_len 16: the stream slides
    assert sum(g["n"] for g in cert["campaign"]["position_profile"]["groups"]) == 3000
