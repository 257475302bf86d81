"""Check that every number README.md and docs/ state still follows from its source.

    python claims/check.py                # check (what `make claims` and tests/test_claims.py run)
    python claims/check.py --list         # every claim with its value, source and date
    python claims/check.py --refresh NAME # re-run the command behind a results file (slow; see --list)

How it works (docs/claims.md says how to add a claim):

- A document marks the spans that state results: `<!-- claims: NAME -->` ... `<!-- /claims -->`
  (invisible when rendered). Region `FILE#NAME`.
- claims/registry.py registers, per region, every number the span states: where its value comes
  from (a cheap computation re-run here, a key of a committed results file whose date is printed,
  or a parameter of the code) and how the document writes it.
- Every number token in a span (outside `code`, which holds commands) must be matched by one of
  the region's claims, and every claim must be found in its span: an unregistered number, a stale
  one (its source now gives another value) and a claim the document no longer states all fail.
- Outside the spans, a covered file may not state a measured-looking number (a decimal with a
  unit, a percentage, a ratio "5.3x", scientific notation) unless the registry lists it as a
  definitional literal of that file. Every *.md in README.md and docs/ must be declared covered,
  generated (checked by its generator) or pending (with the owner and the reason); pending files
  are reported, with their measured-looking numbers counted, not failed.

Exit status 0 when every check passes, 1 otherwise. Stdlib only here; the registry imports
tickformer for the cheap re-runs. Not part of the package (like benchmarks/).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

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


def numbers(text: str) -> list[str]:
    return [normalize(m.group(0)) for m in NUMBER.finditer(strip(text))]


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


@dataclass
class Result:
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, msg: str) -> None:
        self.failures.append(msg)


def regions_of(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in REGION.finditer(uncode(text)):
        out[m.group(1)] = out.get(m.group(1), "") + "\n" + m.group(2)
    return out


def outside_regions(text: str) -> str:
    return _blank(REGION, uncode(text))


def _matches(token: str, text: str, value: object, tol: float | None, rtol: float | None = None) -> bool:
    if token == normalize(text):
        return True
    if (tol is None and rtol is None) or not isinstance(value, (int, float)):
        return False
    try:
        gap = abs(float(token) - float(value))
    except ValueError:
        return False
    # rtol is relative to the larger of the two, so it is symmetric: rtol=0.5 accepts a factor of 2
    # either way (a stated 2.4e-6 against a re-run 1.6e-6, or the reverse)
    scale = max(abs(float(token)), abs(float(value)))
    return (tol is not None and gap <= tol) or (rtol is not None and gap <= rtol * scale)


def check_region(name: str, body: str, claims: list, values: dict, result: Result) -> None:
    tokens = numbers(body)
    left = list(tokens)
    for c in claims:
        value, text = values[c.key]
        hit = next(
            (i for i, t in enumerate(left) if _matches(t, text, value, c.tol, getattr(c, "rtol", None))), None
        )
        if hit is None:
            result.fail(
                f"{name}: claim {c.name!r} = {text} ({c.source}) is not stated in the span "
                f"(stale number, or the document no longer says it); numbers there: {sorted(set(left))}"
            )
        else:
            left.pop(hit)
    for t, n in Counter(left).items():
        result.fail(
            f"{name}: number {t} is stated {n}x but registered for no claim of this span "
            f"(register it in claims/registry.py, or it is stale)"
        )


def check(registry, *, verbose: bool = False) -> Result:
    """Run every check; returns the failures (empty: all claims hold)."""
    result = Result()
    t0 = time.perf_counter()
    values = registry.evaluate(result)
    docs = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    by_region: dict[str, list] = {}
    for c in registry.CLAIMS:
        by_region.setdefault(c.region, []).append(c)
    seen_regions = set()
    for path in docs:
        rel = str(path.relative_to(ROOT))
        status = registry.FILES.get(rel)
        text = path.read_text()
        if status is None:
            result.fail(f"{rel}: not declared in claims/registry.py FILES (covered, generated or pending)")
            continue
        kind = status[0]
        if kind == "pending":
            found = measured_looking(strip(text))
            result.notes.append(
                f"{rel}: PENDING ({status[1]}): {len(found)} measured-looking numbers unchecked"
            )
            continue
        if kind == "generated":
            result.notes.append(f"{rel}: generated: {status[1]}")
            continue
        for name, body in regions_of(text).items():
            key = f"{rel}#{name}"
            seen_regions.add(key)
            if key not in by_region:
                result.fail(f"{key}: a claims span with no registered claims")
                continue
            check_region(key, body, by_region[key], values, result)
        allowed = set(registry.LITERALS.get(rel, {}))
        for offset, token in measured_looking(strip(outside_regions(text))):
            if token in allowed:
                continue
            line = text.count("\n", 0, offset) + 1
            snippet = text[offset : offset + 20].split("\n")[0]
            result.fail(
                f"{rel}:{line}: measured-looking number {token} ({snippet!r}) outside a claims span "
                f"(put it in a span and register it, or list it in LITERALS[{rel!r}] if it is definitional)"
            )
    for key in by_region:
        if key not in seen_regions and registry.FILES.get(key.split("#")[0], ("",))[0] == "covered":
            result.fail(f"{key}: registered claims but no such span in the document")
    for generated in registry.GENERATED:
        generated(result)
    result.notes.append(
        f"{len(registry.CLAIMS)} claims in {len(by_region)} spans checked in {time.perf_counter() - t0:.1f} s"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    # The threading `make test` runs with (set before numpy loads): the last bits of a few
    # floating-point error figures follow it.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    import registry

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="print every claim, its value, source and date")
    ap.add_argument("--refresh", metavar="NAME", help="re-run the command behind a results file")
    args = ap.parse_args(argv)
    if args.refresh:
        return registry.refresh(args.refresh)
    result = check(registry)
    if args.list:
        for line in registry.listing():
            print(line)
    for note in result.notes:
        print(f"note: {note}")
    for failure in result.failures:
        print(f"FAIL: {failure}")
    print(f"claims: {'ok' if not result.failures else f'{len(result.failures)} failure(s)'}")
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
