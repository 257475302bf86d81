"""`tickformer verify ART --weights F`: the compiled C step of a weight format, property-tested.

codegen --weights F stores the layer matrices in fewer bytes (codegen/weights.py) and computes in
float32. Two properties hold the compiled step of F (built by codegen, loaded by backend "c"),
each over Hypothesis-drawn sequences of the artifact's domain (its edges included: the
strategies of verify/properties/strategies.py), stepped from a reset:

    weight_format_equivalence   the step equals the numpy model with the weights as stored
                                (weights.rounded_params), within the artifact's tolerance
                                elementwise: atol + rtol |reference| (the bitwise contract class
                                of every C step, docs/codegen.md "Equivalence")
    weight_format_bound         the step is within the format's stated bound of the fp32 model
                                (the numpy backend, weights not rounded): per sequence,
                                max |y_F - y_fp32| <= weights.fp32_bound(F) max |y_fp32|, the
                                same bound tf_test checks on the golden sequences

The first rests on the rounding being exact in C (proved for every 16-bit pattern in the tests);
the second on the measured propagation of the per-weight rounding through softmax and the
LayerNorms (docs/codegen.md, "The bound against the fp32 model"): verify tests it on drawn
sequences, it does not prove it. Needs a C compiler (BackendUnavailable names the fix otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from tickformer import runtime
from tickformer.codegen import plan_for
from tickformer.codegen import weights as formats
from tickformer.contracts.decode_equivalence import equivalence_excess
from tickformer.model.transformer import forward
from tickformer.verify.properties.models import open_artifact_model
from tickformer.verify.properties.results import SKIP_REQUESTED, PropertyResult
from tickformer.verify.properties.runner import run_property

NAMES = ("weight_format_equivalence", "weight_format_bound")


def check_supported(path: Path, fmt: str, trust: Path | None = None) -> None:
    """Refuse (ArtifactError, naming why) a format or an artifact the generator cannot build,
    before any property runs."""
    from tickformer.runtime import open_artifact

    plan_for(open_artifact(path, trust=trust), formats.check_format(fmt))


def verify_format(
    path: Path,
    fmt: str,
    *,
    max_t: int,
    trust: Path | None,
    examples: int,
    seed_value: int | None,
    out_dir: Path | None,
    domain: tuple[float, float] | None = None,
    cache_dir: Path | None = None,
    skip: Iterable[str] = (),
) -> list[PropertyResult]:
    """The two properties of the module docstring for the step of format `fmt` of artifact `path`
    (one named in `skip` is reported skipped, not run)."""
    fp32 = open_artifact_model(Path(path), "numpy", max_t, trust)  # the fp32 reference and the strategies
    try:
        artifact = fp32.session.artifact
        stored = formats.rounded_params(artifact.params(), fp32.config, fmt)
        tol = fp32.tolerance
        bound = formats.fp32_bound(fmt)  # fp32: 64 u, the normwise part of every C step's contract
        strategy = fp32.sequences(fp32.t_range, domain)
        # the step as the runtime builds it for weights=fmt (backend "c"'s builder, codegen's
        # build_for: plan_for refuses what it cannot generate), not a library built beside it
        with runtime.load(path, backend="c", weights=fmt, cache_dir=cache_dir, trust=trust) as c:
            library = c.backend.library_path

            def stepped(session: Any, x: np.ndarray) -> np.ndarray:
                fp32.start(session, x)  # a reset, as every artifact check starts a sequence
                return fp32.steps(session, x)  # [B, T, G]

            def equivalence(x: np.ndarray) -> Any:
                y = stepped(c, x)
                r = forward(stored, fp32.config, np.ascontiguousarray(x))
                excess = equivalence_excess(y, r, tol["rtol"], tol["atol"])  # the C step's contract
                if excess <= 0:
                    return None
                return (
                    f"the {fmt} step differs from the numpy model with the weights as stored beyond atol "
                    f"{tol['atol']} + rtol {tol['rtol']} (excess {excess:.3g})",
                    {"x": np.asarray(x), "y_format": y, "y_stored": r},
                )

            def within_bound(x: np.ndarray) -> Any:
                y = stepped(c, x).astype(np.float64)
                r = stepped(fp32.session, x).astype(np.float64)
                err, scale = float(np.abs(y - r).max()), float(np.abs(r).max())
                if np.isfinite(err) and err <= bound * scale:
                    return None
                return (
                    f"the {fmt} step is {err!r} from the fp32 model, over its bound {bound!r} x max |y_fp32| "
                    f"{scale!r} = {bound * scale!r} (weights.fp32_bound)",
                    {"x": np.asarray(x), "y_format": y, "y_fp32": r},
                )

            results = []
            for name, check in zip(NAMES, (equivalence, within_bound), strict=True):
                if name in skip:
                    results.append(PropertyResult(name, "skip", 0, SKIP_REQUESTED))
                    continue
                result = run_property(
                    name, strategy, check, examples=examples, seed_value=seed_value, out_dir=out_dir
                )
                result.details.update(
                    {"weights": fmt, "library": library}
                    | ({"tolerance": tol} if name == NAMES[0] else {"bound_rel": bound})
                )
                if result.status == "pass":
                    result.message = (
                        f"{fmt} step = numpy with the stored weights, within atol {tol['atol']} + rtol {tol['rtol']}"
                        if name == NAMES[0]
                        else f"{fmt} step within {bound:.3g} x max |y_fp32| of the fp32 model"
                    )
                results.append(result)
            return results
    finally:
        fp32.close()
