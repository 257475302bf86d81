"""What codegen refuses, each with an error that names the reason and what to use instead."""

from __future__ import annotations

import dataclasses

import pytest

from tickformer.codegen import plan_for
from tickformer.errors import ArtifactError
from tickformer.runtime import open_artifact


def test_encoder_decoder_is_refused(arts):
    with pytest.raises(
        ArtifactError, match="does not support arch 'encoder-decoder'.*use backend 'ort' or 'numpy'"
    ):
        plan_for(open_artifact(arts["seq2seq"]))


def test_unknown_config_field_is_refused(arts):
    """A field this generator does not know (say, a mixture of experts) changes the step: refuse."""
    art = open_artifact(arts["tiny"])
    manifest = {**art.manifest, "config": {**art.manifest["config"], "experts": 4}}
    with pytest.raises(
        ArtifactError, match=r"config fields \['experts'\] are not supported by tickformer codegen"
    ):
        plan_for(dataclasses.replace(art, manifest=manifest))


def test_an_unknown_artifact_kind_is_refused_by_name(arts):
    """A manifest kind without a block kind here (say a future 'moe') is named in the refusal."""
    art = open_artifact(arts["ssm"])
    with pytest.raises(ArtifactError, match=r"codegen does not support artifact kind 'moe'.*use backend"):
        plan_for(dataclasses.replace(art, manifest={**art.manifest, "kind": "moe"}))


def test_ssm_plan(arts):
    art = open_artifact(arts["ssm"])
    plan = plan_for(art)
    assert (plan.cache_kind, plan.block_kind, plan.d_state, plan.has_pe) == ("state", "ssm", 4, False)
    assert plan.state_bound == tuple(art.manifest["state_bound"]["layers"])


def test_ssm_without_a_state_bound_is_refused(arts):
    art = open_artifact(arts["ssm"])
    manifest = {**art.manifest, "state_bound": {"layers": [1.0]}}  # one layer short
    with pytest.raises(ArtifactError, match="does not give a finite positive bound per layer"):
        plan_for(dataclasses.replace(art, manifest=manifest))


def test_unknown_manifest_key_is_refused(arts):
    art = open_artifact(arts["tiny"])
    with pytest.raises(ArtifactError, match=r"manifest keys \['cache'\] are not known"):
        plan_for(dataclasses.replace(art, manifest={**art.manifest, "cache": {"kind": "ring"}}))


def test_missing_weight_is_named(arts):
    plan = plan_for(open_artifact(arts["tiny"]))
    params = {k: v for k, v in plan.params.items() if k != "dec.1.ffn.w2"}
    from tickformer.codegen import source

    with pytest.raises(ArtifactError, match="no parameter 'dec.1.ffn.w2'"):
        source.source(dataclasses.replace(plan, params=params), "test")


@pytest.mark.parametrize("name", ["tiny", "tokens", "batch2", "odd", "narrow", "win1", "win4"])
def test_decoders_are_planned(arts, name):
    art = open_artifact(arts[name])
    plan = plan_for(art)
    assert (plan.cache_kind, plan.block_kind) == (
        "static" if art.config.window is None else "ring",
        "attention",
    )
    assert plan.rows == (art.config.window or art.max_len)
    assert plan.batch == art.batch and plan.domain == art.input_domain
