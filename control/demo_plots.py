"""The control demo's two figures (tickformer demo): the tracking of every controller over the first
30 s of plant time, and every tick's step time over the run with the budget, the period and the
missed deadlines. Each PNG is rendered in memory and written with one atomic replace. Not real-time
code."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.durable import atomic_write

from .demo import CONTROLLERS, DemoConfig


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    """PNG bytes rendered in memory, then one atomic write: a reader never sees half a plot."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    atomic_write(Path(path), buf.getvalue())


def plot_tracking(path: Path, loop: dict[str, Any], cfg: DemoConfig) -> None:
    """Angle and tracking error of every controller over the first 30 s of plant time."""
    plt = _pyplot()
    dt = loop["dt_s"]
    # The first 30 s of plant time. Each loop's trace has its own length: skipped periods
    # advance the plant too, so loops of the same tick count can end at different plant times.
    n = min(max(len(loop[name]["virtual_time"]["_theta"]) for name in CONTROLLERS), 300)
    t = np.arange(n) * dt  # [n]
    ref = cfg.amplitude * np.sin(2 * np.pi * t / cfg.ref_period_s)  # [n]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    ax.plot(t, ref, "k--", lw=1, label="reference")
    for name in CONTROLLERS:
        virtual = loop[name]["virtual_time"]
        th = virtual["_theta"][:n]  # [m], m <= n
        m = th.size
        ax.plot(t[:m], th, lw=1, label=f"{name} (rms {virtual['tracking_rms']:.4f} rad)")
        ax2.plot(t[:m], th - ref[:m], lw=1, label=name)
    ax.set_ylabel("theta (rad)")
    ax.legend(fontsize=7, loc="upper right")
    ax2.set_ylabel("theta - reference (rad)")
    ax2.set_xlabel("plant time (s)")
    fig.suptitle(f"hidden pendulum, first {n} of {loop['model']['ticks']} ticks (virtual time)", fontsize=9)
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)


def plot_latency(path: Path, loop: dict[str, Any], cfg: DemoConfig) -> None:
    """Every tick's controller step time over the run (model and memoryless), running medians,
    the tick budget, the period, and the ticks that missed their deadline."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for name, color in (("model", "tab:blue"), ("memoryless", "tab:orange")):
        us = loop[name]["_step_ns"] / 1e3  # [ticks]
        ax.plot(np.arange(us.size), us, ".", ms=1, alpha=0.3, color=color, label=f"{name} step (every tick)")
        w = max(1, us.size // 200)
        med = np.array([np.median(us[i : i + w]) for i in range(0, us.size, w)])
        ax.plot(np.arange(med.size) * w, med, lw=1.2, color=color, label=f"{name} median of {w} ticks")
        late = loop[name]["_late_ticks"]
        if late.size:
            ax.plot(late, us[late], "x", ms=5, color=color, label=f"{name} deadline misses ({late.size})")
    ax.axhline(cfg.tick_budget_ns / 1e3, color="r", lw=1, ls="--", label="tick budget")
    ax.axhline(cfg.period_ns / 1e3, color="k", lw=1, ls=":", label="period")
    ax.set_yscale("log")
    ax.set_xlabel("tick")
    ax.set_ylabel("controller step (us)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)
