"""`tickformer verify ART --weights F` (verify/formats.py): the compiled step of a weight format is
held to the numpy model with the weights as stored, and to the fp32 model within the format's
stated bound; each property fails when the thing it guards is broken (a mutant per property)."""

from __future__ import annotations

import json

import pytest

from tickformer.cli import main
from tickformer.codegen import weights as W
from tickformer.verify import formats

pytestmark = pytest.mark.usefixtures("compiler")  # tests/conftest.py: skips without a C compiler


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    cfg = preset("tiny")
    out = tmp_path_factory.mktemp("fmt") / "art"
    export_params(cfg, init_params(cfg, seed=4), out, domain=(-2.0, 2.0))
    return out


def _run(artifact, fmt, tmp_path, **kwargs):
    return formats.verify_format(
        artifact,
        fmt,
        max_t=6,
        trust=None,
        examples=15,
        seed_value=0,
        out_dir=tmp_path / "out",
        cache_dir=tmp_path / "cache",
        **kwargs,
    )


@pytest.mark.parametrize("fmt", W.FORMATS)
def test_every_format_passes_both_properties(artifact, fmt, tmp_path):
    results = _run(artifact, fmt, tmp_path)
    assert [r.name for r in results] == list(formats.NAMES)
    assert [r.status for r in results] == ["pass", "pass"], [r.message for r in results]
    assert results[1].details["bound_rel"] == W.fp32_bound(fmt)


def test_cli_adds_the_format_properties_to_the_report(artifact, tmp_path):
    rc = main(
        [
            "verify",
            str(artifact),
            "--weights",
            "int8",
            "--examples",
            "10",
            "--max-t",
            "6",
            "--out",
            str(tmp_path),
        ]
    )
    report = json.loads((tmp_path / "verify.json").read_text())
    assert rc == 0, report
    names = [p["name"] for p in report["properties"]]
    assert names[-2:] == list(formats.NAMES)
    assert report["settings"]["weights"] == "int8"


def test_a_step_that_drops_the_int8_scale_is_caught(artifact, tmp_path, monkeypatch):
    """Mutant of the generated C: int8 codes read without their channel's scale."""
    real = W.load_expr
    monkeypatch.setattr(
        W, "load_expr", lambda fmt, ref: f"((float){ref})" if fmt == "int8" else real(fmt, ref)
    )
    results = _run(artifact, "int8", tmp_path)
    assert [r.status for r in results] == ["fail", "fail"]
    assert "numpy model with the weights as stored" in results[0].message
    assert (tmp_path / "out" / "weight_format_equivalence.npz").exists()


def test_a_reference_with_unrounded_weights_is_caught(artifact, tmp_path, monkeypatch):
    """Mutant of the check: the equivalence against the fp32 weights, not the stored ones -- the
    int8 step's rounding is far beyond the artifact's tolerance, so the property must notice."""
    monkeypatch.setattr(formats.formats, "rounded_params", lambda params, config, fmt: params)
    results = _run(artifact, "int8", tmp_path)
    assert results[0].status == "fail" and results[1].status == "pass"


def test_the_step_checked_is_the_one_the_runtime_builds_for_the_format(artifact, tmp_path, monkeypatch):
    """Mutant of backend "c"'s builder (codegen.toolchain.build_for): weights= dropped, every format
    built as fp32. verify loads the step through runtime.load(weights=F), so the int8 property run
    checks that fp32 library against the int8-stored weights and fails."""
    from tickformer.codegen import toolchain

    real = toolchain.plan_for
    monkeypatch.setattr(toolchain, "plan_for", lambda artifact, weights="fp32": real(artifact))
    results = _run(artifact, "int8", tmp_path)
    assert results[0].status == "fail" and "numpy model with the weights as stored" in results[0].message


def test_a_bound_tighter_than_the_error_fails(artifact, tmp_path, monkeypatch):
    """The bound is checked, not assumed: below the measured int8 error it fails."""
    monkeypatch.setattr(formats.formats, "fp32_bound", lambda fmt: 1e-6)
    results = _run(artifact, "int8", tmp_path)
    assert results[0].status == "pass" and results[1].status == "fail"
    assert "from the fp32 model" in results[1].message


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--weights", "fp8"], "unknown weight format 'fp8'"),
        (["--weights", "int8", "--spec", "x.json"], "--spec and --step describe bare ONNX models"),
    ],
)
def test_bad_weights_is_one_line_exit_2(artifact, tmp_path, capsys, argv, needle):
    rc = main(["verify", str(artifact), *argv, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_weights_on_a_bare_onnx_file_is_refused(artifact, tmp_path, capsys):
    rc = main(["verify", str(artifact / "model.onnx"), "--weights", "int8", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--weights tests the generated C step" in err and len(err.splitlines()) == 1


def test_a_format_the_generator_refuses_is_one_line(tmp_path, capsys):
    """ssm artifacts are generated in fp32 only: --weights int8 names that, exit 2, no report of a pass."""
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    cfg = preset("tiny").replace(block="ssm", d_state=3)
    art = tmp_path / "ssm"
    export_params(cfg, init_params(cfg, seed=0), art)
    rc = main(["verify", str(art), "--weights", "int8", "--examples", "3", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "fp32" in err and "Traceback" not in err and len(err.splitlines()) == 1, err


def test_skip_names_a_format_property(artifact, tmp_path):
    """--skip weight_format_bound with --weights: reported skipped, the other one run."""
    rc = main(
        ["verify", str(artifact), "--weights", "int8", "--skip", "weight_format_bound", "--examples", "5",
         "--max-t", "4", "--out", str(tmp_path)]
    )  # fmt: skip
    report = {
        p["name"]: p["status"] for p in json.loads((tmp_path / "verify.json").read_text())["properties"]
    }
    assert (
        rc == 0 and report["weight_format_bound"] == "skip" and report["weight_format_equivalence"] == "pass"
    )
