"""The environment the tests run in is the locked one (requirements.lock, `make lock`).

A version that drifts from the lock fails here with one line per package naming both versions and
the fix; the lock itself must still satisfy pyproject.toml's ranges (an edited range without
`make lock` fails too)."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _load_lockfile():
    spec = importlib.util.spec_from_file_location("_claims_lockfile", ROOT / "claims" / "lockfile.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lockfile = _load_lockfile()


def test_installed_packages_are_the_locked_versions():
    lines = lockfile.drift()
    if lines:
        pytest.fail("\n".join(lines), pytrace=False)


def test_a_drifted_or_missing_package_is_named_with_both_versions_and_the_fix(tmp_path):
    have = lockfile.installed("hypothesis")
    lock = tmp_path / "requirements.lock"
    lock.write_text(
        "hypothesis==0.0.1 \\\n    --hash=sha256:00\n"
        f"pytest=={lockfile.installed('pytest')} \\\n    --hash=sha256:00\n"
        "not-a-package-here==1.0 ; python_full_version >= '3.0' \\\n    --hash=sha256:00\n"
        "only-on-windows==1.0 ; sys_platform == 'win32' \\\n    --hash=sha256:00\n"
    )
    lines = lockfile.drift(lock)
    assert lines == [
        f"hypothesis: requirements.lock pins 0.0.1, {have} is installed; {lockfile.FIX}",
        f"not-a-package-here: requirements.lock pins 1.0, not installed; {lockfile.FIX}",
    ]


def test_an_empty_lock_is_refused(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("# nothing\n")
    with pytest.raises(ValueError, match="pins no package"):
        lockfile.locked(lock)


def test_the_lock_satisfies_every_range_of_pyproject():
    """Every dependency of the base install and of the extras the lock is made from (cpu, data,
    plant, test) is pinned, at a version its range admits: a range edited without `make lock` fails."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = lockfile.locked()
    wanted = list(project["dependencies"])
    for extra in ("cpu", "data", "plant", "test"):
        wanted += project["optional-dependencies"][extra]
    env = default_environment()
    problems = []
    for text in wanted:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name} is not in requirements.lock")
        elif not req.specifier.contains(pin, prereleases=True):
            problems.append(f"{req.name}: the lock pins {pin}, outside pyproject's {req.specifier}")
    assert not problems, "; ".join(problems) + ": run `make lock`"
