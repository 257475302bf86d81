"""Every number README.md and docs/ state follows from its source (claims/check.py, claims/claims.toml,
docs/claims.md).

The whole check runs here (cheap re-runs and committed results files, seconds), and the checker
itself is tested on small documents with a small data file: an unregistered number, a stale one
and a claim the document no longer states each fail, and a regenerated results file re-renders
the numbers it changed (and only those)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_claims_{name}", ROOT / "claims" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


check = _load("check")


def test_every_stated_number_follows_from_its_source():
    result = check.check(check.load())
    assert not result.failures, "\n".join(result.failures)


def test_every_results_file_can_be_refreshed():
    """Each results file names a command or a function of claims/refresh.py (the expressions'
    names are checked by the whole check above: an unknown one fails its claim)."""
    refresh = _load("refresh")
    reg = check.load()
    for r in reg.results.values():
        assert bool(r.command) != bool(r.refresh), f"{r.name}: one of command, refresh"
        assert not r.refresh or callable(getattr(refresh, r.refresh, None)), f"{r.name}: {r.refresh}?"


# --- the checker on small documents ------------------------------------------------------------------------
RESULTS = {"utc": "2026-12-07T10:00:00Z", "p50": 33.64, "ratio": 48, "runs": {"a": 1.5, "b": 2.5}}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A repository with README.md, docs/, one results file r.json and a claims.toml to write."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "r.json").write_text(json.dumps(RESULTS))
    monkeypatch.setattr(check, "ROOT", tmp_path)
    return tmp_path


def _data(root: Path, spans: str, extra: str = "") -> object:
    (root / "claims.toml").write_text(
        '[results]\nr = {path = "r.json", date = "utc", command = "true"}\n'
        f'[files]\ncovered = ["README.md"]\n{extra}\n{spans}'
    )
    return check.load(root / "claims.toml")


def _run(root: Path, text: str, spans: str, extra: str = "") -> list[str]:
    (root / "README.md").write_text(text)
    return check.check(_data(root, spans, extra)).failures


SPAN = '[[span]]\nat = "README.md#t"\nfile = "r"\nclaims = [\n  {key = "p50", fmt = "{:.1f}"},\n  {key = "ratio"},\n]\n'


def test_checker_accepts_matching_claims(tree):
    text = (
        "intro\n<!-- claims: t -->| a | 33.6 µs and 48x, `cmd --samples 500` |<!-- /claims -->\nend 2 items\n"
    )
    assert _run(tree, text, SPAN) == []


def test_checker_fails_on_a_stale_number(tree):
    failures = _run(tree, "<!-- claims: t -->p50 33.5 us, 48x<!-- /claims -->", SPAN)
    assert any("33.6 (r.json:p50 (2026-12-07T10:00:00Z)) is not stated" in f for f in failures), failures
    assert any("number 33.5" in f and "registered for no claim" in f for f in failures), failures


def test_checker_fails_on_an_unregistered_number_and_a_missing_span(tree):
    failures = _run(tree, "<!-- claims: t -->33.6 and 48 and 0.0490<!-- /claims -->", SPAN)
    assert failures == [
        "README.md#t: number 0.0490 is stated 1x but registered for no claim of this span "
        "(declare it in claims/claims.toml, or it is stale)"
    ]
    failures = _run(tree, "no span here", SPAN)
    assert any("no such span" in f for f in failures)


def test_checker_fails_on_a_claim_no_longer_stated(tree):
    failures = _run(tree, "<!-- claims: t -->33.6<!-- /claims -->", SPAN)
    assert failures and "48 (r.json:ratio" in failures[0] and "not stated" in failures[0]


def test_checker_fails_on_a_source_that_fails_and_a_span_without_claims(tree):
    failures = _run(tree, "<!-- claims: t -->33.6 48<!-- /claims -->", SPAN.replace('"ratio"', '"nope"'))
    assert any("a claim's source failed: r:nope: KeyError('nope')" in f for f in failures), failures
    failures = _run(
        tree, "<!-- claims: t -->33.6 48<!-- /claims --> <!-- claims: v -->1<!-- /claims -->", SPAN
    )
    assert failures == ["README.md#v: a claims span with no registered claims"]


def test_checker_fails_on_a_measured_number_outside_spans_unless_definitional(tree):
    failures = _run(tree, "the step takes 33.6 µs here\n", "")
    assert any("outside a claims span" in f and "33.6" in f for f in failures)
    assert _run(tree, "budget 1.5 ms by default\n", "", '[literals."README.md"]\n"1.5" = "a default"') == []


def test_checker_requires_every_document_declared(tree):
    (tree / "docs" / "new.md").write_text("hello")
    assert any("docs/new.md: not declared" in f for f in _run(tree, "x", ""))


def test_expressions_loops_literals_and_tolerances(tree):
    spans = """[[span]]
at = "README.md#t"
claims = [
  {each.k = ["a", "b"], claims = [{expr = 'r["runs.{k}"] * 2', fmt = "{:.0f}"}]},
  {each = [{x = "7", w = "seven"}], claims = [{literal = "{x}", why = "{w}"}]},
  {expr = 'mean(r["runs"].values())', fmt = "{:.3f}", tol = 0.01},
]
"""
    assert _run(tree, "<!-- claims: t -->3, 5, 7 and 2.005<!-- /claims -->", spans) == []
    failures = _run(tree, "<!-- claims: t -->3, 5, 7 and 2.02<!-- /claims -->", spans)
    assert any('2.000 (mean(r["runs"].values()) [r.json' in f and "not stated" in f for f in failures), (
        failures
    )
    with pytest.raises(ValueError, match="literal with its why"):
        _data(tree, '[[span]]\nat = "README.md#t"\nclaims = [{literal = "7"}]\n')
    with pytest.raises(ValueError, match="unknown field"):
        _data(tree, '[[span]]\nat = "README.md#t"\nclaims = [{key = "p50", file = "r", format = "{}"}]\n')


def test_a_generated_file_is_compared_with_its_renderer(tree):
    (tree / "gen.md").write_text("r 33.64\n")
    extra = r"""[files.generated."gen.md"]
note = "n"
render = '"r %s\n" % r["p50"]'
regenerate = "x"
"""
    assert _run(tree, "x", "", extra) == []
    (tree / "gen.md").write_text("r 33.65\n")
    assert any("gen.md differs" in f for f in _run(tree, "x", "", extra))


RENDERED = """[[span]]
at = "README.md#t"
file = "r"
claims = [
  {key = "p50", fmt = "{:.1f}"},
  {expr = 'r["runs.a"] - r["runs.b"]', fmt = "{:.1f}"},
  {key = "runs.a", fmt = "{:.1f}"},
  {key = "runs.b", fmt = "{:.1f}"},
]
[[span]]
at = "README.md#u"
claims = [{literal = "1.5", why = "a threshold"}]
"""


def test_a_regenerated_results_file_re_renders_the_numbers_it_changed(tree, capsys):
    text = (
        "# Results\n\nThe step takes <!-- claims: t -->33.6 µs (−1.0 against b: 1.5, 2.5)<!-- /claims -->.\n"
        "Elsewhere <!-- claims: u -->1.5<!-- /claims --> again.\n"
    )
    assert _run(tree, text, RENDERED) == []
    reg = _data(tree, RENDERED)
    before = check.evaluate(reg)
    (tree / "r.json").write_text(json.dumps({**RESULTS, "p50": 35.04, "runs": {"a": 1.5, "b": 2.75}}))
    assert check.check(reg).failures  # stale until re-rendered
    assert check._finish(reg, before, ["r"]) == 0
    want = text.replace("33.6", "35.0").replace("−1.0", "−1.2").replace("2.5)", "2.8)")
    assert (tree / "README.md").read_text() == want
    out = capsys.readouterr().out
    assert "README.md:3 (span t): 33.6 -> 35.0, −1.0 -> −1.2, 2.5 -> 2.8" in out, out
    assert "span u" not in out and "claims: ok" in out


def test_refresh_runs_the_command_then_re_renders(tree, monkeypatch, capsys):
    refresh = _load("refresh")
    monkeypatch.setitem(sys.modules, "refresh", refresh)
    monkeypatch.setattr(refresh, "ROOT", tree)
    (tree / "new.json").write_text(json.dumps({**RESULTS, "p50": 30.0}))
    (tree / "README.md").write_text("<!-- claims: t -->33.6 µs, 48x<!-- /claims -->\n")
    reg = _data(tree, SPAN)
    reg.results["r"] = check.ResultsFile("r", "r.json", "utc", "cp new.json r.json")
    assert check.refresh(reg, "r") == 0
    assert (tree / "README.md").read_text() == "<!-- claims: t -->30.0 µs, 48x<!-- /claims -->\n"
    assert "33.6 -> 30.0" in capsys.readouterr().out
