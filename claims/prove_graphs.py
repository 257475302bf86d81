"""The graph proofs of docs/assurance.md, on reference artifacts of every kind (about half a minute).

    python claims/prove_graphs.py --out claims/results/prove_graphs.json

Exports one artifact per kind from initial weights (seeded; the proofs are about the graphs'
structure, which training does not change) -- decoder-only (tiny, and control for the time at a
realistic max_len), windowed (tiny, W = 4), encoder-decoder (tiny-seq2seq), ssm (tiny, d_state 3)
-- and runs `tickformer prove ART` on each (verify/proofs/graphs/), recording every claim and
the interpretation time. The same proofs on the user's own artifact: `tickformer prove ART`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (kind as the manifest names it, preset, config changes)
ARTIFACTS: tuple[tuple[str, str, dict], ...] = (
    ("decoder", "tiny", {}),
    ("decoder", "control", {}),
    ("windowed", "tiny", {"window": 4}),
    ("encoder-decoder", "tiny-seq2seq", {}),
    ("ssm", "tiny", {"block": "ssm", "d_state": 3}),
)


def run(out: Path) -> dict:
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset
    from tickformer.verify.proofs.graphs import driver

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, name, changes in ARTIFACTS:
            cfg = preset(name).replace(**changes) if changes else preset(name)
            art = Path(tmp) / f"{kind}-{name}"
            export_params(cfg, init_params(cfg, seed=0), art)
            start = time.monotonic()
            proofs = driver.prove_artifact(str(art))
            report = driver.report(proofs, time.monotonic() - start)
            for g in report["graphs"]:
                g["file"] = "ART/" + Path(g["file"]).name  # not the temporary directory
            results.append({"kind": kind, "preset": name, "changes": changes, "report": report})
            print(f"{kind} ({name}): {report['status']}, {report['wall_s']:.1f} s", flush=True)
    data = {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python claims/prove_graphs.py --out claims/results/prove_graphs.json",
        "machine": platform.machine(),
        "note": "one artifact per kind, exported from seeded initial weights; `tickformer prove ART` on each",
        "ok": all(a["report"]["ok"] for a in results),
        "artifacts": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "claims" / "results" / "prove_graphs.json")
    args = parser.parse_args()
    data = run(args.out)
    raise SystemExit(0 if data["ok"] else 1)


if __name__ == "__main__":
    main()
