"""Imports flow one way (docs/architecture.md): a test that reads every import of the package.

    base      tickformer.{errors, validation, durable, sealed}   stdlib + numpy only
    contracts tickformer.contracts                               statements, bounds, hot-path checks
    model     tickformer.model                                   numpy Transformer, training
    artifact  tickformer.artifact                                the exported format, its reader
    export    tickformer.export, tickformer.codegen              ONNX graphs (and C) from the model
    runtime   tickformer.runtime                                 sessions, backends, control loop
    tools     tickformer.verify | tickformer.certify | tickformer.control   (siblings: no imports between them)
    cli       tickformer.cli, tickformer.commands

A module may import only from its own layer's package or from layers above it in this list.
Every import counts, also the lazy ones inside functions (they are how a module defers an
optional dependency, not how it escapes the order). The walk is over the source files named by
pyproject's package-dir, parsed with `ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("tickformer.errors", "tickformer.validation", "tickformer.durable", "tickformer.sealed", "tickformer"),
    ("tickformer.contracts",),
    ("tickformer.model",),
    ("tickformer.artifact",),
    ("tickformer.export", "tickformer.codegen"),
    ("tickformer.runtime",),
    ("tickformer.verify", "tickformer.certify", "tickformer.control"),
    ("tickformer.cli", "tickformer.commands", "tickformer.__main__"),
)
# Deliberate exceptions, each with its reason.
ALLOWED = {
    # Deprecated alias kept until the next artifact format change (certification moved out of verify).
    ("tickformer.verify.certify", "tickformer.certify"),
}


def package_dirs() -> dict[str, Path]:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {name: REPO / folder for name, folder in mapping.items()}


def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    dirs = package_dirs()
    found: dict[str, Path] = {}
    for package, folder in sorted(dirs.items(), key=lambda kv: -kv[0].count(".")):
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            # a sub-folder mapped to its own package (core/commands is tickformer.commands)
            found.setdefault(name, path)
    return found


def unit(module: str) -> str:
    """The layer entry a module belongs to (longest matching prefix)."""
    best = ""
    for layer in LAYERS:
        for entry in layer:
            if (module == entry or module.startswith(entry + ".")) and len(entry) > len(best):
                best = entry
    return best


def rank(module: str) -> int:
    entry = unit(module)
    return next(i for i, layer in enumerate(LAYERS) if entry in layer)


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported tickformer module) for every import in the file, lazy ones included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tickformer"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "tickformer":
                continue
            if target == "tickformer":  # `from tickformer import sealed` names a module
                out += [(node.lineno, f"tickformer.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def violations(mods: dict[str, Path] | None = None) -> list[str]:
    found = []
    for module, path in (modules() if mods is None else mods).items():
        for line, target in imports(path, module):
            src, dst = unit(module), unit(target)
            if not dst or (module, dst) in ALLOWED or (src, dst) in ALLOWED:
                continue
            siblings = (
                rank(target) == rank(module) and src != dst and rank(module) not in (0, len(LAYERS) - 1)
            )
            if rank(target) > rank(module) or siblings:  # base and CLI modules may import each other
                found.append(f"{path}:{line}: {module} ({src}) imports {target} ({dst})")
    return found


def test_every_module_is_in_a_layer():
    unplaced = [m for m in modules() if not unit(m)]
    assert not unplaced, f"modules outside every layer of LAYERS: {unplaced}"


def test_imports_flow_one_way():
    bad = violations()
    assert not bad, "imports against the layer order (docs/architecture.md):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("tickformer.model.train", "tickformer.export.writer"),  # model -> export: upward
        ("tickformer.export.graphs", "tickformer.runtime.session"),  # export -> runtime: upward
        ("tickformer.certify.campaign", "tickformer.verify.properties"),  # sibling tools
        ("tickformer.contracts.masking", "tickformer.model.attention"),  # contracts sit below the model
    ],
)
def test_the_check_catches_an_import_against_the_order(module, target, tmp_path):
    """A planted import (a lazy one, inside a function) in each forbidden direction is reported."""
    path = tmp_path / "planted.py"
    path.write_text(f"def f():\n    import {target}\n")
    assert any(target in v for v in violations({module: path}))
