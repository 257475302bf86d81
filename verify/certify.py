"""Deprecated: latency certification moved to `tickformer.certify` (its own package: it shares
nothing with the proofs and property tests of `tickformer.verify`). This name re-exports the
campaign and `estimate_pwcet` until the next artifact format change, then goes away.
"""

from __future__ import annotations

import warnings

from tickformer.certify.campaign import *  # noqa: F403
from tickformer.certify.campaign import __all__  # noqa: F401
from tickformer.certify.evt import estimate_pwcet  # noqa: F401

warnings.warn(
    "tickformer.verify.certify is deprecated: import from tickformer.certify instead",
    DeprecationWarning,
    stacklevel=2,
)
