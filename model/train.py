"""The seeded training loop: batches from a task, hand-written gradients, Adam with the paper's
schedule, global-norm clipping, held-out metrics, an atomic checkpoint.

Reproducibility: one integer seed derives independent numpy Generators (SeedSequence spawning)
for parameter initialisation, the held-out data, training batches and dropout masks. Every
operation is deterministic numpy on one machine, so the same seed gives the same loss curve bit
for bit (tests/model/test_train.py checks it on a few steps).

Weight averaging (`ema_decay` > 0; both built-in tasks use 0.995): the returned and saved
weights are an exponential moving average of the iterates (Polyak & Juditsky 1992),
accumulated in float64. It removes the final-iterate noise that made held-out metrics vary
between seeds and flip under last-bit roundoff changes (a different BLAS kernel, one 2-D
product instead of per-batch products): such a change reorders every later step, so a recipe
is only as good as its margin over the spread of outcomes it may land on.

Outputs (when `out` is given): a checkpoint directory (model.checkpoint) whose meta holds the
task, its normalisation statistics and the metrics, with two extra hashed files:
metrics.json (held-out metrics, timing, settings) and loss_curve.json (loss at every step).
Progress (steps, loss, ETA) is shown with rich. Not real-time safe (training).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .checkpoint import save_checkpoint
from .config import Config
from .grad import loss_and_grads
from .optim import Adam, clip_by_global_norm, noam_lr
from .schedule import TrainSettings
from .tasks import Task, greedy_decode  # greedy_decode: the reverse task's decoder, re-exported

__all__ = [
    "TrainResult",
    "TrainSettings",
    "greedy_decode",
    "keep_freed_memory",
    "seeded_generators",
    "single_threaded_blas",
    "train",
    "train_steps",
]
from .transformer import init_params


@dataclass
class TrainResult:
    params: dict[str, np.ndarray]
    losses: list[float]
    metrics: dict[str, Any]
    train_seconds: float
    checkpoint: Path | None


def seeded_generators(seed: int) -> dict[str, np.random.Generator]:
    """Independent streams from one seed: init, data (held-out), batches, dropout."""
    names = ("init", "data", "batches", "dropout")
    children = np.random.SeedSequence(seed).spawn(len(names))
    return {name: np.random.default_rng(child) for name, child in zip(names, children)}


def single_threaded_blas() -> contextlib.AbstractContextManager[Any]:
    """Limit BLAS to one thread while training: the matrices are small (rows of 64-128), so
    threads buy nothing, and BLAS threads spinning on cores that other processes hold slow every
    step (docs/training.md, "Training speed"). Uses threadpoolctl when installed, else changes
    nothing."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - optional dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def keep_freed_memory() -> bool:
    """Keep the memory training frees mapped for reuse (glibc malloc), instead of returning it
    to the system and faulting it in again on the next step.

    numpy allocates a fresh array for nearly every operation of a training step. By default
    glibc serves large blocks with fresh mmaps and trims the top of the heap once enough of it is
    free, so every step page-faults the same memory in again; on a virtual machine each fault is
    a trip through the hypervisor (docs/training.md has the measured fault counts and times).
    Raising the mmap threshold to its maximum (32 MiB on 64-bit) and the trim threshold to 1 GiB
    keeps the pages: the process holds on to its peak working set until it exits.

    Process-wide and not undone (glibc has no getter to restore its adaptive default; the
    setting only changes when memory goes back to the system). Returns False, changing
    nothing, where there is no glibc."""
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(mallopt(m_mmap_threshold, 32 * 2**20)) and bool(mallopt(m_trim_threshold, 2**30))


def _progress(enabled: bool):  # pragma: no cover - display only
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=False,
    )


def train_steps(
    task: Task,
    config: Config,
    settings: TrainSettings,
    *,
    progress: bool = False,
    on_step: Callable[[int, Mapping[str, np.ndarray]], None] | None = None,
) -> tuple[dict[str, np.ndarray], list[float], Any, float, float]:
    """Run the optimisation only. Returns (params, per-step losses, task data, wall seconds,
    CPU seconds of this process). `on_step(step, weights)`, if given, is called after every
    step with the weights training would return if it stopped there (the EMA when there is one,
    in float64: the return value casts it to float32); they are live arrays, so copy what you
    keep (experiments/control_side_runs.py takes the snapshots of one run this way)."""
    rngs = seeded_generators(settings.seed)
    params = init_params(config, seed=int(rngs["init"].integers(2**31)))
    data = task.hooks.prepare(config, rngs["data"])
    if hasattr(data, "train_settings"):  # a task whose evaluation trains a baseline twin (pendulum-hidden)
        data.train_settings = settings
    opt = Adam(beta1=0.9, beta2=0.98, eps=1e-9)
    ema = {name: value.astype(np.float64) for name, value in params.items()} if settings.ema_decay else None
    losses: list[float] = []
    keep_freed_memory()
    start = time.perf_counter_ns()
    cpu_start = time.process_time_ns()
    with single_threaded_blas(), _progress(progress) as bar:
        job = bar.add_task(f"train {task.name}", total=settings.steps, loss=float("nan"))
        for step in range(1, settings.steps + 1):
            batch = task.hooks.batch(data, rngs["batches"], settings.batch_size)
            loss, grads = loss_and_grads(
                params, config, batch, rng=rngs["dropout"], label_smoothing=settings.label_smoothing
            )
            if not np.isfinite(loss):
                raise FloatingPointError(f"loss is {loss} at step {step}; lower --lr-scale or raise warmup")
            grads, _ = clip_by_global_norm(grads, settings.clip)
            opt.step(
                params,
                grads,
                noam_lr(step, d_model=config.d_model, warmup=settings.warmup, scale=settings.lr_scale),
            )
            if ema is not None:
                for name, value in params.items():
                    ema[name] *= settings.ema_decay
                    ema[name] += (1.0 - settings.ema_decay) * value
            losses.append(loss)
            if on_step is not None:
                on_step(step, params if ema is None else ema)
            if step % 10 == 0 or step == settings.steps:
                bar.update(job, completed=step, loss=float(np.mean(losses[-10:])))
    seconds = (time.perf_counter_ns() - start) / 1e9
    cpu_seconds = (time.process_time_ns() - cpu_start) / 1e9
    if ema is not None:
        params = {name: value.astype(np.float32) for name, value in ema.items()}
    return params, losses, data, seconds, cpu_seconds


def checkpoint_meta(
    task: Task, data: Any, preset_name: str | None, seed: int, steps: int, metrics: dict[str, Any]
) -> dict[str, Any]:
    """What a checkpoint of `task` records besides its weights: the run (task, preset, seed,
    steps, held-out metrics) and what the task needs to use the model (`task.hooks.meta`: e.g. the
    input and output standardisation)."""
    meta = {"task": task.name, "preset": preset_name, "seed": seed, "steps": steps, "metrics": metrics}
    meta.update(task.hooks.meta(data))
    return meta


def train(
    task: Task,
    config: Config,
    settings: TrainSettings,
    *,
    out: str | Path | None = None,
    preset_name: str | None = None,
    progress: bool = False,
    on_step: Callable[[int, Mapping[str, np.ndarray]], None] | None = None,
) -> TrainResult:
    """Train `config` on `task`, evaluate on the held-out set and (if `out`) save a checkpoint.
    `progress`: a live bar on a terminal; `on_step`: as in `train_steps`."""
    params, losses, data, seconds, cpu_seconds = train_steps(
        task, config, settings, progress=progress, on_step=on_step
    )
    if task.hooks.finalize is not None:
        params = task.hooks.finalize(params, config, data)
    eval_start = time.perf_counter_ns()
    with single_threaded_blas():
        held_out = task.hooks.evaluate(params, config, data)
    eval_seconds = (time.perf_counter_ns() - eval_start) / 1e9
    metrics = {
        "task": task.name,
        "preset": preset_name,
        "settings": asdict(settings),
        "train_seconds": round(seconds, 3),
        "train_cpu_seconds": round(cpu_seconds, 3),
        "eval_seconds": round(eval_seconds, 3),
        "final_loss_mean_last_50": float(np.mean(losses[-50:])),
        "held_out": held_out,
    }
    path = None
    if out is not None:
        meta = checkpoint_meta(task, data, preset_name, settings.seed, settings.steps, held_out)
        extra = {
            "metrics.json": (json.dumps(metrics, indent=2, sort_keys=True) + "\n").encode(),
            "loss_curve.json": (json.dumps(losses) + "\n").encode(),
        }
        path = save_checkpoint(out, config, params, meta, extra_files=extra)
    return TrainResult(params=params, losses=losses, metrics=metrics, train_seconds=seconds, checkpoint=path)
