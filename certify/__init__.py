"""tickformer.certify: worst-case latency certification of a step.

campaign   the measurement campaign (isolation, timing, statistics, verdict) and
           `certify_artifact`, what `tickformer certify` runs
evt        extreme value theory: tail fits (POT, block maxima), pWCET, admissibility tests
report     certificate.json, plots, the terminal summary

from tickformer.certify import estimate_pwcet
estimate_pwcet(samples_ns, 1e-9)
"""

from .campaign import (
    EXIT_CODES,
    FAIL,
    INCONCLUSIVE,
    PASS,
    CampaignConfig,
    EvtConfig,
    analyze,
    certify_artifact,
    certify_session,
    measure,
)
from .evt import estimate_pwcet, fit_tail

__all__ = [
    "EXIT_CODES",
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
    "CampaignConfig",
    "EvtConfig",
    "analyze",
    "certify_artifact",
    "certify_session",
    "estimate_pwcet",
    "fit_tail",
    "measure",
]
