"""Where a control loop's resident memory grows (docs/control.md, "Where the resident memory
comes from"): the demo's model loop (HistoryMPC on the batch-K windowed artifact, ORT, contracts
in monitor mode, `Isolation(realtime=True)`: SCHED_FIFO + mlockall where granted) for N ticks,
the process RSS read every 1000 ticks, and the anonymous mappings whose resident size grew
between ticks 3000 and 6000 (/proc/self/smaps).

    tickformer demo --quick --out DIR             # a trained model and its artifact (seconds)
    python experiments/ort_thread_rss.py DIR 8000   # [stall]: sleep 12-22 ms at five ticks
    strace -f -tt -e trace=clone3 python experiments/ort_thread_rss.py DIR 8000   # who makes threads

Observed here (onnxruntime 1.32.0): RSS +1 MiB in the first 1000 ticks, +17 MiB around 9-10 s
after the start, flat after; the grown mappings are two 8 MiB thread stacks and four malloc
arenas, made by a thread of onnxruntime's that starts short-lived threads every ~5.5 s.
Not part of the package or the test suite.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from tickformer.certify.isolation import Isolation
from tickformer.control import demo as D
from tickformer.control.delayed import HistoryMPC
from tickformer.model.checkpoint import load_checkpoint
from tickformer.runtime import load


def smaps() -> dict[tuple[str, str], int]:
    """(address range, path) -> Rss in KiB, for every mapping of this process."""
    out: dict[tuple[str, str], int] = {}
    cur = ("", "")
    with open("/proc/self/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                cur = (parts[0], parts[5] if len(parts) > 5 else "[anon]")
            elif line.startswith("Rss:"):
                out[cur] = int(line.split()[1])
    return out


def main() -> None:
    demo_dir, ticks = Path(sys.argv[1]), int(sys.argv[2])
    stall = len(sys.argv) > 3 and sys.argv[3] == "stall"
    cfg = D.DemoConfig(quick=True, ticks=ticks)
    plant = D.loop_plant(cfg)
    norm = load_checkpoint(demo_dir / "checkpoint").meta["norm"]
    summary = json.loads((demo_dir / "demo_summary.json").read_text())
    session = load(demo_dir / "artifact", backend="ort", contracts="monitor", budget_ns=cfg.tick_budget_ns)
    ctl = HistoryMPC(
        session,
        norm,
        plant,
        summary["export"]["model"]["output_bound"],
        catch_up_max=cfg.catch_up_max,
        kp=cfg.kp,
        w_omega=cfg.w_omega,
    )
    sim = D.HiddenPlantSim(plant, D.reference(cfg), cfg.ticks * 64, seed=0)
    trail = np.zeros(ticks // 1000 + 1, dtype=np.int64)  # RSS every 1000 ticks, preallocated
    snaps: dict[int, dict] = {}
    plant_observe = sim.observe

    def observe(k: int) -> np.ndarray:
        if k % 1000 == 0:
            trail[k // 1000] = D.rss_bytes()
            if k in (3000, 6000):
                snaps[k] = smaps()
        if stall and k in (1000, 1500, 2000, 2500, 3000):
            time.sleep(0.012 + 0.002 * (k // 500))
        return plant_observe(k)

    sim.observe = observe
    r = D.run_loop(ctl, sim, cfg, isolation=lambda: Isolation(realtime=True))
    print("rss growth after the warm-up ticks (bytes):", r["rss_end_bytes"] - r["rss_warm_bytes"])
    print("fallbacks", r["fallbacks"], "misses", r["deadline_misses"], "skipped", ctl.skipped)
    print("RSS every 1000 ticks, KiB above tick 0:", [(int(x) - int(trail[0])) // 1024 for x in trail])
    if 3000 in snaps and 6000 in snaps:
        a, b = snaps[3000], snaps[6000]
        grown = {k: v - a.get(k, 0) for k, v in b.items() if v - a.get(k, 0) > 64}
        print("mappings grown between ticks 3000 and 6000 (KiB):", grown)


if __name__ == "__main__":
    main()
