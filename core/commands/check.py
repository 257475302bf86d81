"""`tickformer check ART --target trt-10.3|trt-10|trt-11`: offline lint for TensorRT.

Checks every exported graph of an artifact (or one bare .onnx file) against an operator table
transcribed from onnx-tensorrt's docs/operators.md for the target release (opset range,
supported operators and their documented restrictions), plus static-shape, dtype and
fp16-range checks (see `tickformer.export.trt_support` for the tables and their sources). A bare
model's KV-cache step graph (--step, or the spec's cache.step) is checked too, as a graph of
dynamic shapes (its past length grows: TensorRT needs an optimization profile for it). It
does not run TensorRT's ONNX parser: a graph that passes can still be refused by it. Prints one
line per finding and a summary; exits 1 when any finding is an error, 0 otherwise. Needs
neither a GPU nor TensorRT.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tickformer.commands import args as shared


def register(subparsers: argparse._SubParsersAction) -> None:
    from tickformer.export.trt_support import target_names

    p = subparsers.add_parser(
        "check",
        help="lint exported graphs against onnx-tensorrt's documented operator table of a release, "
        "plus shape/dtype/fp16-range checks (no GPU; not the parser itself)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    shared.artifact(p, help="exported artifact directory, or one .onnx file")
    shared.trust(p)
    shared.bare_onnx(p, values=False)
    p.add_argument(
        "--target",
        required=True,
        choices=target_names(),
        help="TensorRT release line: trt-10.3 (JetPack 6), trt-10 (latest 10.x), trt-11",
    )
    p.add_argument("--notes", action="store_true", help="also print notes (facts, not problems)")
    p.add_argument("--json", action="store_true", help="print the findings as one JSON document")
    p.set_defaults(func=run)


def _step_findings(args: argparse.Namespace, spec) -> list:
    """A bare model's step graph (--step, or the spec's cache.step), read once through the safe
    loader and checked as a dynamic-shape graph; the spec file itself is checked on the way."""
    from tickformer.errors import ConfigError

    if args.step is None and args.spec is None:
        return []
    if args.artifact.is_dir():
        raise ConfigError(
            f"--step and --spec describe bare ONNX models; {args.artifact} is an artifact directory, whose manifest "
            "lists its graphs: remove them"
        )
    from tickformer.artifact.foreign.graph import read_graph
    from tickformer.artifact.foreign.inference import open_signature
    from tickformer.artifact.foreign.spec import Flags
    from tickformer.export.trt_support import Finding, check_model

    sig, _, step_data = open_signature(
        args.artifact, spec=args.spec, flags=Flags(step=args.step, require_domain=False)
    )
    if step_data is None or sig.cache is None:
        return []
    _, model = read_graph(sig.cache.step)
    name = Path(sig.cache.step).name
    note = Finding(
        "note",
        name,
        "step-dynamic",
        "graph",
        "a KV-cache step graph: checked with dynamic shapes (its past length grows; a TensorRT engine needs an "
        "optimization profile covering the cache lengths)",
    )
    return [*check_model(model, spec, role="full", graph=name), note]


def run(args: argparse.Namespace) -> int:
    from tickformer.export.trt_support import check_path, count, target

    spec = target(args.target)
    findings = check_path(args.artifact, spec, trust=args.trust)
    findings += _step_findings(args, spec)
    errors, warnings, notes = (count(findings, s) for s in ("error", "warning", "note"))
    if args.json:
        doc = {
            "target": spec.name,
            "trt_version": spec.trt_version,
            "source": spec.source,
            "errors": errors,
            "warnings": warnings,
            "notes": notes,
            "findings": [f.__dict__ for f in findings],
        }
        print(json.dumps(doc, indent=2))
    else:
        for f in findings:
            if f.severity != "note" or args.notes:
                print(f.line())
        verdict = "FAIL" if errors else "ok"
        print(
            f"check {spec.name}: {verdict}: {errors} error(s), {warnings} warning(s), {notes} note(s) "
            f"in {args.artifact}"
        )
    return 1 if errors else 0
