"""Check that every number README.md and docs/ state still follows from its source.

    python claims/check.py                    # check (what `make claims` and tests/test_claims.py run)
    python claims/check.py --list             # every claim with its value, source and date
    python claims/check.py --refresh NAME     # regenerate a results file (slow), then re-render the docs
    python claims/check.py --render FILE.json # re-render after regenerating FILE.json by hand

How it works (docs/claims.md says how to add a claim):

- A document marks the spans that state results: `<!-- claims: NAME -->` ... `<!-- /claims -->`
  (invisible when rendered). Span `FILE#NAME`.
- claims/claims.toml declares, per span, every number it states, in order: a key of a committed
  results file, an expression over the results files and the functions of claims/computed.py
  (values computed from the code are re-run here), or a literal with its reason; and how the
  document writes it (`fmt`).
- Every number token in a span (outside `code`, which holds commands) must be matched by one of
  the span's claims, and every claim must be found in its span: an unregistered number, a stale
  one (its source now gives another value) and a claim the document no longer states all fail.
- Outside the spans, a covered file may not state a measured-looking number (a decimal with a
  unit, a percentage, a ratio "5.3x", scientific notation) unless it is a declared literal of that
  file. Every *.md in README.md and docs/ must be declared covered, generated (re-rendered and
  compared where it has a renderer) or pending (with the reason; reported, not failed).
- --refresh and --render evaluate every claim before and after the results file changes and
  rewrite each number whose text changed where the check finds it (the same matching), then
  check again and name the spans whose prose a human should read again.

Exit status 0 when every check passes, 1 otherwise. Not part of the package (like benchmarks/).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "claims.toml"
sys.path.insert(0, str(Path(__file__).resolve().parent))
import computed  # noqa: E402  (claims/, put on the path above)

REGION = re.compile(r"<!--\s*claims:\s*([\w.-]+)\s*-->(.*?)<!--\s*/claims\s*-->", re.S)
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK = re.compile(r"\]\([^)]*\)")
# A number: not glued to an identifier before it (p50, fp16, B16, v1, trt-10) nor after it,
# except an attached unit (48x, 0.8%); thousands separators and a unicode minus allowed. A date
# is one token.
NUMBER = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?"
    r"|(?<![\w.])\d+\.\d+\.\d+(?:\.\d+)*(?![\w.])"  # a version is one token
    r"|(?<![\w.^=#:+\-])[−+-]?\d[\d,]*(?:\.\d+)?(?:[eE][−+-]?\d+)?(?=x\b|%|[^\w.]|\.(?!\d)|$)"
)
_UNIT_AFTER = re.compile(r"\s?(µs|us|ms|ns|s|min|%|x|KB|MB|GB|rad|Hz)(?!\w)")


# --- reading the documents ----------------------------------------------------------------------------
def _blank(pattern: re.Pattern, text: str) -> str:
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def uncode(text: str) -> str:
    """Text with code spans and blocks blanked (offsets and lines kept): commands, not claims."""
    return _blank(_CODE, text)


def strip(text: str) -> str:
    """Text without code, HTML comments and link targets: what a reader takes as stated numbers."""
    for pattern in (_CODE, _COMMENT, _LINK):
        text = _blank(pattern, text)
    return text


def normalize(token: str) -> str:
    return token.replace(",", "").replace("−", "-").rstrip(".").lstrip("+")


def spans_of(text: str) -> dict[str, list[tuple[int, int, str]]]:
    """Span name -> its number tokens (start, end, normalized token); a name used twice in a file
    is one span."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    for m in REGION.finditer(uncode(text)):
        toks = out.setdefault(m.group(1), [])
        for t in NUMBER.finditer(strip(m.group(2))):
            toks.append((m.start(2) + t.start(), m.start(2) + t.end(), normalize(t.group(0))))
    return out


def measured_looking(text: str) -> list[tuple[int, str]]:
    """(offset, token) of the numbers in `text` that read as measurements: a unit, percentage or
    ratio after them, scientific notation, or two or more decimals. Bare counts and versions
    like 10.3 are not flagged (a heuristic; the spans are the real mechanism)."""
    out = []
    for m in NUMBER.finditer(text):
        tok = m.group(0)
        if re.match(r"\d{4}-\d{2}-\d{2}", tok) or tok.count(".") > 1:  # dates, versions
            continue
        mantissa = re.split(r"[eE]", tok)[0]
        decimals = mantissa.split(".")[1] if "." in mantissa else ""
        if _UNIT_AFTER.match(text, m.end()) or re.search(r"[eE][−+-]?\d", tok) or len(decimals) >= 2:
            out.append((m.start(), normalize(tok)))
    return out


# --- the data file ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    span: str  # FILE#NAME
    kind: str  # key | expr | literal | cells
    what: str  # the dotted key, the expression, the literal's text
    file: str | None = None  # the results file of a key
    fmt: str = "{}"  # str.format, or an expression naming a format function: "sci(1)"
    scale: float | None = None
    tol: float | None = None  # absolute tolerance of a re-run
    rtol: float | None = None  # relative tolerance (of the larger of the two)
    why: str = ""


@dataclass(frozen=True)
class ResultsFile:
    name: str
    path: str
    date: str  # the dotted key of its date
    command: str | list[str] = ""  # what --refresh runs, or
    refresh: str = ""  # a function of claims/refresh.py

    @property
    def var(self) -> str:
        return self.name.replace("-", "_")


@dataclass
class Registry:
    claims: list[Claim]
    results: dict[str, ResultsFile]
    covered: list[str]
    generated: dict[str, dict]
    pending: dict[str, str]
    literals: dict[str, dict[str, str]]


_LEAVES = ("key", "expr", "literal", "cells")
_FIELDS = {*_LEAVES, "at", "file", "fmt", "scale", "tol", "rtol", "why", "each", "claims"}


def _sub(value: Any, bindings: dict) -> Any:
    if isinstance(value, str):
        for k, v in bindings.items():
            value = value.replace("{" + k + "}", str(v))
    return value


def _iterations(each: Any, bindings: dict):
    """`each = {a = [...], b = [...]}`: every combination, a outermost; `each = [{a, b}, ...]`: rows."""
    if each is None:
        yield bindings
    elif isinstance(each, list):
        for row in each:
            yield {**bindings, **row}
    else:
        for combo in itertools.product(*each.values()):
            yield {**bindings, **dict(zip(each, combo))}


def _expand(entry: dict, bindings: dict, at: str, file: str | None) -> list[Claim]:
    unknown = set(entry) - _FIELDS
    if unknown:
        raise ValueError(f"{at}: unknown field(s) {sorted(unknown)} in {entry}")
    out: list[Claim] = []
    for b in _iterations(entry.get("each"), bindings):
        file_b = _sub(entry.get("file", file), b)
        if "claims" in entry:
            for sub in entry["claims"]:
                out += _expand(sub, b, _sub(at, b), file_b)
            continue
        kinds = [k for k in _LEAVES if k in entry]
        if len(kinds) != 1 or (kinds == ["literal"] and not entry.get("why")):
            raise ValueError(f"{at}: a claim has one of {_LEAVES} (a literal with its why): {entry}")
        kind = kinds[0]
        if kind == "key" and not file_b:
            raise ValueError(f"{at}: key {entry['key']!r} without a results file (file = ...)")
        rest = {k: _sub(entry[k], b) for k in ("fmt", "scale", "tol", "rtol", "why") if k in entry}
        out.append(
            Claim(_sub(at, b), kind, _sub(str(entry[kind]), b), file_b if kind == "key" else None, **rest)
        )
    return out


def load(path: Path = DATA) -> Registry:
    data = tomllib.loads(path.read_text())
    claims: list[Claim] = []
    for entry in data.get("span", []):
        top = {k: v for k, v in entry.items() if k != "at"}
        for at in entry["at"] if isinstance(entry["at"], list) else [entry["at"]]:
            claims += _expand(top, {}, at, None)
    results = {name: ResultsFile(name, **r) for name, r in data["results"].items()}
    for c in claims:
        if c.file is not None and c.file not in results:
            raise ValueError(f"{c.span}: {c.file!r} is not a results file of {path.name} [results]")
    files = data["files"]
    return Registry(
        claims,
        results,
        files["covered"],
        files.get("generated", {}),
        files.get("pending", {}),
        data.get("literals", {}),
    )


# --- evaluation ----------------------------------------------------------------------------------------------
@dataclass
class Value:
    claim: Claim
    value: Any
    text: str  # as the document writes it
    source: str  # where it comes from, with the results file's date
    error: str = ""


class Sources:
    """The results files, each read once; `old` maps a path to the text to read instead (git HEAD's)."""

    def __init__(self, reg: Registry, old: dict[str, str] | None = None) -> None:
        self.reg, self.old, self.docs = reg, old or {}, {}
        self.by_var = {r.var: r for r in reg.results.values()}
        self.base = {name: getattr(computed, name) for name in computed.__all__}

    def doc(self, name: str) -> Any:
        if name not in self.docs:
            path = self.reg.results[name].path
            text = self.old[path] if path in self.old else (ROOT / path).read_text()
            self.docs[name] = computed.Doc(json.loads(text))
        return self.docs[name]

    def date(self, name: str) -> str:
        try:
            return str(computed.dig(self.doc(name), self.reg.results[name].date))
        except (KeyError, IndexError, TypeError, OSError, ValueError):
            return "no date"

    def files_of(self, expr: str) -> list[str]:
        names = {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}
        return [self.by_var[n].name for n in sorted(names) if n in self.by_var]

    def eval(self, expr: str) -> Any:
        ns = {**self.base, **{self.reg.results[f].var: self.doc(f) for f in self.files_of(expr)}}
        return eval(expr, ns)

    def where(self, expr: str) -> str:
        """The results files an expression reads, with their dates; none: a re-run from the code."""
        dated = [f"{self.reg.results[f].path} ({self.date(f)})" for f in self.files_of(expr)]
        return "; ".join(dated) or "re-run"


def _fmt(c: Claim, v: Any, src: Sources) -> str:
    return c.fmt.format(v) if "{" in c.fmt else src.eval(c.fmt)(v)


def _evaluate_claim(c: Claim, src: Sources) -> list[Value]:
    if c.kind == "literal":
        return [Value(c, c.what, c.what, f"definitional: {c.why}")]
    if c.kind == "cells":
        return [
            Value(c, v, text, f"{name}: {c.what} [{src.where(c.what)}]") for name, v, text in src.eval(c.what)
        ]
    if c.kind == "key":
        v = computed.dig(src.doc(c.file), c.what)
        if c.scale is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
            v = v * c.scale
        where = f"{src.reg.results[c.file].path}:{c.what} ({src.date(c.file)})"
    else:
        v, where = src.eval(c.what), f"{c.what} [{src.where(c.what)}]"
    return [Value(c, v, _fmt(c, v, src), where)]


def evaluate(reg: Registry, src: Sources | None = None) -> list[Value]:
    """Every claim's value and text. BLAS pinned to one thread, as `make test` and the runtime run:
    the summation order, and so the last bits of the error figures, depend on it."""
    from threadpoolctl import threadpool_limits

    src = src or Sources(reg)
    out: list[Value] = []
    with threadpool_limits(1):
        for c in reg.claims:
            try:
                out += _evaluate_claim(c, src)
            except Exception as exc:  # a missing key, file or module is a failed claim, named
                what = f"{c.file}:{c.what}" if c.kind == "key" else c.what
                out.append(Value(c, None, f"<error: {type(exc).__name__}: {exc}>", what, f"{what}: {exc!r}"))
    return out


# --- the check ------------------------------------------------------------------------------------------------
@dataclass
class Result:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, msg: str) -> None:
        self.failures.append(msg)


def _matches(token: str, v: Value) -> bool:
    if token == normalize(v.text):
        return True
    tol, rtol = v.claim.tol, v.claim.rtol
    if (tol is None and rtol is None) or not isinstance(v.value, (int, float)):
        return False
    try:
        gap = abs(float(token) - float(v.value))
    except ValueError:
        return False
    # rtol is relative to the larger of the two, so it is symmetric: rtol=0.5 accepts a factor of 2
    # either way (a stated 2.4e-6 against a re-run 1.6e-6, or the reverse)
    scale = max(abs(float(token)), abs(float(v.value)))
    return (tol is not None and gap <= tol) or (rtol is not None and gap <= rtol * scale)


def assign(tokens: list[tuple[int, int, str]], values: list[Value]) -> tuple[dict[int, int], list[int]]:
    """Each claim (in order) takes the first unclaimed token it matches: claim index -> token index,
    and the tokens no claim took."""
    left, hits = list(range(len(tokens))), {}
    for i, v in enumerate(values):
        j = next((j for j in left if _matches(tokens[j][2], v)), None)
        if j is not None:
            hits[i] = j
            left.remove(j)
    return hits, left


def _docs() -> list[Path]:
    return sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def by_span(values: list[Value]) -> dict[str, list[Value]]:
    out: dict[str, list[Value]] = {}
    for v in values:
        out.setdefault(v.claim.span, []).append(v)
    return out


def check(reg: Registry, values: list[Value] | None = None) -> Result:
    """Run every check; returns the failures (empty: all claims hold)."""
    result, t0 = Result(), time.perf_counter()
    src = Sources(reg)
    values = evaluate(reg, src) if values is None else values
    for v in values:
        if v.error:
            result.fail(f"{v.claim.span}: a claim's source failed: {v.error}")
    spans, seen = by_span(values), set()
    for path in _docs():
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        if rel in reg.pending:
            found = measured_looking(strip(text))
            result.notes.append(f"{rel}: PENDING ({reg.pending[rel]}): {len(found)} measured-looking numbers")
            continue
        if rel in reg.generated:
            continue
        if rel not in reg.covered:
            result.fail(f"{rel}: not declared in claims/claims.toml [files] (covered, generated or pending)")
            continue
        for name, tokens in spans_of(text).items():
            key = f"{rel}#{name}"
            seen.add(key)
            if key not in spans:
                result.fail(f"{key}: a claims span with no registered claims")
                continue
            hits, left = assign(tokens, spans[key])
            for i, v in enumerate(spans[key]):
                if i not in hits:
                    result.fail(
                        f"{key}: {v.text} ({v.source}) is not stated in the span "
                        f"(stale number, or the document no longer says it); numbers there: "
                        f"{sorted({tokens[j][2] for j in left})}"
                    )
            for t, n in Counter(tokens[j][2] for j in left).items():
                result.fail(
                    f"{key}: number {t} is stated {n}x but registered for no claim of this span "
                    f"(declare it in claims/claims.toml, or it is stale)"
                )
        allowed = set(reg.literals.get(rel, {}))
        outside = _blank(REGION, uncode(text))
        for offset, token in measured_looking(strip(outside)):
            if token not in allowed:
                line = text.count("\n", 0, offset) + 1
                snippet = text[offset : offset + 20].split("\n")[0]
                result.fail(
                    f"{rel}:{line}: measured-looking number {token} ({snippet!r}) outside a claims span "
                    f"(put it in a span and declare it, or in [literals.{rel!r}] if it is definitional)"
                )
    for key in spans:
        if key not in seen and key.split("#")[0] in reg.covered:
            result.fail(f"{key}: registered claims but no such span in the document")
    for rel, g in reg.generated.items():
        result.notes.append(f"{rel}: generated: {g['note']}")
        if "render" in g and not _same(rel, src.eval(g["render"]), g.get("ignore")):
            result.fail(f"{rel} differs from {g['render']} (regenerate: {g['regenerate']})")
    result.notes.append(
        f"{len(values)} claims in {len(spans)} spans checked in {time.perf_counter() - t0:.1f} s"
    )
    return result


def _same(rel: str, want: str, ignore: str | None) -> bool:
    have = (ROOT / rel).read_text()
    if ignore is None:
        return want == have
    kept = [[ln for ln in md.splitlines() if ln.strip() and not re.match(ignore, ln)] for md in (want, have)]
    return kept[0] == kept[1]


# --- refresh and re-render -------------------------------------------------------------------------------------
def rerender(before: list[Value], after: list[Value]) -> list[str]:
    """Rewrite in the documents each claim whose text changed, at the token the check matches with
    its old value; one line per span changed (its prose may need reading again)."""
    old, new = by_span(before), by_span(after)
    edits: dict[str, list[tuple[int, int, str]]] = {}
    texts: dict[str, str] = {}
    lines = []
    for span in new:
        if [v.text for v in new[span]] == [v.text for v in old.get(span, [])]:
            continue
        rel, name = span.split("#", 1)
        text = texts.setdefault(rel, (ROOT / rel).read_text())
        tokens = spans_of(text).get(name, [])
        if len(old.get(span, [])) != len(new[span]) or not tokens:
            lines.append(f"{span}: its claims changed in number (or no span): edit by hand")
            continue
        hits, _ = assign(tokens, old[span])
        said = []
        for i, (o, n) in enumerate(zip(old[span], new[span])):
            if i not in hits:
                if o.text != n.text:
                    said.append(f"{o.text} -> {n.text} (not found: edit by hand; {n.source})")
                continue
            start, end, token = tokens[hits[i]]
            if _matches(token, n):
                continue
            raw, write = text[start:end], n.text
            if raw.startswith("−") and write.startswith("-"):
                write = "−" + write[1:]
            edits.setdefault(rel, []).append((start, end, write))
            said.append(f"{raw} -> {write}")
        if said:
            lines.append(
                f"{rel}:{text.count(chr(10), 0, tokens[0][0]) + 1} (span {name}): " + ", ".join(said)
            )
    for rel, changes in edits.items():
        text = texts[rel]
        for start, end, write in sorted(changes, reverse=True):
            text = text[:start] + write + text[end:]
        (ROOT / rel).write_text(text)
    return lines


def _finish(reg: Registry, before: list[Value], changed: list[str]) -> int:
    """After results files changed: rewrite the generated files that render from them, re-render
    the documents' numbers, check again."""
    src = Sources(reg)
    for rel, g in reg.generated.items():
        if "render" in g and set(src.files_of(g["render"])) & set(changed):
            (ROOT / rel).write_text(src.eval(g["render"]))
            print(f"rewrote {rel} ({g['render']})")
    after = evaluate(reg, src)
    lines = rerender(before, after)
    print(f"changed results: {', '.join(changed) or 'none'}; {len(lines)} span(s) re-rendered")
    if lines:
        print("read the prose around these numbers again (does it still say what they say?):")
        for line in lines:
            print(f"  {line}")
    return _report(check(reg))


def refresh(reg: Registry, name: str) -> int:
    import refresh as refreshers

    found = [r for r in reg.results.values() if name in (r.name, r.refresh)]
    if not found:
        print(f"unknown results file {name!r}; choose one of {sorted(reg.results)}")
        return 2
    r = found[0]
    before = evaluate(reg)
    stamps = {n: _stamp(f.path) for n, f in reg.results.items()}
    if r.refresh:
        getattr(refreshers, r.refresh.replace("-", "_"))()
    for command in [r.command] if isinstance(r.command, str) and r.command else r.command or []:
        refreshers.run(command)
    return _finish(reg, before, [n for n, f in reg.results.items() if _stamp(f.path) != stamps[n]])


def render(reg: Registry, paths: list[str]) -> int:
    """Re-render the documents after `paths` (results files) were regenerated by hand: the old
    values are git HEAD's."""
    known = {r.path: n for n, r in reg.results.items()}
    rels = [str(Path(p).resolve().relative_to(ROOT)) for p in paths]
    unknown = [p for p in rels if p not in known]
    if unknown:
        print(f"not a results file of claims/claims.toml: {unknown}")
        return 2
    old = {
        p: subprocess.run(
            ["git", "show", f"HEAD:{p}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        for p in rels
    }
    return _finish(reg, evaluate(reg, Sources(reg, old)), [known[p] for p in rels])


def _stamp(path: str) -> bytes | None:
    p = ROOT / path
    return p.read_bytes() if p.exists() else None


# --- the command ------------------------------------------------------------------------------------------------
def _report(result: Result) -> int:
    for note in result.notes:
        print(f"note: {note}")
    for failure in result.failures:
        print(f"FAIL: {failure}")
    print(f"claims: {'ok' if not result.failures else f'{len(result.failures)} failure(s)'}")
    return 1 if result.failures else 0


def main(argv: list[str] | None = None) -> int:
    # The threading `make test` runs with (set before numpy loads): the last bits of a few
    # floating-point error figures follow it.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="print every claim, its value, source and date")
    ap.add_argument("--refresh", metavar="NAME", help="regenerate a results file, then re-render the docs")
    ap.add_argument(
        "--render", metavar="FILE", nargs="+", help="re-render after FILE was regenerated by hand"
    )
    args = ap.parse_args(argv)
    reg = load()
    if args.refresh:
        return refresh(reg, args.refresh)
    if args.render:
        return render(reg, args.render)
    values = evaluate(reg)
    if args.list:
        for v in values:
            print(f"{v.claim.span:32s} {v.text:>14s}  {v.source}")
    return _report(check(reg, values))


if __name__ == "__main__":
    sys.exit(main())
