"""The native and the Python-path campaign of one artifact, side by side, and the static bound
(docs/certify.md, "The deployed step, timed where it runs"; issue 41).

    python benchmarks/certify_native.py [--samples 50000] [--cpu 1] [--out runs/certify_native]

The artifact: the control preset of docs/codegen.md (d_model 64, 4 heads, 2 layers, max_len 256,
seed 0). Two campaigns of `tickformer certify ... --backend c`, both pinned to --cpu with
--realtime and a 1 ms budget: `--native` (the generated C step built with the deployment flags,
timed in C in its own process; with the static bound) and the Python call path (Session.step over
the same C library). Writes benchmarks/results/certify_native.json (the figures the document
states, with the load average before each run) and keeps both reports (report.html) under --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tickformer.cli import main as cli
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset


def _figures(cert: dict) -> dict:
    st = cert["stats"]
    return {
        "p50_us": st["p50"] / 1e3,
        "p99_9_us": st["p99.9"] / 1e3,
        "max_us": st["max"] / 1e3,
        "min_us": st["min"] / 1e3,
        "n": st["n"],
        "over_budget": cert["over_budget"],
        "verdict": cert["verdict"],
        "pwcet": cert["pwcet"],
        "reasons": cert["reasons"],
        "load_average_before": cert["conditions"]["load_average"],
        "isolation": {k: v["granted"] for k, v in cert["conditions"]["isolation"].items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=50_000)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "certify_native")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "certify_native.json")
    args = ap.parse_args()
    art = args.out / "control-art"
    if not art.exists():
        cfg = preset("control")
        export_params(cfg, init_params(cfg, 0), art)
    common = ["--backend", "c", "--budget-us", "1000", "--samples", str(args.samples), "--cpu", str(args.cpu)]
    common += ["--realtime", "--quiet"]
    runs = {"native": ["--native"], "python": []}
    out: dict = {
        "utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "artifact": "preset control, init_params seed 0 (docs/codegen.md)",
        "commands": {},
    }
    certs = {}
    for name, extra in runs.items():
        rep = args.out / name
        argv = ["certify", str(art), *common, *extra, "--out", str(rep)]
        shown = ["ART" if a == str(art) else ("DIR" if a == str(rep) else a) for a in argv]
        out["commands"][name] = "tickformer " + " ".join(shown)
        cli(argv)
        certs[name] = json.loads((rep / "certificate.json").read_text())
        out[name] = _figures(certs[name])
    static = certs["native"]["static_bound"]
    machine = static["machine"]
    env = certs["native"]["conditions"]["environment"]
    out["static_bound"] = {
        "value_us": static["value_ns"] / 1e3,
        "bound_by": static["bound_by"],
        "flops": static["flops"],
        "bytes_touched": static["bytes_touched"],
        "compute_us": static["compute_ns"] / 1e3,
        "memory_us": static["memory_ns"] / 1e3,
        "cold_memory_us": static["cold_memory_ns"] / 1e3,
        "peak_gflops": machine["peak_flops_per_s"] / 1e9,
        "bw_working_set_gbs": machine["read_bw_working_set_bytes_per_s"] / 1e9,
        "bw_64mib_gbs": machine["read_bw_64mib_bytes_per_s"] / 1e9,
        "native_p50_over_bound": certs["native"]["stats"]["p50"] / static["value_ns"],
        "native_min_over_bound": certs["native"]["stats"]["min"] / static["value_ns"],
        "consistent_with_measurement": static["consistent_with_measurement"],
    }
    out["machine"] = {
        "cpu_model": certs["native"]["conditions"]["cpu_model"],
        "cpu_count": env["cpu_count"],
        "governor": env["cpu"][str(args.cpu)]["governor"],
        "flags": certs["native"]["conditions"]["native"]["step_flags"],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("native", "python", "static_bound")}, indent=1)[:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
