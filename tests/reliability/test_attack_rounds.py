"""The adversarial rounds' table (attack_rounds.toml, rendered into docs/reliability_report.md):
every test a finding names exists, and a finding is marked defended only when all of its tests
ran and passed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from _relutil import ROUNDS, finding_state

ROOT = Path(__file__).parents[2]


def test_every_finding_names_tests_that_exist():
    rounds = tomllib.loads(ROUNDS.read_text(encoding="utf-8"))["round"]
    assert rounds and all(r["finding"] for r in rounds)
    for r in rounds:
        for f in r["finding"]:
            assert f["was"] in ("broken", "weak"), f
            for test in f["tests"]:
                path, _, name = test.partition("::")
                assert (ROOT / path).is_file(), f"{test}: no such file"
                if name:
                    text = (ROOT / path).read_text(encoding="utf-8")
                    assert re.search(rf"^def {re.escape(name)}", text, re.M), f"{test}: no such test"


def test_a_finding_is_defended_only_when_every_test_ran_and_passed():
    tests = ["t.py::test_a", "u.py"]
    passed = {"t.py::test_a[x]": "passed", "u.py::test_b": "passed"}
    assert finding_state(tests, passed) == "defended"
    assert finding_state(tests, {**passed, "u.py::test_c": "failed"}) == "broken"
    assert finding_state(tests, {"t.py::test_a[x]": "passed"}) == "not run"  # u.py did not run
    assert finding_state(tests, {**passed, "u.py::test_d": "skipped"}) == "not run"
