"""`tickformer demo --out DIR`: the whole pipeline end to end, in a few minutes on 2 cores.

Stages (each a function, so a missing part of the checkout fails one stage with a clear note):

    1. train      the control model on the `pendulum` task (model/tasks.py), few steps
    2. export     to an ONNX artifact (export/writer.py), max_len = the task's sequence length
    3. verify     the contracts on the exported artifact (tickformer.verify.properties on ORT)
    4. certify    step latency on ONNX Runtime (tickformer.certify) against a per-step budget
                  derived from the control loop: tick budget / number of candidate actions
    5. loop       closed loop on the simulated pendulum (tickformer.control) under ControlLoop
                  (runtime/control_loop.py), real wall-clock periods:
                    - model controller: one-step model-predictive choice among K candidate
                      torques, the next state of each predicted by the exported model on ORT
                      (reset + one step at position 0 per candidate: the pendulum is Markov, and
                      a session has one cache, so candidates cannot share a history);
                    - the same controller using the true plant model (pendulum_step);
                    - open loop (u = 0) for scale.
                  Reported: RMS / max tracking error of theta against the reference, deadline
                  statistics and fallback counts of each loop.

The plant is simulated: one control tick advances it by the plant's dt (model/plant.py) with the
actuated torque held (zero-order hold), also through skipped periods; the wall-clock period of
the loop (--period-ms) is independent of dt (the demo runs faster than real time).
Writes DIR/{checkpoint, artifact, certify/, demo_summary.json, tracking.png}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError, TickformerError


@dataclass(frozen=True)
class DemoConfig:
    """Defaults sized for ~2-4 minutes on a shared 2-core machine."""

    train_steps: int = 600
    seed: int = 0
    samples: int = 20_000
    n_boot: int = 100
    verify_examples: int = 20
    ticks: int = 100  # plant ticks of dt each (model/plant.py)
    period_ms: float = 20.0
    tick_budget_ms: float | None = None  # default: half the period
    candidates: int = 17
    amplitude: float = 0.3  # rad; gravity needs u >= 9.81 sin(theta), so stay below asin(4/9.81)
    ref_period_s: float = 8.0
    kp: float = 2.0
    w_omega: float = 0.01

    def __post_init__(self) -> None:
        for name in ("train_steps", "samples", "ticks", "n_boot", "verify_examples"):
            validation.positive_int(getattr(self, name), f"--{name.replace('_', '-')}")
        validation.integer(self.candidates, "--candidates", min_value=2, hint="a choice needs alternatives")
        validation.positive_real(self.period_ms, "--period-ms")
        if self.tick_budget_ms is not None and not (0 < self.tick_budget_ms <= self.period_ms):
            raise ConfigError(
                f"--tick-budget-ms {self.tick_budget_ms!r} must be in (0, period {self.period_ms}]"
            )

    @property
    def period_ns(self) -> int:
        return int(round(self.period_ms * 1e6))

    @property
    def tick_budget_ns(self) -> int:
        ms = self.period_ms / 2 if self.tick_budget_ms is None else self.tick_budget_ms
        return int(round(ms * 1e6))

    @property
    def step_budget_ns(self) -> int:
        """Per model step: the tick runs `candidates` steps, so each gets 1/candidates of it."""
        return self.tick_budget_ns // self.candidates


def reference(cfg: DemoConfig):
    from tickformer.control import SineReference

    return SineReference(cfg.amplitude, cfg.ref_period_s)


# ----------------------------------------------------------------------------- stages


def stage_train(out: Path, cfg: DemoConfig, progress: bool) -> dict[str, Any]:
    from tickformer.model import preset
    from tickformer.model.tasks import get_task
    from tickformer.model.train import TrainSettings, train

    task = get_task("pendulum")
    result = train(
        task,
        preset(task.preset),
        TrainSettings.for_task(task, steps=cfg.train_steps, seed=cfg.seed),
        out=out / "checkpoint",
        preset_name=task.preset,
        progress=progress,
    )
    h = result.metrics["held_out"]
    return {
        "checkpoint": str(result.checkpoint),
        "seconds": round(result.train_seconds, 1),
        "steps": cfg.train_steps,
        "held_out_rmse": h["model_rmse"],
        "baseline_rmse": h["baseline_rmse"],
        "baseline": h["baseline"],
    }


def stage_export(out: Path, checkpoint: str) -> dict[str, Any]:
    from tickformer.artifact import open_artifact
    from tickformer.export.writer import export_artifact
    from tickformer.model.tasks import PENDULUM_STEPS

    art = export_artifact(checkpoint, out / "artifact", max_len=PENDULUM_STEPS)
    manifest = open_artifact(art).manifest
    worst = max(p["max_abs"] for p in manifest["equivalence"]["pairs"].values())
    return {
        "artifact": str(art),
        "max_len": manifest["max_len"],
        "worst_backend_disagreement": worst,
        "output_bound": manifest.get("output_bound"),
    }


def stage_verify(out: Path, artifact: str, cfg: DemoConfig) -> dict[str, Any]:
    """Contracts on the exported artifact (tickformer.verify.properties: finite outputs over the
    declared domain, causality, step == full pass, stale-cache isolation, numpy vs ORT) run on the
    artifact through the real runtime."""
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
    status = "fail: " + ", ".join(failed) if failed else "pass"
    return {
        "status": status,
        "properties": {r["name"]: f"{r['status']} ({r['examples']} examples)" for r in rows},
        "results": rows,
    }


def stage_certify(
    out: Path, artifact: str, cfg: DemoConfig, progress: Callable[[int], None] | None
) -> dict[str, Any]:
    from tickformer.certify.campaign import CampaignConfig, EvtConfig, certify_artifact
    from tickformer.certify.report import write_report

    report, durations = certify_artifact(
        artifact,
        backend="ort",
        budget_ns=float(cfg.step_budget_ns),
        campaign=CampaignConfig(samples=cfg.samples, warmup=1000, seed=cfg.seed),
        evt_config=EvtConfig(n_boot=cfg.n_boot, seed=cfg.seed),
        progress=progress,
    )
    write_report(out / "certify", report, durations)
    st = report["stats"]
    pwcet = report["pwcet"]  # estimated only from an admissible tail fit (certify.campaign.pwcet_result)
    return {
        "verdict": report["verdict"],
        "reasons": report["reasons"],
        "budget_us": cfg.step_budget_ns / 1e3,
        "p50_us": st["p50"] / 1e3,
        "p99_us": st["p99"] / 1e3,
        "p99.9_us": st["p99.9"] / 1e3,
        "max_us": st["max"] / 1e3,
        "pwcet_1e-9_us": pwcet["value_ns"] / 1e3
        if pwcet["estimated"] and pwcet["value_ns"] is not None
        else None,
        "pwcet_1e-9": "estimated" if pwcet["estimated"] else pwcet["text"],
        "xi": (report.get("evt") or {}).get("fit", {}).get("xi"),
        "report": str(out / "certify"),
    }


def run_loop(controller: Any, cfg: DemoConfig, plant_params: Any, u_max: float) -> dict[str, Any]:
    from tickformer.control import SimulatedPlant
    from tickformer.runtime.control_loop import ControlLoop, LoopConfig

    plant = SimulatedPlant(plant_params, reference(cfg), n_ticks_max=cfg.ticks * 64)
    loop = ControlLoop(
        controller,
        LoopConfig(
            period_ns=cfg.period_ns,
            budget_ns=cfg.tick_budget_ns,
            fallback="hold",
            safe_action=(0.0,),
            output_bound=u_max,
            hist_bin_ns=50_000,
            hist_bins=200,
        ),
    )
    # warm the controller (first-call paths of the backend) outside the loop
    controller.step(plant.observe(0))
    stats = loop.run(cfg.ticks, plant.observe, plant.actuate)
    d = stats.to_dict()
    d.pop("histogram")
    return {"tracking": plant.tracking(), "deadlines": d, "theta": plant.theta[: plant.k + 1].tolist()}


def open_loop(cfg: DemoConfig, plant_params: Any) -> dict[str, Any]:
    from tickformer.control import SimulatedPlant

    plant = SimulatedPlant(plant_params, reference(cfg), n_ticks_max=cfg.ticks)
    zero = np.zeros(1)
    for k in range(cfg.ticks):
        plant.observe(k)
        plant.actuate(zero)
    return {"tracking": plant.tracking()}


def stage_loop(artifact: str, checkpoint: str, cfg: DemoConfig, output_bound: float | None) -> dict[str, Any]:
    from tickformer.control import ModelMPC, TrueMPC
    from tickformer.model.checkpoint import load_checkpoint
    from tickformer.model.plant import PendulumParams
    from tickformer.runtime import load

    meta = load_checkpoint(checkpoint).meta
    plant_params = PendulumParams(**meta["plant"])
    weights = {"kp": cfg.kp, "w_omega": cfg.w_omega}
    session = load(artifact, backend="ort", contracts="off")
    try:
        controller = ModelMPC(
            cfg.candidates, plant_params.u_max, session, meta["norm"], output_bound, **weights
        )
        model = run_loop(controller, cfg, plant_params, plant_params.u_max)
    finally:
        session.close()
    true = run_loop(TrueMPC(cfg.candidates, plant_params, **weights), cfg, plant_params, plant_params.u_max)
    return {"model": model, "true": true, "open_loop": open_loop(cfg, plant_params), "dt_s": plant_params.dt}


# ----------------------------------------------------------------------------- report


def plot_tracking(path: Path, loop: dict[str, Any], cfg: DemoConfig) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    dt = loop["dt_s"]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    n = len(loop["model"]["theta"])
    t = np.arange(n) * dt
    ax.plot(t, cfg.amplitude * np.sin(2 * np.pi * t / cfg.ref_period_s), "k--", lw=1, label="reference")
    ax.plot(
        t, loop["model"]["theta"], label=f"model MPC (rms {loop['model']['tracking']['rms_rad']:.4f} rad)"
    )
    tt = np.arange(len(loop["true"]["theta"])) * dt
    ax.plot(
        tt,
        loop["true"]["theta"],
        label=f"true-model MPC (rms {loop['true']['tracking']['rms_rad']:.4f} rad)",
        alpha=0.8,
    )
    ax.set_xlabel("plant time (s)")
    ax.set_ylabel("theta (rad)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_table(summary: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    t = Table(title="tickformer demo", show_header=True, header_style="bold")
    t.add_column("stage")
    t.add_column("result")
    tr = summary.get("train")
    if tr:
        t.add_row(
            "train",
            f"{tr['steps']} steps in {tr['seconds']} s; held-out one-step RMSE {tr['held_out_rmse']:.4f} "
            f"(std. units; {tr['baseline']}: {tr['baseline_rmse']:.2e})",
        )
    ex = summary.get("export")
    if ex:
        t.add_row(
            "export",
            f"max_len {ex['max_len']}; worst backend disagreement {ex['worst_backend_disagreement']:.2g}",
        )
    ve = summary.get("verify")
    if ve:
        detail = ve.get("reason") or ", ".join(f"{k} {v}" for k, v in ve.get("properties", {}).items())
        t.add_row("verify", f"[bold]{ve['status']}[/]: {detail}")
    ce = summary.get("certify")
    if ce:
        if ce["pwcet_1e-9_us"] is not None:
            pw = f"pWCET(1e-9) {ce['pwcet_1e-9_us']:.4g} us"
        elif ce.get("pwcet_1e-9", "estimated") != "estimated":
            pw = f"pWCET(1e-9) {ce['pwcet_1e-9']}"
        else:
            pw = "pWCET(1e-9) unbounded"
        t.add_row(
            "certify (ort)",
            f"[bold]{ce['verdict']}[/] at {ce['budget_us']:.0f} us/step: p50 {ce['p50_us']:.1f}, "
            f"p99 {ce['p99_us']:.1f}, max {ce['max_us']:.1f} us; {pw}\n{ce['reasons'][0]}",
        )
    lo = summary.get("loop")
    if lo:
        for name in ("model", "true"):
            r = lo[name]
            d = r["deadlines"]
            t.add_row(
                f"loop: {name} MPC",
                f"tracking rms {r['tracking']['rms_rad']:.4f} rad, max {r['tracking']['max_abs_rad']:.4f} rad | "
                f"{d['ticks']} ticks, misses {d['deadline_misses']}, skipped {d['skipped_periods']}, "
                f"overruns {d['overruns']}, violations {d['contract_violations']}, faults {d['faults']}, "
                f"fallbacks {d['fallbacks']} | step max {d['step_max'] / 1e3:.0f} us, "
                f"wake lateness max {d['wake_lateness_max'] / 1e3:.0f} us",
            )
        t.add_row("loop: open (u = 0)", f"tracking rms {lo['open_loop']['tracking']['rms_rad']:.4f} rad")
    console.print(t)


# ----------------------------------------------------------------------------- CLI


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="end to end: train, export, verify, certify, closed loop",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = DemoConfig()
    p.add_argument("--out", required=True, help="report directory")
    p.add_argument(
        "--train-steps", type=int, default=d.train_steps, help=f"training steps (default {d.train_steps})"
    )
    p.add_argument(
        "--samples", type=int, default=d.samples, help=f"certification samples (default {d.samples})"
    )
    p.add_argument("--n-boot", type=int, default=d.n_boot, help=f"bootstrap replicates (default {d.n_boot})")
    p.add_argument(
        "--ticks", type=int, default=d.ticks, help=f"control ticks per closed loop (default {d.ticks})"
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
        default=d.verify_examples,
        help=f"Hypothesis examples per contract property (default {d.verify_examples})",
    )
    p.add_argument(
        "--candidates",
        type=int,
        default=d.candidates,
        help=f"candidate torques per tick (default {d.candidates})",
    )
    p.add_argument("--seed", type=int, default=d.seed, help="seed (default 0)")
    p.set_defaults(func=run)


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


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    cfg = DemoConfig(
        train_steps=args.train_steps,
        seed=args.seed,
        samples=args.samples,
        n_boot=args.n_boot,
        ticks=args.ticks,
        period_ms=args.period_ms,
        tick_budget_ms=args.tick_budget_ms,
        candidates=args.candidates,
        verify_examples=args.verify_examples,
    )
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

    tr = timed("train", lambda: stage_train(out, cfg, progress=interactive))
    ex = timed("export", lambda: stage_export(out, tr["checkpoint"]))
    timed("verify", lambda: stage_verify(out, ex["artifact"], cfg))

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

            return stage_certify(out, ex["artifact"], cfg, progress)

    timed("certify", certify)
    timed("loop", lambda: stage_loop(ex["artifact"], tr["checkpoint"], cfg, ex["output_bound"]))
    plot_tracking(out / "tracking.png", summary["loop"], cfg)
    summary["run"]["wall_s"] = round(time.perf_counter() - wall0, 1)
    summary["run"]["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    slim = json.loads(json.dumps(summary, default=str))
    for name in ("model", "true"):
        slim["loop"][name].pop("theta", None)
    (out / "demo_summary.json").write_text(json.dumps(slim, indent=2) + "\n")
    summary_table(summary, console)
    console.print(f"report directory: {out.resolve()}  (demo_summary.json, tracking.png, certify/)")
    return 0
