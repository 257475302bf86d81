"""Render the bench section of docs/ssm.md from benchmarks/results/ssm_bench.json (ssm_bench.py).

    .venv/bin/python benchmarks/ssm_report.py [benchmarks/results/ssm_bench.json]

Prints markdown tables (no number is typed by hand). Not a pytest file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _kib(n: int) -> str:
    return (
        f"{n / 1024:,.0f} KiB"
        if n < 2**20
        else f"{n / 2**20:,.1f} MiB"
        if n < 2**30
        else f"{n / 2**30:,.2f} GiB"
    )


def render(report: dict) -> str:
    models = report["models"]
    names = list(models)
    lines = [
        f"Task `{report['task']}`, {report['train_steps']} training steps per model (same trainer, batch, seed); "
        f"`{report['command']}`.",
        "",
        "| model | parameters | held-out one-step RMSE | linear AR baseline | training s (s/step) "
        "| ORT step p50 / p99 (us) |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        m = models[name]
        cfg = m["config"]
        label = name + (f" (W = {cfg['window']})" if cfg.get("window") else "")
        label += f" (N = {cfg['d_state']}, d_ff {cfg['d_ff']})" if cfg.get("block") == "ssm" else ""
        lines.append(
            f"| {label} | {m['parameters']:,} | {m['held_out_rmse']:.4f} | {m['baseline_rmse']:.4f} | "
            f"{m['train_seconds']:.1f} ({m['train_seconds_per_step']:.3f}) | "
            f"{m['ort_step']['p50_us']:.1f} / {m['ort_step']['p99_us']:.1f} |"
        )
    lengths = list(models[names[0]]["state_bytes"])
    lines += [
        "",
        "State a step reads, per stream, and step cost at stream length n (median us; full attention: a static "
        "cache of n rows, so max_len = n; the others: one stream, the 1,000 steps before n):",
        "",
        "| n | "
        + " | ".join(f"{name} state" for name in names)
        + " | "
        + " | ".join(f"{name} step" for name in names)
        + " |",
        "|---|" + "---|" * (2 * len(names)),
    ]
    for n in lengths:
        states = [_kib(models[name]["state_bytes"][n]) for name in names]
        costs = []
        for name in names:
            c = models[name]["step_cost"].get(n, {})
            costs.append(
                f"{c['median_us']:.1f}" if "median_us" in c else f"not run ({c.get('skipped', 'n/a')})"
            )
        lines.append(f"| {int(n):,} | " + " | ".join(states) + " | " + " | ".join(costs) + " |")
    return "\n".join(lines)


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/ssm_bench.json")
    print(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
