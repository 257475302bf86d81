"""mypy type-checks the TensorRT and cuda-python code against the `tensorrt-stubs` package.

The stubs as published (tensorrt-stubs 10.13.0.35.1) cannot be used directly: their `tensorrt/`
folder has no py.typed marker (mypy skips it as untyped) and `tensorrt_bindings/tensorrt.pyi`
names parameters `in` (a keyword: a syntax error), puts a parameter without default after
defaulted ones (add_scale_nd: a syntax error) and shadows the builtin `bool` with a module
variable (every `-> bool` becomes invalid). So the test builds a MYPYPATH in a temp dir: the
stub files with those three defects repaired (names and defaults only), and a `tickformer`
tree of symlinks mirroring pyproject's package-dir mapping. cuda-python has no stubs: it is
`ignore_missing_imports` in mypy.ini (typed as Any), and said so in docs/gpu.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = [
    "runtime/backends/cuda.py",
    "runtime/backends/tensorrt_engine.py",
    "export/engines.py",
    "runtime/backends/tensorrt.py",
    "runtime/backends/ort_gpu.py",
]
# Sub-package -> folder, read from pyproject's package-dir (top-level sub-packages only).
PACKAGE_DIRS = {
    name.split(".", 1)[1]: folder
    for name, folder in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ].items()
    if name.count(".") == 1
}


def stub_root() -> Path:
    site = Path(sysconfig.get_paths()["purelib"])
    if not (site / "tensorrt_bindings" / "tensorrt.pyi").is_file():
        pytest.skip("tensorrt-stubs is not installed (pip install --no-deps tensorrt-stubs)")
    return site


def split_params(params: str) -> list[str]:
    """Split a parameter list at top-level commas."""
    parts, depth, cur = [], 0, ""
    for ch in params:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + ([cur] if cur.strip() else [])


def fix_defaults(line: str) -> str:
    """A stub `def` whose parameter without default follows one with a default (a syntax error,
    e.g. add_scale_nd(..., power: Weights = None, channel_axis: int)) gets `= ...` on the rest."""
    m = re.match(r"^(\s*def \w+\()(.*)(\)\s*->.*:\s*)$", line)
    if not m:
        return line
    params, seen_default, out = split_params(m.group(2)), False, []
    for p in params:
        bare = p.strip()
        if bare.startswith("*"):
            seen_default = False
        elif "=" in bare:
            seen_default = True
        elif seen_default:
            p = p + " = ..."
        out.append(p)
    return m.group(1) + ",".join(out) + m.group(3)


def fix_builtins(line: str) -> str:
    """The stubs define module variables `bool`, `float32`... (TensorRT DataType aliases) that
    shadow the builtin `bool` in every annotation; point annotations back at builtins.bool."""
    if re.match(r"^bool\s*:", line):
        return line
    return re.sub(r"(?<![\w.])bool\b", "_builtins.bool", line)


def prepare_mypy_path(tmp: Path) -> Path:
    site = stub_root()
    for pkg in ("tensorrt", "tensorrt_bindings"):
        for pyi in (site / pkg).glob("*.pyi"):
            text = pyi.read_text(encoding="utf-8")
            text = re.sub(r"([(,]\s*)in(\s*:)", r"\1in_\2", text)  # `in` is a keyword
            text = "\n".join(fix_builtins(fix_defaults(line)) for line in text.split("\n"))
            text = "import builtins as _builtins\n" + text
            (tmp / pkg).mkdir(parents=True, exist_ok=True)
            (tmp / pkg / pyi.name).write_text(text, encoding="utf-8")
    pkg = tmp / "tickformer"
    pkg.mkdir()
    for entry in (REPO / "core").iterdir():
        (pkg / entry.name).symlink_to(entry)
    for name, folder in PACKAGE_DIRS.items():
        if (REPO / folder).is_dir():
            (pkg / name).symlink_to(REPO / folder)
    return tmp


def run_mypy(tmp: Path, files: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, MYPYPATH=str(prepare_mypy_path(tmp)))
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(REPO / "mypy.ini"),
        "--no-incremental",
        "--cache-dir",
        str(tmp / ".mypy_cache"),
        *files,
    ]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_tensorrt_code_type_checks_against_the_stubs(tmp_path):
    files = FILES
    missing = [f for f in files if not (REPO / f).is_file()]
    assert not missing, f"type-checked files moved or vanished: {missing}; update FILES"
    result = run_mypy(tmp_path, files)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_the_check_can_fail(tmp_path):
    """The stubs are really used: a misspelled TensorRT method and a wrong argument type fail."""
    bad = tmp_path / "bad_trt.py"
    bad.write_text(
        "import tensorrt as trt\n"
        "def f() -> None:\n"
        "    b = trt.Builder(trt.Logger(trt.Logger.WARNING))\n"
        "    b.create_netwrk(0)\n"
        "    b.create_builder_config().set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 'big')\n",
        encoding="utf-8",
    )
    result = run_mypy(tmp_path / "path", [str(bad)]) if (tmp_path / "path").mkdir() is None else None
    assert result is not None and result.returncode == 1
    assert "create_netwrk" in result.stdout and "set_memory_pool_limit" in result.stdout
