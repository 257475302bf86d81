"""The `tickformer` command line: one subcommand per module in `tickformer.commands`.

Each subcommand module defines HELP, `arguments(p)` and `run(args)` (and may define DESCRIPTION
and ERROR_EXIT); `commands.args.register` builds its parser from them.
A user error (`TickformerError`) prints one line and exits non-zero (1, or the command's own
`error_exit` default: `verify` exits 2, keeping 1 for a violated property); so does an OSError
no command turned into one (a path, a permission, a full disk: the environment, not a bug);
`--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tickformer.commands.args import register
from tickformer.errors import TickformerError

# The order here is the order `tickformer --help` lists them in.
COMMANDS = (
    "info",
    "log",
    "plant",
    "train",
    "export",
    "keygen",
    "sign",
    "inspect",
    "run",
    "build",
    "check",
    "prove",
    "verify",
    "certify",
    "codegen",
    "serve",
    "demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickformer",
        description="Formally checked, real-time inference runtime for attention models.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"tickformer.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tickformer.commands.{name}":
                continue  # subcommand not built yet in this checkout
            raise
        register(subparsers, module)
    return parser


def main(argv: list[str] | None = None) -> int:
    from tickformer.commands.args import glued_values, refuse_writes_into_artifacts, trust_policy

    parser = build_parser()
    args = parser.parse_args(glued_values(sys.argv[1:] if argv is None else argv))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "backend", None) == "c":  # its library builder is tickformer.codegen's (registered)
        import tickformer.codegen  # noqa: F401
    try:
        trust_policy(args)
        refuse_writes_into_artifacts(args)
        return int(args.func(args) or 0)
    except TickformerError as exc:
        if args.debug:
            raise
        print(f"tickformer {args.command}: error: {exc}", file=sys.stderr)
        return int(getattr(args, "error_exit", 1))  # a command may give its user errors their own code
    except OSError as exc:  # an environment error no command mapped (a path, a permission, a full disk)
        if args.debug:
            raise
        where = f" ({str(exc.filename)[:200]})" if exc.filename else ""
        print(
            f"tickformer {args.command}: error: {exc.strerror or exc}{where}; check the path, its permissions "
            "and the free space, then run again",
            file=sys.stderr,
        )
        return int(getattr(args, "error_exit", 1))
    except KeyboardInterrupt:
        print(f"tickformer {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
