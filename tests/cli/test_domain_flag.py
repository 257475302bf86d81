"""`--domain LO:HI` with a negative LO, in both spellings (`--domain -1:1` and `--domain=-1:1`), for
every subcommand that takes it (issue 17: `--domain -1:1` was an argparse error, "expected one
argument"; tickformer.commands.args.glued_values)."""

from __future__ import annotations

import pytest

from tickformer.cli import build_parser
from tickformer.commands.args import glued_values

COMMANDS = {
    "verify": ["verify", "m.onnx"],
    "certify": ["certify", "m.onnx", "--budget-us", "100", "--out", "o"],
    "inspect": ["inspect", "m.onnx"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("value", ["-1:1", "-1e3:-5", "-0.5:0.25"])
@pytest.mark.parametrize("glued", [False, True])
def test_negative_domain_in_both_spellings(command, value, glued):
    argv = [*COMMANDS[command], *([f"--domain={value}"] if glued else ["--domain", value])]
    args = build_parser().parse_args(glued_values(argv))
    assert args.domain == value


def test_a_value_after_double_dash_is_not_glued():
    assert glued_values(["verify", "--domain", "--", "-1:1"]) == ["verify", "--domain", "--", "-1:1"]
