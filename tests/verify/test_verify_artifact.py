"""`tickformer verify` on one of our artifacts (our export and runtime): every property
passes on a correct export, and each artifact-only property fails when the runtime is sabotaged
the way a real bug would (so none of them can only pass)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tickformer.cli import main  # noqa: E402
from tickformer.verify.properties import (
    check_numpy_vs_backend,
    check_stale_cache,
    check_step_full,
    domain_arrays,
    run_property,
)  # noqa: E402
from tickformer.verify.properties.models import ArtifactModel  # noqa: E402


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    from tickformer.export.writer import export_artifact
    from tickformer.model.checkpoint import Checkpoint
    from tickformer.model.config import preset
    from tickformer.model.transformer import init_params

    cfg = preset("tiny")
    out = tmp_path_factory.mktemp("art") / "tiny"
    return export_artifact(
        Checkpoint(cfg, init_params(cfg, seed=3), {}), out, domain=(-2.0, 2.0), lengths=[1, 4]
    )


def test_correct_artifact_passes_every_property(artifact, tmp_path):
    rc = main(["verify", str(artifact), "--examples", "20", "--max-t", "8", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "verify.json").read_text())
    assert rc == 0, report
    assert [p["name"] for p in report["properties"]] == [
        "finite_outputs",
        "causality",
        "step_equals_full",
        "stale_cache_isolation",
        "numpy_vs_backend",
        "rejected_step_is_harmless",
    ]
    assert all(p["status"] == "pass" for p in report["properties"])
    assert report["domain"] == [-2.0, 2.0]  # from the manifest


def xs(model):
    return domain_arrays(model.domain, lambda t: (model.batch, t, model.features), (1, 6))


def test_step_that_drifts_is_caught(artifact, tmp_path):
    model = ArtifactModel(artifact, "ort", 6)
    real = model.session.backend.step
    model.session.backend.step = lambda x, pos: real(x, pos) + np.float32(1e-2) * (pos > 0)
    r = run_property(
        "step_equals_full", xs(model), check_step_full(model), examples=20, seed_value=0, out_dir=tmp_path
    )
    model.close()
    assert r.status == "fail" and "differs from the full pass" in r.message
    assert np.load(r.counterexample)["x"].shape[1] == 2  # shrunk: position 1 is the first drifting one


def test_reset_that_keeps_stale_rows_selected_is_caught(artifact, tmp_path):
    model = ArtifactModel(artifact, "ort", 6)
    model.session.reset = lambda: None  # forgets to restart at position 0: stale rows stay visible
    strategy = xs(model)
    import hypothesis.strategies as st

    r = run_property(
        "stale_cache_isolation",
        st.tuples(strategy, strategy),
        check_stale_cache(model),
        examples=20,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail"
    data = np.load(r.counterexample)
    assert data["before"].shape[1] == 1 and data["x"].shape[1] == 1  # minimal: one stale row, one step


def test_backend_disagreeing_with_numpy_is_caught(artifact, tmp_path):
    model = ArtifactModel(artifact, "ort", 6)
    real = model.reference.run
    model.reference.run = lambda x: real(x) * np.float32(1.001)
    r = run_property(
        "numpy_vs_backend",
        xs(model),
        check_numpy_vs_backend(model),
        examples=20,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail" and "numpy reference" in r.message


def test_runtime_that_accepts_out_of_domain_input_is_caught(artifact, tmp_path):
    import hypothesis.strategies as st

    from tickformer.verify.properties import check_rejected_step, out_of_domain_values

    model = ArtifactModel(artifact, "ort", 6)
    model.session._validate_step_input = lambda x: None  # a runtime that forgot to enforce the domain
    strategy = st.tuples(xs(model), st.integers(0, 5), out_of_domain_values(model.domain))
    r = run_property(
        "rejected_step_is_harmless",
        strategy,
        check_rejected_step(model),
        examples=20,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail" and "was accepted" in r.message
