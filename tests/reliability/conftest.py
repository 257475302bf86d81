"""Fixtures of the reliability tests: small artifacts and checkpoints written once per session,
and the report writer.

Report: the fuzz and stateful tests record how every mutated artifact and bad input ended
(`_relutil.OUTCOMES`). When the environment variable TICKFORMER_RELIABILITY_REPORT names a file,
the session writes the counts there as markdown at the end of the run, with the test results:

    TICKFORMER_RELIABILITY_REPORT=docs/reliability_report.md \
        .venv/bin/python -m pytest tests/reliability tests/cli/test_cli_errors.py -q

Without the variable nothing is written (CI runs do not touch the checkout).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # for `import _relutil` (importlib import mode)

import _relutil  # noqa: E402

from tickformer.export.writer import export_params  # noqa: E402
from tickformer.model import init_params, preset  # noqa: E402
from tickformer.model.checkpoint import save_checkpoint  # noqa: E402

TINY_TOKENS = preset("tiny").replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)
REPORT_ENV = "TICKFORMER_RELIABILITY_REPORT"


@pytest.fixture(scope="session")
def art_src(tmp_path_factory):
    """(path, params) of a decoder-only continuous artifact: tiny preset, d_in 3, max_len 16,
    domain [-10, 10]. Read-only: tests copy it before damaging it."""
    cfg = preset("tiny")
    params = init_params(cfg, 1)
    out = tmp_path_factory.mktemp("rel-art") / "art"
    export_params(cfg, params, out, lengths=[1, 16])
    return out, params


@pytest.fixture(scope="session")
def tokens_src(tmp_path_factory):
    """(path, params) of a decoder-only token artifact (V = 11, max_len 16)."""
    params = init_params(TINY_TOKENS, 2)
    out = tmp_path_factory.mktemp("rel-tok") / "art"
    export_params(TINY_TOKENS, params, out, lengths=[1, 16])
    return out, params


@pytest.fixture(scope="session")
def window_src(tmp_path_factory):
    """(path, params) of a windowed continuous artifact: tiny preset, window 3, max_len 16 (its
    ring cache wraps every 3 steps; sliding sessions never fill)."""
    cfg = preset("tiny").replace(window=3)
    params = init_params(cfg, 4)
    out = tmp_path_factory.mktemp("rel-win") / "art"
    export_params(cfg, params, out, lengths=[1, 16])
    return out, params


@pytest.fixture(scope="session")
def window_tokens_src(tmp_path_factory):
    """(path, params) of a windowed token artifact (V = 11, window 2, max_len 16)."""
    cfg = TINY_TOKENS.replace(window=2)
    params = init_params(cfg, 5)
    out = tmp_path_factory.mktemp("rel-wtok") / "art"
    export_params(cfg, params, out, lengths=[1, 16])
    return out, params


@pytest.fixture(scope="session")
def ckpt_src(tmp_path_factory):
    """(path, params) of a checkpoint of the tiny preset with an extra hashed file."""
    cfg = preset("tiny")
    params = init_params(cfg, 3)
    out = tmp_path_factory.mktemp("rel-ckpt") / "ckpt"
    save_checkpoint(
        out,
        cfg,
        params,
        {"task": "pendulum", "input_domain": [-10.0, 10.0]},
        extra_files={"metrics.json": b'{"loss": 0.5}\n'},
    )
    return out, params


@pytest.fixture(scope="session")
def outcomes():
    return _relutil.OUTCOMES


@pytest.fixture(scope="session")
def worker():
    """A load_worker.py child process shared by the session (crash / hang isolation)."""
    w = _relutil.Worker(timeout=60.0)
    yield w
    w.close()
    if w.noise:
        _relutil.OUTCOMES.describe(
            "worker stdout noise", f"{len(w.noise)} non-reply lines skipped, first: {w.noise[0][:200]!r}"
        )


# --- the report -------------------------------------------------------------------------------------
def _finding_tests() -> list[str]:
    import tomllib

    rounds = tomllib.loads(_relutil.ROUNDS.read_text(encoding="utf-8"))["round"]
    return [t for r in rounds for f in r["finding"] for t in f["tests"]]


def _collect_test_states(stats) -> None:
    """Outcome of every test of this issue (tests/reliability, tests/cli/test_cli_errors.py) and
    of the tests attack_rounds.toml names elsewhere."""
    elsewhere = _finding_tests()
    names = {
        "passed": "passed",
        "failed": "failed",
        "error": "error",
        "xfailed": "xfailed (known bug, see reason)",
        "xpassed": "XPASS",
        "skipped": "skipped",
    }
    for key, label in names.items():
        for report in stats.get(key, []):
            nodeid = getattr(report, "nodeid", "")
            ours = "tests/reliability/" in nodeid or "test_cli_errors" in nodeid
            if (ours or any(nodeid.startswith(t) for t in elsewhere)) and (
                report.when == "call" or report.outcome != "passed"
            ):
                _relutil.OUTCOMES.tests[nodeid] = label


def _examples_line(seed: object) -> str:
    """How this run drew its Hypothesis examples: derandomized (the `repro` profile: the counts
    are reproducible) or random from the run's seed (the `ci` profile: the fuzz counts change
    from run to run, and HYPOTHESIS_SEED reruns these examples)."""
    from hypothesis import settings

    profile = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    if settings.default.derandomize:
        return f"profile `{profile}`: derandomized, the examples depend only on the test: the counts are reproducible"
    return (
        f"profile `{profile}`: random examples from seed {seed}, so the fuzz counts vary between runs; "
        f"prefix the command with HYPOTHESIS_SEED={seed} to draw these examples again"
    )


def _report_markdown(command: str, seed: object = None) -> str:
    import hypothesis
    import numpy
    import onnx
    import onnxruntime

    rec = _relutil.OUTCOMES
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    lines = [
        "# Reliability test report",
        "",
        "Generated by a real run; do not edit by hand. Regenerate with:",
        "",
        "```",
        command,
        "```",
        "",
        f"Run: {now}, Python {platform.python_version()}, numpy {numpy.__version__}, onnx {onnx.__version__}, "
        f"onnxruntime {onnxruntime.__version__}, hypothesis {hypothesis.__version__} ({_examples_line(seed)}).",
        "",
        "## Mutated artifacts, checkpoints and bad inputs: how each case ended",
        "",
        "An outcome is `success` (the input was accepted and the call completed) or the name of the",
        "`TickformerError` subclass raised. `UNEXPECTED <type>` would be a defect (any other exception);",
        "the test that met it fails.",
        "",
        "| class of case | cases | outcomes | seconds |",
        "|---|---:|---|---:|",
    ]
    total = 0
    unexpected = 0
    for kind in sorted(rec.counts):
        counts = rec.counts[kind]
        n = sum(counts.values())
        total += n
        unexpected += sum(v for k, v in counts.items() if k.startswith("UNEXPECTED"))
        outs = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        lines.append(f"| {kind} | {n} | {outs} | {rec.seconds[kind]:.1f} |")
    by_class: dict[str, Counter] = {}
    for kind, counts in rec.counts.items():
        group = kind.split(":", 1)[0]
        by_class.setdefault(group, Counter()).update(
            {
                "cases": sum(counts.values()),
                "kinds": 1,
                **{"unexpected": sum(v for k, v in counts.items() if k.startswith("UNEXPECTED"))},
            }
        )
    lines += [
        "",
        "By class (the prefix of each row above):",
        "",
        "| class | rows | cases | unexpected |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {group} | {c['kinds']} | {c['cases']} | {c['unexpected']} |"
        for group, c in sorted(by_class.items())
    ]
    lines += [
        "",
        f"Total: {total} cases, {unexpected} ended in an unexpected exception.",
        "",
        "Every unexpected exception counted above belongs to a known bug: the test that meets it is a strict",
        "xfail listed under Test results, whose reason names the file and the fix.",
        "",
    ]
    if rec.notes:
        lines += ["### What each class does", ""]
        lines += [f"- **{kind}**: {note}" for kind, note in sorted(rec.notes.items())]
        lines.append("")
    if rec.defects:
        lines += ["### Unexpected exceptions met (first three per class)", ""]
        for kind, found in sorted(rec.defects.items()):
            lines += [f"- {kind}: " + " | ".join(f"`{d}`" for d in found[:3])]
        lines.append("")
    lines += _rounds_markdown(rec.tests)
    states: dict[str, int] = {}
    for state in rec.tests.values():
        states[state] = states.get(state, 0) + 1
    lines += [
        "## Test results",
        "",
        "Tests of tests/reliability and tests/cli/test_cli_errors.py in this run: "
        + ", ".join(f"{v} {k}" for k, v in sorted(states.items()))
        + ".",
        "",
    ]
    known = sorted(n for n, s in rec.tests.items() if s.startswith("xfailed"))
    if known:
        lines += ["Known bugs (strict xfail; the reason names the file and the fix):", ""]
        lines += [f"- `{n}`" for n in known]
        lines.append("")
    failed = sorted(n for n, s in rec.tests.items() if s in ("failed", "XPASS"))
    if failed:
        lines += ["Failed:", ""] + [f"- `{n}`" for n in failed] + [""]
    return "\n".join(lines)


def _rounds_markdown(results: dict[str, str]) -> list[str]:
    """The adversarial rounds (attack_rounds.toml): each finding, what it was, what it is in this run."""
    import tomllib

    lines = ["## Adversarial rounds: attacks tried, broken, weak and defended", ""]
    for r in tomllib.loads(_relutil.ROUNDS.read_text(encoding="utf-8"))["round"]:
        now = Counter()
        rows = []
        for f in r["finding"]:
            state = _relutil.finding_state(f["tests"], results)
            now[state] += 1
            tests = ", ".join(f"`{t.split('::')[-1] if '::' in t else t}`" for t in f["tests"])
            rows.append(f"| {f['attack']} | {f['was']} | **{state}** | {tests} |")
        was = Counter(f["was"] for f in r["finding"])
        lines += [
            f"### {r['name']}",
            "",
            f"Tried: {r['tried']} new attacks, {r['rerun']} earlier ones re-run ({r['rerun_note']}). "
            f"Found: {was['broken']} broken, {was['weak']} weak; {r['not_listed']}. "
            f"In this run: {now['defended']} of the {len(r['finding'])} findings defended, "
            f"{now['broken']} broken, {now['not run']} not run.",
            "",
            "| attack | found | this run | tests |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    target = os.environ.get(REPORT_ENV)
    if not target or not _relutil.OUTCOMES.counts:
        return
    _collect_test_states(terminalreporter.stats)
    args = " ".join(config.invocation_params.args)
    command = f"{REPORT_ENV}={target} .venv/bin/python -m pytest {args}"
    seed = config.getoption("hypothesis_seed", None)
    Path(target).write_text(_report_markdown(command, seed) + "\n", encoding="utf-8")
    terminalreporter.write_line(f"reliability report written to {target}")
