"""The arguments several subcommands share, defined once: artifact path, --backend, --threads,
--seed, --out, an optional file or folder flag (`path`), a flag of named values (`choice`),
--domain, --trust, a bare ONNX model's --step/--spec/--vocab, and the parser of --vocab's value
(`parse_vocab`); `config`, which builds a command's settings dataclass from the flags named as
its fields; and `register`, which builds a subcommand's parser from its module (HELP,
`arguments`, `run`; core/cli.py calls it for each).

`glued_values(argv)` lets a value that starts with "-" follow its flag as a separate word
(`--domain -1:1`): argparse would take "-1:1" for an unknown option, so such a pair is glued
into `--domain=-1:1` before parsing. Not real-time code.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Sequence, TypeVar

from tickformer.errors import ConfigError

T = TypeVar("T")

# Flags whose value may begin with "-" (a negative number, a negative interval).
NEGATIVE_VALUE_FLAGS = ("--domain",)


def glued_values(argv: Sequence[str]) -> list[str]:
    """argv with `FLAG -VALUE` pairs of NEGATIVE_VALUE_FLAGS written as `FLAG=-VALUE`."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if (
            word in NEGATIVE_VALUE_FLAGS
            and i + 1 < len(argv)
            and argv[i + 1].startswith("-")
            and argv[i + 1] != "--"
        ):
            out.append(f"{word}={argv[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def path(
    p: argparse.ArgumentParser, flag: str, *, help: str, default: Path | None = None, metavar: str = "FILE"
) -> None:
    """An optional file or folder flag: a Path, `default` (None) when not given."""
    p.add_argument(flag, type=Path, default=default, metavar=metavar, help=help)


def artifact(p: argparse.ArgumentParser, *, name: str = "artifact", help: str | None = None) -> None:
    p.add_argument(name, type=Path, help=help or "artifact directory (tickformer export --out)")


def backend(
    p: argparse.ArgumentParser,
    *,
    default: str | None = "ort",
    help: str | None = None,
    choices: Sequence[str] | None = None,
    **kwargs: Any,
) -> None:
    """--backend NAME, one of the runtime's backend registry. Checked when the backend is loaded
    (not by argparse `choices`): an unknown name is a one-line error like every other, exit 1.
    A command that serves only some backends names them in `choices` (argparse checks those,
    e.g. `build`: engines exist for tensorrt only)."""
    from tickformer.runtime.backends import REGISTRY

    names = sorted(REGISTRY) if choices is None else list(choices)
    text = help or f"runtime backend (default {default})"
    p.add_argument(
        "--backend",
        default=default,
        metavar="NAME",
        choices=None if choices is None else names,
        help=f"{text}; one of {', '.join(names)}",
        **kwargs,
    )


def threads(p: argparse.ArgumentParser, *, default: int | None = 1) -> None:
    shown = "1: lowest jitter, deterministic" if default in (1, None) else str(default)
    p.add_argument(
        "--threads", type=int, default=default, metavar="N", help=f"ort: intra-op threads (default {shown})"
    )


def seed(p: argparse.ArgumentParser, *, default: int = 0, help: str = "seed") -> None:
    p.add_argument("--seed", type=int, default=default, metavar="S", help=f"{help} (default {default})")


def choice(p: argparse.ArgumentParser, flag: str, choices: Sequence[str], *, help: str | None = None) -> None:
    """FLAG {A,B,...}: one of `choices`, the first of them when not given."""
    p.add_argument(flag, choices=choices, default=choices[0], help=help)


def out(
    p: argparse.ArgumentParser,
    *,
    help: str,
    default: Path | None = None,
    metavar: str = "DIR",
    required: bool | None = None,
) -> None:
    """--out PATH: required unless a default is given (or required=False: the command checks it,
    as certify does, whose --check mode writes nothing)."""
    need = default is None if required is None else required
    p.add_argument("--out", type=Path, required=need, default=default, metavar=metavar, help=help)


def domain(p: argparse.ArgumentParser, *, help: str) -> None:
    p.add_argument("--domain", default=None, metavar="LO:HI", help=help + " (e.g. --domain -1:1)")


def trust(p: argparse.ArgumentParser) -> None:
    """--trust NAME.pub: the artifact must carry a valid signature by that key (tickformer.signing)."""
    path(
        p,
        "--trust",
        metavar="NAME.pub",
        help="public key (tickformer keygen): refuse the artifact unless it is signed with it",
    )
    p.add_argument(
        "--min-release",
        type=int,
        default=None,
        metavar="N",
        help="with --trust: refuse a signed artifact whose release is below N (anti-rollback)",
    )


def trust_policy(args: argparse.Namespace) -> None:
    """--trust with --min-release N becomes one `signing.Trust` policy in args.trust, so every
    command that passes args.trust on checks both; --min-release alone is refused."""
    from tickformer import signing
    from tickformer.errors import ConfigError

    minimum = getattr(args, "min_release", None)
    if minimum is None:
        return
    if getattr(args, "trust", None) is None:
        raise ConfigError(
            "--min-release needs --trust NAME.pub: without a signature a re-sealed manifest can claim any release"
        )
    args.trust = signing.Trust(args.trust, minimum)


WRITES_ARTIFACTS = ("export",)  # --out is the artifact it writes (sign and build write ART itself)


def refuse_writes_into_artifacts(args: argparse.Namespace) -> None:
    """--out inside an artifact folder, or an artifact folder replaced by another command's
    output (codegen --out ART --force), is refused before anything runs: a signed artifact would
    no longer load, and a replaced one is gone. Only export writes an artifact at --out."""
    out = getattr(args, "out", None)
    if out is None:
        return
    from tickformer.artifact.location import artifact_containing

    home = artifact_containing(out)
    if home is None:
        return
    if Path(out).resolve() == home:
        if args.command in WRITES_ARTIFACTS:
            return
        raise ConfigError(
            f"--out {out} is an artifact; `tickformer {args.command}` would replace it with its output: "
            "choose a --out outside the artifact"
        )
    raise ConfigError(
        f"--out {out} is inside the artifact {home}: the tools never write into an artifact (a signed one "
        f"would no longer load); choose a --out outside it"
    )


def config(cls: type[T], args: argparse.Namespace, fields: Sequence[str], **given: Any) -> T:
    """The dataclass `cls` built from the flags whose dest is one of its `fields` (the flag named
    as the field: --rt-priority sets rt_priority) and from `given` (a flag named otherwise, or a
    value the command computes); every other field keeps its default, and `cls` checks them all
    as it always does. A name that is not a field of `cls`, or a field no flag of the command
    set, is a mistake in the command and raises TypeError at once, never a silent default."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = [name for name in (*fields, *given) if name not in known]
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
    unset = [name for name in fields if not hasattr(args, name)]
    if unset:
        raise TypeError(
            f"no flag of `tickformer {getattr(args, 'command', '?')}` sets {cls.__name__}.{', '.join(unset)}"
        )
    return cls(**{name: getattr(args, name) for name in fields}, **given)


def bare_onnx(p: argparse.ArgumentParser, *, values: bool = True) -> None:
    """The signature of a bare ONNX model (artifact.foreign): --step and --spec, and with
    values also --domain and --vocab (what certify and inspect draw inputs from)."""
    path(p, "--step", metavar="STEP.onnx", help="bare ONNX: a KV-cache pair's step graph")
    path(p, "--spec", help="bare ONNX: property spec (docs/verify.md)")
    if values:
        domain(p, help="bare ONNX: input domain of float inputs")
        vocab(p, help="bare ONNX: token id range of integer inputs")


def vocab(p: argparse.ArgumentParser, *, help: str) -> None:
    """--vocab LO:HI, read with `parse_vocab`."""
    p.add_argument("--vocab", default=None, metavar="LO:HI", help=help)


def parse_vocab(text: str | None) -> tuple[int, int] | None:
    """--vocab LO:HI as (lo, hi), 0 <= lo <= hi; None stays None. ConfigError naming the fix."""
    if text is None:
        return None
    try:
        lo, hi = (int(v) for v in text.split(":"))
    except ValueError:
        raise ConfigError(
            f"--vocab {text!r} must look like LO:HI with integer ids, e.g. --vocab 0:999"
        ) from None
    if not 0 <= lo <= hi:
        raise ConfigError(f"--vocab {text!r}: ids must satisfy 0 <= LO <= HI, e.g. --vocab 0:999")
    return lo, hi


def register(subparsers: argparse._SubParsersAction, module: Any) -> argparse.ArgumentParser:
    """Add subcommand `module` (a module of tickformer.commands) to `subparsers`: named as the
    module, its parser built from the module's HELP, its description (the module docstring, kept
    as written; or DESCRIPTION, wrapped by argparse; None for none) and `arguments(p)`, then
    `func=module.run` and, where the module gives ERROR_EXIT, `error_exit` (the exit code of its
    user errors; 1 otherwise, core/cli.py)."""
    explicit = hasattr(module, "DESCRIPTION")
    p = subparsers.add_parser(
        module.__name__.rsplit(".", 1)[1],
        help=module.HELP,
        description=module.DESCRIPTION if explicit else module.__doc__,
        formatter_class=argparse.HelpFormatter if explicit else argparse.RawDescriptionHelpFormatter,
    )
    module.arguments(p)
    p.set_defaults(func=module.run)
    if hasattr(module, "ERROR_EXIT"):
        p.set_defaults(error_exit=module.ERROR_EXIT)
    return p
