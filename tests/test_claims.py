"""Every number README.md and docs/ state follows from its source (claims/check.py, docs/claims.md).

The whole check runs here (cheap re-runs and committed results files, seconds), and the checker
itself is tested on small documents: an unregistered number, a stale one and a claim the
document no longer states each fail."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_claims_{name}", ROOT / "claims" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    sys.path.insert(0, str(ROOT / "claims"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "claims"))
    return module


check = _load("check")


def test_every_stated_number_follows_from_its_source():
    registry = _load("registry")
    result = check.check(registry)
    assert not result.failures, "\n".join(result.failures)


def _fake_registry(claims, files, literals=None):
    reg = types.SimpleNamespace(CLAIMS=claims, FILES=files, LITERALS=literals or {}, GENERATED=[])
    reg.evaluate = lambda result: {c.key: (c.get(), c.fmt(c.get())) for c in claims}
    return reg


def _claim(region, name, value, fmt="{}"):
    return types.SimpleNamespace(
        region=region,
        name=name,
        key=f"{region}:{name}",
        get=lambda: value,
        fmt=fmt.format,
        source="test",
        tol=None,
    )


@pytest.fixture
def doc_root(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(check, "ROOT", tmp_path)
    return tmp_path


def _run(root, text, claims, literals=None):
    (root / "README.md").write_text(text)
    return check.check(_fake_registry(claims, {"README.md": ("covered", "")}, literals)).failures


def test_checker_accepts_matching_claims(doc_root):
    text = (
        "intro\n<!-- claims: t -->| a | 33.6 µs and 48x, `cmd --samples 500` |<!-- /claims -->\nend 2 items\n"
    )
    assert (
        _run(doc_root, text, [_claim("README.md#t", "p50", 33.64, "{:.1f}"), _claim("README.md#t", "r", 48)])
        == []
    )


def test_checker_fails_on_a_stale_number(doc_root):
    failures = _run(
        doc_root, "<!-- claims: t -->p50 33.6 us<!-- /claims -->", [_claim("README.md#t", "p50", 35.0)]
    )
    assert any("'p50' = 35.0" in f and "not stated" in f for f in failures)
    assert any("number 33.6" in f and "registered for no claim" in f for f in failures)


def test_checker_fails_on_an_unregistered_number_and_a_missing_span(doc_root):
    failures = _run(
        doc_root,
        "<!-- claims: t -->0.0367 and 0.0490<!-- /claims -->",
        [_claim("README.md#t", "a", "0.0367")],
    )
    assert any("number 0.0490" in f for f in failures)
    failures = _run(doc_root, "no span here", [_claim("README.md#t", "a", "1")])
    assert any("no such span" in f for f in failures)


def test_checker_fails_on_a_measured_number_outside_spans_unless_definitional(doc_root):
    failures = _run(doc_root, "the step takes 33.6 µs here\n", [])
    assert any("outside a claims span" in f and "33.6" in f for f in failures)
    assert _run(doc_root, "budget 1.5 ms by default\n", [], {"README.md": {"1.5": "a default"}}) == []


def test_checker_requires_every_document_declared(doc_root):
    (doc_root / "docs" / "new.md").write_text("hello")
    (doc_root / "README.md").write_text("x")
    failures = check.check(_fake_registry([], {"README.md": ("covered", "")})).failures
    assert any("docs/new.md: not declared" in f for f in failures)


def _bound_names(targets):
    """Names a target list binds (x, a tuple of them); not `_`, and not d[k] or o.a, which bind none."""
    import ast

    for t in targets:
        if isinstance(t, ast.Name) and t.id != "_":
            yield t.id
        elif isinstance(t, (ast.Tuple, ast.List)):
            yield from _bound_names(t.elts)


def _module_scope_bindings(body):
    """(name, line, kind) of every name bound at module scope: assignments, loop variables (also in
    nested module-level loops and ifs) and defs; function and class bodies are not module scope."""
    import ast

    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            yield node.name, node.lineno, "def"
            continue
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.For)):
            targets = [node.target]
        else:
            targets = []
        kind = "loop" if isinstance(node, ast.For) else "assign"
        for name in _bound_names(targets):
            yield name, node.lineno, kind
        for field in ("body", "orelse"):
            if isinstance(node, (ast.For, ast.If, ast.While, ast.With)):
                yield from _module_scope_bindings(getattr(node, field, []))


def test_no_module_name_of_the_registry_is_rebound():
    """The registry's claims are lambdas that read module names when the check runs, so a
    constant bound again further down (a second `_B = ...`) silently re-points every earlier
    claim that uses it, and a loop variable named like a function (`_fmt`, `_test`) replaces the
    function. Loop variables may be reused by other loops (each claim takes them as default
    arguments); nothing else is bound twice."""
    import ast

    tree = ast.parse((ROOT / "claims" / "registry.py").read_text())
    first: dict[str, tuple[int, str]] = {}
    clashes = []
    for name, line, kind in _module_scope_bindings(tree.body):
        if name in first and not (kind == "loop" and first[name][1] == "loop"):
            clashes.append(f"{name} ({first[name][1]} line {first[name][0]}, {kind} line {line})")
        first.setdefault(name, (line, kind))
    assert not clashes, f"module names bound twice in claims/registry.py: {clashes}"
