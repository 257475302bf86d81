"""Flags several subcommands share are defined once (core/commands/args.py) and present wherever
they apply: every command that loads an artifact takes --trust (SECURITY.md lists them)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tickformer.cli import build_parser

LOADERS = {"inspect", "run", "verify", "certify", "check", "build", "prove", "codegen", "serve"}
SIGN = "sign"  # reads the artifact to sign it with your own key: nothing to trust beforehand
SHARED = ("--out", "--backend", "--seed", "--threads", "--trust", "--vocab", "--domain")
# Commands that still define a shared flag themselves, with the reason (fix, then remove here).
OWN_DEFINITIONS = {"demo.py": "--out and --seed defined in the demo command (its owner's file)"}
COMMANDS = Path(__file__).parents[2] / "core" / "commands"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_that_loads_an_artifact_takes_trust():
    subs = _subparsers()
    takes_artifact = {
        name
        for name, p in subs.items()
        if any(not a.option_strings and a.dest in ("artifact", "path", "target") for a in p._actions)
    }
    assert takes_artifact == LOADERS | {SIGN}
    missing = sorted(n for n in LOADERS if "--trust" not in subs[n]._option_string_actions)
    assert not missing, f"commands that load artifacts without --trust: {missing}"
    security = (Path(__file__).parents[2] / "SECURITY.md").read_text()
    listed = re.search(r"`--trust NAME.pub` on (.*?), refuses", security, re.S)
    assert listed and set(re.findall(r"`(\w+)`", listed.group(1))) == LOADERS


def test_shared_flags_are_defined_only_in_args_py():
    """No command module spells a shared flag in its own add_argument (before: --out four times,
    --backend in build, --vocab in verify and bare_onnx)."""
    own = {}
    for path in sorted(COMMANDS.glob("*.py")):
        if path.name == "args.py" or path.name in OWN_DEFINITIONS:
            continue
        found = [f for f in SHARED if re.search(rf"add_argument\(\s*[\"']{f}[\"']", path.read_text())]
        if found:
            own[path.name] = found
    assert not own, f"shared flags defined outside core/commands/args.py: {own}"


def test_the_artifact_positional_is_the_shared_one():
    """build, check, codegen used to define it inline; every loader now reads it as a Path."""
    for name, p in _subparsers().items():
        if name in LOADERS | {SIGN}:
            positional = next(a for a in p._actions if not a.option_strings and a.dest != "help")
            assert positional.type is Path, name
