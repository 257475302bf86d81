"""`tickformer prove`: CrossHair proofs of the contracts' specifications, each with a wrong twin.

    tickformer prove [--per-condition-timeout S] [--total-timeout S] [--jobs N] [--json FILE]
                     [--contract NAME ...] [--assurance [--no-proofs] [--assurance-out FILE]]

Exit 0 only if no spec has a counterexample (or failed to run) and every wrong twin was refuted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import time
from pathlib import Path

from tickformer.durable import atomic_write
from tickformer.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "prove", help="prove the contracts' specifications with CrossHair (with wrong twins)"
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
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument(
        "--assurance", action="store_true", help="print the assurance table and write it as markdown"
    )
    p.add_argument(
        "--no-proofs", action="store_true", help="with --assurance: do not run CrossHair (verdicts 'not run')"
    )
    p.add_argument(
        "--assurance-out",
        type=Path,
        default=Path("docs/assurance.md"),
        metavar="FILE",
        help="markdown path (default docs/assurance.md)",
    )
    p.add_argument(
        "--tests",
        type=Path,
        default=Path("tests/contracts"),
        metavar="DIR",
        help="the property tests whose example counts the table shows "
        "(default tests/contracts of the checkout in the current directory)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tickformer.verify.proofs import crosshair as prove

    console = Console()
    if args.per_condition_timeout <= 0 or args.total_timeout <= 0 or args.jobs < 1:
        raise ConfigError("--per-condition-timeout and --total-timeout must be > 0 and --jobs >= 1")
    proofs = prove.PROOFS
    if args.contract:
        known = sorted({p.contract for p in prove.PROOFS})
        unknown = sorted(set(args.contract) - set(known))
        if unknown:
            raise ConfigError(f"unknown contract(s) {unknown}; choose among {known}")
        proofs = tuple(p for p in proofs if p.contract in args.contract)

    outcomes = None
    ok = True
    if not (args.assurance and args.no_proofs):
        start = time.monotonic()
        with console.status("CrossHair: checking specs and wrong twins ..."):
            outcomes = prove.run_proofs(
                proofs, per_condition_s=args.per_condition_timeout, total_s=args.total_timeout, jobs=args.jobs
            )
        wall = time.monotonic() - start
        _print_results(console, outcomes, wall)
        ok = all(o.ok for o in outcomes)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            data = prove.outcomes_to_json(outcomes, wall)
            data["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            args.json.write_text(json.dumps(data, indent=2) + "\n")
    if args.assurance:
        _assurance(console, outcomes, args)
    return 0 if ok else 1


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
        verdict = o.spec_status if o.spec_ok else "[red]FAILED[/red]"
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
    console.print(
        f"{'OK' if ok else 'FAILED'}: {sum(o.spec_ok for o in outcomes)}/{len(outcomes)} specs hold, "
        f"{sum(o.twin_refuted for o in outcomes)}/{len(outcomes)} wrong twins refuted, {wall:.1f} s wall"
    )


def _assurance(console, outcomes, args: argparse.Namespace) -> None:
    from rich.table import Table

    from tickformer.verify import assurance

    rows = assurance.build_table(outcomes, tests_root=args.tests)
    table = Table(title="Assurance table", show_lines=True)
    for col in (
        "contract",
        "bound",
        "proofs / wrong twins",
        "property tests",
        "run-time monitor",
        "tickformer verify",
    ):
        table.add_column(col, overflow="fold")
    for r in rows:
        proofs = (
            "\n".join(f"{p['spec']}: {p['status']} / {p['twin']}: {p['twin_status']}" for p in r["proofs"])
            or "-"
        )
        tests = "\n".join(f"{name.split('::')[-1]}: {n}" for name, n in r["tests"]) or "-"
        table.add_row(
            f"{r['contract']}\n{r['statement']}",
            r["bound"] or "-",
            proofs,
            tests,
            r["monitor"],
            r["exported"] or "-",
        )
    console.print(table)
    note = (
        "Proof verdicts from this run."
        if outcomes
        else "Proofs not run (`--no-proofs`): verdicts show 'not run'."
    )
    out = args.assurance_out
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, assurance.to_markdown(rows, note).encode())
    console.print(f"wrote {out}")
