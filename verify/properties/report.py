"""The `tickformer verify` report a user can hand on: DIR/verify.json (schema in docs/verify.md,
REPORT_SCHEMA) and a short Markdown summary DIR/verify.md beside it, both written atomically
(tickformer.durable.atomic_write). Pure builders plus one writer. Not real-time code.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import tickformer
from tickformer.durable import atomic_write

FORMAT, VERSION = "tickformer-verify-report", 1
STATUSES = ("pass", "fail", "skip", "error")  # results.STATUSES (this module imports nothing of verify)
MODEL_KINDS = ("onnx", "decoder", "encoder-decoder", "ssm", "windowed")  # plans.PLANS (a test checks both)

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "tickformer verify report",
    "type": "object",
    "required": ["format", "version", "ok", "verdict", "utc", "model", "settings", "summary", "properties"],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"const": VERSION},
        "ok": {"type": "boolean", "description": "no property failed and no check had an internal error"},
        "verdict": {
            "enum": ["OK", "VIOLATED", "INCOMPLETE"],
            "description": "VIOLATED: a property failed; INCOMPLETE: none failed but a check had an internal "
            "error (a bug in verify) or the run stopped at its wall-clock or memory budget (`stopped`), so the "
            "model is not verified; OK otherwise",
        },
        "stopped": {
            "type": ["string", "null"],
            "description": "why the run stopped before every property ran (a budget exceeded), else null",
        },
        "utc": {"type": "string", "description": "when the run ended, ISO 8601"},
        "wall_s": {"type": "number"},
        "model": {
            "type": "object",
            "required": ["kind", "path", "backend"],
            "properties": {
                "kind": {"enum": list(MODEL_KINDS)},
                "path": {"type": "string"},
                "backend": {"type": "string"},
            },
            "description": "kind, path, backend; an artifact's inputs and dtype; a bare model's step graph and "
            "signature (inputs with roles, axes, domains; outputs; sizes tried; KV-cache pairing; inference notes)",
        },
        "settings": {
            "type": "object",
            "properties": {
                "examples": {"type": "integer"},
                "seed": {"type": ["integer", "null"]},
                "backend": {"type": "string"},
                "max_t": {"type": "integer"},
                "domain": {"type": ["array", "null"]},
                "skip": {"type": "array", "items": {"type": "string"}},
            },
        },
        "versions": {"type": "object", "additionalProperties": {"type": "string"}},
        "summary": {
            "type": "object",
            "properties": {k: {"type": "integer"} for k in STATUSES},
        },
        "properties": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "status", "examples", "message", "counterexample", "details"],
                "properties": {
                    "name": {"type": "string"},
                    "status": {"enum": list(STATUSES)},
                    "examples": {
                        "type": "integer",
                        "description": "examples run (shrinking included) or trials",
                    },
                    "message": {"type": "string"},
                    "counterexample": {
                        "type": ["string", "null"],
                        "description": "the .npz holding the shrunk failing example (and its outputs)",
                    },
                    "details": {
                        "type": "object",
                        "description": "per property: tolerance (formula, n, R, E, factor, reason), margin "
                        "(worst gap / tolerance), worst (output_bound), rejected (examples with engine "
                        "errors), failures and runs (dynamic_axes), engine_error (its kind), traceback (an "
                        "internal error's last lines)",
                    },
                },
            },
        },
        "domain": {
            "type": ["array", "null"],
            "description": "same as settings.domain (kept for readers of v0)",
        },
        "examples": {"type": "integer", "description": "same as settings.examples"},
        "seed": {"type": ["integer", "null"], "description": "same as settings.seed"},
    },
}


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "tickformer": tickformer.__version__}
    for mod in ("numpy", "onnx", "onnxruntime", "hypothesis"):
        try:
            out[mod] = str(__import__(mod).__version__)
        except ImportError:
            out[mod] = "not installed"
    return out


def build_report(
    model: dict[str, Any],
    results: Sequence[Any],
    settings: dict[str, Any],
    wall_s: float,
    stopped: str | None = None,
) -> dict[str, Any]:
    """The report document (REPORT_SCHEMA). Pure but for the clock and the version lookup.
    stopped: why the run stopped early (a budget), else None."""
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    ok = counts["fail"] == 0 and counts["error"] == 0 and stopped is None
    return {
        "format": FORMAT,
        "version": VERSION,
        "ok": ok,
        "verdict": "VIOLATED" if counts["fail"] else "INCOMPLETE" if counts["error"] or stopped else "OK",
        "stopped": stopped,
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 2),
        "model": model,
        "settings": settings,
        "versions": _versions(),
        "summary": counts,
        "properties": [r.to_dict() for r in results],
        "domain": settings.get("domain"),
        "examples": settings.get("examples"),
        "seed": settings.get("seed"),
    }


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(report: dict[str, Any]) -> str:
    """A short summary for a person: verdict, model, one row per property, counterexamples."""
    m = report["model"]
    lines = [
        f"# tickformer verify: {report['verdict']}",
        "",
        f"- model: `{m.get('path')}` ({m.get('kind')})"
        + (f", step graph `{m['step']}`" if m.get("step") else ""),
        f"- backend {report['settings'].get('backend')}, {report['settings'].get('examples')} examples per property, "
        f"seed {report['settings'].get('seed')}; {report['utc']}, {report['wall_s']} s",
        "- {pass} passed, {fail} failed, {skip} skipped".format(**report["summary"])
        + (f", {report['summary']['error']} internal errors" if report["summary"].get("error") else ""),
        *([f"- stopped: {report['stopped']}"] if report.get("stopped") else []),
        "",
    ]
    sig = m.get("signature")
    if sig:
        lines += ["| input | dtype | dims | role | domain / vocabulary |", "|---|---|---|---|---|"]
        for i in sig["inputs"]:
            dom = i.get("domain", i.get("vocab", ""))
            lines.append(
                f"| {_cell(i['name'])} | {i['dtype']} | {_cell(i['dims'])} | {i['role']} | {_cell(dom)} |"
            )
        lines.append("")
    lines += ["| property | result | examples | detail |", "|---|---|---|---|"]
    for p in report["properties"]:
        status = {"pass": "pass", "fail": "**FAIL**", "skip": "skip", "error": "**ERROR** (in verify)"}[
            p["status"]
        ]
        lines.append(f"| {p['name']} | {status} | {p['examples']} | {_cell(p['message'])} |")
    failed = [p for p in report["properties"] if p["counterexample"]]
    if failed:
        lines += ["", "Counterexamples (shrunk, `numpy.load`):", ""]
        lines += [f"- {p['name']}: `{p['counterexample']}`" for p in failed]
    return "\n".join(lines) + "\n"


def write_report(out_dir: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """DIR/verify.json and DIR/verify.md, each written atomically. Returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "verify.json", out_dir / "verify.md"
    text = json.dumps(_strict(report), indent=2, default=_plain, allow_nan=False)
    atomic_write(json_path, (text + "\n").encode())
    atomic_write(md_path, markdown(report).encode())
    return json_path, md_path


def _strict(value: Any) -> Any:
    """value with every non-finite float written as a string ("inf", "nan"): strict JSON."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """JSON for numpy scalars and arrays in details (sizes, indices); anything else (a Path, ...)
    as its str."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
