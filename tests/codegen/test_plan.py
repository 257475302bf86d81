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
    """A field this generator does not know (a block type) changes the step: refuse."""
    art = open_artifact(arts["tiny"])
    manifest = {**art.manifest, "config": {**art.manifest["config"], "block": "ssm"}}
    with pytest.raises(
        ArtifactError, match=r"config fields \['block'\] are not supported by tickformer codegen"
    ):
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
