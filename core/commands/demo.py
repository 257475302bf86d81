"""`tickformer demo --out DIR`: the whole pipeline end to end on a plant where history matters.

The plant (control/plant.py `HiddenPendulum`, task `pendulum-hidden` in control/task.py): only a
noisy angle is measured, mass / length / damping / actuator gain are drawn per episode (the
loop's plant from the held-out bands: constants no training episode had), and a command reaches
the joint 2 ticks after it is issued. The velocity, the constants and the commands in flight
must all come from the stream, so the model is used as a sequence model: a window of 32 ticks,
one position per tick, sliding without reset.

Stages (each a function, so a missing part of the checkout fails one stage with a clear note):

    1. train      the memoryless model (the same network with window 1), then the windowed
                  model (window 32) on `pendulum-hidden`, whose held-out metrics include the
                  baselines (the first model as the memoryless twin, linear AR, nominal physics)
    2. export     both with batch K (the K candidate commands x 1 stream, static shapes)
    3. verify     the contracts on the exported windowed artifact (tickformer.verify.properties)
    0. backend    the models' backend for the certification and the loop (--backend): auto
                  takes the generated C (backend c: the K candidates in one call) where a C
                  compiler is found, ONNX Runtime otherwise; recorded with its reason
                  (demo_summary.json `backend`; tickformer.control.demo_tick)
    4. certify    the batch-K step, on the loop's backend, against the tick budget
    5. loop       four controllers (tickformer.control.delayed) on the same plant, reference
                  and measurement-noise seed, each under ControlLoop with absolute deadlines
                  (runtime/control_loop.py) at --period-ms, --ticks ticks:
                    model       IdentifiedMPC: one Session.peek of K candidates over the shared
                                history, commit of the chosen one, the session sliding; the
                                model's identified constants (outputs after its horizons,
                                smoothed) in an EKF of the state and the physics prediction
                                (--horizons-only: HistoryMPC, the model's predicted angles)
                    memoryless  the same controller on the window-1 model
                    nominal     NominalMPC: true equations, nominal constants, EKF state
                    oracle      OracleMPC: true equations, the episode's true constants, EKF
                  Each controller runs twice from the same start: in virtual time
                  (runtime.control_loop.VirtualClock: every tick on time, so the tracking
                  depends on the seed alone and is reproduced to the digit -- the result) and on
                  the wall clock (deadlines, fallbacks, and what the late ticks cost the
                  tracking, with the machine's load beside them).
                  On backend c the model's wall-clock loop runs once more on ORT: the tick (the
                  controller's whole step) before and after, p50/p99.9 against the period, and
                  its share outside the model calls (`loop.tick`).
                  Per-tick step time is traced for the whole run (latency.png), RSS read after
                  the warm-up ticks and at the end; the sessions' contracts in monitor mode; each
                  loop under SCHED_FIFO + mlockall + a frozen gc where granted (recorded).

The plant is simulated: one tick advances it by its dt (0.1 s), also through skipped periods
(the held command); the wall-clock period of the loop is independent of dt (faster than real
time). Writes DIR/{checkpoint, checkpoint-memoryless, artifact, artifact-memoryless, certify/,
demo_summary.json, tracking.png, latency.png}. `--quick` (tests): tiny budgets everywhere.

This module parses the arguments, calls the stages (library code: tickformer.control.demo,
tickformer.verify.properties, tickformer.certify) and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from tickformer.control.demo import CONTROLLERS, QUICK, DemoConfig
from tickformer.control.demo_tick import BACKEND_CHOICES
from tickformer.errors import TickformerError

__all__ = [
    "CONTROLLERS",
    "QUICK",
    "DemoConfig",
    "HELP",
    "arguments",
    "config_from_args",
    "run",
    "summary_table",
]


# ----------------------------------------------------------------------------- stages


def stage_verify(out: Path, artifact: str, cfg: DemoConfig) -> dict[str, Any]:
    """Contracts on the exported artifact (tickformer.verify.properties: finite outputs over the
    declared domain, causality, step == full pass, numpy vs ORT, ...) through the real runtime."""
    from tickformer.verify.properties import open_model, verify_model

    model = open_model(artifact, backend="ort", max_t=8)
    try:
        results = verify_model(
            model, examples=cfg.verify_examples, seed_value=cfg.seed, out_dir=out / "verify"
        )
    finally:
        model.close()
    rows = [r.to_dict() for r in results]
    failed = [r["name"] for r in rows if r["status"] == "fail"]
    return {
        "status": "fail: " + ", ".join(failed) if failed else "pass",
        "properties": {r["name"]: f"{r['status']} ({r['examples']} examples)" for r in rows},
        "results": rows,
    }


def stage_certify(
    out: Path,
    artifact: str,
    cfg: DemoConfig,
    progress: Callable[[int], None] | None,
    backend: str,
) -> dict[str, Any]:
    """Certify the batch-K step of the windowed artifact on the loop's backend (the step a tick
    runs when it catches up; its peek evaluates the K candidates over one history), against the
    tick budget, under the loops' isolation."""
    from tickformer.certify.campaign import CampaignConfig, certify_artifact
    from tickformer.certify.decision import EvtConfig
    from tickformer.certify.report import write_report

    report, durations = certify_artifact(
        artifact,
        backend=backend,
        budget_ns=float(cfg.tick_budget_ns),
        campaign=CampaignConfig(
            samples=cfg.samples, warmup=min(1000, cfg.samples // 2), seed=cfg.seed, realtime=cfg.realtime
        ),
        evt_config=EvtConfig(n_boot=cfg.n_boot, seed=cfg.seed),
        progress=progress,
    )
    write_report(out / "certify", report, durations)
    st, pwcet = report["stats"], report["pwcet"]  # pwcet: only from an admissible tail fit
    return {
        "verdict": report["verdict"],
        "reasons": report["reasons"],
        "backend": report["conditions"]["backend"],  # what the campaign ran on, from its certificate
        "batch": cfg.candidates,
        "budget_us": cfg.tick_budget_ns / 1e3,
        "p50_us": st["p50"] / 1e3,
        "p99_us": st["p99"] / 1e3,
        "p99.9_us": st["p99.9"] / 1e3,
        "max_us": st["max"] / 1e3,
        "pwcet_1e-9_us": pwcet["value_ns"] / 1e3
        if pwcet["estimated"] and pwcet["value_ns"] is not None
        else None,
        "pwcet_1e-9": "estimated" if pwcet["estimated"] else pwcet["text"],
        "xi": (report.get("evt") or {}).get("fit", {}).get("xi"),
        "isolation": report["conditions"].get("isolation"),
        "report": str(out / "certify"),
    }


# ----------------------------------------------------------------------------- printing


def summary_table(summary: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    t = Table(title="tickformer demo", show_header=True, header_style="bold")
    t.add_column("stage")
    t.add_column("result")
    be = summary.get("backend")
    if be:
        t.add_row("backend", f"[bold]{be['used']}[/] for the certification and the loop: {be['reason']}")
    tr = summary.get("train")
    if tr:
        b = tr.get("baselines") or {}
        base = ", ".join(f"{k} {v['rmse']:.4f}" for k, v in b.items())
        t.add_row(
            "train",
            f"{tr['steps']} steps x 2 models in {tr['seconds']} s; held-out one-step RMSE {tr['held_out_rmse']:.4f} "
            f"rad (window {tr['window']}); baselines: {base}",
        )
    ex = summary.get("export")
    if ex:
        t.add_row(
            "export",
            f"batch {ex['batch']}; max_len {ex['model']['max_len']}; worst backend disagreement "
            f"{ex['model']['worst_backend_disagreement']:.2g}",
        )
    ve = summary.get("verify")
    if ve:
        detail = ve.get("reason") or ", ".join(f"{k} {v}" for k, v in ve.get("properties", {}).items())
        t.add_row("verify", f"[bold]{ve['status']}[/]: {detail}")
    ce = summary.get("certify")
    if ce:
        pw = (
            f"pWCET(1e-9) {ce['pwcet_1e-9_us']:.4g} us"
            if ce["pwcet_1e-9_us"] is not None
            else f"pWCET(1e-9) {ce.get('pwcet_1e-9')}"
        )
        t.add_row(
            f"certify ({ce.get('backend', 'ort')}, batch {ce.get('batch', 1)})",
            f"[bold]{ce['verdict']}[/] at {ce['budget_us']:.0f} us/step: p50 {ce['p50_us']:.1f}, "
            f"p99 {ce['p99_us']:.1f}, max {ce['max_us']:.1f} us; {pw}\n{ce['reasons'][0]}",
        )
    lo = summary.get("loop")
    if lo:
        for name in CONTROLLERS:
            r = lo[name]
            v = r["virtual_time"]
            t.add_row(
                f"loop: {name}" + (f" ({r['controller']})" if "controller" in r else ""),
                f"tracking rms {v['tracking_rms']:.4f} rad (virtual time, deterministic) | wall clock: "
                f"{r['ticks']} ticks, misses {r['deadline_misses']} ({r['misses_covered_by_fallback']} covered "
                f"by the fallback), fallbacks {r['fallbacks']}, tracking {r['tracking_rms']:.4f} rad "
                f"({r['tracking_cost_of_real_time']:+.4f}) | step p50 {r['step_p50_us']:.0f} us (first 10% "
                f"{r['step_p50_first_10pct_us']:.0f}, last 10% {r['step_p50_last_10pct_us']:.0f}), p99 "
                f"{r['step_p99_us']:.0f} us",
            )
        for name, k in (lo.get("tick") or {}).get("by_backend", {}).items():
            t.add_row(
                f"tick: model on {name}",
                f"p50 {k['tick_p50_us']:.1f} us, p99.9 {k['tick_p99.9_us']:.1f} us "
                f"({100 * k['tick_p50_period_share']:.1f}% and {100 * k['tick_p99.9_period_share']:.1f}% "
                f"of the {k['period_us']:.0f} us period); model calls p50 {k['model_p50_us']:.1f} us; "
                f"{100 * k['outside_model_share']:.0f}% of the tick outside the model calls",
            )
        before, after = lo.get("load_average_before"), lo.get("load_average_after")
        if before and after:
            t.add_row(
                "machine load",
                f"load average {before[0]:.2f} before the loops, {after[0]:.2f} after ({lo['cpu_count']} CPUs): "
                "the wall-clock rows depend on it, the virtual-time tracking does not",
            )
        verdict = lo.get("verdict") or {}
        if verdict:
            t.add_row(
                "targets",
                "; ".join(f"{k} {'met' if v['met'] else '[bold]not met[/]'}" for k, v in verdict.items()),
            )
    console.print(t)


# ----------------------------------------------------------------------------- CLI


HELP = "end to end: train, export, verify, certify, closed loop on the hidden pendulum"


def arguments(p: argparse.ArgumentParser) -> None:
    d = DemoConfig()
    p.add_argument("--out", required=True, help="report directory")
    p.add_argument(
        "--train-steps", type=int, default=None, help=f"training steps per model (default {d.train_steps})"
    )
    p.add_argument("--samples", type=int, default=None, help=f"certification samples (default {d.samples})")
    p.add_argument("--n-boot", type=int, default=None, help=f"bootstrap replicates (default {d.n_boot})")
    p.add_argument(
        "--ticks",
        type=int,
        default=None,
        help=f"control ticks per closed loop (default {d.ticks}; at least 20,000 and 20 windows)",
    )
    p.add_argument(
        "--period-ms", type=float, default=d.period_ms, help=f"wall-clock loop period (default {d.period_ms})"
    )
    p.add_argument(
        "--tick-budget-ms", type=float, default=None, help="per-tick budget (default: half the period)"
    )
    p.add_argument(
        "--verify-examples",
        type=int,
        default=None,
        help=f"Hypothesis examples per contract property (default {d.verify_examples})",
    )
    p.add_argument(
        "--candidates",
        type=int,
        default=d.candidates,
        help=f"candidate commands per tick (default {d.candidates})",
    )
    p.add_argument("--seed", type=int, default=d.seed, help="seed (default 0)")
    p.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        default=d.backend,
        help="the models' backend for the certification and the loop: auto (default: c where a C "
        "compiler is found, else ort), c or ort; the choice and why is in demo_summary.json",
    )
    p.add_argument(
        "--no-realtime",
        action="store_true",
        help="do not request SCHED_FIFO and mlockall for the certification and the loops "
        "(requested by default; a refusal is recorded, never fatal)",
    )
    p.add_argument(
        "--horizons-only",
        action="store_true",
        help="train the models without the state and constants outputs and run HistoryMPC on their "
        "predicted angles (the demo before IdentifiedMPC)",
    )
    p.add_argument(
        "--quick", action="store_true", help="tiny budgets everywhere (tests; numbers meaningless)"
    )


def _run_record() -> dict[str, Any]:
    """When and where the demo ran, for demo_summary.json (its numbers are this machine's)."""
    import datetime as _dt
    import platform
    import sys

    import tickformer

    return {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "tickformer " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["demo"] else "tickformer demo",
        "tickformer": tickformer.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_before": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    base: dict[str, Any] = dict(QUICK) if args.quick else {}
    for name in ("train_steps", "samples", "n_boot", "ticks", "verify_examples"):
        value = getattr(args, name)
        if value is not None:
            base[name] = value
    return DemoConfig(
        seed=args.seed,
        period_ms=args.period_ms,
        tick_budget_ms=args.tick_budget_ms,
        candidates=args.candidates,
        realtime=not getattr(args, "no_realtime", False),
        identify=not getattr(args, "horizons_only", False),
        backend=getattr(args, "backend", "auto"),
        quick=args.quick,
        **base,
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tickformer.certify.isolation import Isolation
    from tickformer.control import demo as D
    from tickformer.control.demo_plots import plot_latency, plot_tracking
    from tickformer.durable import atomic_write

    cfg = config_from_args(args)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TickformerError(
            f"cannot create --out {out}: {exc.strerror or exc}; choose another --out directory"
        ) from exc
    console = Console()
    summary: dict[str, Any] = {"run": _run_record(), "config": asdict(cfg), "stage_seconds": {}}
    interactive = console.is_terminal
    wall0 = time.perf_counter()

    def timed(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        console.print(f"[bold]== {name}[/]")
        t0 = time.perf_counter()
        result = fn()
        summary["stage_seconds"][name] = round(time.perf_counter() - t0, 1)
        summary[name] = result
        return result

    def note(line: str) -> None:  # progress of the long stages, one line each (a log too)
        console.print(f"  {line}", highlight=False, soft_wrap=True)

    from tickformer.control.demo_tick import choose_backend

    choice = choose_backend(cfg.backend)
    summary["backend"] = choice.to_dict()
    console.print(f"[bold]== backend[/] {choice.reason}", highlight=False)
    D.start_runtime()
    tr = timed(
        "train", lambda: D.train_models(out, cfg, progress=interactive, note=None if interactive else note)
    )
    ex = timed("export", lambda: D.export_models(out, tr, cfg))
    timed("verify", lambda: stage_verify(out, ex["model"]["artifact"], cfg))

    def certify() -> dict[str, Any]:
        with Progress(
            TextColumn("sampling"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            auto_refresh=False,
            transient=True,
            disable=not interactive,
        ) as bar:
            task = bar.add_task("sampling", total=cfg.samples)

            def progress(done: int) -> None:
                bar.update(task, completed=done)
                bar.refresh()

            return stage_certify(out, ex["model"]["artifact"], cfg, progress, choice.used)

    ce = timed("certify", certify)
    lo = timed(
        "loop",
        lambda: D.run_loops(
            ex,
            tr,
            cfg,
            isolation=lambda: Isolation(realtime=cfg.realtime),
            progress=note,
            backend=choice.used,
        ),
    )
    lo["period"] = D.period_shares(ce, lo, cfg)
    plot_tracking(out / "tracking.png", lo, cfg)
    plot_latency(out / "latency.png", lo, cfg)
    summary["window"] = cfg.window
    summary["max_len"] = ex["model"]["max_len"]
    summary["run"]["wall_s"] = round(time.perf_counter() - wall0, 1)
    summary["run"]["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    slim = json.loads(json.dumps({**summary, "loop": D.public(lo)}, default=str))
    atomic_write(out / "demo_summary.json", (json.dumps(slim, indent=2) + "\n").encode())
    summary_table(summary, console)
    console.print(
        f"report directory: {out.resolve()}  (demo_summary.json, tracking.png, latency.png, certify/)"
    )
    return 0
