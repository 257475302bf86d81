"""The versions requirements.lock pins, for this interpreter and platform.

    locked()            {normalized name: version} of every package the lock installs here
    drift()             one line per locked package whose installed version differs, or that is
                        missing, naming both versions and the fix

The lock is written by `make lock` (uv pip compile, universal: one line per package and version,
with an environment marker where the version depends on the Python or the platform). Used by
claims/computed.py (the versions the documents state come from the lock) and by tests/test_lock.py
(the installed environment is the locked one). Not part of the package.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

LOCK = Path(__file__).resolve().parent.parent / "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?\s*$")
FIX = "run `make lock` if the new version is wanted, else reinstall the lock: `rm .venv/.installed && make test`"


def locked(path: Path = LOCK) -> dict[str, str]:
    """Every `name==version [; marker]` line of the lock whose marker holds here."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = _PIN.match(line)
        if m is None:
            continue
        name, version, marker = m.groups()
        if marker is None or Marker(marker).evaluate():
            out[canonicalize_name(name)] = version
    if not out:
        raise ValueError(f"{path} pins no package: regenerate it with `make lock`")
    return out


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def drift(path: Path = LOCK) -> list[str]:
    """One line per locked package installed at another version, or not installed."""
    lines = []
    for name, want in sorted(locked(path).items()):
        have = installed(name)
        if have is None:
            lines.append(f"{name}: requirements.lock pins {want}, not installed; {FIX}")
        elif have != want:
            lines.append(f"{name}: requirements.lock pins {want}, {have} is installed; {FIX}")
    return lines


def version(name: str, path: Path = LOCK) -> str:
    """The version the lock pins for `name` here (KeyError naming the package otherwise)."""
    pins = locked(path)
    key = canonicalize_name(name)
    if key not in pins:
        raise KeyError(f"{name} is not in {path.name}: add it to pyproject.toml or requirements-tools.in")
    return pins[key]
