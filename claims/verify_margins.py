"""The tolerance margins and planted-bug outcomes of docs/verify.md, measured (about a minute).

    python claims/verify_margins.py --out claims/results/verify_margins.json [--examples 50]

Runs `verify_model` (seed 0) on the foreign models the tests build (tests/verify/foreign_models.py
with onnx.helper; tests/verify/torch_models.py with torch.onnx when torch is installed) and
records, per model and property, the status and, for the comparisons (step_equals_full,
optimizations_agree, onnx_reference), the stated tolerance and the measured margin (the worst
normwise gap over the examples divided by the tolerance).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPARISONS = ("step_equals_full", "optimizations_agree", "onnx_reference")


def _models(tmp: Path) -> dict[str, tuple[Path, dict]]:
    sys.path.insert(0, str(ROOT / "tests" / "verify"))
    import foreign_models as fm

    out: dict[str, tuple[Path, dict]] = {
        "signal_causal": (fm.signal_model(tmp / "causal.onnx", "causal"), {"domain": (-1.0, 1.0)}),
        "signal_leaky": (fm.signal_model(tmp / "leaky.onnx", "leaky"), {"domain": (-1.0, 1.0)}),
        "signal_nan": (fm.signal_model(tmp / "nan.onnx", "nan"), {"domain": (-1.0, 1.0)}),
        "signal_pole": (fm.signal_model(tmp / "pole.onnx", "pole"), {"domain": (-1.0, 1.0)}),
        "signal_baked": (fm.signal_model(tmp / "baked.onnx", "baked"), {"domain": (-1.0, 1.0)}),
        "masked": (fm.masked_model(tmp / "masked.onnx"), {"domain": (-1.0, 1.0)}),
        "masked_leak": (fm.masked_model(tmp / "masked_leak.onnx", leak=True), {"domain": (-1.0, 1.0)}),
    }
    for bug in (None, "off_by_one", "leak_future"):
        full, step = fm.lm_pair(tmp / f"lm_{bug}", bug)
        out[f"lm_pair_{bug or 'correct'}"] = (full, {"step": step})
    try:
        import torch_models as tm
    except ImportError:  # torch not installed: the onnx.helper models only
        return out
    for bug in (None, "off_by_one"):
        full, step = tm.export_gpt(tmp / f"gpt_{bug}", bug)
        out[f"torch_gpt_{bug or 'correct'}"] = (full, {"step": step})
    out["torch_baked"] = (tm.export_baked(tmp / "tbaked.onnx"), {"domain": (-1.0, 1.0)})
    return out


def measure(examples: int) -> dict:
    from tickformer.artifact.foreign.spec import Flags
    from tickformer.verify.properties import verify_model
    from tickformer.verify.properties.models import ForeignModel

    models: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, flags) in _models(Path(tmp)).items():
            model = ForeignModel(path, flags=Flags(**flags))
            try:
                results = verify_model(model, examples=examples, seed_value=0)
            finally:
                model.close()
            entry: dict = {}
            for r in results:
                item = {"status": r.status, "examples": r.examples}
                if r.name in COMPARISONS and "margin" in r.details:
                    item.update(
                        margin=r.details["margin"],
                        gap=r.details["worst_gap"],
                        tol=r.details["tolerance_used"],
                    )
                entry[r.name] = item
            models[name] = entry
    worst = {  # over the models where the comparison holds (a planted bug's margin is its failure)
        p: max(
            (
                m[p]["margin"]
                for m in models.values()
                if "margin" in m.get(p, {}) and m[p]["status"] == "pass"
            ),
            default=None,
        )
        for p in COMPARISONS
    }
    return {"models": models, "worst_margin": worst}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--examples", type=int, default=50)
    args = parser.parse_args()
    import numpy as np
    import onnx
    import onnxruntime

    start = time.monotonic()
    data = measure(args.examples)
    data.update(
        utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        command=f"python claims/verify_margins.py --out {args.out} --examples {args.examples}",
        examples=args.examples,
        seed=0,
        wall_s=round(time.monotonic() - start, 1),
        versions={
            "python": platform.python_version(),
            "numpy": np.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
        },
    )
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
