"""The deprecated alias `tickformer.verify.certify` (certification moved to `tickformer.certify`)
still gives every public name of the campaign, and warns."""

from __future__ import annotations

import importlib
import sys

import pytest

import tickformer.certify as certify_pkg
from tickformer.certify import campaign


def test_the_alias_warns_and_re_exports_the_campaign():
    sys.modules.pop("tickformer.verify.certify", None)  # the warning is issued at import
    with pytest.deprecated_call(match="import from tickformer.certify"):
        alias = importlib.import_module("tickformer.verify.certify")
    for name in campaign.__all__:
        assert getattr(alias, name) is getattr(campaign, name), name
    # the public surface issue 12 names: certify_artifact (was missing: ImportError) and estimate_pwcet
    assert alias.certify_artifact is campaign.certify_artifact
    assert alias.estimate_pwcet is certify_pkg.evt.estimate_pwcet
    exec("from tickformer.verify.certify import certify_artifact, estimate_pwcet", {})
