"""tickformer.verify.properties: Hypothesis property tests of exported models (`tickformer verify`).

models      what is verified: one of our artifacts (runtime sessions) or a bare ONNX model
strategies  inputs inside (and just outside) the declared domain
checks      the properties (finite outputs, causality, step == full, stale cache, ...)
runner      running them with shrinking, saving counterexamples; `verify_model`
"""

from .checks import (
    check_causal,
    check_finite,
    check_numpy_vs_backend,
    check_rejected_step,
    check_stale_cache,
    check_step_full,
)
from .models import ArtifactModel, OnnxModel, open_model
from .runner import PropertyResult, run_property, save_counterexample, verify_model
from .strategies import domain_arrays, out_of_domain_values

__all__ = [
    "ArtifactModel",
    "OnnxModel",
    "PropertyResult",
    "check_causal",
    "check_finite",
    "check_numpy_vs_backend",
    "check_rejected_step",
    "check_stale_cache",
    "check_step_full",
    "domain_arrays",
    "open_model",
    "out_of_domain_values",
    "run_property",
    "save_counterexample",
    "verify_model",
]
