"""The planted-defect family of docs/verify.md, measured (about five minutes on one core).

    python claims/verify_defects.py --out claims/results/verify_defects.json [--examples 50]

Builds every member of the family (tests/verify/foreign_models.py planted_defect: a pole, a cusp
and a threshold, direct on x or on the mix x @ [0.6, 0.3, 0.1], at 5 places and 4 widths: 120
models, each |y| <= 10 but on |d - place| < width) and runs output_bound at the default example
count, seed 0, twice: with the graph's break points in the strategies and the targeted search
after the examples (search=True, what verify does), and without them (search=False). Records
per member whether output_bound found the broken bound, and the counts per kind and route.
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


def measure(examples: int) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "verify"))
    import foreign_models as fm

    from tickformer.artifact.foreign.spec import Flags
    from tickformer.verify.properties import verify_model
    from tickformer.verify.properties.models import ForeignModel

    members = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in fm.DEFECT_KINDS:
            for route in fm.DEFECT_ROUTES:
                for place in fm.DEFECT_PLACES:
                    for width in fm.DEFECT_WIDTHS:
                        path = fm.planted_defect(
                            Path(tmp) / f"{kind}_{route}_{place}_{width}.onnx", kind, place, width, route
                        )
                        row = {"kind": kind, "route": route, "place": place, "width": width}
                        for search in (True, False):
                            flags = Flags(
                                domain=(-1.0, 1.0), output_bound=fm.DEFECT_BOUND, skip=fm.DEFECT_SKIP
                            )
                            model = ForeignModel(path, flags=flags, search=search)
                            try:
                                r = next(
                                    r
                                    for r in verify_model(model, examples=examples, seed_value=0)
                                    if r.name == "output_bound"
                                )
                            finally:
                                model.close()
                            key = "found" if search else "found_without_search"
                            row[key] = r.status == "fail"
                            if search:
                                row["by_search"] = "targeted search" in r.message
                        members.append(row)
    counts: dict[str, dict[str, int]] = {}
    for key in ("found", "found_without_search"):
        counts[key] = {"all": sum(m[key] for m in members)}
        for kind in fm.DEFECT_KINDS:
            for route in fm.DEFECT_ROUTES:
                counts[key][f"{kind}_{route}"] = sum(
                    m[key] for m in members if m["kind"] == kind and m["route"] == route
                )
    counts["by_search"] = {"all": sum(m.get("by_search", False) for m in members)}
    return {
        "members": members,
        "counts": counts,
        "total": len(members),
        "per_group": len(fm.DEFECT_PLACES) * len(fm.DEFECT_WIDTHS),
        "places": list(fm.DEFECT_PLACES),
        "widths": list(fm.DEFECT_WIDTHS),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "claims" / "results" / "verify_defects.json")
    p.add_argument("--examples", type=int, default=50)
    args = p.parse_args()
    start = time.time()
    data = measure(args.examples)
    doc = {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python claims/verify_defects.py --out claims/results/verify_defects.json",
        "examples": args.examples,
        "seed": 0,
        "bound": 10.0,
        "python": platform.python_version(),
        "wall_s": round(time.time() - start, 1),
        **data,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["counts"], indent=1))


if __name__ == "__main__":
    main()
