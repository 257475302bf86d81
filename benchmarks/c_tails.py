"""The tails of the C and ORT steps with enough samples to mean something (docs/codegen.md, "Tails").

    python benchmarks/c_tails.py [--rounds 300] [--last 32]

benchmarks/test_c_step.py judges the tail target (the C step's p99.9/p50 no worse than the ORT
step's) on 4 positions at max_len over 150 rounds: 600 samples per subject, so its p99.9 is about
the largest sample and moves from run to run. Here the same subjects -- Session.step on backend
"c" and on backend "ort", the control preset's seeded model (benchmarks/conftest.py `control`),
one thread, flush-to-zero, x as in test_c_step.py -- run interleaved, one whole sequence of each
in turn per round, and the statistics are over the last `--last` positions of every round:
rounds x last samples per subject. The static cache reads all of its rows at every position, so
those positions do the same work as max_len itself.

Twice: as the benchmarks run (the garbage collector frozen and disabled: harness.quiet_gc), then
inside certify.campaign.Isolation(realtime=True, cpu=1) -- SCHED_FIFO, mlockall, pinned to CPU 1,
each request and whether it was granted recorded. Writes benchmarks/results/c_tails.json. Not
part of the package; about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import tickformer.codegen  # noqa: F401  (registers backend "c"'s library builder: runtime/backends/c.py)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import subjects  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "c_tails.json"


def interleaved_tails(subjects_: dict, n: int, rounds: int, last: int) -> dict:
    """Per subject: harness.summarize over the last `last` positions of `rounds` sequences, each
    subject's whole sequence in turn per round (3 warm-up rounds discarded)."""
    out = harness.interleaved_sequences(subjects_, n, rounds, warmup_rounds=3)
    return {name: harness.summarize(samples[:, n - last :]) for name, samples in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--last", type=int, default=32, help="positions at the end of each sequence")
    args = ap.parse_args()
    from tickformer import runtime
    from tickformer.certify.isolation import Isolation
    from tickformer.model import init_params, preset
    from tickformer.runtime.denormals import flushed_denormals

    config = preset("control")
    x = np.random.default_rng(7).standard_normal((1, 1, config.d_in)).astype(np.float32)  # [1, 1, d_in]
    result = {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python benchmarks/c_tails.py --rounds {args.rounds} --last {args.last}",
        "load_average_before": list(os.getloadavg()),
        "rounds": args.rounds,
        "last_positions": args.last,
    }
    with tempfile.TemporaryDirectory() as tmp, flushed_denormals():
        art = subjects.export_artifact(config, init_params(config, seed=0), Path(tmp))
        sessions = {"c": runtime.load(art, backend="c"), "ort": subjects.open_session(art, "ort")}
        subjects_ = {name: subjects.session_subject(name, s, x) for name, s in sessions.items()}
        n = sessions["c"].max_len
        try:
            result["plain"] = interleaved_tails(subjects_, n, args.rounds, args.last)
            with Isolation(realtime=True, cpu=1) as iso:
                result["isolated"] = interleaved_tails(subjects_, n, args.rounds, args.last)
            result["isolation"] = iso.granted
        finally:
            for s in subjects_.values():
                s.close()
    for mode in ("plain", "isolated"):
        stats = result[mode]
        print(
            f"{mode}: p99.9/p50 c {stats['c']['tail_ratio']:.2f} ({stats['c']['p50']:.1f} / "
            f"{stats['c']['p99.9']:.1f} us), ort {stats['ort']['tail_ratio']:.2f} ({stats['ort']['p50']:.1f} / "
            f"{stats['ort']['p99.9']:.1f} us), n {stats['c']['n']}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
