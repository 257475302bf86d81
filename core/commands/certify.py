"""`tickformer certify ART --budget-us B --out DIR`: worst-case latency certification of a step.

ART is an artifact directory, or a bare ONNX model: `tickformer certify MODEL.onnx [--step
STEP.onnx] [--spec FILE] [--domain LO:HI] [--vocab LO:HI] [--mode auto|full|step] [--max-len N]`
times the step graph of a KV-cache pair with its cache fed back, or the full graph at one fixed
shape (certify/campaign.py `certify_onnx`), with the same campaign, statistics and verdict.

Loads the artifact on a backend (default ort), runs the measurement campaign
(tickformer.certify), fits the tail with extreme value theory, writes certificate.json,
latency_hist.png, exceedance.png and samples_ns.npy into DIR and prints a one-screen summary.
Exit code: 0 PASS, 1 FAIL, 2 INCONCLUSIVE (a user error also exits 1, with one line on stderr).
See docs/certify.md.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from tickformer.commands import args as shared
from tickformer.errors import ConfigError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "certify",
        help="measure step latency and certify it against a budget (pWCET by extreme value theory)",
        description="Measure the per-step latency of an exported artifact under controlled conditions, "
        "estimate a probabilistic WCET with extreme value theory, and give a PASS/FAIL/INCONCLUSIVE "
        "verdict (exit 0/1/2).",
    )
    shared.artifact(p, help="artifact directory (tickformer export --out), or a bare .onnx model")
    shared.backend(p)
    shared.trust(p)
    shared.bare_onnx(p)
    p.add_argument(
        "--mode",
        choices=("auto", "full", "step"),
        default="auto",
        help="bare ONNX: time the step graph with its cache fed back (step), or the full graph at one fixed "
        "shape (full); auto: step when a step graph is given",
    )
    p.add_argument(
        "--max-len",
        type=int,
        default=None,
        metavar="N",
        help="bare ONNX: positions per sequence (step) or the sequence length (full); default: the longest allowed",
    )
    p.add_argument("--budget-us", type=float, required=True, help="latency budget per step in microseconds")
    p.add_argument("--samples", type=int, default=100_000, help="timed steps (default 100000)")
    p.add_argument("--warmup", type=int, default=2_000, help="untimed warm-up steps (default 2000)")
    p.add_argument("--cpu", type=int, default=None, help="pin the measuring thread to this CPU")
    p.add_argument(
        "--realtime", action="store_true", help="try SCHED_FIFO and mlockall (recorded if refused)"
    )
    p.add_argument("--rt-priority", type=int, default=50, help="SCHED_FIFO priority with --realtime (1..99)")
    p.add_argument(
        "--exceedance",
        type=float,
        default=1e-9,
        help="per-step exceedance probability certified (default 1e-9)",
    )
    p.add_argument(
        "--method",
        choices=("pot", "bm"),
        default="pot",
        help="EVT method: peaks over threshold (default) or block maxima",
    )
    p.add_argument("--run-length", type=int, default=3, help="runs-declustering gap in steps (default 3)")
    p.add_argument("--block-size", type=int, default=100, help="block size for --method bm (default 100)")
    p.add_argument("--n-boot", type=int, default=200, help="parametric bootstrap replicates (default 200)")
    shared.threads(p)
    shared.seed(p, help="seed for inputs and bootstrap")
    shared.out(p, help="report directory")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=run)


def _budget_ns(budget_us: float) -> float:
    if not (math.isfinite(budget_us) and budget_us > 0):
        raise ConfigError(f"--budget-us {budget_us!r} must be a positive number of microseconds, e.g. 500")
    return budget_us * 1e3


def _certifier(args: argparse.Namespace) -> Any:
    """certify_artifact for an artifact directory, certify_onnx (with the bare-model flags) for a file."""
    import functools

    from tickformer.certify.campaign import certify_artifact, certify_onnx

    bare_flags = {"--step": args.step, "--spec": args.spec, "--domain": args.domain, "--vocab": args.vocab}
    bare_flags.update({"--mode": None if args.mode == "auto" else args.mode, "--max-len": args.max_len})
    if args.artifact.is_dir():
        given = [k for k, v in bare_flags.items() if v is not None]
        if given:
            raise ConfigError(
                f"{', '.join(given)} describe bare ONNX models; {args.artifact} is an artifact directory, whose "
                "manifest declares everything: remove them"
            )
        return functools.partial(certify_artifact, trust=args.trust)
    if args.trust is not None:
        raise ConfigError(
            f"--trust applies to signed artifacts; {args.artifact} is a bare .onnx file, which carries no signature"
        )
    if not args.artifact.exists():
        from tickformer.errors import ArtifactError

        raise ArtifactError(f"{args.artifact} does not exist; pass an artifact directory or a .onnx file")
    from tickformer.artifact.foreign.spec import Flags
    from tickformer.contracts.input_domain import parse_domain

    flags = Flags(
        domain=parse_domain(args.domain) if args.domain else None, vocab=shared.parse_vocab(args.vocab)
    )
    return functools.partial(
        certify_onnx, step=args.step, spec=args.spec, flags=flags, mode=args.mode, max_len=args.max_len
    )


def reproduction(args: argparse.Namespace) -> str:
    """The command that reruns this campaign, every setting explicit (defaults included)."""
    import shlex

    words = ["tickformer", "certify", str(args.artifact), "--backend", args.backend]
    words += [
        "--budget-us",
        f"{args.budget_us:g}",
        "--samples",
        str(args.samples),
        "--warmup",
        str(args.warmup),
    ]
    for flag, value in (
        ("--cpu", args.cpu),
        ("--trust", args.trust),
        ("--step", args.step),
        ("--spec", args.spec),
    ):
        if value is not None:
            words += [flag, str(value)]
    for flag, value in (("--domain", args.domain), ("--vocab", args.vocab), ("--max-len", args.max_len)):
        if value is not None:
            words += [flag, str(value)]
    if args.mode != "auto":
        words += ["--mode", args.mode]
    if args.realtime:
        words += ["--realtime", "--rt-priority", str(args.rt_priority)]
    if getattr(args, "native", False):
        words += ["--native"]
    words += [
        "--exceedance",
        f"{args.exceedance:g}",
        "--method",
        args.method,
        "--run-length",
        str(args.run_length),
    ]
    words += [
        "--block-size",
        str(args.block_size),
        "--n-boot",
        str(args.n_boot),
        "--threads",
        str(args.threads),
    ]
    words += ["--seed", str(args.seed), "--out", str(args.out)]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from tickformer.certify.campaign import CampaignConfig
    from tickformer.certify.decision import EvtConfig, check_sample_count
    from tickformer.certify.report import summary, write_report

    budget_ns = _budget_ns(args.budget_us)
    evt_config = EvtConfig(
        method=args.method,
        exceedance=float(args.exceedance),
        run_length=args.run_length,
        block_size=args.block_size,
        n_boot=args.n_boot,
        seed=args.seed,
    )
    check_sample_count(args.samples, evt_config)  # the tail fit's own minimum, before anything runs
    campaign = CampaignConfig(
        samples=args.samples,
        warmup=args.warmup,
        cpu=args.cpu,
        realtime=args.realtime,
        rt_priority=args.rt_priority,
        seed=args.seed,
    )
    console = Console()
    certify = _certifier(args)
    if args.quiet:
        report, durations = certify(
            args.artifact,
            backend=args.backend,
            budget_ns=budget_ns,
            campaign=campaign,
            evt_config=evt_config,
            threads=args.threads,
        )
    else:
        # auto_refresh=False: no refresh thread competing for the GIL while steps are timed;
        # the bar is redrawn every 1000 samples, outside the timed region.
        with Progress(
            TextColumn("sampling"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            auto_refresh=False,
            transient=True,
        ) as bar:
            task = bar.add_task("sampling", total=args.samples)

            def progress(done: int) -> None:
                bar.update(task, completed=done)
                bar.refresh()

            report, durations = certify(
                args.artifact,
                backend=args.backend,
                budget_ns=budget_ns,
                campaign=campaign,
                evt_config=evt_config,
                threads=args.threads,
                progress=progress,
            )
    report["conditions"]["command_line"] = reproduction(args)
    cert = write_report(args.out, report, durations)
    if not args.quiet:
        summary(report, console)
        console.print(f"report: {cert.parent}")
    return int(report["exit_code"])
