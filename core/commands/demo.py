"""`tickformer demo --out DIR`: the whole pipeline end to end on a plant where history matters.

The plant (model/plant.py `HiddenPendulum`, task `pendulum-hidden` in model/tasks.py): only a
noisy angle is measured, mass / length / damping / actuator gain are drawn per episode (the
loop's plant from the held-out bands: constants no training episode had), and a command reaches
the joint 2 ticks after it is issued. The velocity, the constants and the commands in flight
must all come from the stream, so the model is used as a sequence model: a window of 32 ticks,
one position per tick, sliding without reset.

Stages (each a function, so a missing part of the checkout fails one stage with a clear note):

    1. train      the windowed model (window 32) on `pendulum-hidden`, whose held-out metrics
                  include the baselines (memoryless twin, linear AR, nominal physics), and the
                  memoryless model (the same network with window 1) for the loop
    2. export     both with batch K (the K candidate commands x 1 stream, static shapes)
    3. verify     the contracts on the exported windowed artifact (tickformer.verify.properties)
    4. certify    the batch-K step the loop runs, on ONNX Runtime, against the tick budget
    5. loop       four controllers (tickformer.control.delayed) on the same plant, reference
                  and measurement-noise seed, each under ControlLoop with absolute deadlines
                  (runtime/control_loop.py) at --period-ms, --ticks ticks:
                    model       HistoryMPC: one Session.peek of K candidates over the shared
                                history, commit of the chosen one, the session sliding
                    memoryless  the same controller on the window-1 model
                    nominal     NominalMPC: true equations, nominal constants, EKF state
                    oracle      OracleMPC: true equations, the episode's true constants, EKF
                  Per-tick step time is traced for the whole run (latency.png), RSS read at the
                  start and end of the model's loop.

The plant is simulated: one tick advances it by its dt (0.1 s), also through skipped periods
(the held command); the wall-clock period of the loop is independent of dt (faster than real
time). Writes DIR/{checkpoint, checkpoint-memoryless, artifact, artifact-memoryless, certify/,
demo_summary.json, tracking.png, latency.png}. `--quick` (tests): tiny budgets everywhere.
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

CONTROLLERS = ("model", "memoryless", "nominal", "oracle")


@dataclass(frozen=True)
class DemoConfig:
    """Defaults sized for a few minutes on a shared 2-core machine (docs/control.md)."""

    train_steps: int = 1500
    seed: int = 0
    samples: int = 20_000
    n_boot: int = 100
    verify_examples: int = 20
    ticks: int = 20_000  # control ticks (plant periods of dt) per closed loop
    period_ms: float = 5.0
    tick_budget_ms: float | None = None  # default: half the period
    candidates: int = 17
    window: int = 32
    amplitude: float = 0.25  # rad
    ref_period_s: float = 4.0
    settle_ticks: int = (
        100  # tracking RMS skips the first ticks (the model's window filling, the filters settling)
    )
    kp: float = 2.0
    w_omega: float = 0.05
    quick: bool = False

    def __post_init__(self) -> None:
        for name in ("train_steps", "samples", "ticks", "n_boot", "verify_examples"):
            validation.positive_int(getattr(self, name), f"--{name.replace('_', '-')}")
        validation.integer(self.candidates, "--candidates", min_value=2, hint="a choice needs alternatives")
        validation.positive_real(self.period_ms, "--period-ms")
        if self.tick_budget_ms is not None and not (0 < self.tick_budget_ms <= self.period_ms):
            raise ConfigError(
                f"--tick-budget-ms {self.tick_budget_ms!r} must be in (0, period {self.period_ms}]"
            )
        if not self.quick and self.ticks < max(20_000, 20 * self.window):
            raise ConfigError(
                f"--ticks {self.ticks} is below the demo's minimum {max(20_000, 20 * self.window)} "
                f"(20,000 and 20 windows); give --ticks N >= that, or --quick for a short test run"
            )

    @property
    def period_ns(self) -> int:
        return int(round(self.period_ms * 1e6))

    @property
    def tick_budget_ns(self) -> int:
        ms = self.period_ms / 2 if self.tick_budget_ms is None else self.tick_budget_ms
        return int(round(ms * 1e6))


QUICK = {"train_steps": 30, "samples": 2000, "n_boot": 20, "verify_examples": 3, "ticks": 400}


def reference(cfg: DemoConfig):
    from tickformer.control import SineReference

    return SineReference(cfg.amplitude, cfg.ref_period_s)


def loop_plant(cfg: DemoConfig) -> Any:
    """The loop's plant: constants drawn from the held-out bands (model.plant.draw_hidden), seeded."""
    from tickformer.model.plant import draw_hidden

    return draw_hidden(np.random.default_rng([cfg.seed, 14]), "held_out")


# ----------------------------------------------------------------------------- stages


def stage_train(out: Path, cfg: DemoConfig, progress: bool) -> dict[str, Any]:
    from tickformer.model import preset
    from tickformer.model.tasks import get_task
    from tickformer.model.train import TrainSettings, train

    task = get_task("pendulum-hidden")
    settings = TrainSettings.for_task(task, steps=cfg.train_steps, seed=cfg.seed)
    base = preset(task.preset)
    runs = {}
    for name, window, where in (
        ("model", cfg.window, "checkpoint"),
        ("memoryless", 1, "checkpoint-memoryless"),
    ):
        result = train(
            task,
            base.replace(window=window),
            settings,
            out=out / where,
            preset_name=task.preset,
            progress=progress,
        )
        runs[name] = (result, where)
    h = runs["model"][0].metrics["held_out"]
    return {
        "checkpoint": str(runs["model"][0].checkpoint),
        "checkpoint_memoryless": str(runs["memoryless"][0].checkpoint),
        "seconds": round(sum(r.train_seconds for r, _ in runs.values()), 1),
        "steps": cfg.train_steps,
        "window": cfg.window,
        "held_out_rmse": h["model_rmse"],
        "held_out_rmse_3_step": h["model_rmse_3_step"],
        "baselines": h.get("baselines"),
        "ratio_to_memoryless": h.get("ratio_to_memoryless"),
        "target_met": h.get("target_met"),
        "memoryless_checkpoint_rmse": runs["memoryless"][0].metrics["held_out"]["model_rmse"],
    }


def stage_export(out: Path, tr: dict[str, Any], cfg: DemoConfig) -> dict[str, Any]:
    from tickformer.artifact import open_artifact
    from tickformer.export.writer import export_artifact

    result: dict[str, Any] = {"batch": cfg.candidates}
    for name, ckpt, where in (
        ("model", tr["checkpoint"], "artifact"),
        ("memoryless", tr["checkpoint_memoryless"], "artifact-memoryless"),
    ):
        art = export_artifact(ckpt, out / where, batch=cfg.candidates)
        manifest = open_artifact(art).manifest
        worst = max(p["max_abs"] for p in manifest["equivalence"]["pairs"].values())
        result[name] = {
            "artifact": str(art),
            "max_len": manifest["max_len"],
            "worst_backend_disagreement": worst,
            "output_bound": manifest.get("output_bound"),
        }
    return result


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
    status = "fail: " + ", ".join(failed) if failed else "pass"
    return {
        "status": status,
        "properties": {r["name"]: f"{r['status']} ({r['examples']} examples)" for r in rows},
        "results": rows,
    }


def stage_certify(
    out: Path, artifact: str, cfg: DemoConfig, progress: Callable[[int], None] | None
) -> dict[str, Any]:
    """Certify the step the loop runs: the batch-K step of the windowed artifact (one call per
    tick evaluates all K candidates), against the tick budget."""
    from tickformer.certify.campaign import CampaignConfig, EvtConfig, certify_artifact
    from tickformer.certify.report import write_report

    report, durations = certify_artifact(
        artifact,
        backend="ort",
        budget_ns=float(cfg.tick_budget_ns),
        campaign=CampaignConfig(samples=cfg.samples, warmup=min(1000, cfg.samples // 2), seed=cfg.seed),
        evt_config=EvtConfig(n_boot=cfg.n_boot, seed=cfg.seed),
        progress=progress,
    )
    write_report(out / "certify", report, durations)
    st = report["stats"]
    pwcet = report["pwcet"]  # estimated only from an admissible tail fit (certify.campaign.pwcet_result)
    return {
        "verdict": report["verdict"],
        "reasons": report["reasons"],
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
        "report": str(out / "certify"),
    }


def rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc/self/statm; 0 where unavailable)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return 0


def run_loop(controller: Any, sim: Any, cfg: DemoConfig) -> dict[str, Any]:
    """One closed loop under ControlLoop (trace on: every tick's step time and outcome)."""
    from tickformer.runtime.control_loop import MISSED, OK, ControlLoop, LoopConfig

    loop = ControlLoop(
        controller,
        LoopConfig(
            period_ns=cfg.period_ns,
            budget_ns=cfg.tick_budget_ns,
            fallback="hold",
            safe_action=(0.0,),
            output_bound=1.0,
            hist_bin_ns=50_000,
            hist_bins=200,
        ),
    )
    rss = [0, 0]
    plant_observe = sim.observe

    def observe(k: int) -> np.ndarray:
        if k == 0:
            rss[0] = rss_bytes()  # at the first tick: everything allocated, the trace resident
        return plant_observe(k)

    stats = loop.run(cfg.ticks, observe, sim.actuate, trace=True)
    rss[1] = rss_bytes()
    rss0, rss1 = rss
    assert loop.trace is not None
    step_ns = loop.trace["step_ns"].astype(np.float64)  # [ticks]
    late = loop.trace["lateness_ns"]
    flags = loop.trace["flags"]
    missed = late > 0
    covered = missed & ((flags & ~MISSED) != OK)  # the tick's output was the fallback's
    tenth = max(1, cfg.ticks // 10)
    d = stats.to_dict()
    d.pop("histogram")
    return {
        "ticks": stats.ticks,
        "deadline_misses": stats.deadline_misses,
        "misses_covered_by_fallback": int(covered.sum()),
        "fallbacks": stats.fallbacks,
        "tracking_rms": sim.tracking(skip=min(cfg.settle_ticks, cfg.ticks // 4))["rms_rad"],
        "tracking": sim.tracking(skip=min(cfg.settle_ticks, cfg.ticks // 4)),
        "step_p50_us": float(np.percentile(step_ns, 50)) / 1e3,
        "step_p99_us": float(np.percentile(step_ns, 99)) / 1e3,
        "step_max_us": float(step_ns.max()) / 1e3,
        "step_p50_first_10pct_us": float(np.percentile(step_ns[:tenth], 50)) / 1e3,
        "step_p50_last_10pct_us": float(np.percentile(step_ns[-tenth:], 50)) / 1e3,
        "rss_start_bytes": rss0,
        "rss_end_bytes": rss1,
        "deadlines": d,
        "_step_ns": step_ns,
        "_theta": sim.theta[: sim.k + 1].copy(),
    }


def stage_loop(ex: dict[str, Any], tr: dict[str, Any], cfg: DemoConfig) -> dict[str, Any]:
    from tickformer.control import HiddenPlantSim, HistoryMPC, NominalMPC, OracleMPC
    from tickformer.model.checkpoint import load_checkpoint
    from tickformer.runtime import load

    plant = loop_plant(cfg)
    weights = {"kp": cfg.kp, "w_omega": cfg.w_omega}
    result: dict[str, Any] = {"plant": plant.to_dict(), "dt_s": plant.dt, "period_ms": cfg.period_ms}

    def sim() -> Any:
        return HiddenPlantSim(plant, reference(cfg), cfg.ticks * 64, seed=cfg.seed)

    for name in CONTROLLERS:
        s = sim()
        if name in ("model", "memoryless"):
            ckpt = tr["checkpoint"] if name == "model" else tr["checkpoint_memoryless"]
            norm = load_checkpoint(ckpt).meta["norm"]
            session = load(ex[name]["artifact"], backend="ort", contracts="off")
            try:
                controller = HistoryMPC(session, norm, plant, ex[name]["output_bound"], **weights)
                result[name] = run_loop(controller, s, cfg)
                result[name]["window"] = session.window
                result[name]["sliding"] = session.sliding
                result[name]["final_position"] = session.position
            finally:
                session.close()
        elif name == "nominal":
            result[name] = run_loop(NominalMPC(cfg.candidates, **weights), s, cfg)
        else:
            result[name] = run_loop(OracleMPC(cfg.candidates, s, **weights), s, cfg)
    m, o = result["model"]["tracking_rms"], result["oracle"]["tracking_rms"]
    result["model_to_oracle"] = m / o if o > 0 else None
    result["target"] = "model tracking_rms <= 1.5 x oracle and < memoryless and < nominal"
    result["target_met"] = bool(
        o > 0
        and m <= 1.5 * o
        and m < result["memoryless"]["tracking_rms"]
        and m < result["nominal"]["tracking_rms"]
    )
    return result


# ----------------------------------------------------------------------------- report


def plot_tracking(path: Path, loop: dict[str, Any], cfg: DemoConfig) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    dt = loop["dt_s"]
    n = min(len(loop["model"]["_theta"]), 400)  # the first 40 s of plant time
    t = np.arange(n) * dt
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    ref = cfg.amplitude * np.sin(2 * np.pi * t / cfg.ref_period_s)
    ax.plot(t, ref, "k--", lw=1, label="reference")
    for name in CONTROLLERS:
        th = loop[name]["_theta"][:n]
        ax.plot(t, th, lw=1, label=f"{name} (rms {loop[name]['tracking_rms']:.4f} rad)")
        ax2.plot(t, th - ref, lw=1, label=name)
    ax.set_ylabel("theta (rad)")
    ax.legend(fontsize=7, loc="upper right")
    ax2.set_ylabel("theta - reference (rad)")
    ax2.set_xlabel("plant time (s)")
    fig.suptitle(f"hidden pendulum, first {n} of {loop['model']['ticks']} ticks", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(path: Path, loop: dict[str, Any], cfg: DemoConfig) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.6))
    for name in ("model", "memoryless"):
        us = loop[name]["_step_ns"] / 1e3
        ax.plot(np.arange(us.size), us, ",", alpha=0.5, label=f"{name} step (per tick)")
        w = max(1, us.size // 200)
        med = np.array([np.median(us[i : i + w]) for i in range(0, us.size, w)])
        ax.plot(np.arange(med.size) * w, med, lw=1.5, label=f"{name} running median")
    ax.axhline(cfg.tick_budget_ns / 1e3, color="r", lw=1, ls="--", label="tick budget")
    ax.set_yscale("log")
    ax.set_xlabel("tick")
    ax.set_ylabel("controller step (us)")
    ax.legend(fontsize=7)
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
            f"certify (ort, batch {ce.get('batch', 1)})",
            f"[bold]{ce['verdict']}[/] at {ce['budget_us']:.0f} us/step: p50 {ce['p50_us']:.1f}, "
            f"p99 {ce['p99_us']:.1f}, max {ce['max_us']:.1f} us; {pw}\n{ce['reasons'][0]}",
        )
    lo = summary.get("loop")
    if lo:
        for name in CONTROLLERS:
            r = lo[name]
            t.add_row(
                f"loop: {name}",
                f"tracking rms {r['tracking_rms']:.4f} rad | {r['ticks']} ticks, misses {r['deadline_misses']} "
                f"({r['misses_covered_by_fallback']} covered by the fallback), fallbacks {r['fallbacks']} | "
                f"step p50 {r['step_p50_us']:.0f} us (first 10% {r['step_p50_first_10pct_us']:.0f}, last 10% "
                f"{r['step_p50_last_10pct_us']:.0f}), p99 {r['step_p99_us']:.0f} us",
            )
    console.print(t)


# ----------------------------------------------------------------------------- CLI


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="end to end: train, export, verify, certify, closed loop on the hidden pendulum",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
        "--quick", action="store_true", help="tiny budgets everywhere (tests; numbers meaningless)"
    )
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


def config_from_args(args: argparse.Namespace) -> DemoConfig:
    base = dict(QUICK) if args.quick else {}
    for name in ("train_steps", "samples", "n_boot", "ticks", "verify_examples"):
        value = getattr(args, name)
        if value is not None:
            base[name] = value
    return DemoConfig(
        seed=args.seed,
        period_ms=args.period_ms,
        tick_budget_ms=args.tick_budget_ms,
        candidates=args.candidates,
        quick=args.quick,
        **base,
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

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

    tr = timed("train", lambda: stage_train(out, cfg, progress=interactive))
    ex = timed("export", lambda: stage_export(out, tr, cfg))
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

            return stage_certify(out, ex["model"]["artifact"], cfg, progress)

    timed("certify", certify)
    lo = timed("loop", lambda: stage_loop(ex, tr, cfg))
    plot_tracking(out / "tracking.png", lo, cfg)
    plot_latency(out / "latency.png", lo, cfg)
    summary["window"] = cfg.window
    summary["max_len"] = ex["model"]["max_len"]
    summary["run"]["wall_s"] = round(time.perf_counter() - wall0, 1)
    summary["run"]["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    slim = dict(summary)
    slim["loop"] = {
        k: ({kk: vv for kk, vv in v.items() if not kk.startswith("_")} if isinstance(v, dict) else v)
        for k, v in lo.items()
    }
    slim = json.loads(json.dumps(slim, default=str))
    from tickformer.durable import atomic_write

    atomic_write(out / "demo_summary.json", (json.dumps(slim, indent=2) + "\n").encode())
    summary_table(summary, console)
    console.print(
        f"report directory: {out.resolve()}  (demo_summary.json, tracking.png, latency.png, certify/)"
    )
    return 0
