"""`tickformer verify PATH`: Hypothesis property tests of an exported model under a real backend.

    tickformer verify PATH [--step STEP.onnx] [--spec FILE] [--domain LO:HI] [--vocab LO:HI]
                      [--output-bound B] [--max-t T] [--not-causal] [--skip NAME ...]
                      [--backend ort] [--examples N] [--seed S] [--out DIR] [--trust KEY.pub]
                      [--state-bound B] [--time-budget S] [--memory-budget GIB]
                      [--weights fp32|fp16|bf16|int8]

PATH: one of our artifacts (a directory with manifest.json; every kind) or a bare .onnx file
(any inputs and outputs; a KV-cache pair with --step; docs/verify.md for the spec file). Exit 0
if every property holds, 1 if one is violated (each printed with the input that broke it and
the file of its shrunk counterexample, DIR/<property>.npz), 2 if the verification could not run
(a usage error: bad arguments, an unknown --skip name, a spec file with an error, a model that
does not load or run, with the node or declaration and the fix) or could not finish (a check
had an internal error: a bug in verify, reported as status "error" with its traceback in the
report, never as a violation; or the run went past its wall-clock or memory budget, named with
the flag that raises it). Never a traceback on the terminal: one line on stderr.
DIR/verify.json (schema: docs/verify.md) and DIR/verify.md hold the report either way.
--weights F (artifacts only; needs a C compiler) also compiles the generated C step with its layer
matrices stored in F (`tickformer codegen --weights`) and tests it against the numpy model with
the weights as stored and against the fp32 model within the format's stated bound
(verify/formats.py: weight_format_equivalence, weight_format_bound).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from tickformer import validation
from tickformer.commands import args as shared
from tickformer.commands import user_model
from tickformer.errors import ConfigError

USAGE_EXIT = 2  # tickformer.cli: the exit code of a user error of this command


HELP = "property-test an exported model (ours, or a bare ONNX model with any signature) with Hypothesis"
ERROR_EXIT = USAGE_EXIT


def arguments(p: argparse.ArgumentParser) -> None:
    shared.artifact(p, name="path", help="artifact directory or .onnx file")
    shared.bare_onnx(p, values=False)
    shared.backend(p, help="ort (CPU; default), ort-cuda, ort-trt; artifacts also numpy")
    shared.trust(p)
    p.add_argument(
        "--examples", type=int, default=50, metavar="N", help="Hypothesis examples per property (default 50)"
    )
    shared.seed(p, help="Hypothesis seed (reproducible)")
    shared.domain(p, help="input domain of every float input (default: the artifact's manifest; the spec)")
    shared.vocab(p, help="token id range of integer inputs (e.g. 0:999)")
    p.add_argument(
        "--output-bound", type=float, default=None, metavar="B", help="declared bound on every |output|"
    )
    p.add_argument("--max-t", type=int, default=16, metavar="T", help="longest sequence drawn (default 16)")
    p.add_argument("--not-causal", action="store_true", help="the model is not causal: skip causality")
    p.add_argument(
        "--state-bound",
        type=float,
        default=None,
        metavar="B",
        help="declared bound on every |state| a recurrent model hands on (state_bounded)",
    )
    user_model.budget_flags(p, "verify")
    p.add_argument(
        "--weights",
        default=None,
        metavar="F",
        help="also test the compiled C step with its weights stored in F: fp32|fp16|bf16|int8 (artifacts only)",
    )
    p.add_argument(
        "--skip", action="append", default=[], metavar="NAME", help="a property not to run (repeatable)"
    )
    shared.out(p, default=Path("verify-out"), help="report and counterexamples (default ./verify-out)")


def _open(open_model, path: Path, backend: str, max_t: int, trust: Path | None = None, **kwargs: Any):
    """open_model, naming the fix when a bare file is no graph onnxruntime can load."""
    from tickformer.errors import ArtifactError

    try:
        return open_model(path, backend, max_t, trust=trust, **kwargs)
    except ArtifactError as exc:
        if path.is_dir() or "cannot load" not in str(exc) or "pass a valid" in str(exc):
            raise
        raise ArtifactError(f"{exc}; pass a valid .onnx file or an artifact directory") from None


def run(args: argparse.Namespace) -> int:
    if user_model.is_bare(args.path, args):
        import tickformer.verify.properties  # noqa: F401  (imported before the budget's clock starts)

        return user_model.guarded(args, "verify", lambda budget: _run(args, budget), backend=args.backend)
    return _run(args, None)


def _run(args: argparse.Namespace, budget: Any) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tickformer.artifact.foreign.spec import Flags
    from tickformer.contracts.input_domain import parse_domain
    from tickformer.runtime.budget import BudgetExceeded
    from tickformer.verify.properties import open_model, verify_model
    from tickformer.verify.properties.report import build_report, write_report

    validation.positive_int(args.examples, "--examples", hint="e.g. --examples 50")
    if args.output_bound is not None:
        validation.positive_real(args.output_bound, "--output-bound", hint="e.g. --output-bound 10")
    if args.state_bound is not None:
        validation.positive_real(args.state_bound, "--state-bound", hint="e.g. --state-bound 10")
    domain = parse_domain(args.domain) if args.domain is not None else None
    flags = Flags(
        domain=domain,
        vocab=shared.parse_vocab(args.vocab),
        output_bound=args.output_bound,
        max_t=args.max_t,
        causal=False if args.not_causal else None,
        step=args.step,
        skip=tuple(args.skip),
        state_bound=args.state_bound,
    )
    console = Console(highlight=False)
    bare = not args.path.is_dir()
    kwargs: dict[str, Any] = {"spec": args.spec, "flags": flags} if bare else {}
    if not bare and (args.spec is not None or args.step is not None):
        raise ConfigError(
            f"--spec and --step describe bare ONNX models; {args.path} is an artifact directory, whose manifest "
            "declares everything: remove them"
        )
    if bare and args.weights is not None:
        raise ConfigError(
            f"--weights tests the generated C step of one of our artifacts; {args.path} is not an artifact "
            "directory: remove --weights, or pass the directory `tickformer export --out` wrote"
        )
    if not bare and (
        args.vocab is not None
        or args.output_bound is not None
        or args.not_causal
        or args.state_bound is not None
    ):
        raise ConfigError(
            f"--vocab, --output-bound, --state-bound and --not-causal describe bare ONNX models; {args.path} is an "
            "artifact directory, whose manifest declares them: remove them"
        )
    format_names: tuple[str, ...] = ()  # --skip may name them only with --weights
    if args.weights is not None:
        from tickformer.verify.formats import NAMES, check_supported

        check_supported(args.path, args.weights, args.trust)
        format_names = NAMES
    model = _open(open_model, args.path, args.backend, args.max_t, args.trust, **kwargs)
    sig = getattr(model, "sig", None)
    if budget is not None and sig is not None and sig.warnings:
        from tickformer.artifact.foreign.control_flow import unbounded

        flows = unbounded(model.model_proto("full")) or unbounded(model.model_proto("step"))
        budget.hint = f"the graph has an unbounded Loop, {flows[0].short}" if flows else ""
    for warning in getattr(sig, "warnings", ()):
        console.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    start = time.monotonic()
    stopped: BudgetExceeded | None = None
    try:
        with console.status(f"verifying {args.path} ..."):
            try:
                results = verify_model(
                    model,
                    examples=args.examples,
                    seed_value=args.seed,
                    domain=None if bare else domain,
                    out_dir=args.out,
                    skip=[name for name in args.skip if name not in format_names],
                )
            except BudgetExceeded as exc:  # stopped at the budget: the report says how far it got
                results, stopped = exc.results, exc
            if args.weights is not None and stopped is None:
                from tickformer.verify.formats import verify_format

                results += verify_format(
                    args.path,
                    args.weights,
                    max_t=args.max_t,
                    trust=args.trust,
                    examples=args.examples,
                    seed_value=args.seed,
                    out_dir=args.out,
                    domain=domain,
                    skip=args.skip,
                )
        used_domain = domain if domain is not None else model.domain
        info = model.describe()
    finally:
        model.close()
    wall = time.monotonic() - start
    settings = {
        "examples": args.examples,
        "seed": args.seed,
        "backend": args.backend,
        "max_t": args.max_t,
        "domain": list(used_domain) if used_domain is not None else None,
        "skip": sorted(set(args.skip)),
        "weights": args.weights,
    }
    report = build_report(info, results, settings, wall, stopped=None if stopped is None else str(stopped))
    json_path, md_path = write_report(args.out, report)

    table = Table(title=Text(f"tickformer verify {args.path} ({info['kind']}, backend {args.backend})"))
    for col in ("property", "result", "examples", "detail"):
        table.add_column(col, overflow="fold")
    colors = {"pass": "green", "fail": "red", "skip": "yellow", "error": "magenta"}
    for r in results:
        detail = r.message + (f"\ncounterexample: {r.counterexample}" if r.counterexample else "")
        table.add_row(
            Text(r.name), Text(r.status, style=colors[r.status]), Text(str(r.examples)), Text(detail)
        )
    console.print(table)
    for r in results:
        if r.status == "fail":
            print_counterexample(console, r, info)
        elif r.status == "error":  # the traceback is in the report, not on the terminal
            console.print(
                f"{r.name}: {r.message} (its traceback: {json_path})",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    counts = report["summary"]
    errors = f", {counts['error']} internal errors" if counts["error"] else ""
    console.print(
        Text(
            f"{report['verdict']}: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped"
            f"{errors} in {wall:.1f} s; report {json_path} and {md_path}"
        )
    )
    if stopped is not None and not counts["fail"]:
        raise stopped  # one line on stderr, exit 2: the model was not verified
    if stopped is not None:
        print(f"tickformer verify: {stopped}", file=sys.stderr)
    if counts["fail"]:
        return 1
    return USAGE_EXIT if counts["error"] else 0  # 2: the verification could not be completed


def print_counterexample(console: Any, result: Any, info: dict[str, Any]) -> None:
    """The violation, the model file, and the saved arrays, printed literally (no rich markup:
    an array like [nan nan] is text, not a markup tag)."""
    import numpy as np

    where = info.get("path")
    console.print(
        f"{result.name} violated ({where}): {result.message}", markup=False, highlight=False, soft_wrap=True
    )
    if not result.counterexample:
        return
    console.print(f"  counterexample: {result.counterexample}", markup=False, highlight=False, soft_wrap=True)
    with np.load(result.counterexample) as data:
        for key in data.files:
            if key == "meta":
                continue
            text = np.array2string(data[key], threshold=24, precision=4).replace("\n", " ")
            console.print(
                f"  {key} {list(data[key].shape)}: {text}", markup=False, highlight=False, soft_wrap=True
            )
