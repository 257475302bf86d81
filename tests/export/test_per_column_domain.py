"""Per-column input domains carried into every artifact (issue 35): a model trained on logged
signals declares one interval per input column; export records them (input_domain_columns, the
envelope as input_domain) with the signals' names and units; every backend's step refuses a value
inside the envelope but outside its column; the generated C header names the columns and checks
each; backend c refuses a library whose check is the envelope's only; verify draws inside the
columns and certify's inputs stay inside them."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from tickformer import runtime
from tickformer.artifact.reader import open_artifact
from tickformer.cli import main
from tickformer.errors import ArtifactError, BackendError, ExportError, InputError
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

CFG = preset("tiny")  # d_in 3
COLUMNS = [(-1.0, 1.0), (0.0, 5.0), (-10.0, 10.0)]
SIGNALS = {
    "inputs": [
        {"name": "pump", "unit": "V", "role": "input", "index": 0},
        {"name": "level */ evil", "unit": "cm", "role": "output", "index": 1},
        {"name": "level2", "unit": "cm", "role": "output", "index": 2},
    ],
    "outputs": [{"name": "level2", "unit": "cm", "horizon": 1, "index": k} for k in range(CFG.d_out)],
}
INSIDE = np.array([[[0.5, 2.5, 0.0]]], np.float32)
OUTSIDE_COLUMN = np.array([[[0.5, 6.0, 0.0]]], np.float32)  # inside [-10, 10], outside column 1


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    out = tmp_path_factory.mktemp("columns") / "art"
    source = {"checkpoint": None, "checkpoint_meta": {"signals": SIGNALS}}
    export_params(CFG, init_params(CFG, 0), out, domain=COLUMNS, source=source, lengths=[1, CFG.max_len])
    return out


def test_the_manifest_records_the_columns_their_envelope_and_the_signals(art):
    manifest = open_artifact(art).manifest
    assert manifest["input_domain_columns"] == [list(c) for c in COLUMNS]
    assert manifest["input_domain"] == [-10.0, 10.0]
    assert manifest["signals"] == SIGNALS
    assert open_artifact(art).input_domain_columns == ((-1.0, 0.0, -10.0), (1.0, 5.0, 10.0))


def test_export_refuses_columns_that_do_not_fit_the_model(tmp_path):
    with pytest.raises(ExportError, match="must be 3 \\[lo, hi\\] pairs"):
        export_params(CFG, init_params(CFG, 0), tmp_path / "a", domain=[(-1, 1), (0, 5)])
    with pytest.raises(ExportError, match="input column 1: input domain \\[5.0, 0.0\\] is empty"):
        export_params(CFG, init_params(CFG, 0), tmp_path / "b", domain=[(-1, 1), (5, 0), (0, 1)])


def test_a_column_outside_the_envelope_is_refused_at_load(art, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))
    import _relutil as ru

    root = ru.fresh_copy(art, tmp_path / "bad")
    doc = ru.read_json(root / ru.ART_MANIFEST)
    doc["input_domain_columns"][1] = [0.0, 50.0]  # wider than the envelope the bounds rest on
    ru.write_json(root / ru.ART_MANIFEST, ru.resealed(doc, ru.read_json(art / ru.ART_MANIFEST)))
    with pytest.raises(ArtifactError, match="input column 1's domain \\[0.0, 50.0\\] is not inside"):
        open_artifact(root)


@pytest.mark.parametrize("backend", ["numpy", "ort", "c"])
def test_every_backend_refuses_a_value_outside_its_column(art, backend):
    if backend == "c":
        pytest.importorskip("tickformer.codegen")
        if shutil.which("cc") is None and shutil.which("gcc") is None:
            pytest.skip("no C compiler")
    with runtime.load(art, backend=backend) as s:
        s.step(INSIDE)
        with pytest.raises(InputError, match="outside input column 1's declared domain \\[0.0, 5.0\\]"):
            s.step(OUTSIDE_COLUMN)
        assert s.position == 1  # the refused step changed nothing


def test_the_header_names_the_columns_and_the_c_check_is_per_column(art, tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    from tickformer.codegen import generate, plan_for
    from tickformer.codegen.toolchain import build_library

    header = generate(art)["tf_model.h"].decode()
    assert "j=0: pump [V] (input) in [-1.0, 1.0]" in header
    assert "j=1: level * / evil [cm] (output) in [0.0, 5.0]" in header  # a name cannot close the comment
    assert "#define TF_DOMAIN_COLUMNS 1" in header
    # the mutant the load probe exists for: the same artifact's step checking the envelope only
    plan = dataclasses.replace(plan_for(open_artifact(art)), columns=None, signals=None)
    lib = build_library(plan, cache_dir=tmp_path)
    with pytest.raises(BackendError, match="its input check accepts the input value .* in input column 0"):
        runtime.load(art, backend="c", library=lib)


def test_verify_draws_inside_the_columns_and_tries_a_value_outside_one(art, tmp_path, capsys):
    out = tmp_path / "v"
    assert main(["verify", str(art), "--out", str(out), "--examples", "20"]) == 0, capsys.readouterr().err
    report = json.loads((out / "verify.json").read_text())
    assert report["verdict"] == "OK"
    from hypothesis import find, settings
    from hypothesis.errors import NoSuchExample

    from tickformer.verify.properties.models import ArtifactModel

    model = ArtifactModel(art)
    lows, highs = np.array([c[0] for c in COLUMNS]), np.array([c[1] for c in COLUMNS])

    def outside(xs):
        return not np.all((xs >= lows) & (xs <= highs))

    with pytest.raises(NoSuchExample):  # every draw lies inside its column
        find(model.sequences((4, 4)), outside, settings=settings(max_examples=200))
    edge = find(
        model.sequences((4, 4)), lambda xs: xs[..., 1].max() == 5.0, settings=settings(max_examples=500)
    )
    assert edge[..., 1].max() == 5.0  # column 1's upper edge is drawn
    bad = find(model.bad_values(), lambda v: -10.0 <= v <= 10.0)  # inside the envelope, outside column 0
    assert not -1.0 <= bad <= 1.0


def test_certify_draws_its_inputs_inside_the_columns(art):
    from tickformer.certify.campaign import _domain
    from tickformer.certify.measurement import make_inputs

    with runtime.load(art) as s:
        x = make_inputs(s.input_shape, s.input_dtype, _domain(s), 500, 0)  # [500, 1, 1, 3]
        lows, highs = np.array([c[0] for c in COLUMNS]), np.array([c[1] for c in COLUMNS])
        assert np.all((x >= lows) & (x <= highs)) and x[..., 1].max() > 4.0  # the whole column is used
        for row in x[: s.max_len]:
            s.step(row)  # each accepted
