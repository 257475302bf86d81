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

Beside the order: no import cycle between tickformer modules, lazy imports counted (KNOWN_CYCLES:
the ones other changes are removing); no module over 600 lines whose docstring does not say why
(PENDING_SIZE: the ones other changes are splitting); every package folder in pyproject's packages.
"""

from __future__ import annotations

import ast
import re
import tomllib
import warnings
from pathlib import Path
from typing import Any

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
    ("tickformer.verify", "tickformer.certify", "tickformer.control", "tickformer.serve"),
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


# --- module size: a module over MAX_LINES lines states why, in its docstring's first lines ----------

MAX_LINES = 600
REASON = "Longer than 600 lines:"
# Modules over MAX_LINES that other changes of issue 34 are reworking now. Each is carried here,
# pending, until its owner splits it or states its reason; an entry that no longer needs to be
# here is named in a warning by test_pending_lists_hold_only_what_is_pending (remove it then).
PENDING_SIZE: frozenset[str] = frozenset()


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def states_its_length(path: Path) -> bool:
    """The module docstring says why the module is long, in its first lines."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return REASON in "\n".join(doc.splitlines()[:6])


def unexplained_long_modules(
    mods: dict[str, Path] | None = None, pending: frozenset[str] = PENDING_SIZE
) -> list[str]:
    found = []
    for module, path in sorted((modules() if mods is None else mods).items()):
        n = line_count(path)
        if n > MAX_LINES and module not in pending and not states_its_length(path):
            found.append(
                f"{path}: {n} lines; split it along its ideas or start its docstring with {REASON!r}"
            )
    return found


def test_a_long_module_states_why():
    bad = unexplained_long_modules()
    assert not bad, f"modules over {MAX_LINES} lines without a reason:\n" + "\n".join(bad)


def test_the_size_check_can_fail(tmp_path):
    """A planted 601-line module is reported; the same module with the reason is not."""
    body = "\n".join(f"x{i} = {i}" for i in range(MAX_LINES))
    path = tmp_path / "long.py"
    path.write_text('"""A long module."""\n' + body + "\n")
    assert len(unexplained_long_modules({"tickformer.verify.long": path})) == 1
    path.write_text(f'"""A long module.\n\n{REASON} one table, read as one.\n"""\n' + body + "\n")
    assert unexplained_long_modules({"tickformer.verify.long": path}) == []


# --- no import circles, lazy imports included ------------------------------------------------------

# Cycles that other changes of issue 34 are removing now, each the set of modules it runs through.
# A cycle inside one of these sets is tolerated until its owner removes it (and the entry).
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()


def import_graph(mods: dict[str, Path] | None = None) -> dict[str, dict[str, int]]:
    """module -> {tickformer module it imports: line}, every import counted as `imports` sees them
    (lazy ones, by name, registry strings); `from package import name` is an import of the
    submodule package.name when there is one, else of the package."""
    mods = modules() if mods is None else mods
    graph: dict[str, dict[str, int]] = {}
    for module, path in mods.items():
        out: dict[str, int] = {}
        tree = ast.parse(path.read_text(), filename=str(path))
        resolved: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _from_target(node, module, path.name == "__init__.py")
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                for sub in subs:
                    out.setdefault(sub, node.lineno)
                if len(subs) == len(node.names):
                    resolved.add(node.lineno)  # names only submodules: not an import of the package
        for line, target in imports(path, module):
            if target in mods and target != module and not (line in resolved and target not in out):
                out.setdefault(target, line)
        out.pop(module, None)
        graph[module] = out
    return graph


def _from_target(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan), as the list
    of modules it runs through, the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # recursion depth: the length of an import chain, a few dozen
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_a_cycle_in(graph, c) for c in components]


def _a_cycle_in(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """The shortest cycle through the component's first module (breadth-first)."""
    start = min(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w in component and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # a component of more than one module has one


def describe(cycle: list[str], graph: dict[str, dict[str, int]], mods: dict[str, Path]) -> str:
    hops = [f"{a} ({mods[a].name}:{graph[a][b]}) -> {b}" for a, b in zip(cycle, cycle[1:])]
    return "; ".join(hops)


def unknown_cycles(
    mods: dict[str, Path] | None = None, known: tuple[frozenset[str], ...] = KNOWN_CYCLES
) -> list[str]:
    mods = modules() if mods is None else mods
    graph = import_graph(mods)
    return [describe(c, graph, mods) for c in cycles(graph) if not any(set(c) <= k for k in known)]


def test_no_import_cycles():
    bad = unknown_cycles()
    assert not bad, (
        "import cycles (lazy imports count; break each by moving what both need below both):\n"
        + "\n".join(bad)
    )


def test_the_cycle_check_finds_a_planted_cycle():
    """A small fake graph: a -> b -> c -> a is found and listed hop by hop, the chain d -> a is not
    a cycle, and a cycle inside a known set is tolerated."""
    graph = {"a": {"b": 3}, "b": {"c": 5}, "c": {"a": 7}, "d": {"a": 1}}
    (cycle,) = cycles(graph)
    assert cycle == ["a", "b", "c", "a"]
    mods = {m: Path(f"{m}.py") for m in graph}
    assert describe(cycle, graph, mods) == "a (a.py:3) -> b; b (b.py:5) -> c; c (c.py:7) -> a"
    assert cycles({"a": {"b": 1}, "b": {}, "d": {"a": 1}}) == []


def test_the_cycle_check_reads_lazy_imports(tmp_path):
    """Two planted modules that import each other inside functions (the circle verify/properties
    plans <-> runner hid that way) are reported; a known set tolerates them."""
    (tmp_path / "plans.py").write_text("def f():\n    from tickformer.verify.properties.runner import g\n")
    (tmp_path / "runner.py").write_text("from tickformer.verify.properties.plans import f\n")
    mods = {
        "tickformer.verify.properties.plans": tmp_path / "plans.py",
        "tickformer.verify.properties.runner": tmp_path / "runner.py",
    }
    (found,) = unknown_cycles(mods, known=())
    assert "plans.py:2" in found and "runner.py:1" in found
    assert unknown_cycles(mods, known=(frozenset(mods),)) == []


def test_pending_lists_hold_only_what_is_pending():
    """PENDING_SIZE and KNOWN_CYCLES shrink: an entry whose module is gone, no longer too long (or
    now states its reason), or whose cycle is gone, is named in a warning so that its owner removes
    it (a warning, not a failure: the owners finish their changes in the same checkout)."""
    mods = modules()
    stale: list[Any] = [
        m
        for m in sorted(PENDING_SIZE)
        if m not in mods or line_count(mods[m]) <= MAX_LINES or states_its_length(mods[m])
    ]
    found = cycles(import_graph(mods))
    stale += [sorted(k) for k in KNOWN_CYCLES if not any(set(c) <= k for c in found)]
    if stale:
        warnings.warn(
            f"tests/test_architecture.py: remove these pending entries (their change is done): {stale}",
            stacklevel=1,
        )


def test_every_package_folder_is_in_pyproject():
    """A sub-package (a folder with __init__.py) missing from pyproject's `packages` is left out of
    the wheel while the checkout still imports it."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {m for m, p in modules().items() if p.name == "__init__.py"}
    assert folders <= listed, f"add to pyproject.toml's packages: {sorted(folders - listed)}"
