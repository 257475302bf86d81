"""`tickformer verify PATH`: Hypothesis property tests of an exported model under a real backend.

    tickformer verify PATH [--backend ort] [--examples N] [--seed S] [--domain LO:HI] [--max-t T] [--out DIR]

PATH: one of our artifacts (directory with manifest.json) or a bare .onnx file with one float
input [B, T, F] and one float output [B, T, G]. Exit 0 if every property holds, 1 otherwise
(each violation printed with its shrunk counterexample, saved as DIR/<property>.npz);
DIR/verify.json holds the report either way.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tickformer.commands import args as shared
from tickformer.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "verify",
        help="property-test an exported model (ours or a bare ONNX [B,T,F]->[B,T,G]) with Hypothesis",
    )
    shared.artifact(p, name="path", help="artifact directory or .onnx file")
    shared.backend(p, help="ort (CPU; default), ort-cuda, ort-trt; artifacts also numpy")
    shared.trust(p)
    p.add_argument(
        "--examples", type=int, default=50, metavar="N", help="Hypothesis examples per property (default 50)"
    )
    shared.seed(p, help="Hypothesis seed (reproducible)")
    shared.domain(p, help="input domain (default: the artifact's manifest; required for bare ONNX)")
    p.add_argument("--max-t", type=int, default=16, metavar="T", help="longest sequence drawn (default 16)")
    shared.out(p, default=Path("verify-out"), help="report and counterexamples (default ./verify-out)")
    p.set_defaults(func=run)


def _open(open_model, path: Path, backend: str, max_t: int, trust: Path | None = None):
    """open_model, naming the fix when a bare file is no graph onnxruntime can load (the loader's
    message says what failed, not what to pass instead)."""
    from tickformer.errors import ArtifactError

    try:
        return open_model(path, backend, max_t, trust=trust)
    except ArtifactError as exc:
        if path.is_dir() or "cannot load" not in str(exc):
            raise
        raise ArtifactError(f"{exc}; pass a valid .onnx file or an artifact directory") from None


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from tickformer.contracts.input_domain import parse_domain
    from tickformer.verify.properties import open_model, verify_model

    if args.examples < 1:
        raise ConfigError(f"--examples {args.examples} must be >= 1")
    domain = parse_domain(args.domain) if args.domain is not None else None
    console = Console()
    model = _open(open_model, args.path, args.backend, args.max_t, args.trust)
    start = time.monotonic()
    try:
        with console.status(f"verifying {args.path} ..."):
            results = verify_model(
                model, examples=args.examples, seed_value=args.seed, domain=domain, out_dir=args.out
            )
        used_domain = domain if domain is not None else model.domain
        info = model.describe()
    finally:
        model.close()
    wall = time.monotonic() - start
    ok = all(r.status != "fail" for r in results)
    report = {
        "model": info,
        "domain": list(used_domain) if used_domain is not None else None,
        "examples": args.examples,
        "seed": args.seed,
        "ok": ok,
        "wall_s": round(wall, 2),
        "properties": [r.to_dict() for r in results],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / ".verify.json.tmp"
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(args.out / "verify.json")

    table = Table(
        title=f"tickformer verify {args.path} ({info['kind']}, backend {args.backend}, domain {report['domain']})"
    )
    for col in ("property", "result", "examples", "detail"):
        table.add_column(col, overflow="fold")
    colors = {"pass": "green", "fail": "red", "skip": "yellow"}
    for r in results:
        detail = r.message + (f"\ncounterexample: {r.counterexample}" if r.counterexample else "")
        table.add_row(r.name, f"[{colors[r.status]}]{r.status}[/{colors[r.status]}]", str(r.examples), detail)
    console.print(table)
    for r in results:
        if r.status == "fail":
            _print_counterexample(console, r)
    console.print(
        f"{'OK' if ok else 'VIOLATED'}: {sum(r.status == 'pass' for r in results)} passed, "
        f"{sum(r.status == 'fail' for r in results)} failed, {sum(r.status == 'skip' for r in results)} skipped "
        f"in {wall:.1f} s; report {args.out / 'verify.json'}"
    )
    return 0 if ok else 1


def _print_counterexample(console, result) -> None:
    import numpy as np

    console.print(f"[red]{result.name} violated[/red]: {result.message}", soft_wrap=True, highlight=False)
    if result.counterexample:
        with np.load(result.counterexample) as data:
            for key in data.files:
                if key != "meta":
                    console.print(
                        f"  {key} {data[key].shape}: {np.array2string(data[key], threshold=24, precision=4)}",
                        soft_wrap=True,
                        highlight=False,
                    )
