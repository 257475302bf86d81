"""The cell formats of benchmarks/README.md's tables, shared by report.py and report_tick.py."""

from __future__ import annotations

import math


def us(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value >= 1000:
        return f"{value / 1000:.2f} ms"
    return f"{value:.1f} us" if value >= 10 else f"{value:.2f} us"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(ok: bool | None) -> str:
    return "NOT MEASURED" if ok is None else "**PASS**" if ok else "**FAIL**"
