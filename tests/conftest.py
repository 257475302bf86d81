"""Shared test settings: Hypothesis profiles sized for 2-core CI machines.

`ci` (default): no per-example deadline (shared machines are noisy; speed lives in benchmarks),
derandomized so CI runs are reproducible. `dev`: more examples, random seeds.
Select with HYPOTHESIS_PROFILE=dev.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=60,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
