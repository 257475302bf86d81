"""Render docs/ssm.md's bench tables from benchmarks/results/ssm_bench.json (benchmarks/ssm_bench.py).

    .venv/bin/python benchmarks/ssm_report.py [benchmarks/results/ssm_bench.json]

Prints the markdown that goes inside the `<!-- claims: bench-tables -->` span of docs/ssm.md. Every
number in it is a `Cell`: its name, how it is read from the results, and how it is written. The
same cells are the span's declared claims (claims/claims.toml, "ssm-bench"), so the document,
this renderer and the registry cannot disagree: `make claims` fails on any number typed by hand
or left stale. Not a pytest file.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

MODELS = ("attention", "windowed", "ssm")


@dataclass(frozen=True)
class Cell:
    """One number of the tables: claim name, value from the report, its written form."""

    name: str
    get: Callable[[dict], Any]
    fmt: Callable[[Any], str]

    def text(self, report: dict) -> str:
        return self.fmt(self.get(report))


def _unit(n: int) -> tuple[float, str, str]:
    """Bytes as the tables write them: KiB below 1 MiB, MiB below 1 GiB, else GiB."""
    if n < 2**20:
        return n / 1024, "{:,.0f}", "KiB"
    return (n / 2**20, "{:,.1f}", "MiB") if n < 2**30 else (n / 2**30, "{:,.2f}", "GiB")


def size_number(n: int) -> str:
    value, spec, _ = _unit(n)
    return spec.format(value)


def size_unit(n: int) -> str:
    return _unit(n)[2]


def _f(spec: str) -> Callable[[Any], str]:
    return lambda v: spec.format(v)


def _m(name: str, *keys: str) -> Callable[[dict], Any]:
    def get(report: dict) -> Any:
        value: Any = report["models"][name]
        for k in keys:
            value = value[k]
        return value

    return get


def lengths(report: dict) -> list[str]:
    return list(report["models"]["ssm"]["state_bytes"])


def lines(report: dict) -> list[list[str | Cell]]:
    """The tables as lines of text pieces and cells."""
    out: list[list[str | Cell]] = [
        [
            "Task `",
            report["task"],
            "` (preset `",
            report["preset"],
            "`), ",
            Cell("train steps", lambda r: r["train_steps"], _f("{:,}")),
            " training steps per model and seed, ",
            Cell("seeds", lambda r: len(r["seeds"]), _f("{}")),
            " seeds (the same trainer, batch and data for the three models at each seed); one-step RMSE "
            "in rad against the true angle, on the held-out episodes at positions t >= ",
            Cell("scored from", lambda r: r["scored_from_position"], _f("{}")),
            " for all three. Run ",
            Cell("date", lambda r: r["utc"][:10], _f("{}")),
            ", load average ",
            Cell("load start", lambda r: r["load_avg_start"][0], _f("{:.1f}")),
            " at its start and ",
            Cell("load end", lambda r: r["load_avg_end"][0], _f("{:.1f}")),
            " at its end (other jobs on the ",
            Cell("cpus", lambda r: r["machine"]["cpus"], _f("{}")),
            " shared cores).",
        ],
        [""],
        [
            "| model | parameters | one-step RMSE, mean (min to max over ",
            Cell("seeds (table)", lambda r: len(r["seeds"]), _f("{}")),
            " seeds) | RMSE ",
            Cell("horizon", lambda r: r["models"]["attention"]["config"]["d_out"], _f("{}")),
            " ticks ahead, mean | training CPU ms per step | ORT step p50 / p99 (us) |",
        ],
        ["|---|---|---|---|---|---|"],
    ]
    for name in MODELS:
        label: list[str | Cell] = {
            "attention": [
                "full attention (static cache, max_len ",
                Cell(f"{name} max_len", _m(name, "config", "max_len"), _f("{}")),
                ")",
            ],
            "windowed": [
                "windowed attention (W = ",
                Cell(f"{name} W", _m(name, "config", "window"), _f("{}")),
                ")",
            ],
            "ssm": [
                "ssm (N = ",
                Cell(f"{name} N", _m(name, "config", "d_state"), _f("{}")),
                ", d_ff ",
                Cell(f"{name} d_ff", _m(name, "config", "d_ff"), _f("{}")),
                ")",
            ],
        }[name]
        out.append(
            [
                "| ",
                *label,
                " | ",
                Cell(f"{name} parameters", _m(name, "parameters"), _f("{:,}")),
                " | ",
                Cell(f"{name} rmse", _m(name, "held_out_rmse", "mean"), _f("{:.4f}")),
                " (",
                Cell(f"{name} rmse min", _m(name, "held_out_rmse", "min"), _f("{:.4f}")),
                " to ",
                Cell(f"{name} rmse max", _m(name, "held_out_rmse", "max"), _f("{:.4f}")),
                ") | ",
                Cell(f"{name} rmse last", _m(name, "held_out_rmse_last_horizon", "mean"), _f("{:.4f}")),
                " | ",
                Cell(f"{name} train ms/step", _m(name, "train_cpu_ms_per_step"), _f("{:.1f}")),
                " | ",
                Cell(f"{name} p50", _m(name, "ort_step", "p50_us"), _f("{:.1f}")),
                " / ",
                Cell(f"{name} p99", _m(name, "ort_step", "p99_us"), _f("{:.1f}")),
                " |",
            ]
        )
    base = report.get("baselines", {})
    if base:
        out += [
            [""],
            [
                "Baselines on the same positions (mean over the seeds): linear AR over the last ",
                Cell("ar order", lambda r: r["models"]["windowed"]["config"]["window"], _f("{}")),
                " (y, command) pairs ",
                Cell("linear ar", lambda r: r["baselines"]["linear_ar"]["mean"], _f("{:.4f}")),
                ", nominal physics (EKF) ",
                Cell("nominal", lambda r: r["baselines"]["nominal"]["mean"], _f("{:.4f}")),
                ", the memoryless twin (attention with window ",
                Cell("twin window", lambda r: 1, _f("{}")),
                ", the same settings) ",
                Cell("memoryless", lambda r: r["baselines"]["memoryless"]["mean"], _f("{:.4f}")),
                ".",
            ],
        ]
    out += [
        [""],
        [
            "State a step reads per stream, and the step's cost at stream length n (median us; ssm and windowed: "
            "one stream each, stepped alternately, the ",
            Cell("median window", lambda r: 1000, _f("{:,}")),
            " steps before n; full attention: a static cache of n rows, through Session.step up to n = ",
            Cell("session max n", lambda r: _session_max(r), _f("{:,}")),
            ", beyond it the artifact's step graph alone; the last column: full attention's median over that "
            "of a block of ",
            Cell("ref block", lambda r: 1000, _f("{:,}")),
            " ssm steps timed right after it, under the load of that moment):",
        ],
        [""],
        [
            "| n | full attention state | windowed state | ssm state | full attention step | windowed step | ssm step "
            "| full / ssm |"
        ],
        ["|---|---|---|---|---|---|---|---|"],
    ]
    for n in lengths(report):
        row: list[str | Cell] = ["| ", Cell(f"n {n}", lambda r, n=n: int(n), _f("{:,}"))]
        for name in MODELS:
            size = report["models"][name]["state_bytes"][n]
            row += [
                " | ",
                Cell(f"{name} state {n}", _m(name, "state_bytes", n), size_number),
                " " + size_unit(size),
            ]
        for name in MODELS:
            cost = report["models"][name]["step_cost"].get(n, {})
            if "median_us" in cost:
                row += [" | ", Cell(f"{name} step {n}", _m(name, "step_cost", n, "median_us"), _f("{:.1f}"))]
            else:
                row += [" | not run (", cost.get("skipped", "n/a"), ")"]
        att = report["models"]["attention"]["step_cost"].get(n, {})
        if "ratio_to_ssm" in att:
            row += [
                " | ",
                Cell(f"ratio {n}", _m("attention", "step_cost", n, "ratio_to_ssm"), _f("{:.1f}")),
                "x |",
            ]
        else:
            row += [" | |"]
        out.append(row)
    n0 = str(_session_max(report))
    both = report["models"]["attention"]["step_cost"].get(n0, {}).get("interleaved")
    last = lengths(report)[-1]
    if both:
        out += [
            [""],
            [
                "The Session's own share, at n = ",
                Cell("overhead n", lambda r: _session_max(r), _f("{:,}")),
                " where both ways run, interleaved step for step (",
                Cell("overhead steps", _m("attention", "step_cost", n0, "interleaved", "steps"), _f("{}")),
                " pairs): ",
                Cell(
                    "overhead session",
                    _m("attention", "step_cost", n0, "interleaved", "session_median_us"),
                    _f("{:.1f}"),
                ),
                " us through Session.step, ",
                Cell(
                    "overhead raw",
                    _m("attention", "step_cost", n0, "interleaved", "raw_graph_median_us"),
                    _f("{:.1f}"),
                ),
                " us for the step graph alone (the same C++ call). Full attention's step graph runs ",
                Cell("attn steps", _m("attention", "step_cost", last, "steps"), _f("{}")),
                " times beyond. The first ssm step after the full-attention steps at n = ",
                Cell("cold n", lambda r: int(lengths(r)[-1]), _f("{:,}")),
                " took ",
                Cell("cold ssm", _m("attention", "step_cost", last, "ssm_first_after_us"), _f("{:.1f}")),
                " us (their sweep over the cache evicts the ssm model's data from the CPU caches: what the next job "
                "on that core pays).",
            ],
        ]
    return out


def _session_max(report: dict) -> int:
    costs = report["models"]["attention"]["step_cost"]
    through = [int(n) for n, c in costs.items() if "Session.step" in c.get("method", "")]
    return max(through) if through else 0


def cells(report: dict) -> list[Cell]:
    return [piece for line in lines(report) for piece in line if isinstance(piece, Cell)]


def text_without_cells(report: dict) -> str:
    """The rendered tables with every cell left out: must hold no digit (tests: every number is a cell)."""
    return "\n".join("".join(piece for piece in line if isinstance(piece, str)) for line in lines(report))


def render(report: dict) -> str:
    return "\n".join(
        "".join(piece.text(report) if isinstance(piece, Cell) else piece for piece in line)
        for line in lines(report)
    )


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/ssm_bench.json")
    print(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
