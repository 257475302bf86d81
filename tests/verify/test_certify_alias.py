"""The deprecated alias `tickformer.verify.certify` (certification moved to `tickformer.certify`)
still gives every public name the campaign module exported before it was split, and warns."""

from __future__ import annotations

import importlib
import sys

import pytest

from tickformer.certify import campaign, decision, evt, isolation, measurement, statistics

# what `tickformer.certify.campaign.__all__` listed before the split, and where each name lives now
PUBLIC = {
    campaign: ("CampaignConfig", "certify_session", "certify_artifact", "certify_onnx"),
    decision: (
        "EvtConfig",
        "decide",
        "pwcet_result",
        "analyze",
        "PASS",
        "FAIL",
        "INCONCLUSIVE",
        "EXIT_CODES",
    ),
    isolation: ("Isolation",),
    measurement: ("measure", "conditions", "artifact_hash"),
    statistics: ("latency_stats", "histogram", "worst_indices"),
    evt: ("estimate_pwcet",),
}


def test_the_alias_warns_and_re_exports_the_campaign():
    sys.modules.pop("tickformer.verify.certify", None)  # the warning is issued at import
    with pytest.deprecated_call(match="import from tickformer.certify"):
        alias = importlib.import_module("tickformer.verify.certify")
    names = [name for group in PUBLIC.values() for name in group]
    assert sorted(alias.__all__) == sorted(names)
    for module, group in PUBLIC.items():
        for name in group:
            assert getattr(alias, name) is getattr(module, name), name
    # the public surface issue 12 names: certify_artifact (was missing: ImportError) and estimate_pwcet
    exec("from tickformer.verify.certify import certify_artifact, estimate_pwcet", {})
