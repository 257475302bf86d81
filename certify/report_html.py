# ruff: noqa: E501  (the HTML template held in a string: its lines are HTML's)
"""The certificate as one self-contained HTML page an assessor reads (report.html): verdict first,
then the budget, the statistics, the measured figures beside the static bound, the tail plot with
the budget line, the EVT diagnostics (what each test checked, its outcome), the environment, and
the commands that reproduce and check it. Plots are embedded (data: URIs); nothing is fetched.

Rendered with Jinja2 (autoescaping on: every value of the certificate is text, never markup).
tests/certify/test_report_html.py renders it in headless Chromium and looks at the screenshot.

Not real-time code.
"""

from __future__ import annotations

import base64
from typing import Any

import jinja2

TESTS_CHECK = {
    "enough tail samples": "that the fit rests on enough extremes (cluster peaks or block maxima) to estimate a tail",
    "independence (Ljung-Box)": "that the fitted extremes are not autocorrelated (Ljung-Box Q over up to 20 lags, "
    "chi-squared)",
    "independence (runs)": "that the extremes above and below their median alternate as at random (Wald-Wolfowitz runs)",
    "identical distribution (KS halves)": "that the extremes of the first half of the run have the distribution of the "
    "second half's (two-sample Kolmogorov-Smirnov)",
    "stationary rate (binomial halves)": "that the extremes are as frequent in the first half of the run as in the "
    "second (binomial)",
    "goodness of fit (Anderson-Darling, bootstrap)": "that the fitted GPD/GEV describes the extremes (Anderson-Darling "
    "A^2, p-value by parametric bootstrap with refits)",
}

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Latency certificate: {{ r.verdict }} -- {{ cond.artifact or "artifact" }}</title>
<style>
 body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1000px; padding: 16px 24px; color: #222; }
 h1 { font-size: 22px; margin: 4px 0 8px; } h2 { font-size: 18px; margin: 26px 0 8px; border-bottom: 1px solid #ccc; }
 .verdict { padding: 14px 18px; border-radius: 6px; color: #fff; }
 .PASS { background: #2e7d32; } .FAIL { background: #c62828; } .INCONCLUSIVE { background: #ef8f00; }
 .verdict .big { font-size: 30px; font-weight: 700; letter-spacing: 1px; }
 .verdict ul { margin: 6px 0 0; padding-left: 20px; }
 table { border-collapse: collapse; margin: 6px 0; } td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
 th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
 .ok { color: #2e7d32; font-weight: 600; } .no { color: #c62828; font-weight: 600; }
 img { max-width: 100%; border: 1px solid #ddd; } code, pre { background: #f6f6f6; padding: 2px 4px; }
 pre { padding: 8px; white-space: pre-wrap; word-break: break-all; } .muted { color: #666; font-size: 13px; }
</style></head><body>
<div class="verdict {{ r.verdict }}">
 <div class="big">{{ r.verdict }}</div>
 <div>budget {{ us(r.budget_ns) }} &micro;s per step &middot; {{ r.over_budget }} of {{ r.stats.n }} steps over it
  &middot; exceedance {{ "%.0e" % r.exceedance }} per step</div>
 <ul>{% for line in r.reasons %}<li>{{ line }}</li>{% endfor %}</ul>
</div>
<h1>Latency certificate of {{ cond.artifact or "a step" }}</h1>
<p>{{ reach }}{% if need and need.samples %}<br><b>Samples needed:</b> {{ "{:,}".format(need.samples) }}
 ({{ need.rule }}): {{ need.text }}{% endif %}</p>
{% if r.advice %}<p class="muted">{{ r.advice }}</p>{% endif %}

<h2>Budget and campaign</h2>
<table>
<tr><th>budget</th><td>{{ us(r.budget_ns) }} &micro;s per step, certified at exceedance {{ "%.0e" % r.exceedance }} per step</td></tr>
<tr><th>what was timed</th><td>{{ where }}</td></tr>
<tr><th>samples</th><td>{{ r.campaign.samples }} timed, {{ r.campaign.warmup }} warm-up; positions
 {{ r.campaign.timed_positions[0] }}..{{ r.campaign.timed_positions[1] }}; {{ "%.2f" % r.campaign.wall_s }} s</td></tr>
<tr><th>clock</th><td>{{ cond.clock.name }}; overhead {{ cond.clock.overhead_ns }} ns</td></tr>
<tr><th>isolation</th><td>{% for k, v in (cond.isolation or {}).items() %}{{ k }}: <span class="{{ 'ok' if v.granted else 'no' if v.requested else '' }}">
 {{ 'granted' if v.granted else 'refused' if v.requested else 'not requested' }}</span> ({{ v.detail }})<br>{% endfor %}</td></tr>
</table>

<h2>Statistics (&micro;s)</h2>
<table><tr>{% for k in keys %}<th>{{ k }}</th>{% endfor %}</tr>
<tr>{% for k in keys %}<td class="num">{{ us(r.stats[k]) }}</td>{% endfor %}</tr></table>

<h2>Measured beside the static bound</h2>
<table>
<tr><th>figure</th><th>&micro;s</th><th>what it rests on</th></tr>
<tr><td>observed max</td><td class="num">{{ us(r.stats.max) }}</td><td>{{ r.stats.n }} steps timed</td></tr>
<tr><td>p99.9 (measured)</td><td class="num">{{ us(r.stats["p99.9"]) }}</td><td>the samples, numpy's "higher" method: an observed step</td></tr>
<tr><td>pWCET({{ "%.0e" % r.exceedance }})</td><td class="num">{{ pwcet_value }}</td><td>{{ pwcet_basis }}</td></tr>
{% if static and static.computed %}
<tr><td><b>static lower bound</b></td><td class="num"><b>{{ us(static.value_ns) }}</b></td><td>bound by {{ static.bound_by }}:
 {{ "{:,}".format(static.flops) }} flops at {{ "%.3g" % static.machine.peak_flops_per_s }}/s = {{ us(static.compute_ns) }} &micro;s;
 {{ "{:,}".format(static.bytes_touched) }} bytes at {{ "%.3g" % static.machine.read_bw_working_set_bytes_per_s }} B/s = {{ us(static.memory_ns) }} &micro;s
 (from DRAM at {{ "%.3g" % static.machine.read_bw_64mib_bytes_per_s }} B/s: {{ us(static.cold_memory_ns) }} &micro;s, information)</td></tr>
</table>
<p><b>What the static figure is.</b> {{ static.meaning }}</p>
<ul>{% for line in static.rests_on %}<li>{{ line }}</li>{% endfor %}</ul>
{% else %}
</table><p class="muted">Static bound: {{ (static or {}).get("reason", "not computed (a Python-path campaign: the static bound comes with --native)") }}</p>
{% endif %}

<h2>Tail: exceedance per step, with the budget</h2>
<img alt="exceedance plot" src="data:image/png;base64,{{ plots.exceedance }}">
<img alt="latency histogram" src="data:image/png;base64,{{ plots.histogram }}">

<h2>Extreme value diagnostics</h2>
{% if evt %}
<p>{{ evt.fit.method | upper }} fit on {{ evt.fit.n_extremes }} extremes: &xi; = {{ "%+.3f" % evt.fit.xi }} ({{ evt.fit.tail }}),
 &sigma; = {{ "%.4g" % evt.fit.sigma }} ns{% if evt.fit.threshold_ns is defined %}, threshold {{ us(evt.fit.threshold_ns) }} &micro;s
 ({{ "%.3g" % evt.fit.zeta }} of the steps above it){% endif %}. Every test must pass before a pWCET is a result.</p>
<table><tr><th>test</th><th>what it checked</th><th>statistic</th><th>p</th><th>outcome</th></tr>
{% for t in evt.tests %}<tr><td>{{ t.name }}</td><td>{{ checks.get(t.name, t.detail) }}<br><span class="muted">{{ t.detail }}</span></td>
<td class="num">{{ "-" if t.statistic is none else "%.3g" % t.statistic }}</td><td class="num">{{ "-" if t.p_value is none else "%.3g" % t.p_value }}</td>
<td class="{{ 'ok' if t.passed else 'no' }}">{{ "passed" if t.passed else "FAILED" }}</td></tr>{% endfor %}
</table>
{% else %}<p>No tail fit: {{ r.evt_error }}</p>{% endif %}

<h2>Environment</h2>
<table>
{% for k, v in env_rows %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}
</table>
<details><summary>library versions ({{ libs | length }} packages from requirements.lock)</summary>
<table>{% for name, v in libs %}<tr><td>{{ name }}</td><td>{{ v.installed }}</td><td class="muted">{{ "locked " ~ v.locked if v.locked != v.installed else "" }}</td></tr>{% endfor %}</table></details>

<h2>Reproduce and check</h2>
<p>Rerun the campaign:</p><pre>{{ command }}</pre>
<p>Recompute the verdict from the stored samples and verify the artifact and the record:</p>
<pre>tickformer certify --check {{ out_dir }}/certificate.json {{ cond.artifact or "ART" }}{{ " --trust KEY" if integrity.signature else "" }}</pre>
<p class="muted">Integrity: {{ integrity.text }}. Artifact id (manifest_sha256, also in the generated C header):
 <code>{{ cond.artifact_id }}</code>. Format {{ r.format }} v{{ r.version }}.</p>
</body></html>
"""


def _us(v: Any) -> str:
    if v is None or isinstance(v, jinja2.Undefined):
        return "-"
    x = float(v) / 1e3
    return f"{x:.2f}" if abs(x) < 100 else (f"{x:.1f}" if abs(x) < 1e6 else f"{x:.3e}")


def _fact(f: Any) -> str:
    """A fact of certify/environment.py as text: its value, or 'unknown (reason)'."""
    if isinstance(f, dict) and "value" in f:
        if f["value"] == "unknown":
            return f"unknown ({f.get('reason', '?')})"
        extra = f" ({f['meaning']})" if "meaning" in f else ""
        return f"{f['value']}{extra}"
    return "-" if f is None else str(f)


def _env_rows(cond: dict[str, Any]) -> list[tuple[str, str]]:
    env = cond.get("environment") or {}
    rows = [
        ("artifact id", str(cond.get("artifact_id"))),
        ("host", str(env.get("host", "-"))),
        ("when (UTC)", str(cond.get("utc"))),
        ("load average (before, after)", f"{cond.get('load_average')} / {cond.get('load_average_after')}"),
    ]
    for cpu, facts in (env.get("cpu") or {}).items():
        states = facts.get("cstates", {}).get("states", {})
        cst = (
            ", ".join(
                f"{s['name']} ({s['exit_latency_us']} us{', disabled' if s['disabled'] == '1' else ''})"
                for s in states["value"]
            )
            if isinstance(states.get("value"), list)
            else _fact(states)
        )
        rows += [
            (f"CPU {cpu}: model", _fact(facts.get("model"))),
            (f"CPU {cpu}: microcode", _fact(facts.get("microcode"))),
            (f"CPU {cpu}: SMT siblings", _fact(facts.get("thread_siblings"))),
            (f"CPU {cpu}: governor", _fact(facts.get("governor"))),
            (f"CPU {cpu}: C-states", f"{cst}; driver {_fact(facts.get('cstates', {}).get('driver'))}"),
        ]
    smt = env.get("smt") or {}
    rows += [
        ("cores used / online", f"{env.get('cpus_used')} of {env.get('cpu_count')}"),
        ("SMT", f"control {_fact(smt.get('control'))}, active {_fact(smt.get('active'))}"),
        ("turbo / boost", _fact(env.get("turbo"))),
        (
            "isolated CPUs / nohz_full",
            f"{_fact(env.get('isolated_cpus'))} / {_fact(env.get('nohz_full_cpus'))}",
        ),
        (
            "kernel",
            f"{(env.get('os') or {}).get('release', cond.get('kernel'))} {(env.get('os') or {}).get('version', '')}",
        ),
        (
            "kernel command line",
            ", ".join(
                f"{k}={v}" for k, v in ((env.get("kernel_cmdline") or {}).get("parameters") or {}).items()
            )
            or _fact(env.get("kernel_cmdline")),
        ),
        (
            "RT throttling",
            _fact((env.get("rt_throttling") or {}).get("sched_rt_runtime_us")) + " us per second",
        ),
    ]
    lib = cond.get("c_library")
    if lib:
        build = lib.get("build") or {}
        rows.append(
            (
                "C library timed (backend c)",
                f"{lib['path']}; compiler {build.get('compiler', '-')} ({build.get('compiler_version', '-')}); "
                f"flags {' '.join(build.get('flags', [])) or _fact(build)}",
            )
        )
    nat = cond.get("native")
    if nat:
        rows += [
            ("compiler", f"{nat['compiler']} ({nat['compiler_version']})"),
            ("flags of the step", " ".join(nat["step_flags"]) + f" -- the same as {nat['same_flags_as']}"),
            ("timing program", f"{nat['program']}; {nat['run_command']}"),
        ]
    dist = cond.get("input_distribution") or {}
    rows.append(("input distribution", ", ".join(f"{k}: {v}" for k, v in dist.items())))
    lock = ((env.get("libraries") or {}).get("lock")) or {}
    drift = (env.get("libraries") or {}).get("drift") or []
    rows.append(
        ("requirements.lock", f"{_fact(lock)} sha256 {lock.get('sha256', '-')}; drift: {drift or 'none'}")
    )
    return rows


def render(
    report: dict[str, Any], pngs: dict[str, bytes], *, out_dir: str = "DIR", integrity: Any = None
) -> str:
    """report.html of `report` (a certificate dict), with the PNG plots embedded. Pure."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.ChainableUndefined)
    env.globals["us"] = _us
    cond = {
        "artifact": None,
        "artifact_id": None,
        "clock": {"name": "-", "overhead_ns": "-"},
        "isolation": {},
    }
    cond.update(report.get("conditions") or {})
    campaign = {"samples": "-", "warmup": "-", "timed_positions": ["-", "-"], "wall_s": float("nan")}
    campaign.update(report.get("campaign") or {})
    report = {**report, "campaign": campaign}
    pw = report.get("pwcet") or {}
    evt = report.get("evt")
    if pw.get("estimated"):
        level = pw.get("level") or 0.95
        pwcet_value = f"{_us(pw.get('value_ns'))} (upper {_us(pw.get('upper_ns'))})"
        pwcet_basis = (
            f"an extrapolation from the admissible {evt['fit']['method'].upper()} tail fit, "
            f"{report['extrapolation_orders']:.1f} orders of magnitude beyond the data; upper: its {level:.0%} "
            "bootstrap bound"
        )
    else:
        pwcet_value, pwcet_basis = "-", pw.get("text", "not estimated")
    libs = sorted((((cond.get("environment") or {}).get("libraries") or {}).get("packages") or {}).items())
    where = (report.get("campaign") or {}).get("where") or (
        f"the Python call path (Session.step, backend {cond.get('backend')}), in this process"
    )
    if integrity is None:
        integrity = {"signature": None, "text": "not sealed"}
    return env.from_string(TEMPLATE).render(
        r=report,
        cond=cond,
        reach=(report.get("reach") or {}).get("text", ""),
        need=report.get("samples_needed"),
        keys=["min", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max", "std"],
        static=report.get("static_bound"),
        pwcet_value=pwcet_value,
        pwcet_basis=pwcet_basis,
        plots={k: base64.b64encode(v).decode("ascii") for k, v in pngs.items()},
        evt=evt,
        checks=TESTS_CHECK,
        env_rows=_env_rows(cond),
        libs=libs,
        where=where,
        command=cond.get("command_line") or "(not recorded: run through the library, not the CLI)",
        out_dir=out_dir,
        integrity=integrity,
    )
