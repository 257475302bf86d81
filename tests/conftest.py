"""Shared test settings: Hypothesis profiles sized for 2-core CI machines, and the run's seed.

Profiles (HYPOTHESIS_PROFILE=NAME, default `ci`):
  ci     new examples every run: random generation, no example database (a CI checkout starts
         empty anyway; with none, a run never replays yesterday's examples instead of drawing),
         no per-example deadline (shared machines are noisy; speed lives in benchmarks),
         `print_blob`: a failure prints `@reproduce_failure(...)` for its exact example.
  repro  the fixed examples: derandomized (the examples depend only on the test), for
         reproducing a run without its seed and for bisecting.
  dev    more examples (300), random, with the local database.

Every run without `--hypothesis-seed` draws one seed and hands it to Hypothesis's own
`--hypothesis-seed` option, and the report header and the final summary (shown with -q too)
print it, so a red CI log says how to rerun exactly those examples: `HYPOTHESIS_SEED=N make test`
(or the same pytest command with `--hypothesis-seed=N`: the same selection of tests, since a test's
draws can depend on what ran before it in the process); one failing example alone reproduces
with the `@reproduce_failure(...)` line Hypothesis prints for it.
Tests with their own `@hypothesis.seed(...)` keep it.

Generated C (codegen, the `c` backend) builds into a cache private to the test session, never the
user's ~/.cache (fixture private_codegen_cache).
"""

import os
import secrets

import pytest
from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("ci", max_examples=60, derandomize=False, database=None, **_COMMON)
settings.register_profile("repro", max_examples=60, derandomize=True, database=None, **_COMMON)
settings.register_profile("dev", max_examples=300, **_COMMON)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


@pytest.fixture(scope="session", autouse=True)
def private_codegen_cache(tmp_path_factory):
    """Every test that builds generated C builds it into this session's cache (codegen/toolchain.py)."""
    old = os.environ.get("TICKFORMER_CODEGEN_CACHE")
    os.environ["TICKFORMER_CODEGEN_CACHE"] = str(tmp_path_factory.mktemp("codegen-cache"))
    yield
    if old is None:
        os.environ.pop("TICKFORMER_CODEGEN_CACHE", None)
    else:
        os.environ["TICKFORMER_CODEGEN_CACHE"] = old


def pytest_configure(config):
    """Runs before Hypothesis's plugin reads --hypothesis-seed (conftest hooks are called first)."""
    if PROFILE == "repro" or config.getoption("hypothesis_seed", None) is not None:
        return
    seed = os.environ.get("HYPOTHESIS_SEED") or str(secrets.randbelow(2**32))
    config.option.hypothesis_seed = seed
    # pytest-xdist's workers start after this hook and inherit the environment: one seed per run
    os.environ["HYPOTHESIS_SEED"] = seed


def pytest_report_header(config):
    seed = config.getoption("hypothesis_seed", None)
    if seed is None:
        return f"hypothesis profile {PROFILE!r}: fixed examples (derandomized)"
    return (
        f"hypothesis profile {PROFILE!r}, seed {seed}: rerun the same selection with HYPOTHESIS_SEED={seed} "
        f"(or --hypothesis-seed={seed}); a failing example alone: its printed @reproduce_failure"
    )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    line = pytest_report_header(config)
    terminalreporter.write_line(line if exitstatus == 0 else f"FAILED run: {line}")


@pytest.fixture(scope="module")
def compiler():
    """The C compiler the c backend finds (codegen/toolchain.py), or a skip naming how to install one
    (the runtime's and verify's tests of backend "c")."""
    from tickformer.codegen.toolchain import find_compiler
    from tickformer.errors import BackendUnavailable

    try:
        return find_compiler()
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
