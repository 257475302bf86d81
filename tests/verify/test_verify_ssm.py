"""`tickformer verify` on an ssm artifact (plans.ssm_plan): every property passes on a correct
export, and the ssm-only properties fail when the runtime is sabotaged the way a real bug would."""

from __future__ import annotations

import json

import pytest

from tickformer.cli import main
from tickformer.errors import ContextFull
from tickformer.verify.properties import domain_arrays, run_property
from tickformer.verify.properties.checks import check_no_context_full, check_stale_cache, check_state_bounded
from tickformer.verify.properties.models import SsmArtifact
from tickformer.verify.properties.plans import PROPERTY_NAMES


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    cfg = preset("tiny").replace(block="ssm", d_state=3)
    out = tmp_path_factory.mktemp("ssm") / "art"
    export_params(cfg, init_params(cfg, seed=3), out, domain=(-2.0, 2.0), lengths=[1, 4])
    return out


def test_correct_ssm_artifact_passes_every_property(artifact, tmp_path):
    rc = main(["verify", str(artifact), "--examples", "15", "--max-t", "24", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "verify.json").read_text())
    assert rc == 0, report
    assert [p["name"] for p in report["properties"]] == [
        "finite_outputs",
        "causality",
        "step_equals_full",
        "state_isolation_after_reset",
        "numpy_vs_backend",
        "rejected_step_is_harmless",
        "state_bounded",
        "no_context_full",
    ]
    assert [p["name"] for p in report["properties"]] == list(PROPERTY_NAMES["ssm"])  # what --skip knows
    assert all(p["status"] == "pass" for p in report["properties"])


def xs(model, hi=6):
    return domain_arrays(model.domain, lambda t: (model.batch, t, model.features), (1, hi))


def test_a_state_over_its_bound_is_caught(artifact, tmp_path):
    model = SsmArtifact(artifact, "ort", 6)
    manifest = model.session.artifact.manifest
    manifest["state_bound"]["layers"] = [b * 1e-6 for b in manifest["state_bound"]["layers"]]  # a wrong bound
    r = run_property(
        "state_bounded", xs(model), check_state_bounded(model), examples=10, seed_value=0, out_dir=tmp_path
    )
    model.close()
    assert r.status == "fail" and "exceeds its BIBO bound" in r.message


def test_a_session_that_fills_up_is_caught(artifact, tmp_path):
    model = SsmArtifact(artifact, "ort", 6)
    real = model.session.step
    n = model.session.max_len

    def step(x):
        if model.session.position >= n:
            raise ContextFull("full")
        return real(x)

    model.session.step = step
    longer = domain_arrays(model.domain, lambda t: (model.batch, t, model.features), (n + 1, n + 3))
    r = run_property(
        "no_context_full", longer, check_no_context_full(model), examples=5, seed_value=0, out_dir=tmp_path
    )
    model.close()
    assert r.status == "fail" and "ContextFull" in r.message


def test_a_reset_that_keeps_the_state_is_caught(artifact, tmp_path):
    import hypothesis.strategies as st

    model = SsmArtifact(artifact, "ort", 6)
    session = model.session
    session.reset = lambda: setattr(session, "_position", 0)  # position back to 0, state kept
    r = run_property(
        "state_isolation_after_reset",
        st.tuples(xs(model), xs(model)),
        check_stale_cache(model),
        examples=20,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail"
