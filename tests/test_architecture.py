"""Imports flow one way (docs/architecture.md): a test that reads every import of the package.

    base      tickformer (the package itself), tickformer.{errors, validation, durable, sealed,
              safe_files, signing}                               stdlib + numpy (+ cryptography)
    contracts tickformer.contracts                               statements, bounds, hot-path checks
    model     tickformer.model                                   numpy Transformer, training
    artifact  tickformer.artifact                                the exported format, its reader
    runtime   tickformer.runtime                                 sessions, backends, control loop
    export    tickformer.export, tickformer.codegen              ONNX graphs (and C) from the model
    tools     tickformer.verify | tickformer.certify | tickformer.control   (siblings: no imports between them)
    cli       tickformer.cli, tickformer.commands

A module may import only from its own layer's package or from layers above it in this list.
Every import counts, also the lazy ones inside functions (they are how a module defers an
optional dependency, not how it escapes the order), and so do imports by name:
`importlib.import_module("tickformer.x")` / `__import__(...)` (a string, or an f-string's
leading `tickformer.x.` part) and any other string that names a tickformer module (a registry
such as runtime/backends REGISTRY holds the names it imports later), docstrings excepted. The
walk is over the source files named by pyproject's package-dir, parsed with `ast`. Every module
must sit in a layer: the bare `tickformer` entry is the package's own `__init__` only, so a new
module of core/ is placed by name.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "tickformer",  # core/__init__.py only (`unit` matches it exactly, never as a prefix)
        "tickformer.errors",
        "tickformer.validation",
        "tickformer.durable",
        "tickformer.sealed",
        "tickformer.safe_files",
        "tickformer.signing",
    ),
    ("tickformer.contracts",),
    ("tickformer.model",),
    ("tickformer.artifact",),
    ("tickformer.runtime",),  # loading is reading: the runtime never imports export or codegen
    ("tickformer.export", "tickformer.codegen"),
    ("tickformer.verify", "tickformer.certify", "tickformer.control"),
    ("tickformer.cli", "tickformer.commands", "tickformer.__main__"),
)
# Deliberate exceptions, each with its reason.
ALLOWED = {
    # Deprecated alias kept until the next artifact format change (certification moved out of verify).
    ("tickformer.verify.certify", "tickformer.certify"),
}


ROOT = "tickformer"
MODULE_NAME = re.compile(r"tickformer(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
DYNAMIC_IMPORTS = {"import_module", "__import__"}


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
    """The layer entry a module belongs to (longest matching prefix; the root "tickformer" only
    as itself), or "" for a module in no layer."""
    best = ""
    for layer in LAYERS:
        for entry in layer:
            inside = module == entry or (entry != ROOT and module.startswith(entry + "."))
            if inside and len(entry) > len(best):
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
        elif isinstance(node, ast.Call) and _called(node.func) in DYNAMIC_IMPORTS and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr):  # f"tickformer.commands.{name}": its constant head
                head = ""
                for part in arg.values:
                    if not isinstance(part, ast.Constant):
                        break
                    head += str(part.value)
                name = head.rstrip(".")
                if name.split(".")[0] == "tickformer":
                    out.append((node.lineno, name))
    docstrings = {id(d) for d in _docstrings(tree)}
    for node in ast.walk(tree):  # names in strings: import_module("tickformer.x"), registries
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if MODULE_NAME.fullmatch(node.value):
                out.append((node.lineno, node.value))
    return out


def _called(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _docstrings(tree: ast.Module) -> list[ast.Constant]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.append(body[0].value)
    return found


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


def unplaced(mods: list[str]) -> list[str]:
    return [m for m in mods if not unit(m)]


def test_every_module_is_in_a_layer():
    missing = unplaced(list(modules()))
    assert not missing, f"modules outside every layer of LAYERS: {missing}"


def test_a_new_module_outside_every_layer_is_reported():
    """The check can fail: a new base module not named in LAYERS (before, the bare "tickformer"
    entry matched every module as a prefix, so nothing was ever unplaced)."""
    assert unplaced(["tickformer.newthing", "tickformer.errors", "tickformer"]) == ["tickformer.newthing"]
    assert unit("tickformer.commands.run") == "tickformer.commands"


def test_imports_flow_one_way():
    bad = violations()
    assert not bad, "imports against the layer order (docs/architecture.md):\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("tickformer.model.train", "tickformer.export.writer"),  # model -> export: upward
        ("tickformer.runtime.session", "tickformer.export.consistency"),  # runtime -> export: upward
        ("tickformer.certify.campaign", "tickformer.verify.properties"),  # sibling tools
        ("tickformer.contracts.masking", "tickformer.model.attention"),  # contracts sit below the model
    ],
)
def test_the_check_catches_an_import_against_the_order(module, target, tmp_path):
    """A planted import (a lazy one, inside a function) in each forbidden direction is reported."""
    path = tmp_path / "planted.py"
    path.write_text(f"def f():\n    import {target}\n")
    assert any(target in v for v in violations({module: path}))


@pytest.mark.parametrize(
    "source",
    [
        'import importlib\n\ndef f():\n    return importlib.import_module("tickformer.runtime.session")\n',
        'from importlib import import_module\n\ndef f(n):\n    return import_module(f"tickformer.runtime.{n}")\n',
        'def f():\n    return __import__("tickformer.runtime.session")\n',
        'REGISTRY = {"ort": ("tickformer.runtime.backends.ort", "pip install")}\n',
    ],
    ids=["import_module", "f-string", "__import__", "registry string"],
)
def test_imports_by_name_are_seen(source, tmp_path):
    """importlib.import_module("tickformer.x") and module names kept in strings count as imports
    (before, the walk saw only import statements); a docstring naming a module does not."""
    path = tmp_path / "planted.py"
    path.write_text(source)
    assert any("tickformer.runtime" in v for v in violations({"tickformer.artifact.reader": path}))
    path.write_text('"""See tickformer.runtime.session."""\n')
    assert violations({"tickformer.artifact.reader": path}) == []
