"""Deprecated: latency certification moved to `tickformer.certify` (its own package: it shares
nothing with the proofs and property tests of `tickformer.verify`). This name re-exports what
`tickformer.certify.campaign` exported before the campaign was split into isolation /
measurement / statistics / decision, and `estimate_pwcet`, until the next artifact format
change, then goes away.
"""

from __future__ import annotations

import warnings

from tickformer.certify.campaign import CampaignConfig, certify_artifact, certify_onnx, certify_session
from tickformer.certify.decision import (
    EXIT_CODES,
    FAIL,
    INCONCLUSIVE,
    PASS,
    EvtConfig,
    analyze,
    decide,
    pwcet_result,
)
from tickformer.certify.evt import estimate_pwcet
from tickformer.certify.isolation import Isolation
from tickformer.certify.measurement import artifact_hash, conditions, measure
from tickformer.certify.statistics import histogram, latency_stats, worst_indices

__all__ = [
    "CampaignConfig",
    "EvtConfig",
    "Isolation",
    "measure",
    "latency_stats",
    "histogram",
    "worst_indices",
    "decide",
    "pwcet_result",
    "conditions",
    "artifact_hash",
    "analyze",
    "certify_session",
    "certify_artifact",
    "certify_onnx",
    "estimate_pwcet",
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "EXIT_CODES",
]

warnings.warn(
    "tickformer.verify.certify is deprecated: import from tickformer.certify instead",
    DeprecationWarning,
    stacklevel=2,
)
