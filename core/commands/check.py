"""`tickformer check ART --target trt-10.3|trt-10|trt-11`: offline lint for TensorRT.

Checks every exported graph of an artifact (or one bare .onnx file) against an operator table
transcribed from onnx-tensorrt's docs/operators.md for the target release (opset range,
supported operators and their documented restrictions), plus static-shape, dtype and
fp16-range checks (see `tickformer.export.trt_support` for the tables and their sources). A bare
model's KV-cache step graph (--step, or the spec's cache.step) is checked too, as a graph of
dynamic shapes (its past length grows: TensorRT needs an optimization profile for it). A bare
model is read as verify reads it (external data from its own folder) and its control flow is
checked: a Loop whose trip count is unbounded is a warning [unbounded-loop] (one run may never
end), a Scan or If a note. It does not run TensorRT's ONNX parser: a graph that passes can still
be refused by it. Prints one line per finding and a summary; exits 1 when any finding is an
error, 0 otherwise (a bare model past --time-budget / --memory-budget: one line, exit 2). Needs
neither a GPU nor TensorRT.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tickformer.commands import args as shared
from tickformer.commands import user_model

HELP = (
    "lint exported graphs against onnx-tensorrt's documented operator table of a release, "
    "plus shape/dtype/fp16-range checks (no GPU; not the parser itself)"
)


def arguments(p: argparse.ArgumentParser) -> None:
    from tickformer.export.trt_support import target_names

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
    user_model.budget_flags(p, "check")


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
    if sig.cache.same:
        return []  # the model is its own step graph: checked above
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
    return [*check_model(model, spec, role="full", graph=name), *flow_findings(model, name), note]


def flow_findings(model, graph: str) -> list:
    """Control flow of a bare model as findings: an unbounded Loop a warning, the rest notes."""
    from tickformer.artifact.foreign.control_flow import control_flow
    from tickformer.export.trt_support import Finding

    code = {"Loop": "loop", "Scan": "scan", "If": "if"}
    return [
        Finding(
            f.severity,
            graph,
            "unbounded-loop" if f.severity == "warning" else f"control-flow-{code[f.op]}",
            f.where,
            f.text,
        )
        for f in control_flow(model)
    ]


def _bare_findings(args: argparse.Namespace, spec) -> list:
    """A bare .onnx read as verify reads it (external data from its folder; an unreadable file is a
    finding), checked, with its control flow."""
    from tickformer.artifact.foreign.graph import read_graph
    from tickformer.errors import ArtifactError, TickformerError
    from tickformer.export.trt_support import Finding, check_model, role_of

    if args.trust is not None:
        raise ArtifactError(
            f"--trust applies to signed artifacts; {args.artifact} is a bare .onnx file, which carries no signature: "
            "pass the artifact directory"
        )
    name = args.artifact.name
    try:
        _, model = read_graph(args.artifact)
    except TickformerError as exc:
        if not args.artifact.exists():
            raise
        return [Finding("error", name, "onnx-invalid", "file", str(exc)[:300])]
    try:
        import onnx

        onnx.checker.check_model(model)
    except Exception as exc:  # a broken graph is a finding, not a crash
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [Finding("error", name, "onnx-invalid", "file", msg[:300])]
    return [*check_model(model, spec, role=role_of(args.artifact), graph=name), *flow_findings(model, name)]


def run(args: argparse.Namespace) -> int:
    if user_model.is_bare(args.artifact, args) and args.artifact.suffix == ".onnx":
        return user_model.guarded(args, "check", lambda budget: _run(args))
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from tickformer.export.trt_support import check_path, count, target

    spec = target(args.target)
    if user_model.is_bare(args.artifact, args) and args.artifact.suffix == ".onnx":
        findings = _bare_findings(args, spec)
    else:
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
