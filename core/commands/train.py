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
"""

from __future__ import annotations

import argparse

from tickformer.commands import args as shared


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a model on a built-in task and write a checkpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--task",
        required=True,
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
    shared.seed(p, help="seed of initialisation, data, batches and dropout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--require-target", action="store_true", help="exit with status 3 if the held-out target is not met"
    )
    p.set_defaults(func=run)


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


def run(args: argparse.Namespace) -> int:
    import sys

    from tickformer import validation
    from tickformer.control.task import HIDDEN_TASK
    from tickformer.model.checkpoint import check_target
    from tickformer.model.config import preset
    from tickformer.model.tasks import get_task
    from tickformer.model.train import TrainSettings, train

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
    for line in _summary(result.metrics):
        print(line)
    print(f"checkpoint {result.checkpoint} (metrics.json inside)")
    if args.require_target and not result.metrics["held_out"]["target_met"]:
        return 3
    return 0
