"""Certification report: certificate.json, latency_hist.png, exceedance.png, terminal summary.

Plots use matplotlib's Agg backend (no display). The empirical exceedance curve is
P(X > x_(i)) = (n - i) / n over the sorted samples x_(1) <= ... <= x_(n), drawn on a log axis
with the fitted tail (certify/evt.py) extended to the smallest reported exceedance, the pWCET
points, and the budget line. When the certificate's pWCET is not estimated (its tail fit failed
admissibility, or there is no fit), neither the plots nor the summary show a fitted tail or an
extrapolated latency: they say "pWCET not estimated (reason)", as the certificate does.

Writes are all or nothing as far as a file system allows (`write_report`): every file is first
written and fsynced to a hidden temp sibling; only when all of them are on disk is the previous
certificate.json removed, the plots and samples renamed into place and certificate.json renamed
last. A failure while writing (a full disk) leaves the previous report, certificate included,
untouched; a directory with a certificate.json holds the complete report it describes.
Not real-time code.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import tempfile
import textwrap
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from scipy import stats

from tickformer import sealed, signing
from tickformer.durable import atomic_write, fsync_dir, write_error, write_synced
from tickformer.errors import TickformerError

from . import report_html
from .decision import pwcet_result
from .evt import _gev_c


def _savefig(fig: Any, path: Path | BinaryIO) -> None:
    """PNG of `fig` into a binary file object, or atomically to a path."""
    if not isinstance(path, (str, os.PathLike)):
        fig.savefig(path, format="png", dpi=110)
        return
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write(Path(path), buf.getvalue())


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_histogram(report: dict[str, Any], path: Path | BinaryIO) -> None:
    """Latency histogram (log counts) with the overflow bucket drawn as its own bar, and the budget."""
    plt = _pyplot()
    h = report["histogram"]
    edges = np.asarray(h["edges_ns"]) / 1e3  # [bins + 1] us
    counts = np.asarray(h["counts"])  # [bins]
    width = edges[1] - edges[0]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ax.bar(edges[:-1], counts, width=width, align="edge", color="#4C72B0", label="steps")
    if h["overflow"]:
        ax.bar(
            [edges[-1] + width],
            [h["overflow"]],
            width=width * 2,
            align="edge",
            color="#C44E52",
            label=f"overflow > {edges[-1]:.1f} us ({h['overflow']})",
        )
    budget_us = report["budget_ns"] / 1e3
    st = report["stats"]
    ax.axvline(budget_us, color="k", ls="--", lw=1.5, label=f"budget {budget_us:.1f} us")  # always drawn
    right = max(edges[-1] + 3 * width, budget_us)
    if budget_us > 5 * st["max"] / 1e3:  # far beyond the data: a log axis keeps both readable
        ax.set_xscale("log")
        ax.set_xlim(max(edges[0], 1e-3) * 0.9, right * 1.15)
    else:
        ax.set_xlim(edges[0], right * 1.05)
    for name, ls in (("p50", ":"), ("p99.9", "-.")):
        ax.axvline(st[name] / 1e3, color="#55A868", ls=ls, label=f"{name} {st[name] / 1e3:.1f} us")
    ax.set_yscale("log")
    ax.set_xlabel("step latency (us)")
    ax.set_ylabel("count")
    _title(
        ax,
        f"{st['n']} steps, max {st['max'] / 1e3:.1f} us, verdict {report['verdict']}; {pwcet_text(report)}",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    _savefig(fig, path)
    plt.close(fig)


def _title(ax: Any, text: str, width: int = 95) -> None:
    """A plot title wrapped to lines that fit the figure (never cut off at either end)."""
    ax.set_title("\n".join(textwrap.wrap(text, width)), fontsize=9)


def fitted_exceedance(fit: dict[str, Any], x_ns: np.ndarray) -> np.ndarray:
    """Per-step P(X > x) implied by the fitted tail parameters (certificate's evt.fit)."""
    if fit["method"] == "pot":
        u, zeta = fit["threshold_ns"], fit["zeta"]
        return zeta * stats.genpareto.sf(np.maximum(x_ns - u, 0.0), fit["xi"], scale=fit["sigma"])  # [k]
    p_block = (
        stats.genextreme.sf(x_ns, _gev_c(fit["xi"]), loc=fit["mu"], scale=fit["sigma"]) / fit["theta"]
    )  # [k]
    return -np.expm1(np.log1p(-np.clip(p_block, 0.0, 1.0 - 1e-16)) / fit["block_size"])  # [k]


def _plot_points(ax: Any, points: dict[float, float], marker: str, **style: Any) -> None:
    """{exceedance: latency ns} as markers on the exceedance plot (x in us, y the exceedance)."""
    ax.plot(np.array(list(points.values())) / 1e3, list(points.keys()), marker, **style)


def plot_exceedance(report: dict[str, Any], durations_ns: np.ndarray, path: Path | BinaryIO) -> None:
    """Empirical exceedance curve, fitted tail, pWCET points and budget line (log y)."""
    plt = _pyplot()
    x = np.sort(np.asarray(durations_ns, dtype=np.float64))  # [n]
    n = x.size
    p_emp = (n - np.arange(1, n + 1)) / n  # [n]
    keep = p_emp > 0
    fig, ax = plt.subplots(figsize=(8, 4.6))
    ax.step(x[keep] / 1e3, p_emp[keep], where="post", color="#4C72B0", label="empirical P(step > x)")
    evt = report.get("evt")
    xmax = x[-1]
    estimated = _pwcet(report)["estimated"]
    if not estimated:  # no fitted tail, no extrapolated point: only the data and the reason
        ax.text(
            0.02,
            0.06,
            "\n".join(textwrap.wrap(pwcet_text(report), 90)),
            transform=ax.transAxes,
            fontsize=8,
            color="#C44E52",
        )
    if evt is not None and estimated:
        fit = evt["fit"]
        pw = {float(k): v for k, v in (evt["pwcet_ns"] or {}).items() if v is not None}
        if pw:
            xmax = max(xmax, max(pw.values()))
        start = fit["threshold_ns"] if fit["method"] == "pot" else float(np.quantile(x, 0.9))
        right = max(x[-1], report["budget_ns"])
        grid = np.geomspace(max(start, 1.0), min(xmax, 10 * right) * 1.05, 400)  # [400]
        ax.plot(
            grid / 1e3,
            fitted_exceedance(fit, grid),
            color="#C44E52",
            label=f"{fit['method'].upper()} fit, xi = {fit['xi']:+.3f} ({fit['tail'].split(' ')[0]})",
        )
        if pw:
            _plot_points(ax, pw, "o", color="#C44E52", ms=4, label="pWCET estimates")
        upper = (evt.get("bootstrap") or {}).get("pwcet_upper_ns") or {}
        up = {float(k): v for k, v in upper.items() if v is not None and math.isfinite(v)}
        if up:
            _plot_points(
                ax, up, "x", color="#8172B2", ms=5, label=f"{evt['bootstrap']['level']:.0%} upper bounds"
            )
            xmax = max(xmax, max(up.values()))
    budget_us = report["budget_ns"] / 1e3
    ax.axvline(budget_us, color="k", ls="--", label=f"budget {budget_us:.1f} us")
    ax.axhline(
        report["exceedance"],
        color="0.5",
        ls=":",
        lw=1,
        label=f"target exceedance {report['exceedance']:.0e}/step",
    )
    ax.set_yscale("log")
    ax.set_ylim(min(1e-10, report["exceedance"] / 10), 1.0)
    right = max(x[-1], report["budget_ns"])
    if xmax > 10 * right:  # estimates far off scale (heavy tail): keep the data readable, say so
        ax.text(
            0.02,
            0.02,
            f"pWCET estimates beyond {10 * right / 1e3:.0f} us are off scale (see certificate.json)",
            transform=ax.transAxes,
            fontsize=8,
            color="#C44E52",
        )
        xmax = 10 * right
    ax.set_xscale("log")
    ax.set_xlim(x[0] / 1e3 * 0.9, max(xmax, right) / 1e3 * 1.1)
    ax.set_xlabel("step latency x (us)")
    ax.set_ylabel("exceedance probability per step")
    _title(ax, f"verdict {report['verdict']}; {pwcet_text(report)}")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    _savefig(fig, path)
    plt.close(fig)


def _pwcet(report: dict[str, Any]) -> dict[str, Any]:
    """The report's pWCET result (campaign.pwcet_result), for reports written before it existed too."""
    if "pwcet" in report:
        return report["pwcet"]
    return pwcet_result(report.get("evt"), report.get("evt_error"), report["exceedance"])


def pwcet_text(report: dict[str, Any]) -> str:
    """'pWCET(1e-09) = 71.9 us (95% upper 74.0 us)' or 'pWCET(1e-09) not estimated (reason)'."""
    r = _pwcet(report)
    key = f"{r['exceedance']:.0e}"
    if not r["estimated"]:
        return f"pWCET({key}) {r['text']}"
    upper = (
        ""
        if r.get("upper_ns") is None
        else f" ({(r.get('level') or 0.95):.0%} upper {_us(r['upper_ns'])} us)"
    )
    return f"pWCET({key}) = {_us(r['value_ns'])} us{upper}"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


REPORT_FILES = {
    "histogram": "latency_hist.png",
    "exceedance": "exceedance.png",
    "samples": "samples_ns.npy",
    "html": "report.html",
}
CERTIFICATE = "certificate.json"
SIGNATURE = "certificate.sig"


def certificate_body(data: dict[str, Any]) -> bytes:
    """What the certificate's integrity covers and its signature signs: the canonical JSON
    (tickformer.sealed.canonical) of the certificate without its `integrity` key. Pure."""
    return sealed.canonical({k: v for k, v in data.items() if k != "integrity"})


def report_bytes(
    report: dict[str, Any], durations_ns: np.ndarray, *, signing_key: Any = None, out_dir: str = "DIR"
) -> dict[str, bytes]:
    """Every file of the report, in memory: {name: bytes}, certificate.json included (sealed:
    `integrity.body_sha256` over `certificate_body`, `samples_sha256` inside the body over
    samples_ns.npy) and, with `signing_key` (an Ed25519 private key, tickformer.signing),
    certificate.sig over the same body."""
    files: dict[str, bytes] = {}
    for key, plot in (("histogram", plot_histogram), ("exceedance", None)):
        buf = io.BytesIO()
        if plot is None:
            plot_exceedance(report, durations_ns, buf)
        else:
            plot(report, buf)
        files[REPORT_FILES[key]] = buf.getvalue()
    buf = io.BytesIO()
    np.save(buf, np.asarray(durations_ns, dtype=np.int64))
    files[REPORT_FILES["samples"]] = buf.getvalue()
    data = _jsonable(dict(report))
    data["files"] = dict(REPORT_FILES)
    data["samples_sha256"] = hashlib.sha256(files[REPORT_FILES["samples"]]).hexdigest()
    body = certificate_body(data)
    integrity: dict[str, Any] = {
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "covers": "the canonical JSON (tickformer.sealed.canonical) of this certificate without 'integrity'; "
        "its samples_sha256 covers samples_ns.npy",
        "signature": None,
        "text": "sealed (sha256 of the canonical certificate and of the samples), not signed",
    }
    if signing_key is not None:
        files[SIGNATURE] = signing.signature_document(body, signing_key)
        kid = signing.key_id(signing_key.public_key())
        integrity.update(signature=SIGNATURE, key_id=kid, text=f"sealed and signed (Ed25519, key {kid})")
    data["integrity"] = integrity
    pngs = {"exceedance": files[REPORT_FILES["exceedance"]], "histogram": files[REPORT_FILES["histogram"]]}
    files[REPORT_FILES["html"]] = report_html.render(
        data, pngs, out_dir=out_dir, integrity=integrity
    ).encode()
    files[CERTIFICATE] = (json.dumps(data, indent=2, allow_nan=False) + "\n").encode()
    return files


def write_report(
    out_dir: str | os.PathLike[str],
    report: dict[str, Any],
    durations_ns: np.ndarray,
    *,
    signing_key: Any = None,
) -> Path:
    """Write latency_hist.png, exceedance.png, samples_ns.npy, report.html, certificate.json (and
    certificate.sig with `signing_key`) into `out_dir` (module docstring: every file staged and
    fsynced first, certificate.json renamed last; a signature of a previous report is removed
    with it). A failure while staging raises WriteError and leaves the previous report as it was."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TickformerError(f"cannot create report directory {out}: {exc}; pick a writable --out") from exc
    files = report_bytes(report, durations_ns, signing_key=signing_key, out_dir=str(out))
    cert = out / CERTIFICATE
    staged: dict[str, Path] = {}
    try:
        for name, data in files.items():  # 1. stage: nothing of the previous report is touched
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            os.close(fd)
            staged[name] = Path(tmp)
            os.chmod(tmp, 0o644)
            write_synced(Path(tmp), data)
    except BaseException as exc:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, TickformerError):
            raise write_error(cert, exc) from exc
        raise
    try:  # 2. commit: the old certificate (and its signature) go first, the new one comes last
        cert.unlink(missing_ok=True)
        (out / SIGNATURE).unlink(missing_ok=True)
        for name in [n for n in files if n != CERTIFICATE] + [CERTIFICATE]:
            os.replace(staged[name], out / name)
            del staged[name]
        fsync_dir(out)
    except OSError as exc:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise TickformerError(
            f"cannot write the report into {out}: renaming its files failed ({exc.strerror or exc}); the "
            f"previous certificate was removed and no new one was written: run certify again"
        ) from exc
    return cert


def _us(v_ns: float | None) -> str:
    """ns -> a short microsecond string (scientific beyond 1e6 us, '-' for None)."""
    if v_ns is None:
        return "-"
    v = v_ns / 1e3
    return f"{v:.1f}" if abs(v) < 1e6 else f"{v:.2e}"


def static_text(report: dict[str, Any]) -> str:
    """The static bound beside the measured figures, one line (or why there is none)."""
    static = report.get("static_bound") or {}
    if not static.get("computed"):
        return f"static bound: not computed ({static.get('reason', 'not requested')})"
    st = report["stats"]
    return (
        f"static LOWER bound {_us(static['value_ns'])} us ({static['bound_by']}: {static['flops']:,} flops, "
        f"{static['bytes_touched']:,} bytes per step) -- measured min {_us(st['min'])}, p50 {_us(st['p50'])}, "
        f"p99.9 {_us(st['p99.9'])}, max {_us(st['max'])} us; {pwcet_text(report)}"
    )


def ring_text(ring: dict[str, Any]) -> str:
    """The certificate's statement about a windowed artifact's campaign (certify.campaign.ring_coverage)."""
    lo, hi = ring["positions"]
    every = "every slot timed" if ring["every_slot_timed"] else "NOT every slot timed"
    return (
        f"ring cache of {ring['window']} slots: one stream, positions {lo}..{hi}, {ring['wraps']} wrap-arounds, "
        f"{every} ({ring['timed_per_slot'][0]}..{ring['timed_per_slot'][1]} samples per slot)"
    )


def summary(report: dict[str, Any], console: Any = None) -> None:
    """One-screen rich summary: conditions, statistics, EVT, tests, verdict."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    con = console or Console()
    st = report["stats"]
    cond = report.get("conditions", {})
    iso = cond.get("isolation", {})
    granted = ", ".join(
        f"{k}={'yes' if v['granted'] else ('refused' if v['requested'] else 'no')}" for k, v in iso.items()
    )
    con.print(
        f"[bold]{cond.get('cpu_model', '?')}[/] x{cond.get('cpu_count', '?')}  load {cond.get('load_average')}  "
        f"backend {cond.get('backend')}  artifact {str(cond.get('artifact_id'))[:12]}  {granted}"
    )
    ring = report.get("campaign", {}).get("ring")
    if ring is not None:
        con.print(ring_text(ring))
    t = Table(title="step latency (us)", show_header=True, header_style="bold")
    keys = ["min", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max", "std"]
    for k in keys:
        t.add_column(k, justify="right")
    t.add_row(*[_us(st[k]) for k in keys])
    con.print(t)
    static = report.get("static_bound")
    if static is not None:
        con.print(static_text(report))
    evt = report.get("evt")
    if evt is None:
        con.print(f"[yellow]{pwcet_text(report)}[/]")
    else:
        fit = evt["fit"]
        title = f"pWCET ({fit['method'].upper()}, xi = {fit['xi']:+.3f}: {fit['tail']})"
        if evt.get("pwcet_ns") is None:  # inadmissible: the reason, never the extrapolation
            e: Any = Panel(f"[yellow]{_pwcet(report)['text']}[/]", title=title)
        else:
            e = Table(title=title, header_style="bold")
            e.add_column("exceedance/step")
            e.add_column("pWCET (us)", justify="right")
            e.add_column(f"{(evt.get('bootstrap') or {}).get('level', 0.95):.0%} upper (us)", justify="right")
            upper = (evt.get("bootstrap") or {}).get("pwcet_upper_ns", {})
            for k, v in evt["pwcet_ns"].items():
                u = upper.get(k)
                e.add_row(k, _us(v), _us(u))
        tt = Table(title="admissibility (on the fitted extremes)", header_style="bold")
        tt.add_column("test")
        tt.add_column("stat", justify="right")
        tt.add_column("p", justify="right")
        tt.add_column("ok")
        for test in evt["tests"]:
            s, p = test["statistic"], test["p_value"]
            tt.add_row(
                test["name"],
                "-" if s is None else f"{s:.3g}",
                "-" if p is None else f"{p:.3g}",
                "[green]yes[/]" if test["passed"] else "[red]no[/]",
            )
        from rich.columns import Columns

        con.print(Columns([e, tt]))
        cross = report.get("evt_cross_check") or {}
        key = f"{report['exceedance']:.0e}"
        if cross.get("pwcet_ns"):
            con.print(
                f"[dim]cross-check ({cross['method'].upper()}, not used for the verdict): xi = {cross['xi']:+.3f}, "
                f"pWCET({key}) = {_us(cross['pwcet_ns'].get(key))} us; the estimate extrapolates "
                f"{report.get('extrapolation_orders', float('nan')):.1f} orders of magnitude beyond 1/n[/]"
            )
    colour = {"PASS": "green", "FAIL": "red", "INCONCLUSIVE": "yellow"}[report["verdict"]]
    body = "\n".join(report["reasons"])
    if report.get("reach"):
        body += "\n" + report["reach"]["text"]
    need = report.get("samples_needed")
    if need and need.get("samples"):
        body += f"\nsamples needed: {need['samples']:,} ({need['rule']})"
    if report.get("advice"):
        body += "\n[dim]" + report["advice"] + "[/]"
    con.print(
        Panel(
            body,
            title=f"[bold {colour}]{report['verdict']}[/] budget {report['budget_ns'] / 1e3:.1f} us, "
            f"{report['over_budget']} of {st['n']} steps over budget",
            border_style=colour,
        )
    )
