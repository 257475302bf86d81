"""tickformer.certify: worst-case latency certification of a step.

campaign     the campaign (`certify_session`) and `certify_artifact` / `certify_onnx`, what
             `tickformer certify` runs
isolation    flush-to-zero, gc frozen, CPU pinning, SCHED_FIFO, mlockall around the loop
measurement  the timed loop and the conditions it ran under
statistics   percentiles, histogram, worst samples, the evidence about positions
decision     the EVT fit's admissibility, the pWCET and the verdict (PASS / FAIL / INCONCLUSIVE)
evt          extreme value theory: tail fits (POT, block maxima), pWCET, admissibility tests
iid          the i.i.d. tests an EVT fit must pass
report       certificate.json, plots, the terminal summary

from tickformer.certify import estimate_pwcet
estimate_pwcet(samples_ns, 1e-9)
"""

from .campaign import CampaignConfig, certify_artifact, certify_session
from .decision import EXIT_CODES, FAIL, INCONCLUSIVE, PASS, EvtConfig, analyze
from .evt import estimate_pwcet, fit_tail
from .measurement import measure

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
