"""`tickformer info --preset NAME` or `tickformer info CKPT_DIR`.

Prints a model configuration and its parameter count (thousands separators; tied embedding
counted once, as in the paper). For a checkpoint directory the checkpoint is fully verified
first (hashes, names, shapes, dtypes) and its task, metrics and files are shown too. With no
argument, lists the presets. `--json` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HELP = "show a preset's or a checkpoint's configuration and parameter count"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "checkpoint", nargs="?", type=Path, default=None, help="checkpoint directory (tickformer train --out)"
    )
    p.add_argument(
        "--preset", default=None, help="preset name, e.g. paper-base, paper-big, control, reverse, tiny"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _config_lines(config: Any) -> list[str]:
    fields = config.to_dict()
    width = max(len(k) for k in fields)
    return [f"  {k:<{width}}  {v}" for k, v in fields.items()] + [f"  {'d_head':<{width}}  {config.d_head}"]


def run(args: argparse.Namespace) -> int:
    from tickformer.errors import ConfigError
    from tickformer.model.config import PRESETS, parameter_count, preset

    if args.checkpoint is not None and args.preset is not None:
        raise ConfigError("give either a checkpoint directory or --preset NAME, not both")
    if args.checkpoint is None and args.preset is None:
        rows = {name: parameter_count(cfg) for name, cfg in PRESETS.items()}
        if args.json:
            print(json.dumps({"presets": rows}, indent=2))
        else:
            width = max(len(n) for n in rows)
            for name, count in rows.items():
                cfg = PRESETS[name]
                print(
                    f"{name:<{width}}  {count:>12,} parameters  ({cfg.arch}, {cfg.inputs}, d_model {cfg.d_model}, "
                    f"{cfg.n_enc_layers}+{cfg.n_layers} layers)"
                )
        return 0
    if args.preset is not None:
        config = preset(args.preset)
        count = parameter_count(config)
        if args.json:
            print(
                json.dumps({"preset": args.preset, "config": config.to_dict(), "parameters": count}, indent=2)
            )
        else:
            print(f"preset {args.preset}")
            print("\n".join(_config_lines(config)))
            print(f"parameters {count:,}")
        return 0

    from tickformer.model.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.checkpoint)
    count = parameter_count(ckpt.config)
    manifest = ckpt.manifest  # the verified checkpoint.json: never opened again by path
    if args.json:
        print(
            json.dumps(
                {
                    "checkpoint": str(args.checkpoint),
                    "config": ckpt.config.to_dict(),
                    "parameters": count,
                    "meta": ckpt.meta,
                    "files": manifest["files"],
                },
                indent=2,
            )
        )
        return 0
    print(f"checkpoint {args.checkpoint} (verified: {len(manifest['files'])} files, SHA-256 ok)")
    print("\n".join(_config_lines(ckpt.config)))
    print(f"parameters {count:,}")
    meta = ckpt.meta
    for key in ("task", "preset", "seed", "steps"):
        if key in meta:
            print(f"{key} {meta[key]}")
    metrics = meta.get("metrics")
    if isinstance(metrics, dict):
        shown = {k: v for k, v in metrics.items() if isinstance(v, (int, float, bool))}
        print(
            "held-out metrics "
            + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items())
        )
        for key in ("target", "baseline", "rmse_units"):
            if isinstance(metrics.get(key), str):
                print(f"  {key}: {metrics[key]}")
    for name, entry in sorted(manifest["files"].items()):
        print(f"  {name:<16} {entry['bytes']:>10,} bytes  sha256 {entry['sha256'][:16]}...")
    return 0
