"""What `verify`, `certify`, `inspect` and `check` share when they run on a user's model (a bare
.onnx file): the budget flags and the one way such a run fails.

    budget_flags(p, command)   --time-budget SECONDS (default DEFAULT_SECONDS[command]) and
                               --memory-budget GIB (default: 8 GiB, or half the machine's memory
                               when that is less)
    is_bare(path, args)        the path is a bare model (a .onnx file, or --step/--spec given)
    guarded(args, command, body, backend)
                               body() inside the run's Budget (tickformer.runtime.budget); a
                               failure is one line on stderr: a limit hit (BudgetExceeded naming
                               it and the flag), a model that does not load or run (the node or
                               declaration and the fix), and -- never a traceback -- an error
                               inside tickformer itself (named as one, with its place; --debug
                               shows the traceback). Exit 2 for each with verify and certify (1
                               means a violation, a FAIL); inspect and check keep 1 for a usage
                               error (check's 1: an error finding) and exit 2 when the budget
                               stopped them or tickformer failed (no answer was reached)

Not real-time code.
"""

from __future__ import annotations

import argparse
import math
import traceback
from pathlib import Path
from typing import Any, Callable

from tickformer.errors import ConfigError, TickformerError

USER_MODEL_EXIT = 2  # every failure to run a user's model: one line, exit 2 (1 means a finding)


class InternalError(TickformerError):
    """An error inside tickformer itself while it ran a user's model (not the model's fault)."""


def budget_flags(p: argparse.ArgumentParser, command: str) -> None:
    from tickformer.runtime.budget import DEFAULT_SECONDS, GIB, default_memory

    p.add_argument(
        "--time-budget",
        type=float,
        default=DEFAULT_SECONDS[command],
        metavar="SECONDS",
        help=f"bare ONNX: wall-clock budget of the whole run (default {DEFAULT_SECONDS[command]:g} s); a run "
        "past it stops with exit 2, naming what was running",
    )
    p.add_argument(
        "--memory-budget",
        type=float,
        default=None,
        metavar="GIB",
        help=f"bare ONNX: how much the run may grow the process's memory, in GiB (default "
        f"{default_memory() / GIB:g}: 8, or half this machine's memory if less); declared shapes over it are "
        "refused before anything is allocated",
    )


def is_bare(path: Path, args: argparse.Namespace) -> bool:
    """A bare ONNX model: a .onnx file, or --step / --spec given (not an artifact directory)."""
    try:
        is_dir = path.is_dir()
    except OSError:
        is_dir = False
    return not is_dir and (
        path.suffix == ".onnx"
        or getattr(args, "step", None) is not None
        or getattr(args, "spec", None) is not None
    )


def make_budget(
    args: argparse.Namespace, backend: str = "ort", hint: str = "", per_run_share: bool = False
) -> Any:
    """The Budget of this run from --time-budget / --memory-budget (checked: positive, finite);
    per_run_share: no engine run may take more than PER_RUN_SHARE of it (verify; not certify,
    whose timed loop must see no watchdog wake-ups)."""
    from tickformer.runtime.budget import GIB, PER_RUN_SHARE, Budget, default_memory

    seconds = getattr(args, "time_budget", None)
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"--time-budget {seconds!r} must be a positive number of seconds, e.g. 600")
    gib = getattr(args, "memory_budget", None)
    if gib is not None and not (math.isfinite(gib) and gib > 0):
        raise ConfigError(f"--memory-budget {gib!r} must be a positive number of GiB, e.g. 8")
    memory = int(gib * GIB) if gib is not None else default_memory()
    per_run = seconds * PER_RUN_SHARE if seconds is not None and per_run_share else None
    return Budget(seconds, memory, enforce_memory=backend == "ort", hint=hint, per_run=per_run)


def loop_hint(path: Path, step: Path | None = None) -> str:
    """'the graph has an unbounded Loop, WHERE: WHAT' for a bare model whose control flow has an
    unbounded trip count (artifact/foreign/control_flow.py), else "" (and "" when the file cannot
    be read: the run itself reports that)."""
    from tickformer.artifact.foreign.control_flow import unbounded
    from tickformer.artifact.foreign.graph import read_graph

    for p in (path, step):
        if p is None:
            continue
        try:
            flows = unbounded(read_graph(p)[1])
        except TickformerError:
            return ""
        if flows:
            return f"the graph has an unbounded Loop, {flows[0].short}"
    return ""


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" at {Path(last.filename).name}:{last.lineno}"


def guarded(
    args: argparse.Namespace, command: str, body: Callable[[Any], int], *, backend: str = "ort"
) -> int:
    """body(budget) inside the run's budget; every failure one line, exit 2 (module docstring)."""
    from tickformer.runtime.budget import BudgetExceeded, OverBudget

    if command in ("verify", "certify"):
        args.error_exit = USER_MODEL_EXIT
    budget = make_budget(args, backend, per_run_share=command == "verify")
    try:
        with budget:
            return body(budget)
    except OverBudget as stop:
        args.error_exit = USER_MODEL_EXIT
        raise stop.error from None
    except MemoryError:
        args.error_exit = USER_MODEL_EXIT
        raise budget.over("memory").error from None
    except BudgetExceeded:
        args.error_exit = USER_MODEL_EXIT
        raise
    except (TickformerError, OSError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug of tickformer's own: one line, the traceback behind --debug
        if getattr(args, "debug", False):
            raise
        args.error_exit = USER_MODEL_EXIT
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        raise InternalError(
            f"internal error in tickformer {command} (a bug in tickformer, not a finding about the model): "
            f"{type(exc).__name__}: {first}{_where(exc)}; --debug shows the traceback, please report it"
        ) from exc
