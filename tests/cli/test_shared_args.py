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


def test_config_builds_the_dataclass_from_the_flags_named_as_its_fields():
    """shared.config: the named fields from the namespace, the given ones as given, the rest at
    their defaults; a field the dataclass lacks, or no flag set, is refused at once (the command's
    mistake, never a silent default). build, serve and certify build their settings with it."""
    import dataclasses

    import pytest

    from tickformer.commands.args import config

    @dataclasses.dataclass(frozen=True)
    class Settings:
        samples: int = 10
        rt_priority: int = 50
        idle_s: float = 30.0
        duty_cycle: float = 0.9

    args = argparse.Namespace(command="x", samples=7, rt_priority=9, idle=2.5, unrelated="kept out")
    built = config(Settings, args, ("samples", "rt_priority"), idle_s=args.idle)
    assert built == Settings(samples=7, rt_priority=9, idle_s=2.5, duty_cycle=0.9)
    with pytest.raises(TypeError, match="Settings has no field unrelated"):
        config(Settings, args, ("samples", "unrelated"))
    with pytest.raises(TypeError, match="has no field idle"):
        config(Settings, args, ("samples",), idle=1.0)
    with pytest.raises(TypeError, match="sets Settings.duty_cycle"):
        config(Settings, args, ("samples", "duty_cycle"))


def test_config_of_a_real_command_takes_what_its_flags_parsed():
    """certify's campaign settings from its parsed flags: the named ones as given on the command
    line, each other field at the dataclass's own default."""
    from tickformer.certify.campaign import CampaignConfig
    from tickformer.commands.args import config

    args = build_parser().parse_args(
        [
            "certify",
            "art",
            "--samples",
            "5000",
            "--warmup",
            "3",
            "--cpu",
            "1",
            "--rt-priority",
            "7",
            "--seed",
            "4",
        ]
    )
    names = ("samples", "warmup", "cpu", "realtime", "rt_priority", "seed")
    campaign = config(CampaignConfig, args, names)
    assert campaign == CampaignConfig(samples=5000, warmup=3, cpu=1, realtime=False, rt_priority=7, seed=4)


def test_choice_defaults_to_the_first_and_refuses_the_others(capsys):
    """shared.choice: a flag of named values whose default is the first (serve --when-full and
    --form, certify --mode and --method, export and build --precision, run --contracts)."""
    import pytest

    from tickformer.commands.args import choice

    p = argparse.ArgumentParser(prog="t")
    choice(p, "--when-full", ("queue", "refuse"), help="h")
    assert p.parse_args([]).when_full == "queue"
    assert p.parse_args(["--when-full", "refuse"]).when_full == "refuse"
    with pytest.raises(SystemExit):
        p.parse_args(["--when-full", "wait"])
    assert "invalid choice: 'wait'" in capsys.readouterr().err
    subs = _subparsers()
    for command, dest, default in (
        ("serve", "when_full", "queue"),
        ("serve", "form", "python"),
        ("certify", "mode", "auto"),
        ("certify", "method", "pot"),
        ("export", "precision", "fp32"),
        ("build", "precision", "fp32"),
        ("run", "contracts", "off"),
    ):
        assert subs[command].get_default(dest) == default, (command, dest)


class _Built(Exception):
    """Raised by a stand-in for the work a command hands its settings to: the settings it got."""

    def __init__(self, *settings) -> None:
        super().__init__()
        self.settings = settings


def test_every_settings_flag_reaches_the_settings_a_command_builds(monkeypatch, tmp_path):
    """build, serve and certify, each through its own run(): every flag that names a field of the
    settings dataclass, given a value other than its default, is in the settings the command
    hands on. shared.config refuses a name that is no field or no flag, but not a flag left out
    of the names a command passes (it would silently keep the dataclass's default): this does."""
    import pytest

    import tickformer.certify.campaign as campaign_module
    import tickformer.export.engines as engines
    import tickformer.serve.repository as repository
    from tickformer.certify.campaign import CampaignConfig
    from tickformer.certify.decision import EvtConfig
    from tickformer.cli import main
    from tickformer.commands import certify
    from tickformer.export.engines import BuildOptions
    from tickformer.serve.repository import ServeConfig

    def built(*args, **kwargs):
        raise _Built(*args, *kwargs.values())

    monkeypatch.setattr(engines, "build_engines", built)
    monkeypatch.setattr(repository, "write_repository", built)
    monkeypatch.setattr(campaign_module, "certify_artifact", built)
    (tmp_path / "art").mkdir()  # certify tells a directory from a bare .onnx before it starts
    art = str(tmp_path / "art")

    argv = ["build", art, "--backend", "tensorrt", "--precision", "fp16", "--workspace", "64"]
    argv += ["--timing-cache", "tc", "--version-compatible", "--hardware-compat", "ampere+", "--convert"]
    with pytest.raises(_Built) as got:
        main([*argv, "--graph", "step"])
    assert got.value.settings[1] == BuildOptions(
        precision="fp16",
        workspace_mib=64,
        timing_cache=Path("tc"),
        version_compatible=True,
        hardware_compat="ampere+",
        convert=True,
        graphs=("step",),
    )

    argv = ["serve", art, "--repo", str(tmp_path / "repo"), "--name", "m", "--slots", "3", "--idle", "7"]
    with pytest.raises(_Built) as got:
        main([*argv, "--when-full", "refuse", "--queue-delay-us", "5", "--form", "onnxruntime"])
    assert got.value.settings[2] == ServeConfig(
        name="m", slots=3, idle_s=7.0, when_full="refuse", max_queue_delay_us=5, form="onnxruntime"
    )

    argv = ["certify", art, "--budget-us", "100", "--out", str(tmp_path / "out"), "--quiet"]
    argv += ["--samples", "5000", "--warmup", "3", "--cpu", "1", "--realtime", "--rt-priority", "7"]
    argv += ["--method", "bm", "--exceedance", "1e-6", "--run-length", "5", "--block-size", "20"]
    args = build_parser().parse_args([*argv, "--n-boot", "30", "--seed", "4"])
    with pytest.raises(_Built) as got:
        certify._run(args)
    settings = got.value.settings
    assert CampaignConfig(samples=5000, warmup=3, cpu=1, realtime=True, rt_priority=7, seed=4) in settings
    assert EvtConfig(method="bm", exceedance=1e-6, run_length=5, block_size=20, n_boot=30, seed=4) in settings
