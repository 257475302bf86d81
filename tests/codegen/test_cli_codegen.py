"""`tickformer codegen` and `tickformer certify --backend c` from the command line."""

from __future__ import annotations

import json

from tickformer.cli import main


def test_codegen_writes_and_tests(arts, tmp_path, capsys, c_compiler, make_tool):
    out = tmp_path / "c"
    assert main(["codegen", str(arts["tokens"]), "--out", str(out), "--test", "--cc", c_compiler]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "tf_test: all checks passed" in printed


def test_codegen_refuses_encoder_decoder_in_one_line(arts, tmp_path, capsys):
    assert main(["codegen", str(arts["seq2seq"]), "--out", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "codegen does not support arch 'encoder-decoder'" in err
    assert not (tmp_path / "c").exists()


def test_codegen_test_without_compiler_names_the_package(arts, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler")
    assert main(["codegen", str(arts["tiny"]), "--out", str(tmp_path / "c"), "--test"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "apt-get install gcc" in err


def test_certify_with_the_c_backend(arts, tmp_path, c_compiler):
    out = tmp_path / "cert"
    code = main(
        [
            "certify",
            str(arts["tiny"]),
            "--backend",
            "c",
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
    assert code in (0, 2)  # PASS, or INCONCLUSIVE on a noisy machine; never FAIL at a 100 ms budget
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["conditions"]["backend"] == "c" and cert["verdict"] in ("PASS", "INCONCLUSIVE")


def test_certify_a_windowed_artifact_with_the_c_backend(arts, tmp_path, c_compiler):
    """One sliding stream across wrap-around: the campaign times every slot of the ring."""
    out = tmp_path / "cert"
    args = ["certify", str(arts["win4"]), "--backend", "c", "--budget-us", "100000", "--samples", "2000"]
    code = main([*args, "--warmup", "100", "--n-boot", "20", "--out", str(out), "--quiet"])
    assert code in (0, 2)
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["conditions"]["backend"] == "c"
    ring = cert["campaign"]["ring"]
    assert ring["window"] == 4 and ring["every_slot_timed"] and ring["wraps"] > 100


def test_codegen_a_windowed_artifact(arts, tmp_path, capsys, c_compiler, make_tool):
    out = tmp_path / "c"
    assert main(["codegen", str(arts["wintokens"]), "--out", str(out), "--test", "--cc", c_compiler]) == 0
    printed = capsys.readouterr().out
    assert "slides: " in printed and "tf_test: all checks passed" in printed


def test_codegen_and_certify_an_ssm_artifact(arts, tmp_path, capsys, c_compiler, make_tool):
    out = tmp_path / "c"
    assert main(["codegen", str(arts["ssm"]), "--out", str(out), "--test", "--cc", c_compiler]) == 0
    printed = capsys.readouterr().out
    assert (
        "never full: " in printed
        and "tf_test: all checks passed" in printed
        and "contracts: 0 broken" in printed
    )
    cert_dir = tmp_path / "cert"
    args = ["certify", str(arts["ssm"]), "--backend", "c", "--budget-us", "100000", "--samples", "1000"]
    assert main([*args, "--warmup", "100", "--n-boot", "20", "--out", str(cert_dir), "--quiet"]) in (0, 2)
    cert = json.loads((cert_dir / "certificate.json").read_text())
    assert cert["conditions"]["backend"] == "c" and cert["verdict"] in ("PASS", "INCONCLUSIVE")
