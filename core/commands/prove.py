"""`tickformer prove`: CrossHair proofs of the contracts' specifications, each with a wrong twin;
with a target, proofs about an exported artifact's graphs themselves.

    tickformer prove [--per-condition-timeout S] [--total-timeout S] [--jobs N] [--json FILE]
                     [--contract NAME ...] [--assurance [--no-proofs] [--assurance-out FILE]
                      [--ieee754-json FILE] [--graphs-json FILE]]
    tickformer prove ART | FILE.onnx [--max-len N] [--trust KEY.pub] [--json FILE]
    tickformer prove --ieee754 [--solver-timeout S] [--json FILE]

--ieee754: model.attention's own merge, finalize and safe max on binary32 with z3's FP theory
(verify/proofs/ieee754.py); exit 0 only if every claim is proven and every twin refuted.

Without a target: exit 0 only if no spec has a counterexample (or failed to run) and every wrong
twin was refuted (the float-drift twin of deadline.release_time by z3 on binary64). --assurance
writes the table from this run, claims/results/ieee754.json and claims/results/prove_graphs.json
(--ieee754-json, --graphs-json). With a target (verify/proofs/graphs/: live-set exactness of the
step graph for every position or ring state, causality of the full graph for every length,
bounded work; ssm artifacts: a position-free step and a Scan causal for every T): exit 0 if every
claim is proven ("proven", or "proven if finite" for a full pass), 1 if one FAILED (a step that
depends on stale rows even only through a zero weight fails), 3 if one is only "proven if finite"
and --exact was given; user errors exit 2.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import time
from pathlib import Path

from tickformer.durable import atomic_write
from tickformer.errors import ConfigError

USAGE_EXIT = 2
IF_FINITE_EXIT = 3


HELP = (
    "prove the contracts' specifications with CrossHair (with wrong twins), "
    "or an artifact's exported graphs (prove ART | FILE.onnx)"
)
DESCRIPTION = None
ERROR_EXIT = USAGE_EXIT

# The files of the checkout in the current directory that --assurance writes and reads, each with
# its flag: (flag, default path, metavar, help).
ASSURANCE_FILES = (
    ("--assurance-out", "docs/assurance.md", "FILE", "markdown path (default docs/assurance.md)"),
    (
        "--tests",
        "tests/contracts",
        "DIR",
        "the property tests whose example counts the table shows "
        "(default tests/contracts of the checkout in the current directory)",
    ),
    (
        "--ieee754-json",
        "claims/results/ieee754.json",
        "FILE",
        "with --assurance: the report of `prove --ieee754 --json` to show (default: the checkout's)",
    ),
    (
        "--graphs-json",
        "claims/results/prove_graphs.json",
        "FILE",
        "with --assurance: the graph proofs on reference artifacts (claims/prove_graphs.py) to show",
    ),
)


def arguments(p: argparse.ArgumentParser) -> None:
    from . import args as shared

    p.add_argument(
        "target",
        nargs="?",
        type=Path,
        default=None,
        help="an artifact directory or one of its exported .onnx graphs: prove the graphs themselves",
    )
    p.add_argument(
        "--max-len",
        type=int,
        default=None,
        metavar="N",
        help="FILE.onnx of a full-pass graph: the longest length T to prove it for (the artifact's max_len)",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help=f"with a target: exit {IF_FINITE_EXIT} when a claim holds only for finite cache contents",
    )
    shared.trust(p)
    p.add_argument(
        "--ieee754",
        action="store_true",
        help="prove merge / finalize / safe max on binary32 with z3 (FPSort, RNE), wrong twins refuted",
    )
    p.add_argument(
        "--solver-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="--ieee754: z3 seconds per query (default 60)",
    )
    p.add_argument(
        "--per-condition-timeout",
        type=float,
        default=3.0,
        metavar="S",
        help="CPU seconds per condition (default 3)",
    )
    p.add_argument(
        "--total-timeout",
        type=float,
        default=240.0,
        metavar="S",
        help="wall-clock budget for the whole run (default 240)",
    )
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument(
        "--contract", action="append", default=None, metavar="NAME", help="only this contract (repeatable)"
    )
    shared.path(p, "--json", help="write the results as JSON")
    p.add_argument(
        "--assurance", action="store_true", help="print the assurance table and write it as markdown"
    )
    p.add_argument(
        "--no-proofs", action="store_true", help="with --assurance: do not run CrossHair (verdicts 'not run')"
    )
    for flag, default, metavar, text in ASSURANCE_FILES:
        shared.path(p, flag, default=Path(default), metavar=metavar, help=text)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    if args.target is not None:
        return _prove_graphs(console, args)
    if args.ieee754:
        return _prove_ieee754(console, args)
    if args.max_len is not None or args.exact or args.trust is not None:
        raise ConfigError("--max-len, --exact and --trust need a target: tickformer prove ART | FILE.onnx")
    from tickformer.verify.proofs import crosshair as prove

    if args.per_condition_timeout <= 0 or args.total_timeout <= 0 or args.jobs < 1:
        raise ConfigError("--per-condition-timeout and --total-timeout must be > 0 and --jobs >= 1")
    proofs = prove.PROOFS
    if args.contract:
        known = sorted({p.contract for p in prove.PROOFS})
        unknown = sorted(set(args.contract) - set(known))
        if unknown:
            raise ConfigError(f"unknown contract(s) {unknown}; choose among {known}")
        proofs = tuple(p for p in proofs if p.contract in args.contract)

    data = None
    ok = True
    if not (args.assurance and args.no_proofs):
        start = time.monotonic()
        with console.status("CrossHair: checking specs and wrong twins (the drift twin: z3 binary64) ..."):
            outcomes = prove.run_proofs(
                proofs, per_condition_s=args.per_condition_timeout, total_s=args.total_timeout, jobs=args.jobs
            )
        wall = time.monotonic() - start
        _print_results(console, outcomes, wall)
        ok = all(o.ok for o in outcomes)
        data = prove.outcomes_to_json(outcomes, wall)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            data["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            atomic_write(args.json, (json.dumps(data, indent=2) + "\n").encode())
    if args.assurance:
        _assurance(console, data, args)
    return 0 if ok else 1


def _prove_graphs(console, args: argparse.Namespace) -> int:
    from tickformer.verify.proofs.graphs import driver
    from tickformer.verify.proofs.graphs.claims import FAILED, IF_FINITE

    if args.contract or args.assurance:
        raise ConfigError("--contract and --assurance prove the contracts: run them without a target")
    if args.max_len is not None and args.max_len < 1:
        raise ConfigError(f"--max-len must be >= 1 (got {args.max_len})")
    target: Path = args.target
    start = time.monotonic()
    if target.is_dir():
        if args.max_len is not None:
            raise ConfigError("--max-len is for a bare .onnx file; an artifact states its own max_len")
        proofs = driver.prove_artifact(str(target), trust=args.trust)
    else:
        if args.trust is not None:
            raise ConfigError("--trust checks an artifact's signature: pass the artifact directory")
        proofs = driver.prove_file(str(target), max_len=args.max_len)
    wall = time.monotonic() - start
    if not proofs:
        raise ConfigError(f"{target}: no graph the prover analyses (a model or step graph)")
    report = driver.report(proofs, wall)
    console.print(driver.report_text(report), soft_wrap=True, highlight=False, markup=False)
    if args.json is not None:
        report["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(args.json, (json.dumps(report, indent=2) + "\n").encode())
    if report["status"] == FAILED:
        return 1
    if args.exact and report["status"] == IF_FINITE:
        return IF_FINITE_EXIT
    return 0


def _prove_ieee754(console, args: argparse.Namespace) -> int:
    from tickformer.verify.proofs import ieee754

    if args.contract or args.assurance:
        raise ConfigError("--ieee754 runs the binary32 proofs alone: drop --contract / --assurance")
    if args.solver_timeout <= 0:
        raise ConfigError(f"--solver-timeout must be > 0 (got {args.solver_timeout})")
    start = time.monotonic()
    with console.status("z3: binary32 proofs and wrong twins ..."):
        results = ieee754.run_all(timeout_ms=int(args.solver_timeout * 1000))
        m_bits = ieee754.m_bits_fact(timeout_ms=int(args.solver_timeout * 1000))
    wall = time.monotonic() - start
    data = ieee754.to_json(results, m_bits, wall)
    console.print(ieee754.report_text(data), soft_wrap=True, highlight=False, markup=False)
    if args.json is not None:
        data["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(args.json, (json.dumps(data, indent=2) + "\n").encode())
    return 0 if data["ok"] else 1


def _print_results(console, outcomes, wall: float) -> None:
    from rich.table import Table

    from tickformer.verify.proofs.crosshair import COUNTEREXAMPLE

    table = Table(title="tickformer prove (CrossHair, PEP 316 conditions)")
    for col in ("contract", "spec", "values", "conditions", "verdict", "cpu s", "wrong twin", "twin"):
        table.add_column(col)
    for o in outcomes:
        n = len(o.spec_results)
        confirmed = sum(r.verdict == "confirmed" for r in o.spec_results)
        cpu = sum(r.cpu_s for r in o.spec_results) + sum(r.cpu_s for r in o.twin_results)
        verdict = (
            o.spec_status
            if o.spec_ok
            else "[red]FAILED (vacuous)[/red]"
            if o.vacuous
            else "[red]FAILED[/red]"
        )
        twin = "[green]refuted[/green]" if o.twin_refuted else "[red]SURVIVED[/red]"
        table.add_row(
            o.proof.contract,
            o.proof.spec.__name__,
            o.proof.values,
            f"{confirmed}/{n} confirmed",
            verdict,
            f"{cpu:.1f}",
            o.proof.twin.__name__,
            twin,
        )
    console.print(table)
    for o in outcomes:
        for r in o.spec_results:
            if r.verdict not in ("confirmed", "not confirmed"):
                console.print(
                    f"[red]{o.proof.spec.__name__}: {r.verdict}[/red] {r.condition}: {r.message}",
                    soft_wrap=True,
                )
        if not o.twin_refuted:
            console.print(
                f"[red]wrong twin {o.proof.twin.__name__} survived[/red]: the checker did not refute it",
                soft_wrap=True,
            )
        else:
            r = next(r for r in o.twin_results if r.verdict == COUNTEREXAMPLE)
            console.print(f"  twin {o.proof.twin.__name__}: {r.message}", soft_wrap=True, highlight=False)
    ok = all(o.ok for o in outcomes)
    specs = {o.proof.spec_name: o.spec_status for o in outcomes}  # distinct: a spec with two twins once
    statuses = list(specs.values())
    console.print(
        f"{'OK' if ok else 'FAILED'}: {len(specs)} distinct specs: {statuses.count('proven')} proven, "
        f"{statuses.count('no counterexample (bounded)')} no counterexample (bounded), "
        f"{statuses.count('FAILED')} failed; {sum(o.twin_refuted for o in outcomes)}/{len(outcomes)} wrong twins "
        f"refuted; {wall:.1f} s wall"
    )


def _load_report(path: Path, what: str, console) -> dict | None:
    if not path.is_file():
        console.print(f"{what}: {path} not found, shown as 'not run'", soft_wrap=True)
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON report ({exc}); regenerate it") from None


def _assurance(console, data: dict | None, args: argparse.Namespace) -> None:
    from rich.table import Table

    from tickformer.verify import assurance

    smt = _load_report(args.ieee754_json, "binary32 SMT report", console)
    graphs = _load_report(args.graphs_json, "graph proofs report", console)
    rows = assurance.build_table(data, tests_root=args.tests, smt=smt, graphs=graphs)
    table = Table(title="Assurance table", show_lines=True)
    for col in (
        "contract",
        "bound",
        "what it rests on",
        "property tests",
        "run-time monitor",
        "tickformer verify",
    ):
        table.add_column(col, overflow="fold")
    for r in rows:
        evidence = "\n".join(f"{e['label']}: {e['what']}" for e in r["evidence"]) or "-"
        tests = f"{r['examples']} examples in {len(r['tests'])} tests"
        table.add_row(
            f"{r['contract']}\n{r['statement']}",
            r["bound"] or "-",
            evidence,
            tests,
            r["monitor"] or "-",
            r["exported"] or "-",
        )
    console.print(table)
    note = (
        "Proof verdicts from this run (CrossHair and the binary64 drift query), the binary32 SMT report "
        f"{args.ieee754_json} and the graph proofs {args.graphs_json}."
        if data
        else "CrossHair not run (`--no-proofs`): its verdicts show 'not run'."
    )
    out = args.assurance_out
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, assurance.to_markdown(rows, note, smt=smt, graphs=graphs).encode())
    console.print(f"wrote {out}")
