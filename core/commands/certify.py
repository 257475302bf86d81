"""`tickformer certify ART --budget-us B --out DIR`: worst-case latency certification of a step.

ART is an artifact directory, or a bare ONNX model: `tickformer certify MODEL.onnx [--step
STEP.onnx] [--spec FILE] [--domain LO:HI] [--vocab LO:HI] [--mode auto|full|step] [--max-len N]`
times the step graph of a recurrent model with its state or KV cache fed back (a model whose own
inputs and outputs pair, such as a GRU's h -> h_n, is its own step graph), or the full graph at
one fixed shape (certify/campaign.py `certify_onnx`), with the same campaign, statistics and
verdict; the run has a wall-clock and a memory budget (--time-budget, default 3600 s;
--memory-budget GIB) and any failure on a bare model is one line, exit 2 (never 1: that is FAIL).

Loads the artifact on a backend (default ort), runs the measurement campaign
(tickformer.certify), fits the tail with extreme value theory, writes certificate.json,
latency_hist.png, exceedance.png and samples_ns.npy into DIR and prints a one-screen summary.
Exit code: 0 PASS, 1 FAIL, 2 INCONCLUSIVE (a user error also exits 1, with one line on stderr).
See docs/certify.md.
"""

from __future__ import annotations

import argparse
import functools
import math
from typing import Any

from tickformer.commands import args as shared
from tickformer.commands import user_model
from tickformer.errors import ConfigError

HELP = "measure step latency and certify it against a budget (pWCET by extreme value theory)"
DESCRIPTION = (
    "Measure the per-step latency of an exported artifact under controlled conditions, "
    "estimate a probabilistic WCET with extreme value theory, and give a PASS/FAIL/INCONCLUSIVE "
    "verdict (exit 0/1/2)."
)


def arguments(p: argparse.ArgumentParser) -> None:
    shared.artifact(p, help="artifact directory (tickformer export --out), or a bare .onnx model")
    shared.backend(p)
    shared.trust(p)
    shared.bare_onnx(p)
    shared.choice(
        p,
        "--mode",
        ("auto", "full", "step"),
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
    p.add_argument(
        "--budget-us", type=float, default=None, help="latency budget per step in microseconds (required)"
    )
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
    shared.choice(
        p,
        "--method",
        ("pot", "bm"),
        help="EVT method: peaks over threshold (default) or block maxima",
    )
    p.add_argument("--run-length", type=int, default=3, help="runs-declustering gap in steps (default 3)")
    p.add_argument("--block-size", type=int, default=100, help="block size for --method bm (default 100)")
    p.add_argument("--n-boot", type=int, default=200, help="parametric bootstrap replicates (default 200)")
    shared.threads(p)
    shared.seed(p, help="seed for inputs and bootstrap")
    shared.out(p, help="report directory (required; not with --check)", required=False)
    shared.path(
        p,
        "--check",
        metavar="CERT",
        help="check the certificate CERT (DIR/certificate.json) against ARTIFACT: its integrity, its signature "
        "(with --trust), the artifact's id, and the verdict recomputed from the stored samples",
    )
    shared.path(
        p,
        "--sign",
        metavar="KEY",
        help="sign the certificate with this Ed25519 private key (tickformer keygen; the artifact's key): "
        "DIR/certificate.sig, checked by --check with --trust KEY.pub",
    )
    p.add_argument(
        "--native",
        action="store_true",
        help="with --backend c: time the generated C step in its own process, built with the deployment "
        "flags (tf_timing, timed in C), and add the static bound from the code (docs/certify.md)",
    )
    p.add_argument("--cc", default=None, help="C compiler for --native (default: $CC, cc, gcc or clang)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    user_model.budget_flags(p, "certify")
    p.set_defaults(certify_parser=p)


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
    if args.native:
        if args.backend != "c":
            raise ConfigError(
                f"--native times the generated C step: use it with --backend c (not {args.backend!r})"
            )
        if not args.artifact.is_dir():
            raise ConfigError(
                f"--native times the C step generated from an artifact directory; {args.artifact} is not one "
                "(a bare ONNX model has no C step: drop --native)"
            )
        from tickformer.certify.native import certify_native

        def native(artifact: Any, **kw: Any) -> Any:
            kw.pop("backend"), kw.pop("threads"), kw.pop("progress", None)
            return certify_native(artifact, trust=args.trust, cc=args.cc, **kw)

        return native
    if args.cc is not None:
        raise ConfigError(
            "--cc names the compiler of --native; add --native (the c backend's compiler is $CC)"
        )
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
    if user_model.is_bare(args.artifact, args):
        words += ["--time-budget", f"{args.time_budget:g}"]
        if args.memory_budget is not None:
            words += ["--memory-budget", f"{args.memory_budget:g}"]
    if args.realtime:
        words += ["--realtime", "--rt-priority", str(args.rt_priority)]
    if getattr(args, "native", False):
        words += ["--native"] + (["--cc", args.cc] if args.cc else [])
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


def check(args: argparse.Namespace) -> int:
    """`certify --check CERT ART [--trust KEY.pub]`: exit 0 when every check passes, 1 otherwise."""
    from tickformer.certify.check import check_certificate

    ran = [
        f
        for f, v in (("--budget-us", args.budget_us), ("--out", args.out), ("--sign", args.sign))
        if v is not None
    ]
    if ran:
        raise ConfigError(
            f"--check reads a certificate; {', '.join(ran)} belong to a campaign: remove them (the budget is the "
            "certificate's)"
        )
    result = check_certificate(args.check, args.artifact, trust=args.trust)
    for line in result.lines:
        print(line)
    print(
        f"certificate {'CHECKED' if result.ok else 'NOT VALID'}: {args.check}"
        + (f" (verdict {result.verdict})" if result.verdict else "")
    )
    return 0 if result.ok else 1


def run(args: argparse.Namespace) -> int:
    if args.check is not None:
        return check(args)
    if user_model.is_bare(args.artifact, args):  # a user's model: within its budget, failures exit 2
        import tickformer.certify.campaign  # noqa: F401  (imported before the budget's clock starts)
        import tickformer.certify.report  # noqa: F401

        def body(budget: Any) -> int:
            budget.hint = user_model.loop_hint(args.artifact, args.step)
            budget.doing = f"certify's campaign on {args.artifact}"
            return _run(args)

        return user_model.guarded(args, "certify", body, backend=args.backend)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from tickformer.certify.campaign import CampaignConfig
    from tickformer.certify.decision import EvtConfig, check_sample_count
    from tickformer.certify.report import summary, write_report

    if args.budget_us is None or args.out is None:
        args.certify_parser.error(
            "the following arguments are required: --budget-us, --out (or --check CERT to check a certificate)"
        )
    signing_key = None
    if args.sign is not None:
        from tickformer.signing import load_private_key

        signing_key = load_private_key(args.sign)  # before the campaign: a bad key fails at once
    budget_ns = _budget_ns(args.budget_us)
    evt_config = shared.config(
        EvtConfig, args, ("method", "exceedance", "run_length", "block_size", "n_boot", "seed")
    )
    check_sample_count(args.samples, evt_config)  # the tail fit's own minimum, before anything runs
    campaign = shared.config(
        CampaignConfig, args, ("samples", "warmup", "cpu", "realtime", "rt_priority", "seed")
    )
    console = Console()
    certify = functools.partial(
        _certifier(args),
        args.artifact,
        backend=args.backend,
        budget_ns=budget_ns,
        campaign=campaign,
        evt_config=evt_config,
        threads=args.threads,
    )
    if args.quiet or args.native:  # native: the steps are timed in another process, no progress to show
        report, durations = certify()
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

            report, durations = certify(progress=progress)
    report["conditions"]["command_line"] = reproduction(args)
    cert = write_report(args.out, report, durations, signing_key=signing_key)
    if not args.quiet:
        summary(report, console)
        console.print(f"report: {cert.parent}")
    return int(report["exit_code"])
