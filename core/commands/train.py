"""`tickformer train --task NAME --out DIR [--preset P] [--steps N] [--seed S] [--window W]
[--block attention|ssm] [--d-state N]`.

--window W trains a sliding-window model (decoder-only): every self-attention layer attends to
the last W positions, with a learned relative-position bias instead of the sinusoidal table; its
artifacts stream without end on a ring cache of W rows (docs/streaming.md). 1 <= W <= max_len
of the preset (the training sequence length; W < max_len trains the steady state).

Trains the numpy reference Transformer on a built-in task (reverse, pendulum) with the paper's
recipe (Adam 0.9/0.98/1e-9, warmup schedule, label smoothing 0.1 for tokens, MSE for
continuous outputs, global-norm clipping), shows progress (steps, loss, ETA), evaluates on the
held-out set and writes DIR as a checkpoint directory (atomically) with metrics.json inside.
`--block ssm` puts the selective state-space mixer (docs/ssm.md) where every self-attention
sits, with --d-state states per channel (default 16); the rest of the preset is kept.
Same seed, same loss curve bit for bit.

`tickformer train --data FILE --inputs COL[,COL..] --outputs COL[,COL..] [--episode COL]
[--time COL] [--horizon H] [--window W] [--block attention|ssm] --out DIR` trains on a user's own
logged time series (.csv, .parquet, .npz; docs/your_data.md): the model predicts the outputs
1..H ticks ahead from the history of inputs and outputs, in the data's own units, and metrics.json
holds its held-out RMSE beside persistence, ARX and N4SID on the same held-out runs
(tickformer.model.series, .forecast, .baselines).
"""

from __future__ import annotations

import argparse

from tickformer.commands import args as shared

HELP = "train a model on a built-in task and write a checkpoint"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task",
        default=None,
        help="built-in task: reverse (encoder-decoder, tokens), pendulum (decoder-only, continuous) or "
        "pendulum-hidden (the control demo's: noisy angle only, unknown constants, actuator delay)",
    )
    shared.out(p, help="checkpoint directory to write (an existing checkpoint there is replaced)")
    p.add_argument(
        "--preset",
        default=None,
        help="model preset (default: the task's own: reverse -> reverse, pendulum -> control)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="optimisation steps (default: the task's budget that reaches its target)",
    )
    p.add_argument(
        "--window",
        default=None,
        metavar="W",
        help="sliding-window attention over the last W positions (1..max_len; default: none, full causal)",
    )
    p.add_argument(
        "--block",
        default=None,
        help="sequence mixer of every layer: attention (default, the preset's) or ssm (state-space, docs/ssm.md)",
    )
    p.add_argument(
        "--d-state",
        type=int,
        default=None,
        help="states per channel of the ssm block (default 16; only with --block ssm)",
    )
    data = p.add_argument_group("your own data (instead of --task; docs/your_data.md)")
    data.add_argument(
        "--data", default=None, metavar="FILE", help="a .csv, .parquet or .npz file of logged signals"
    )
    data.add_argument(
        "--inputs", default=None, metavar="COL[,COL..]", help="the input columns (what acts on the plant)"
    )
    data.add_argument(
        "--outputs", default=None, metavar="COL[,COL..]", help="the output columns (what is measured)"
    )
    data.add_argument("--episode", default=None, metavar="COL", help="a column whose value names each run")
    data.add_argument(
        "--time",
        default=None,
        metavar="COL",
        help="a time column: a gap over 1.5 sample periods starts a new run",
    )
    data.add_argument(
        "--horizon", type=int, default=1, metavar="H", help="predict 1..H ticks ahead (default 1)"
    )
    data.add_argument(
        "--held-out", type=float, default=0.2, metavar="SHARE", help="share of runs held out (0.2)"
    )
    data.add_argument("--drop-nan", action="store_true", help="drop rows with a missing or non-finite value")
    data.add_argument(
        "--memory-budget",
        type=float,
        default=4.0,
        metavar="GIB",
        help="largest float32 data to load (default 4 GiB)",
    )
    shared.seed(p, help="seed of initialisation, data, batches and dropout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--require-target", action="store_true", help="exit with status 3 if the held-out target is not met"
    )


def _summary(metrics: dict) -> list[str]:
    held = metrics["held_out"]
    lines = [
        f"trained {metrics['task']} (preset {metrics['preset']}, {metrics['settings']['steps']} steps, "
        f"seed {metrics['settings']['seed']}) "
        f"in {metrics['train_seconds']:.1f} s wall / {metrics['train_cpu_seconds']:.1f} s CPU; "
        f"final loss {metrics['final_loss_mean_last_50']:.4g}"
    ]
    if metrics["task"] == "reverse":
        lines.append(
            f"held-out exact match {held['exact_match']:.4f} over {held['held_out_sequences']} sequences "
            f"(teacher-forced token accuracy {held['token_accuracy_teacher_forced']:.4f})"
        )
    elif metrics["task"] == "pendulum":
        lines.append(
            f"held-out one-step RMSE {held['model_rmse']:.4g} vs linear AR baseline {held['baseline_rmse']:.4g} "
            f"(ratio {held['ratio']:.3f}; {held['rmse_units']})"
        )
    lines.append(f"target {held['target']}: {'met' if held['target_met'] else 'NOT met'}")
    return lines


def with_block(config, block: str | None, d_state: int | None):
    """The preset with --block / --d-state applied; Config's own checks give the errors."""
    from tickformer.errors import ConfigError
    from tickformer.model.config import BLOCKS, DEFAULT_D_STATE

    if block is None:
        if d_state is not None:
            raise ConfigError("--d-state is for --block ssm; add --block ssm or drop --d-state")
        return config
    if block not in BLOCKS:
        raise ConfigError(f"--block {block!r} is not one of {BLOCKS}")
    if block == "attention":
        if d_state is not None:
            raise ConfigError("--d-state is for --block ssm; drop it for --block attention")
        return config.replace(block="attention", d_state=0)
    return config.replace(block="ssm", d_state=DEFAULT_D_STATE if d_state is None else d_state)


def with_window(config, text: str):  # type: ignore[no-untyped-def]
    """config with window W parsed from the command line; one-line ConfigError naming the fix."""
    from tickformer.errors import ConfigError

    hint = f"give a whole number of positions in 1..{config.max_len} (the preset's max_len), e.g. --window 32"
    try:
        window = int(text, 10)
    except ValueError:
        raise ConfigError(f"--window {text!r} is not an integer; {hint}") from None
    if not 1 <= window <= config.max_len:
        raise ConfigError(f"--window {window} is outside 1..max_len {config.max_len}; {hint}")
    if config.arch != "decoder":
        raise ConfigError(
            f"--window is for decoder-only models (unbounded streams); this preset is {config.arch}: drop --window"
        )
    return config.replace(window=window)


def _data_summary(held: dict) -> list[str]:
    """The held-out table of a --data run: RMSE per output and horizon, model and baselines."""
    lines = [f"held-out RMSE in the data's units ({held['positions']:,} positions of the held-out runs):"]
    order = ["model", *[k for k in ("persistence", "arx", "n4sid") if k in held["rmse"]]]
    for name, _ in held["rmse"]["model"].items():
        for k in order:
            row = ", ".join(f"{v:.4g}" for v in held["rmse"][k][name])
            lines.append(f"  {name:>12} {k:>11}: h=1..{len(held['rmse'][k][name])}: {row}")
    lines.append(f"best baseline: {held['best_baseline']}; {held['verdict']}")
    for k, note in held.get("baseline_notes", {}).items():
        lines.append(f"  {k}: {note}")
    return lines


def _series_and_task(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from tickformer import validation
    from tickformer.errors import ConfigError
    from tickformer.model.forecast import forecast_config, forecast_task
    from tickformer.model.series import TimeSeries

    if args.task is not None:
        raise ConfigError("give --task or --data, not both")
    for flag in ("inputs", "outputs"):
        if not getattr(args, flag):
            raise ConfigError(f"--data needs --{flag} COL[,COL..] (the column names of the file)")
    validation.positive_real(args.memory_budget, "--memory-budget", hint="GiB, e.g. --memory-budget 8")
    series = TimeSeries.from_file(
        args.data,
        inputs=[c.strip() for c in args.inputs.split(",") if c.strip()],
        outputs=[c.strip() for c in args.outputs.split(",") if c.strip()],
        episode=args.episode,
        time=args.time,
        drop_nan=args.drop_nan,
        memory_budget=int(args.memory_budget * 2**30),
    )
    window = None
    if args.window is not None:
        try:
            window = int(args.window, 10)
        except ValueError:
            raise ConfigError(f"--window {args.window!r} is not an integer, e.g. --window 32") from None
        validation.positive_int(window, "--window", hint="e.g. --window 32")
    kwargs = {"window": window} if window is not None else {}
    config = forecast_config(
        series,
        args.horizon,
        preset_name=args.preset or "control-hidden",
        block=args.block or "attention",
        d_state=args.d_state,
        **kwargs,
    )
    task = forecast_task(
        series, horizon=args.horizon, held_out=args.held_out, **({"steps": args.steps} if args.steps else {})
    )
    return task, config, args.preset or "control-hidden"


def run(args: argparse.Namespace) -> int:
    import sys

    from tickformer import validation
    from tickformer.control.task import HIDDEN_TASK
    from tickformer.errors import ConfigError
    from tickformer.model.checkpoint import check_target
    from tickformer.model.config import preset
    from tickformer.model.tasks import get_task
    from tickformer.model.train import TrainSettings, train

    if args.data is not None:
        task, config, preset_name = _series_and_task(args)
    else:
        if args.task is None:
            raise ConfigError("give --task NAME (reverse, pendulum, pendulum-hidden) or --data FILE")
        for flag in ("inputs", "outputs", "episode", "time"):
            if getattr(args, flag) is not None:
                raise ConfigError(f"--{flag} is for --data FILE; drop it with --task")
        if args.horizon != 1 or args.drop_nan:
            raise ConfigError("--horizon and --drop-nan are for --data FILE; drop them with --task")
        task = get_task(args.task, extra=(HIDDEN_TASK,))
        preset_name = task.preset if args.preset is None else args.preset
        config = preset(preset_name)
        if args.window is not None:
            config = with_window(config, args.window)
        config = with_block(config, args.block, args.d_state)
    validation.optional_positive_int(args.steps, "--steps", hint="e.g. --steps 1500")
    validation.nonneg_int(args.seed, "--seed", hint="e.g. --seed 0")
    settings = TrainSettings.for_task(task, steps=args.steps, seed=args.seed)
    check_target(args.out)  # fail now, not after training
    result = train(
        task,
        config,
        settings,
        out=args.out,
        preset_name=preset_name,
        progress=not args.quiet and sys.stderr.isatty(),
    )
    for line in _summary(result.metrics) if args.data is None else _data_summary(result.metrics["held_out"]):
        print(line)
    print(f"checkpoint {result.checkpoint} (metrics.json inside)")
    if args.require_target and not result.metrics["held_out"].get("target_met", True):
        return 3
    return 0
