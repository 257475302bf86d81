"""tickformer.verify.properties: Hypothesis property tests of exported models (`tickformer verify`).

models           what is verified: a bare ONNX model (ForeignModel) or one of our artifacts, a
                 class per artifact kind (ARTIFACT_KINDS)
strategies       inputs inside (and just outside) the declared domain
checks           the properties of our artifacts (finite outputs, causality, step == full, ...)
foreign_checks   the properties of bare ONNX models (dynamic axes, output bound, padding mask, ...)
tolerance        the normwise tolerance of comparisons that may reassociate float sums
plans            which properties apply to which kind of model (PLANS)
runner           running them with shrinking; `verify_model`
counterexamples  the shrunk counterexample of a property, saved as <property>.npz
report           the JSON report (schema: docs/verify.md) and its Markdown summary
"""

from .checks import (
    check_causal,
    check_finite,
    check_numpy_vs_backend,
    check_rejected_step,
    check_source_padding,
    check_stale_cache,
    check_step_full,
)
from .counterexamples import save_counterexample
from .models import ARTIFACT_KINDS, ArtifactModel, ForeignModel, OnnxModel, open_model
from .results import Property, PropertyResult
from .runner import run_property, verify_model
from .strategies import domain_arrays, out_of_domain_values, out_of_vocab_ids

__all__ = [
    "ARTIFACT_KINDS",
    "ArtifactModel",
    "ForeignModel",
    "OnnxModel",
    "Property",
    "PropertyResult",
    "check_causal",
    "check_finite",
    "check_numpy_vs_backend",
    "check_rejected_step",
    "check_source_padding",
    "check_stale_cache",
    "check_step_full",
    "domain_arrays",
    "open_model",
    "out_of_domain_values",
    "out_of_vocab_ids",
    "run_property",
    "save_counterexample",
    "verify_model",
]
