"""benchmarks/README.md's section on the controller's tick and the weight formats (issue 40), from
results/c_tick.json (benchmarks/test_c_tick.py) and results/c_formats.json
(benchmarks/test_c_formats.py). Imported by report.py; kept apart so report.py stays one page of
sections it already had."""

from __future__ import annotations

from typing import Any

from report_format import table, us

from tickformer.codegen.weights import BOUND_K, FORMATS


def tick_rows(c_tick: dict[str, Any]) -> tuple[str, str]:
    """(intro, table): backend x K on the tick model, fp32 weights."""
    s = c_tick["session"]
    k = s["candidates"]
    cfg = s["config"]
    labels = {
        "c-tick": ("c", k, f"Session.peek of {k} rows + commit_candidate (tf_peek: one C call)"),
        "ort-tick": ("ort", k, f"Session.peek of {k} rows + commit_candidate (ORT's batch-{k} step)"),
        "ort-step": ("ort", k, f"ORT's batch-{k} step alone"),
        "c-step-1": ("c", 1, "Session.step, one row"),
        "ort-step-1": ("ort", 1, "Session.step, one row"),
    }
    rows = []
    for name, (backend, kk, what) in labels.items():
        st = s["stats"].get(name)
        if st:
            rows.append([backend, "fp32", str(kk), what, us(st["p50"]), us(st["p99.9"]), str(st["n"])])
    in_c = c_tick.get("in_c")
    if in_c:
        st = in_c["stats"]
        rows.append(["c", "fp32", str(k), "tf_peek + tf_commit timed in C (no Python)", us(st["p50"]),
                     us(st["p99.9"]), str(st["n"])])  # fmt: skip
    intro = (
        f"Tick model: d_model {cfg['d_model']}, {cfg['n_layers']} layers, d_ff {cfg['d_ff']}, window "
        f"{s['window']} on a ring cache, positions {s['positions']}; {s['rounds']} interleaved rounds. ORT's "
        f"batch-{k} step p50 over the C tick's: **{s['ratio_ort_step_over_c_tick_p50']:.2f}x** (target "
        f"{s['target_ratio']:.0f}x), at p99.9 {s['ratio_ort_step_over_c_tick_p99_9']:.2f}x; the {k}-candidate "
        f"tick costs {s['c_tick_over_c_step_1_p50']:.1f} one-row C steps."
    )
    header = ["backend", "weights", "K", "what is timed", "p50", "p99.9", "n"]
    return intro, table(header, rows)


def format_rows(case: dict[str, Any]) -> tuple[str, str]:
    """(intro, table): one model's steps per weight format (K = 1, backend c timed in C)."""
    m = case["model"]
    floor = case["fp32_floor_us"]["p50"]
    rows = []
    for fmt, p in sorted(
        case["per_format"].items(),
        key=lambda kv: FORMATS.index(kv[0]),  # results files sort their keys
    ):
        err = p["error_vs_fp32"]
        rows.append(
            [
                "c",
                fmt,
                "1",
                us(p["stats"]["p50"]),
                us(p["stats"]["p99.9"]),
                f"{p['bytes_per_step']['total']:,}",
                f"{p['achieved_GBps_at_p50']:.1f}",
                f"{p['p50_over_fp32_floor']:.2f}",
                f"{p['p50_over_fp32_step']:.2f}",
                f"{err['max_rel_error']:.2e} ({err['in_eps']:.2f} eps_F)",
                f"{err['bound_rel']:.2e}",
            ]
        )
    llc = case.get("last_level_cache_bytes")
    intro = (
        f"d_model {m['d_model']}, {m['n_layers']} layers, d_ff {m['d_ff']}, static cache of {m['max_len']} "
        f"rows; {case['rounds']} interleaved rounds, {case['steps_per_format']:,} steps per format; the float32 "
        f"floor (the fp32 step's bytes read end to end): {floor:,.2f} µs, {case['fp32_floor_GBps_at_p50']:.1f} GB/s"
        + (f"; last-level cache {llc / 2**20:.0f} MiB." if llc else ".")
    )
    header = [
        "backend",
        "weights",
        "K",
        "p50",
        "p99.9",
        "bytes per step",
        "GB/s at p50",
        "p50 / fp32 floor",
        "p50 / fp32 step",
        "max error vs fp32 (relative)",
        "stated bound",
    ]
    return intro, table(header, rows)


def tick_format_rows(data: dict[str, Any]) -> tuple[str, str]:
    """(intro, table): the K-candidate tick timed in C per weight format (results/c_tick_formats.json)."""
    per = data["per_format"]
    base = per["fp32"]["stats"]["p50"]
    rows = [
        [
            "c",
            fmt,
            str(data["candidates"]),
            us(per[fmt]["stats"]["p50"]),
            us(per[fmt]["stats"]["p99.9"]),
            f"{per[fmt]['weight_bytes']:,}",
            f"{per[fmt]['stats']['p50'] / base:.2f}",
            str(per[fmt]["stats"]["n"]),
        ]
        for fmt in FORMATS
        if fmt in per
    ]
    intro = (
        f"The same tick per weight format, tf_peek + tf_commit_candidate timed in C (_results/c_tick_formats.json, "
        f"`python -m pytest benchmarks/test_c_tick.py -k per_format -q -p no:cacheprovider`_; {data['rounds']} "
        f"interleaved rounds of {data['reps']} sequences; tf_peek reads each weight once for all "
        f"{data['candidates']} candidates, so a conversion is shared by {data['candidates']} products):"
    )
    header = ["backend", "weights", "K", "p50", "p99.9", "weight bytes", "p50 / fp32", "n"]
    return intro, table(header, rows)


def tick_and_formats_section(
    c_tick: dict | None, c_formats: dict | None, c_tick_formats: dict | None = None
) -> str:
    parts = []
    if c_tick and "session" in c_tick:
        intro, tab = tick_rows(c_tick)
        parts += [
            "_From results/c_tick.json, `python -m pytest benchmarks/test_c_tick.py -q -p no:cacheprovider "
            "--benchmark-json=benchmarks/results/c_tick_bench.json`._ " + intro,
            tab,
        ]
        if c_tick_formats and "per_format" in c_tick_formats:
            parts += list(tick_format_rows(c_tick_formats))
    else:
        parts.append(
            "_The tick: not measured (results/c_tick.json missing; `pytest benchmarks/test_c_tick.py`)._"
        )
    if c_formats and "formats" in c_formats:
        command = (
            "`python -m pytest benchmarks/test_c_formats.py -q -p no:cacheprovider "
            "--benchmark-json=benchmarks/results/c_formats_bench.json`"
        )
        for key, title in (("formats", "preset `control`, in cache"), ("beyond_cache", "beyond the cache")):
            if key in c_formats:
                intro, tab = format_rows(c_formats[key])
                parts += [f"Weight formats, {title} (_results/c_formats.json, {command}_): {intro}", tab]
        parts.append(
            "The error is max |y_F - y_fp32| / max |y_fp32| over the first golden sequence; the stated bound "
            f"({BOUND_K} eps_F, `codegen.weights.fp32_bound`) is measured, not proved (docs/codegen.md)."
        )
    else:
        parts.append("_Weight formats: not measured (results/c_formats.json missing)._")
    return "\n\n".join(parts)
