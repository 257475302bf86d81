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
from tickformer.verify.properties.plans import PROPERTY_NAMES  # noqa: E402


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
    assert [p["name"] for p in report["properties"]] == list(PROPERTY_NAMES["decoder"])  # what --skip knows


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


def test_full_pass_that_sees_the_future_is_caught(artifact, tmp_path):
    """causality on an artifact: a full pass whose output at t mixes in the input at T - 1 - t
    (a causal mask dropped) fails, shrunk to T = 2, cut 0, with the arrays named as docs/verify.md
    says (x, x_changed, y, y_changed, cut)."""
    import hypothesis.strategies as st

    from tickformer.verify.properties import check_causal

    model = ArtifactModel(artifact, "ort", 6)
    real = model.session.run
    model.session.run = lambda x: real(x) + np.float32(0.1) * x[:, ::-1, :1]  # [B, T, G] + [B, T, 1]
    seq = lambda t: domain_arrays(model.domain, lambda _: (model.batch, t, model.features), (t, t))  # noqa: E731
    pairs = st.integers(2, 6).flatmap(lambda t: st.tuples(seq(t), seq(t), st.integers(0, t - 2)))
    r = run_property("causality", pairs, check_causal(model), examples=30, seed_value=0, out_dir=tmp_path)
    model.close()
    assert r.status == "fail" and "output at position 0 changed" in r.message, r
    data = np.load(r.counterexample)
    assert set(data.files) == {"x", "x_changed", "cut", "y", "y_changed", "meta"}
    assert data["x"].shape[1] == 2 and int(data["cut"]) == 0
    assert np.array_equal(data["x"][:, :1], data["x_changed"][:, :1])  # only the input after the cut changed


def test_full_pass_that_is_nan_on_part_of_the_domain_is_caught(artifact, tmp_path):
    """finite_outputs on an artifact: NaN wherever an input exceeds 1.5 (inside the domain [-2, 2])."""
    from tickformer.verify.properties import check_finite

    model = ArtifactModel(artifact, "ort", 6)
    real = model.session.run
    model.session.run = lambda x: np.where((x > 1.5).any(-1, keepdims=True), np.float32(np.nan), real(x))
    r = run_property(
        "finite_outputs", xs(model), check_finite(model), examples=40, seed_value=0, out_dir=tmp_path
    )
    model.close()
    assert r.status == "fail" and "non-finite output nan" in r.message, r
    data = np.load(r.counterexample)
    assert set(data.files) == {"x", "y", "meta"} and data["x"].shape[1] == 1  # shrunk to one position
    assert (data["x"] > 1.5).any() and np.isnan(data["y"]).any()


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


# --- every artifact kind (issue 17): token decoder-only and encoder-decoder ------------------------


@pytest.fixture(scope="module")
def token_artifact(tmp_path_factory):
    from tickformer.export.writer import export_params
    from tickformer.model.config import Config
    from tickformer.model.transformer import init_params

    cfg = Config(
        arch="decoder",
        inputs="tokens",
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_layers=2,
        vocab_size=7,
        max_len=12,
        dropout=0.0,
    )
    out = tmp_path_factory.mktemp("tok") / "tok"
    export_params(cfg, init_params(cfg, 3), out, lengths=[1, 4])
    return out


@pytest.fixture(scope="module")
def seq2seq_artifact(tmp_path_factory):
    from tickformer.export.writer import export_params
    from tickformer.model.config import preset
    from tickformer.model.transformer import init_params

    cfg = preset("tiny-seq2seq")
    out = tmp_path_factory.mktemp("s2s") / "s2s"
    export_params(cfg, init_params(cfg, 3), out, lengths=[1, 4])
    return out


def test_token_decoder_artifact_passes_every_property(token_artifact, tmp_path):
    rc = main(["verify", str(token_artifact), "--examples", "15", "--max-t", "6", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "verify.json").read_text())
    assert rc == 0, report
    assert report["model"]["kind"] == "decoder" and report["model"]["inputs"] == "tokens"
    assert [p["name"] for p in report["properties"]] == [
        "finite_outputs",
        "causality",
        "step_equals_full",
        "stale_cache_isolation",
        "numpy_vs_backend",
        "rejected_step_is_harmless",
    ]
    assert all(p["status"] == "pass" for p in report["properties"])


def test_encoder_decoder_artifact_passes_every_property(seq2seq_artifact, tmp_path):
    rc = main(["verify", str(seq2seq_artifact), "--examples", "12", "--max-t", "5", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "verify.json").read_text())
    assert rc == 0, report
    got = {p["name"]: p["status"] for p in report["properties"]}
    assert got == {
        "finite_outputs": "pass",
        "causality": "skip",  # no full-pass graph: the reason names stale_cache_isolation
        "padding_mask": "pass",
        "step_equals_full": "pass",
        "stale_cache_isolation": "pass",
        "numpy_vs_backend": "pass",
        "rejected_step_is_harmless": "pass",
    }
    assert list(got) == list(PROPERTY_NAMES["encoder-decoder"])


def test_token_runtime_that_accepts_an_unknown_id_is_caught(token_artifact, tmp_path):
    import hypothesis.strategies as st

    from tickformer.verify.properties import check_rejected_step
    from tickformer.verify.properties.models import DecoderArtifact

    model = DecoderArtifact(token_artifact, "ort", 6)
    model.session._step_tokens_valid = lambda x: True  # a runtime that forgot the vocabulary check
    strategy = st.tuples(model.examples((1, 6)), st.integers(0, 5), model.bad_values())
    r = run_property(
        "rejected_step_is_harmless",
        strategy,
        check_rejected_step(model),
        examples=20,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail"


def test_source_padding_that_leaks_is_caught(seq2seq_artifact, tmp_path):
    """An encoder that ignores the validity mask: the padded source positions reach the decoder."""
    import hypothesis.strategies as st

    from tickformer.verify.properties import check_source_padding
    from tickformer.verify.properties.models import Seq2SeqArtifact
    from tickformer.verify.properties.strategies import id_arrays

    model = Seq2SeqArtifact(seq2seq_artifact, "ort", 5)
    backend = model.session.backend
    real = backend.set_source
    backend.set_source = lambda src, valid: real(src, np.ones_like(valid))  # every position "real"
    filler = id_arrays((model.batch, model.session.max_len), 0, model.config.vocab_size - 1)
    r = run_property(
        "padding_mask",
        st.tuples(model.examples((1, 5)), filler),
        check_source_padding(model),
        examples=25,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail" and "padded positions" in r.message


def test_encoder_decoder_step_that_drifts_is_caught(seq2seq_artifact, tmp_path):
    from tickformer.verify.properties.models import Seq2SeqArtifact

    model = Seq2SeqArtifact(seq2seq_artifact, "ort", 5)
    real = model.session.backend.step
    model.session.backend.step = lambda x, pos: real(x, pos) + np.float32(1e-2) * (pos > 0)
    r = run_property(
        "step_equals_full",
        model.examples((1, 5)),
        check_step_full(model),
        examples=20,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail" and np.load(r.counterexample)["tgt"].shape[1] == 2


def test_unknown_artifact_kind_is_refused_naming_the_known_ones(artifact, monkeypatch):
    from tickformer.errors import ArtifactError
    from tickformer.verify.properties import models

    monkeypatch.setattr(models, "ARTIFACT_KINDS", {"encoder-decoder": models.Seq2SeqArtifact})
    with pytest.raises(ArtifactError, match=r"does not know artifact kind 'decoder' yet"):
        models.open_model(artifact)


# --- windowed artifacts (kind "windowed") ------------------------------------------------------------------
@pytest.fixture(scope="module")
def windowed_artifact(tmp_path_factory):
    from tickformer.export.writer import export_artifact
    from tickformer.model.checkpoint import Checkpoint
    from tickformer.model.config import preset
    from tickformer.model.transformer import init_params

    cfg = preset("tiny").replace(window=3)
    out = tmp_path_factory.mktemp("art") / "windowed"
    return export_artifact(
        Checkpoint(cfg, init_params(cfg, seed=4), {}), out, domain=(-2.0, 2.0), lengths=[1, 16]
    )


def test_windowed_artifact_passes_every_property(windowed_artifact, tmp_path):
    rc = main(["verify", str(windowed_artifact), "--examples", "10", "--max-t", "8", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "verify.json").read_text())
    assert rc == 0, report
    names = [p["name"] for p in report["properties"]]
    assert names[-2:] == ["window_isolation", "slides_past_max_len"] and names == list(
        PROPERTY_NAMES["windowed"]
    )
    assert all(p["status"] == "pass" for p in report["properties"])


def test_a_window_that_reads_too_far_back_is_caught(windowed_artifact, tmp_path):
    """window_isolation fails when the last output depends on an input older than the model says
    (here: the check told the receptive field is one shorter than it is)."""
    from hypothesis import strategies as st

    from tickformer.verify.properties.checks import check_window_isolation
    from tickformer.verify.properties.models import WindowedArtifact

    model = WindowedArtifact(windowed_artifact, "ort", 8)
    model.receptive -= 1  # as if the ring read one slot less than it does
    seqs = domain_arrays(model.domain, lambda t: (1, t, model.features), (12, 12))
    r = run_property(
        "window_isolation",
        st.tuples(seqs, seqs),
        check_window_isolation(model),
        examples=20,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    assert r.status == "fail" and "changed when only inputs before" in r.message


def test_a_session_that_stops_at_max_len_fails_slides_past_max_len(windowed_artifact, tmp_path):
    from tickformer import runtime
    from tickformer.verify.properties.checks import check_slides_past_max_len
    from tickformer.verify.properties.models import WindowedArtifact

    model = WindowedArtifact(windowed_artifact, "ort", 8)
    model.session = runtime.load(windowed_artifact, backend="ort", on_full="raise")
    n = 2 * model.session.max_len + 3
    seqs = domain_arrays(model.domain, lambda t: (1, t, model.features), (n, n))
    r = run_property(
        "slides_past_max_len",
        seqs,
        check_slides_past_max_len(model),
        examples=3,
        seed_value=0,
        out_dir=tmp_path,
    )
    model.close()
    # a skip would satisfy `!= "pass"`: the property must fail, and say why
    assert r.status == "fail" and "raised ContextFull" in r.message, r
    assert r.counterexample is not None and np.load(r.counterexample)["x"].shape[1] == n
