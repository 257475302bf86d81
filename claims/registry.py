"""The claims registry: every number README.md and docs/ state in a claims span, and its source.

Three kinds of source (docs/claims.md):
  run(...)    a cheap computation from the code, re-run by every check (seconds in all);
  result(...) a key of a committed results file (claims/results/, benchmarks/results/): the check
              prints the file's date; `python claims/check.py --refresh NAME` re-runs its command;
  param(...)  a parameter of the code the document restates (a default, a threshold, a count);
  literal     a definitional number with its reason (a threshold written in prose, a version).
A claim's `fmt` renders the value as the document writes it; `tol` accepts a re-run within an
absolute tolerance (for the few cheap re-runs that depend on the platform).

FILES declares every *.md of README.md and docs/: covered (spans checked, no measured-looking
number outside them unless in LITERALS), generated (checked by its generator, GENERATED), or
pending (owner and reason; reported, not failed).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


# --- the claim type ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    region: str  # FILE#NAME of the span
    name: str
    get: Callable[[], Any]
    fmt: Callable[[Any], str]
    where: str | Callable[[], str]  # what a reader re-runs or opens (with its date, for files)
    tol: float | None = None  # absolute tolerance of a re-run
    rtol: float | None = None  # relative tolerance of a re-run

    @property
    def key(self) -> str:
        return f"{self.region}:{self.name}"

    @property
    def source(self) -> str:
        return self.where() if callable(self.where) else self.where


CLAIMS: list[Claim] = []


def _fmt(spec: str | Callable[[Any], str]) -> Callable[[Any], str]:
    return spec if callable(spec) else (lambda v: spec.format(v))


def sci(digits: int = 1) -> Callable[[float], str]:
    """2.86e-06 -> '2.9e-6' (how the docs write scientific notation)."""

    def f(v: float) -> str:
        mant, exp = f"{v:.{digits}e}".split("e")
        return f"{mant}e{int(exp)}"

    return f


class Span:
    """The claims of one span: `span.run(name, fn, fmt, command)` etc. register them in order."""

    def __init__(self, region: str) -> None:
        self.region = region

    def _add(self, name, get, fmt, source, tol=None, rtol=None):
        CLAIMS.append(Claim(self.region, name, get, _fmt(fmt), source, tol, rtol))
        return self

    def run(
        self,
        name: str,
        fn: Callable[[], Any],
        fmt,
        command: str,
        tol: float | None = None,
        rtol: float | None = None,
    ) -> "Span":
        return self._add(name, functools.cache(fn), fmt, f"re-run: {command}", tol, rtol)

    def result(self, name: str, results: str, key: str, fmt, scale: float = 1.0) -> "Span":
        rf = RESULTS[results]

        def get():
            v = dig(rf.load(), key)
            return (
                v * scale if scale != 1.0 and isinstance(v, (int, float)) and not isinstance(v, bool) else v
            )

        return self._add(name, get, fmt, lambda: f"{rf.path}:{key} ({rf.date()})")

    def derived(self, name: str, results: str, fn: Callable[[Any], Any], fmt, what: str) -> "Span":
        rf = RESULTS[results]
        return self._add(name, lambda: fn(rf.load()), fmt, lambda: f"{rf.path}: {what} ({rf.date()})")

    def param(self, name: str, fn: Callable[[], Any], fmt, where: str) -> "Span":
        return self._add(name, fn, fmt, f"code: {where}")

    def literal(self, text: str, why: str) -> "Span":
        return self._add(f"literal {text}", lambda: text, "{}", f"definitional: {why}")

    def literals(self, source: str, *pairs: tuple[str, str]) -> "Span":
        """Numbers a span quotes from one record (a run kept in a docs table, not a results file):
        each (text, why) a literal whose reason is `why, source`."""
        for text, why in pairs:
            self.literal(text, f"{why}, {source}")
        return self


def dig(data: Any, key: str) -> Any:
    for part in key.split("."):
        if isinstance(data, list):
            data = data[int(part)]
        else:
            data = data[part] if part in data else data[part.replace("~", ".")]
    return data


# --- results files ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResultsFile:
    name: str
    path: str  # relative to the repository root
    date_key: str
    refresh: str  # what `--refresh NAME` runs (a function name in this module)

    def load(self) -> Any:
        return _load_json(self.path)

    def date(self) -> str:
        try:
            return str(dig(self.load(), self.date_key))
        except (KeyError, IndexError, TypeError, OSError, ValueError):
            return "no date"


@functools.cache
def _load_json(path: str) -> Any:
    return json.loads((ROOT / path).read_text())


RESULTS: dict[str, ResultsFile] = {
    r.name: r
    for r in (
        ResultsFile("demo", "claims/results/demo/demo_summary.json", "run.utc", "refresh_demo"),
        ResultsFile(
            "demo-certificate", "claims/results/demo/certificate.json", "conditions.utc", "refresh_demo"
        ),
        ResultsFile("certify-50k", "claims/results/certify/c1.json", "conditions.utc", "refresh_demo"),
        ResultsFile("certify-rt", "claims/results/certify/c3.json", "conditions.utc", "refresh_demo"),
        ResultsFile(
            "certify-growing", "claims/results/certify/c_grow.json", "conditions.utc", "refresh_demo"
        ),
        ResultsFile(
            "control-side-runs",
            "experiments/results/control_side_runs.json",
            "recipe.r2_d4.utc",
            "refresh_control_side_runs",
        ),
        ResultsFile("test-tiers", "claims/results/test_tiers.json", "utc", "refresh_test_tiers"),
        ResultsFile("prove", "claims/results/prove.json", "utc", "refresh_prove"),
        ResultsFile("ieee754", "claims/results/ieee754.json", "utc", "refresh_ieee754"),
        ResultsFile("prove-graphs", "claims/results/prove_graphs.json", "utc", "refresh_prove_graphs"),
        ResultsFile("evt-accuracy", "claims/results/evt_accuracy.json", "utc", "refresh_evt"),
        ResultsFile("verify-margins", "claims/results/verify_margins.json", "utc", "refresh_verify"),
        ResultsFile("bench", "benchmarks/results/latest.json", "datetime", "refresh_bench"),
        ResultsFile("bench-memory", "benchmarks/results/memory.json", "date_utc", "refresh_bench"),
        ResultsFile(
            "bench-streaming", "benchmarks/results/streaming.json", "date_utc", "refresh_bench_streaming"
        ),
        ResultsFile(
            "streaming-accuracy",
            "claims/results/streaming_accuracy.json",
            "utc",
            "refresh_streaming_accuracy",
        ),
    )
}


# --- cheap re-runs (each a few seconds at most; memoised) -------------------------------------------
def _module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def bench_report():
    return _module("benchmarks/report.py", "_claims_bench_report")


@functools.cache
def bench_cases() -> dict:
    return bench_report().index_benchmarks(RESULTS["bench"].load())


def step_p50(impl: str, label: str) -> float:
    return bench_report().step_stats(bench_cases(), impl, label)["p50"]


def locked_version(package: str) -> str:
    """The version requirements.lock pins for `package` (the one the tests run with: tests/test_lock.py
    fails when the installed one differs)."""
    from lockfile import version

    return version(package)


def parameter_count(name: str) -> int:
    from tickformer.model.config import parameter_count, preset

    return parameter_count(preset(name))


@functools.cache
def fp16_errors(name: str) -> dict:
    from tickformer.export.fp16 import measure_error, to_fp16
    from tickformer.export.graphs import build_graphs
    from tickformer.model import init_params, preset

    cfg = preset(name)
    params = init_params(cfg, 0)
    graphs = build_graphs(params, cfg, 1, 17)
    return measure_error(
        graphs, {k: to_fp16(v) for k, v in graphs.items()}, params, cfg, domain=(-10.0, 10.0)
    )


@functools.cache
def score_search_reach() -> float:
    """tests/contracts/test_score_bound.py search_reach() in a fresh interpreter: Hypothesis draws
    constants from the modules loaded in the process (its constant pool), so in this process,
    after every other claim's imports, the same seed reaches another value (0.128 against 0.137)."""
    script = (
        "import importlib.util, sys; "
        "spec = importlib.util.spec_from_file_location('t', 'tests/contracts/test_score_bound.py'); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); print(m.search_reach())"
    )
    out = subprocess.run([PY, "-c", script], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


@functools.cache
def step_graph_ops() -> dict[str, int]:
    """ONNX Runtime's node counts by op type of the control preset's step graph after its optimiser."""
    from collections import Counter

    import onnx
    import onnxruntime as ort

    from tickformer.export.graphs import build_step
    from tickformer.model import init_params, preset
    from tickformer.runtime.ort_session import session_options

    cfg = preset("control")
    model = build_step(init_params(cfg, 0), cfg, 1, 17)
    with tempfile.TemporaryDirectory() as tmp:
        options = session_options(1)
        options.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        return dict(Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node))


def step_graph_nodes() -> int:
    return sum(step_graph_ops().values())


@functools.cache
def control_equivalence() -> dict:
    """The manifest of an export of the control preset with init_params seed 0 (a few seconds)."""
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    cfg = preset("control")
    with tempfile.TemporaryDirectory() as tmp:
        export_params(cfg, init_params(cfg, 0), Path(tmp) / "art")
        return json.loads((Path(tmp) / "art" / "manifest.json").read_text())


def decode_tol(name: str) -> float:
    from tickformer.contracts.decode_equivalence import decode_tolerance
    from tickformer.model import preset

    return decode_tolerance(preset(name))[0]


def fp16_bound(name: str) -> float:
    return fp16_errors(name)["bound"]


def proofs() -> int:
    from tickformer.verify.proofs.crosshair import PROOFS

    return len(PROOFS)


def int_proofs(distinct: bool) -> int:
    """The integer-valued CrossHair proofs (a spec with two wrong twins is one spec when distinct)."""
    from tickformer.verify.proofs.crosshair import PROOFS

    ints = [p.spec_name for p in PROOFS if p.values == "int"]
    return len(set(ints)) if distinct else len(ints)


def spec_statuses(report: dict) -> list[str]:
    """The verdict of each distinct spec of a `tickformer prove --json` report (a spec with two
    wrong twins once)."""
    return list({p["spec"]: p["status"] for p in report["proofs"]}.values())


def distinct_specs() -> int:
    """Specs counted once each (a spec with two wrong twins is one spec)."""
    from tickformer.verify.proofs.crosshair import PROOFS

    return len({p.spec_name for p in PROOFS})


def bound_constant(contract: str, pattern: str) -> str:
    module = importlib.import_module(f"tickformer.contracts.{contract}")
    m = re.search(pattern, module.BOUND)
    if m is None:
        raise KeyError(f"{pattern!r} not in {contract}.BOUND")
    return m.group(1)


import importlib  # noqa: E402  (after the helpers that use it lazily)


def _test(cert: dict, prefix: str) -> dict:
    return next(t for t in cert["evt"]["tests"] if t["name"].startswith(prefix))


# --- README.md and docs/status.md (the README's long form) -----------------------------------------------
R = "README.md"
ST = "docs/status.md"
(
    Span(f"{R}#tiers")
    .literal("2", "the 2-core machine")
    .result("make test", "test-tiers", "make_test.wall_s", "{:.0f}")
    .result("make check", "test-tiers", "make_check.wall_s", "{:.0f}")
    .derived("date", "test-tiers", lambda d: d["utc"][:10], "{}", "utc (date)")
)
(
    Span(f"{R}#timings")
    .result("demo wall", "demo", "run.wall_s", "{:.0f}")
    .derived("demo date", "demo", lambda d: d["run"]["utc"][:10], "{}", "run.utc (date)")
)
(
    Span(f"{R}#demo")
    .result("model rms", "demo", "loop.model.virtual_time.tracking_rms", "{:.4f}")
    .result("memoryless rms", "demo", "loop.memoryless.virtual_time.tracking_rms", "{:.4f}")
    .result("nominal rms", "demo", "loop.nominal.virtual_time.tracking_rms", "{:.4f}")
    .result("oracle rms", "demo", "loop.oracle.virtual_time.tracking_rms", "{:.4f}")
    .result("ratio", "demo", "loop.verdict.tracking.model_to_oracle", "{:.2f}")
    .param("target", lambda: _tracking_target(), "{}", "control/demo.py TRACKING_RATIO_TARGET")
    .result("held-out RMSE", "demo", "train.held_out_rmse", "{:.4f}")
    .result("memoryless RMSE", "demo", "train.baselines.memoryless.rmse", "{:.4f}")
    .result("AR RMSE", "demo", "train.baselines.linear_ar.rmse", "{:.4f}")
    .result("nominal RMSE", "demo", "train.baselines.nominal.rmse", "{:.4f}")
    .result("period", "demo", "loop.period_ms", "{:g}")
    .result("model misses", "demo", "loop.model.deadline_misses", "{:,}")
    .result("model ticks", "demo", "loop.model.ticks", "{:,}")
    .result("model fallbacks", "demo", "loop.model.fallbacks", "{:,}")
    .result("wall-clock rms", "demo", "loop.model.tracking_rms", "{:.4f}")
    .result("cost of lateness", "demo", "loop.model.tracking_cost_of_real_time", "{:+.4f}")
    .result("load", "demo", "loop.load_average_before.0", "{:.1f}")
    .result("certify batch", "demo", "certify.batch", "{}")
    .result("budget", "demo", "certify.budget_us", "{:.0f}")
    .result("certify p50", "demo", "certify.p50_us", "{:.1f}")
    .result("certify max", "demo", "certify.max_us", "{:.0f}")
)
(
    Span(f"{ST}#assurance")
    .param(
        "assoc factor", lambda: bound_constant("softmax_stability", r"within ([\d.]+) \(ln n"), "{}", "BOUND"
    )
    .param("assoc offset", lambda: bound_constant("softmax_stability", r"ln n \+ (\d+)\)"), "{}", "BOUND")
    .param(
        "margin",
        lambda: importlib.import_module("tickformer.contracts.decode_equivalence").PER_LAYER_MARGIN,
        "{:.0f}",
        "contracts/decode_equivalence.py PER_LAYER_MARGIN",
    )
    .run("control decode tol", lambda: decode_tol("control"), sci(1), "decode_tolerance(preset('control'))")
    .result("export measures", "demo", "export.model.worst_backend_disagreement", sci(0))
    .run("score reach", score_search_reach, "{:.2f}", "tests/contracts/test_score_bound.py search_reach()")
)


def ieee754_span(anchor: str) -> Span:
    """The `tickformer prove --ieee754` figures (claims/results/ieee754.json), shown in two docs."""
    return (
        Span(anchor)
        .derived(
            "proven",
            "ieee754",
            lambda d: sum(c["status"] == "proven" for c in d["claims"]),
            "{}",
            "claims proven",
        )
        .derived("claims", "ieee754", lambda d: len(d["claims"]), "{}", "claims")
        .derived(
            "refuted",
            "ieee754",
            lambda d: sum(c["twin_status"] == "refuted" for c in d["claims"]),
            "{}",
            "twins refuted",
        )
        .derived("twins", "ieee754", lambda d: len(d["claims"]), "{}", "twins")
        .result("wall", "ieee754", "wall_s", "{:.0f}")
    )


ieee754_span(f"{ST}#ieee754")


def prove_span(anchor: str) -> Span:
    """The `tickformer prove` counts (claims/results/prove.json), stated in README and docs/status.md."""
    return (
        Span(anchor)
        .run("specs", distinct_specs, "{}", "distinct specs of tickformer.verify.proofs.crosshair.PROOFS")
        .derived("proven", "prove", lambda d: spec_statuses(d).count("proven"), "{}", "distinct specs proven")
        .derived(
            "bounded",
            "prove",
            lambda d: spec_statuses(d).count("no counterexample (bounded)"),
            "{}",
            "distinct specs 'no counterexample (bounded)'",
        )
        .derived(
            "twins refuted",
            "prove",
            lambda d: sum(p["twin_refuted"] for p in d["proofs"]),
            "{}",
            "twins refuted",
        )
        .run("twins", proofs, "{}", "len(PROOFS)")
        .result("prove wall", "prove", "wall_s", "{:.0f}")
        .literal("2", "the 2-core machine")
    )


prove_span(f"{R}#prove")
prove_span(f"{ST}#prove")
# The fix, commit 02c148b (vsel): the V-row selection as Gather(Concat(V_cache, zero row), index).
_VSEL = (
    "printed by python experiments/compare_commits.py --rounds 3 e937cfc^ 2dae658 vsel (vsel = 02c148b), "
    "2026-12-04; not kept in a results file"
)
(
    Span(f"{ST}#bench")
    .literal("10", "the target's factor (benchmarks/report.py targets())")
    .run(
        "recompute ratio",
        lambda: step_p50("ort-recompute", "N") / step_p50("ort", "N"),
        "{:.0f}",
        "report.py from latest.json",
    )
    .run("ort N p50", lambda: step_p50("ort", "N"), "{:.1f}", "latest.json step/ort at N, p50 (us)")
    .run(
        "recompute p50",
        lambda: step_p50("ort-recompute", "N") / 1e3,
        "{:.2f}",
        "latest.json ort-recompute at N (ms)",
    )
    .literal("5", "the target's factor")
    .run(
        "torch ratio",
        lambda: bench_cases()["ratio/ort-vs-torch"]["ratio_p50"],
        "{:.2f}",
        "latest.json ratio/ort-vs-torch",
    )
    .run(
        "inter ort",
        lambda: bench_cases()["ratio/ort-vs-torch"]["ort"]["p50"],
        "{:.1f}",
        "latest.json interleaved ort p50",
    )
    .run(
        "inter torch",
        lambda: bench_cases()["ratio/ort-vs-torch"]["torch"]["p50"],
        "{:.1f}",
        "latest.json interleaved torch p50",
    )
    .run(
        "block ratio",
        lambda: step_p50("torch", "N") / step_p50("ort", "N"),
        "{:.2f}",
        "latest.json torch/ort at N",
    )
    .run(
        "alloc peak",
        lambda: RESULTS["bench-memory"].load()["allocations"]["ort"]["peak_bytes_per_call"],
        "{}",
        "memory.json allocations.ort.peak_bytes_per_call",
    )
    .literal("1", "position 1 (the target's wording)")
    .literal("10", "the target's 10%")
    .run(
        "const time",
        lambda: 100 * abs(step_p50("ort", "1") - step_p50("ort", "N")) / step_p50("ort", "N"),
        "{:.1f}",
        "latest.json ort p50 at 1 vs N",
    )
    .run(
        "no ftz",
        lambda: (
            100 * abs(step_p50("ort-no-ftz", "1") - step_p50("ort-no-ftz", "N")) / step_p50("ort-no-ftz", "N")
        ),
        "{:.0f}",
        "latest.json ort-no-ftz p50 at 1 vs N",
    )
    .literal("0.5", "the target's factor")
    .run(
        "train B16",
        lambda: (
            bench_cases()["train/numpy/B16xT64"]["tokens_per_s_p50"]
            / bench_cases()["train/torch/B16xT64"]["tokens_per_s_p50"]
        ),
        "{:.2f}",
        "latest.json train B16xT64 numpy/torch",
    )
    .run(
        "train B4",
        lambda: (
            bench_cases()["train/numpy/B4xT256"]["tokens_per_s_p50"]
            / bench_cases()["train/torch/B4xT256"]["tokens_per_s_p50"]
        ),
        "{:.2f}",
        "latest.json train B4xT256 numpy/torch",
    )
    .literal("2.0", "the target's ratio")
    .literal("4", "section 4 of the analysis")
    .literal("15", f"59.8 - 45.0: the Gather form's cost over the two layers (us), {_VSEL}")
    .run(
        "tail ratio",
        lambda: bench_report().step_stats(bench_cases(), "ort", "all")["tail_ratio"],
        "{:.2f}",
        "latest.json ort all positions p99.9/p50",
    )
    .run(
        "floor p99.9",
        lambda: bench_report().step_stats(bench_cases(), "ort-floor-io", "all")["p99.9"],
        "{:.1f}",
        "latest.json ort-floor-io p99.9 (us)",
    )
    .run(
        "floor ratio",
        lambda: bench_report().step_stats(bench_cases(), "ort-floor-io", "all")["tail_ratio"],
        "{:.0f}",
        "latest.json ort-floor-io p99.9/p50",
    )
)
# The ORT step's regression since e937cfc: measured side by side by experiments/compare_commits.py (its
# output is printed, not kept in a results file) and a one-off micro-benchmark of the V-row selection.
_REGRESSION = (
    "printed by python experiments/compare_commits.py --rounds 3 8d66d39 517c3c5 e937cfc^ e937cfc af0295e "
    "(and --session), 2026-12-04; not kept in a results file"
)
_WHERE_BENCH = (
    "printed by python experiments/v_selection_forms.py (committed with 02c148b), 2026-12-04; H 4, N 256, dh 16, "
    "one thread"
)
Span(f"{ST}#nodes").run(
    "step nodes", step_graph_nodes, "{}", "ORT-optimised node count of build_step(control)"
)


# --- docs/gpu.md ----------------------------------------------------------------------------------------
G = "docs/gpu.md"
_FP16 = Span(f"{G}#fp16")
for _name, _keys in (
    ("tiny", ("uniform", "step_uniform", "all_lo", "all_hi", "step_all_hi", "alternating")),
    ("control", ("uniform", "step_uniform", "all_lo", "all_hi", "step_all_hi", "alternating")),
    ("tiny-seq2seq", ("cross_k", "cross_v", "step_logits")),
    ("reverse", ("cross_k", "cross_v", "step_logits")),
):
    for _k in _keys:
        _FP16.run(
            f"{_name} {_k}",
            lambda n=_name, k=_k: fp16_errors(n)["normwise"][k],
            "{:.2e}",
            f"measure_error(... preset({_name!r}) ...)['normwise'][{_k!r}]",
            rtol=0.01,  # the float32 parts of the graphs follow the BLAS kernels in their last bits
        )
    _FP16.run(
        f"{_name} worst", lambda n=_name: fp16_errors(n)["worst"], "{:.2e}", f"measure_error {_name} worst"
    )
    _FP16.run(f"{_name} bound", lambda n=_name: fp16_bound(n), "{:.2e}", f"error_bound for {_name}")
_FP16.literal("-10", "the domain edge (the all -10 row)").literal("-10", "the domain edge (the all -10 row)")
_FP16.literal("1", "1+1 layers (tiny-seq2seq)").literal("2", "2+2 layers (reverse)")
_FP16.literal("10", "the domain edge (the all +10 row)").literal("10", "the domain edge (the all +10 row)")
Span(f"{G}#fp16-cmd").param("onnxruntime", lambda: locked_version("onnxruntime"), "{}", "requirements.lock")
(
    Span(f"{G}#fp16-bound")
    .literal("2", "u = 2^-11")
    .param(
        "u",
        lambda: importlib.import_module("tickformer.export.fp16").UNIT_ROUNDOFF_FP16,
        sci(1),
        "UNIT_ROUNDOFF_FP16",
    )
    .literal("2", "the safety factor of error_bound")
    .run(
        "roundings L2",
        lambda: round(fp16_bound("tiny") / (2 * 2.0**-11)),
        "{}",
        "error_bound(n_layers=2) / (2 u)",
    )
    .run("bound L2", lambda: fp16_bound("tiny"), sci(1), "error_bound(n_layers=2)")
    .run(
        "headroom",
        lambda: fp16_bound("tiny") / fp16_errors("tiny")["worst"],
        "{:.1f}",
        "error_bound / worst measured, tiny",
    )
)
(
    Span(f"{G}#emulated-fp16")
    .param(
        "measured",
        lambda: _module("tests/runtime/test_gpu_backends.py", "_claims_gpu").FP16_EMULATED_MEASURED,
        sci(1),
        "tests/runtime/test_gpu_backends.py FP16_EMULATED_MEASURED",
    )
    .literal("2", "the stated factor")
)


# --- docs/certify.md ----------------------------------------------------------------------------------
C = "docs/certify.md"
_ACC = Span(f"{C}#evt-accuracy")
for _p in ("1e-03", "1e-06", "1e-09"):
    _ACC.literal(
        str(float(_p)).replace("0.001", "1e-3").replace("1e-06", "1e-6").replace("1e-09", "1e-9"), "p"
    )
    for _d in ("gumbel", "weibull-type", "gpd-heavy"):
        _ACC.result(f"{_d} {_p} bias", "evt-accuracy", f"accuracy.{_d}.{_p}.bias", "{:+.3f}")
        _ACC.result(f"{_d} {_p} sd", "evt-accuracy", f"accuracy.{_d}.{_p}.sd", "{:.3f}")
(
    _ACC.result("seeds", "evt-accuracy", "accuracy.gumbel.1e-03.n_seeds", "{}").derived(
        "date", "evt-accuracy", lambda d: d["utc"][:10], "{}", "utc (date)"
    )
)
for _d, _ in (("gumbel", 0), ("weibull-type", 1), ("gpd-heavy", 2)):
    for _p in (1e-3, 1e-6, 1e-9):
        _ACC.param(
            f"tol {_d} {_p}",
            lambda d=_d, p=_p: _module("tests/certify/test_evt.py", "_claims_test_evt").CASES[d][1][p],
            "{:g}",
            f"tests/certify/test_evt.py CASES[{_d!r}] tolerance at {_p:g}",
        )
for _p in ("1e-3", "1e-6", "1e-9"):
    _ACC.literal(_p, "the exceedances the tolerances are stated at")
(
    _ACC.literal("1e-9", "the exceedance of the sentence")
    .derived(
        "heavy 1e-9 4sd",
        "evt-accuracy",
        lambda d: 100 * round(4 * d["accuracy"]["gpd-heavy"]["1e-09"]["sd"], 1),
        "{:.0f}",
        "4 sd of the GPD error at 1e-9, rounded to 0.1",
    )
    .literal("4", "4 sd")
    .literal("4", "bias + 4 sd")
    .literal("0", "Gumbel shape xi = 0 (tests/certify/test_evt.py CASES)")
    .literal("-1", "Weibull-type shape xi = -1/3 (CASES)")
    .literal("3", "Weibull-type shape xi = -1/3 (CASES)")
    .literal("0.2", "GPD shape xi = +0.2 (CASES)")
)
(
    Span(f"{C}#calibration")
    .result("replicates", "evt-accuracy", "calibration.replicates", "{}")
    .result("refits", "evt-accuracy", "calibration.n_boot", "{}")
    .result("ks p", "evt-accuracy", "calibration.ks_uniform_p", "{:.2f}")
    .result("below", "evt-accuracy", "calibration.fraction_below_0~05", "{:.0f}", scale=100)
    .literal("0.05", "alpha")
)
(
    Span(f"{C}#campaigns-when")
    .derived("date", "certify-50k", lambda d: d["conditions"]["utc"][:10], "{}", "conditions.utc (date)")
    .result("load c1", "certify-50k", "conditions.load_average.0", "{:.1f}")
    .result("load c3", "certify-rt", "conditions.load_average.0", "{:.1f}")
    .literal("2", "the 2 cores")
)
_CAMP = Span(f"{C}#campaigns")
for _f in ("certify-50k", "certify-rt"):
    (
        _CAMP.result(f"{_f} p50", _f, "stats.p50", "{:.1f}", scale=1e-3)
        .result(f"{_f} p99", _f, "stats.p99", "{:.0f}", scale=1e-3)
        .result(f"{_f} p99.9", _f, "stats.p99~9", "{:.0f}", scale=1e-3)
        .result(f"{_f} max", _f, "stats.max", "{:.0f}", scale=1e-3)
        .result(f"{_f} over", _f, "over_budget", "{}")
        .result(f"{_f} exit", _f, "exit_code", "{}")
    )
(
    _CAMP.derived(
        "ljung c1",
        "certify-50k",
        lambda d: _test(d, "independence (Ljung")["p_value"],
        sci(1),
        "evt.tests Ljung-Box p",
    )
    .derived(
        "ljung c3",
        "certify-rt",
        lambda d: _test(d, "independence (Ljung")["p_value"],
        sci(1),
        "Ljung-Box p",
    )
    .derived("ks c3", "certify-rt", lambda d: _test(d, "identical")["p_value"], sci(1), "KS halves p")
    .derived("ks c1", "certify-50k", lambda d: _test(d, "identical")["p_value"], sci(1), "KS halves p")
    .derived(
        "rate c1", "certify-50k", lambda d: _test(d, "stationary")["p_value"], sci(1), "binomial halves p"
    )
    .derived(
        "rate c3", "certify-rt", lambda d: _test(d, "stationary")["p_value"], sci(1), "binomial halves p"
    )
    .derived("ad c3", "certify-rt", lambda d: _test(d, "goodness")["p_value"], "{:.3f}", "Anderson-Darling p")
    .derived("xi c1", "certify-50k", lambda d: d["evt"]["fit"]["xi"], "{:+.2f}", "evt.fit.xi")
    .derived("xi c3", "certify-rt", lambda d: d["evt"]["fit"]["xi"], "{:+.2f}", "evt.fit.xi")
    .literal("1e-9", "the exceedance probability of the pWCET the certificate asks for")
    .literal("1", "the 1 ms budget (column header)")
)
(
    Span(f"{C}#demo")
    .derived("date", "demo", lambda d: d["run"]["utc"][:10], "{}", "run.utc (date)")
    .result("load", "demo", "run.load_average_before.0", "{:.1f}")
    .result("wall", "demo", "run.wall_s", "{:.0f}")
    .result("train", "demo", "stage_seconds.train", "{:.1f}")
    .result("export", "demo", "stage_seconds.export", "{:.1f}")
    .result("verify", "demo", "stage_seconds.verify", "{:.1f}")
    .result("certify", "demo", "stage_seconds.certify", "{:.1f}")
    .result("loops", "demo", "stage_seconds.loop", "{:.1f}")
    .derived("properties", "demo", lambda d: len(d["verify"]["properties"]), "{}", "len(verify.properties)")
    .result("examples", "demo", "config.verify_examples", "{}")
    .result("budget", "demo", "certify.budget_us", "{:.0f}")
    .result("p50", "demo", "certify.p50_us", "{:.1f}")
    .result("p99", "demo", "certify.p99_us", "{:.1f}")
    .result("max", "demo", "certify.max_us", "{:.0f}")
    .result("model ticks", "demo", "loop.model.deadlines.ticks", "{:,}")
    .result("misses", "demo", "loop.model.deadlines.deadline_misses", "{:,}")
    .result("skipped", "demo", "loop.model.deadlines.skipped_periods", "{:,}")
    .result("overruns", "demo", "loop.model.deadlines.overruns", "{:,}")
    .result("fallbacks", "demo", "loop.model.deadlines.fallbacks", "{:,}")
    .result("step max", "demo", "loop.model.deadlines.step_max", "{:.2f}", scale=1e-6)
    .result("wake avg", "demo", "loop.model.deadlines.wake_lateness_avg", "{:.2f}", scale=1e-6)
    .result("wake max", "demo", "loop.model.deadlines.wake_lateness_max", "{:.2f}", scale=1e-6)
)
(
    Span(f"{C}#c-grow")
    .derived(
        "first", "certify-growing", lambda d: d["campaign"]["timed_positions"][0], "{}", "timed_positions"
    )
    .derived(
        "last", "certify-growing", lambda d: d["campaign"]["timed_positions"][1], "{}", "timed_positions"
    )
    .derived("max_len", "certify-growing", lambda d: d["campaign"]["timed_positions"][1] + 1, "{}", "max_len")
    .result("p50", "certify-growing", "stats.p50", "{:.0f}", scale=1e-3)
    .result("max", "certify-growing", "stats.max", "{:.0f}", scale=1e-3)
    .derived(
        "runs p",
        "certify-growing",
        lambda d: _test(d, "independence (runs)")["p_value"],
        "{:.3f}",
        "runs test p",
    )
)


# --- docs/contracts.md ---------------------------------------------------------------------------------
KC = "docs/contracts.md"


@functools.cache
def softmax_sum_ratio(n: int) -> float:
    """Worst |sum p - 1| / weight_sum_bound(n) over 200 rows of N(0, 3^2) scores through the operator."""
    import numpy as np

    from tickformer.contracts.softmax_stability import weight_sum_bound

    weights_of = _module("tests/contracts/test_softmax_stability.py", "_claims_softmax").weights_of
    rng = np.random.default_rng(n)
    worst = 0.0
    for _ in range(200):
        p = weights_of((rng.standard_normal(n) * 3).astype(np.float32))
        worst = max(worst, abs(float(p.astype(np.float64).sum()) - 1.0))
    return worst / weight_sum_bound(n, np.float32)


def exp_ulp() -> float:
    import numpy as np

    x = np.linspace(-87, 88, 2_000_001, dtype=np.float32)
    y = np.exp(x)
    return float((np.abs(y.astype(np.float64) - np.exp(x.astype(np.float64))) / np.spacing(y)).max())


def assoc_ratio() -> float:
    import numpy as np

    from tickformer.contracts.softmax_stability import merge_assoc_bound, merge_assoc_gap

    ms = np.random.default_rng(0).uniform(-50, 50, (3000, 3))
    return max(merge_assoc_gap(*map(float, t)) for t in ms) / merge_assoc_bound(3, np.float64)


def bench_median_us(fullname: str) -> float:
    bench = next(b for b in RESULTS["bench"].load()["benchmarks"] if b["fullname"] == fullname)
    return bench["stats"]["median"] * 1e6


(
    Span(f"{KC}#softmax")
    .param("numpy", lambda: locked_version("numpy"), "{}", "requirements.lock")
    .run("n7", lambda: softmax_sum_ratio(7), "{:.1g}", "softmax_sum_ratio(7) in claims/registry.py", tol=0.2)
    .literal("7", "n")
    .run("n1000", lambda: softmax_sum_ratio(1000), "{:.1g}", "softmax_sum_ratio(1000)", tol=0.0015)
    .literal("1000", "n")
    .run("n4096", lambda: softmax_sum_ratio(4096), "{:.1g}", "softmax_sum_ratio(4096)", tol=0.0004)
    .literal("4096", "n")
)
(
    Span(f"{KC}#softmax-exp")
    .literal("2000001", "grid points")
    .literal("-87", "grid start")
    .literal("88", "grid end")
    .run("exp ulp", exp_ulp, "{:.2f}", "exp_ulp() in claims/registry.py", tol=0.5)
    .literal("3000", "triples")
    .literal("-50", "range")
    .literal("50", "range")
    .run("assoc", assoc_ratio, "{:.2f}", "assoc_ratio() in claims/registry.py")
)
Span(f"{KC}#score").run(
    "reach", score_search_reach, "{:.2f}", "tests/contracts/test_score_bound.py search_reach()"
)
Span(f"{KC}#decode").run(
    "control", lambda: decode_tol("control"), sci(1), "decode_tolerance(preset('control'))"
)
_overhead = Span(f"{KC}#overhead")
for _name, _case, _form, _src in (  # benchmarks/test_contract_overhead.py, median (us)
    ("off", "test_monitor_check_step[off]", "{:.2f}", "latest.json median"),
    ("monitor", "test_monitor_check_step[monitor]", "{:.2f}", "latest.json"),
    ("check", "test_monitor_check_step[check]", "{:.2f}", "latest.json"),
    ("validate", "test_validate_input", "{:.2f}", "latest.json median"),
    ("s off", "test_session_step_contract_modes[off]", "{:.1f}", "latest.json"),
    ("s mon", "test_session_step_contract_modes[monitor]", "{:.1f}", "latest.json"),
    ("s chk", "test_session_step_contract_modes[check]", "{:.1f}", "latest.json"),
):
    _overhead.run(
        _name, lambda t=_case: bench_median_us(f"benchmarks/test_contract_overhead.py::{t}"), _form, _src
    )
(
    Span(f"{KC}#prove")
    .run("specs", distinct_specs, "{}", "distinct specs of PROOFS")
    .derived("proven", "prove", lambda d: spec_statuses(d).count("proven"), "{}", "distinct specs proven")
    .derived(
        "bounded",
        "prove",
        lambda d: spec_statuses(d).count("no counterexample (bounded)"),
        "{}",
        "distinct specs 'no counterexample (bounded)'",
    )
    .derived("refuted", "prove", lambda d: sum(p["twin_refuted"] for p in d["proofs"]), "{}", "twins refuted")
    .run("twins", proofs, "{}", "len(PROOFS)")
    .result("wall", "prove", "wall_s", "{:.0f}")
    .derived(
        "cpu",
        "prove",
        lambda d: sum(c["cpu_s"] for p in d["proofs"] for c in p["conditions"] + p["twin_conditions"]),
        "{:.0f}",
        "sum of cpu_s over every condition",
    )
    .literal("2", "2 cores")
)
ieee754_span(f"{KC}#ieee754")


def graph_proof_seconds(kind: str, preset_name: str) -> Callable[[Any], float]:
    """The wall time of the graph proofs of one reference artifact in prove_graphs.json."""

    def get(d: dict) -> float:
        (a,) = [a for a in d["artifacts"] if a["kind"] == kind and a["preset"] == preset_name]
        return a["report"]["wall_s"]

    return get


def _graph_secs(v: float) -> str:
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


(
    Span(f"{KC}#graphs")
    .derived("tiny decoder", "prove-graphs", graph_proof_seconds("decoder", "tiny"), _graph_secs, "wall_s")
    .derived(
        "control decoder", "prove-graphs", graph_proof_seconds("decoder", "control"), _graph_secs, "wall_s"
    )
    .param("control max_len", lambda: parameter_max_len("control"), "{}", "preset('control').max_len")
    .derived("windowed", "prove-graphs", graph_proof_seconds("windowed", "tiny"), _graph_secs, "wall_s")
    .derived(
        "encoder-decoder",
        "prove-graphs",
        graph_proof_seconds("encoder-decoder", "tiny-seq2seq"),
        _graph_secs,
        "wall_s",
    )
    .derived("ssm", "prove-graphs", graph_proof_seconds("ssm", "tiny"), _graph_secs, "wall_s")
)
(
    Span(f"{KC}#int-specs")
    .run("int specs", lambda: int_proofs(True), "{}", "distinct int specs of PROOFS")
    .run("int proofs", lambda: int_proofs(False), "{}", "int entries of PROOFS")
)
Span(f"{KC}#crosshair").param("version", lambda: locked_version("crosshair-tool"), "{}", "requirements.lock")


# --- docs/export_runtime.md ------------------------------------------------------------------------------
E = "docs/export_runtime.md"
_EQ = Span(f"{E}#equivalence")
for _pair in (
    "model:ort_vs_numpy",
    "model:reference_vs_numpy",
    "step:ort_vs_numpy",
    "step:reference_vs_numpy",
):
    for _k in ("max_abs", "max_rel"):
        _EQ.run(
            f"{_pair} {_k}",
            lambda pair=_pair, k=_k: control_equivalence()["equivalence"]["pairs"][pair][k],
            sci(2),
            f"manifest equivalence.pairs[{_pair!r}].{_k} of the seeded control export",
            rtol=0.5,  # errors of ~1e-6: their last bits follow the BLAS kernels and threading
        )
(
    _EQ.run("atol", lambda: control_equivalence()["tolerance"]["atol"], sci(2), "manifest tolerance.atol")
    .run("rtol", lambda: control_equivalence()["tolerance"]["rtol"], sci(2), "manifest tolerance.rtol")
    .literal("6", "S = 6 sublayers on the path (the tolerance's reason)")
    .run(
        "n",
        lambda: int(re.search(r"n = (\d+)", control_equivalence()["tolerance"]["reason"]).group(1)),
        "{}",
        "tolerance reason",
    )
)
(
    Span(f"{E}#allocs")
    .result("ort peak", "bench-memory", "allocations.ort.peak_bytes_per_call", "{}")
    .result("ort calls", "bench-memory", "allocations.ort.calls", "{}")
    .result("run peak", "bench-memory", "allocations.ort-run.peak_bytes_per_call", "{}")
)
_LAT = Span(f"{E}#latency")
for _impl in ("ort", "ort-no-ftz", "ort-run"):
    for _label in ("1", "N/2", "N"):
        _LAT.run(
            f"{_impl} {_label}",
            lambda i=_impl, l=_label: step_p50(i, l),
            "{:.1f}",
            f"latest.json {_impl} p50 at {_label}",
        )
    _LAT.run(
        f"{_impl} all p50",
        lambda i=_impl: bench_report().step_stats(bench_cases(), i, "all")["p50"],
        "{:.1f}",
        "latest.json",
    )
    _LAT.run(
        f"{_impl} all p99",
        lambda i=_impl: bench_report().step_stats(bench_cases(), i, "all")["p99"],
        "{:.1f}",
        "latest.json",
    )
(
    _LAT.literal("1", "position 1 (the header)")
    .literal("2", "N/2 (the header)")
    .literal("1", "position 1 (the sentence)")
    .run(
        "no ftz",
        lambda: (
            100 * abs(step_p50("ort-no-ftz", "1") - step_p50("ort-no-ftz", "N")) / step_p50("ort-no-ftz", "N")
        ),
        "{:.0f}",
        "latest.json ort-no-ftz p50 at 1 vs N",
    )
    .run(
        "ftz",
        lambda: 100 * abs(step_p50("ort", "1") - step_p50("ort", "N")) / step_p50("ort", "N"),
        "{:.1f}",
        "latest.json ort p50 at 1 vs N",
    )
)
_NODES = Span(f"{E}#nodes").run(
    "total", step_graph_nodes, "{}", "ORT-optimised node count of build_step(control)"
)
for _op in (
    "Gemm",
    "Reshape",
    "Split",
    "MatMul",
    "LayerNormalization",
    "FusedMatMul",
    "Concat",
    "Where",
    "Softmax",
    "Mul",
    "Add",
    "FusedGemm",
    "Gather",
    "Less",
):
    _NODES.run(_op, lambda op=_op: step_graph_ops().get(op, 0), "{}", f"ORT-optimised {_op} count")
(
    Span(f"{E}#binding")
    .run(
        "ort", lambda: bench_report().step_stats(bench_cases(), "ort", "all")["p50"], "{:.1f}", "latest.json"
    )
    .run(
        "run",
        lambda: bench_report().step_stats(bench_cases(), "ort-run", "all")["p50"],
        "{:.1f}",
        "latest.json",
    )
)
(
    Span(f"{E}#numpy")
    .run("numpy N", lambda: step_p50("numpy", "N"), "{:.1f}", "latest.json numpy p50 at N")
    .run("numpy 1", lambda: step_p50("numpy", "1"), "{:.1f}", "latest.json numpy p50 at 1")
    .run("growing 1", lambda: step_p50("numpy-growing", "1"), "{:.1f}", "latest.json numpy-growing p50 at 1")
    .literal("1", "position 1")
    .literal("1", "position 1")
    .run("growing N", lambda: step_p50("numpy-growing", "N"), "{:.1f}", "latest.json numpy-growing p50 at N")
)
(
    Span(f"{E}#stale-cost")
    .literal("7", f"(59.8 - 45.0) / 2: the Gather selection per layer (us), {_VSEL}")
    .literal("26", f"the Where selection per layer (us), {_WHERE_BENCH} and {_VSEL}")
)


# --- docs/verify.md: the normwise tolerance's measured margins (claims/verify_margins.py) -------------------
def _smallest_caught(data: dict) -> float:
    return min(
        m["step_equals_full"]["margin"]
        for m in data["models"].values()
        if m.get("step_equals_full", {}).get("status") == "fail" and "margin" in m["step_equals_full"]
    )


(
    Span("docs/verify.md#margins")
    .result("step_equals_full margin", "verify-margins", "worst_margin.step_equals_full", "{:.2g}")
    .result("optimizations_agree margin", "verify-margins", "worst_margin.optimizations_agree", "{:.2g}")
    .result("onnx_reference margin", "verify-margins", "worst_margin.onnx_reference", "{:.2g}")
    .derived("smallest caught", "verify-margins", _smallest_caught, "{:.0f}", "min margin of a caught bug")
)


# --- docs/control.md ------------------------------------------------------------------------------------
K = "docs/control.md"


def _hidden_param(name: str) -> Any:
    return importlib.import_module("tickformer.control.plant").PARAM_RANGES[name]


def _nominal(field: str) -> Any:
    return getattr(importlib.import_module("tickformer.control.plant").NOMINAL, field)


_task = Span(f"{K}#task")
for _name in ("mass", "length", "damping", "gain"):
    (
        _task.param(
            f"{_name} lo", lambda n=_name: _hidden_param(n)[0], "{:g}", "control/plant.py PARAM_RANGES"
        )
        .param(f"{_name} hi", lambda n=_name: _hidden_param(n)[1], "{:g}", "control/plant.py PARAM_RANGES")
        .param(f"{_name} nominal", lambda n=_name: _nominal(n), "{:.1f}", "control/plant.py NOMINAL")
    )
(
    _task.param("delay", lambda: _nominal("delay"), "{}", "control/plant.py NOMINAL.delay")
    .param("noise", lambda: _nominal("noise"), "{:g}", "control/plant.py NOMINAL.noise")
    .param("dt", lambda: _nominal("dt"), "{:g}", "control/plant.py NOMINAL.dt")
)


def _hidden_task_setting(name: str) -> Any:
    return getattr(importlib.import_module("tickformer.control.task").HIDDEN_TASK, name)


def _hidden_episodes_per(transitions: str) -> int:
    tasks = importlib.import_module("tickformer.control.task")
    max_len = importlib.import_module("tickformer.model.config").preset("control-hidden").max_len
    return getattr(tasks, transitions) // max_len


def _max_hold() -> int:
    import inspect

    plant = importlib.import_module("tickformer.control.plant")
    return inspect.signature(plant.hidden_episodes).parameters["max_hold"].default


def _plant_constant(name: str) -> Any:
    return getattr(importlib.import_module("tickformer.control.plant"), name)


(
    Span(f"{K}#data")
    .param(
        "loop share", lambda: round(100 * _plant_constant("LOOP_SHARE")), "{}", "control/plant.py LOOP_SHARE"
    )
    .param(
        "loop candidates",
        lambda: _plant_constant("LOOP_CANDIDATES"),
        "{}",
        "control/plant.py LOOP_CANDIDATES",
    )
    .param("loop kp", lambda: _plant_constant("LOOP_KP"), "{:g}", "control/plant.py LOOP_KP")
    .param("loop w_omega", lambda: _plant_constant("LOOP_W_OMEGA"), "{:g}", "control/plant.py LOOP_W_OMEGA")
    .param(
        "amplitude lo",
        lambda: _plant_constant("LOOP_AMPLITUDE")[0],
        "{:g}",
        "control/plant.py LOOP_AMPLITUDE",
    )
    .param(
        "amplitude hi",
        lambda: _plant_constant("LOOP_AMPLITUDE")[1],
        "{:g}",
        "control/plant.py LOOP_AMPLITUDE",
    )
    .param("period lo", lambda: _plant_constant("LOOP_PERIOD_S")[0], "{:g}", "control/plant.py LOOP_PERIOD_S")
    .param("period hi", lambda: _plant_constant("LOOP_PERIOD_S")[1], "{:g}", "control/plant.py LOOP_PERIOD_S")
    .param(
        "explore", lambda: round(100 * _plant_constant("LOOP_EXPLORE")), "{}", "control/plant.py LOOP_EXPLORE"
    )
    .literal("2", "the start's range, [-2, 2] rad (START_THETA)")
    .literal("-2", "the start's range")
    .literal("1", "omega_0's range, [-1, 1] rad/s (START_OMEGA)")
    .literal("-1", "omega_0's range's low end")
    .literal("1", "the commands' range, [-1, 1]")
    .literal("-1", "the commands' range's low end")
    .param(
        "tick share",
        lambda: round(100 * dict(importlib.import_module("tickformer.control.plant").EPISODE_MIX)["tick"]),
        "{}",
        "control/plant.py EPISODE_MIX",
    )
    .literal("1", "the shortest hold, 1 tick")
    .param("max hold", _max_hold, "{}", "control/plant.py hidden_episodes(max_hold=)")
    .param(
        "train episodes",
        lambda: _hidden_episodes_per("HIDDEN_TRAIN_TRANSITIONS"),
        "{:,}",
        "HIDDEN_TRAIN_TRANSITIONS // max_len",
    )
    .param(
        "train transitions",
        lambda: importlib.import_module("tickformer.control.task").HIDDEN_TRAIN_TRANSITIONS,
        "{:,}",
        "control/task.py HIDDEN_TRAIN_TRANSITIONS",
    )
    .param(
        "held-out episodes",
        lambda: _hidden_episodes_per("HIDDEN_HELD_OUT_TRANSITIONS"),
        "{:,}",
        "HIDDEN_HELD_OUT_TRANSITIONS // max_len",
    )
    .param(
        "held-out transitions",
        lambda: importlib.import_module("tickformer.control.task").HIDDEN_HELD_OUT_TRANSITIONS,
        "{:,}",
        "control/task.py HIDDEN_HELD_OUT_TRANSITIONS",
    )
    .param("steps", lambda: _hidden_task_setting("steps"), "{:,}", "control/task.py HIDDEN_TASK")
    .param("batch", lambda: _hidden_task_setting("batch_size"), "{}", "control/task.py HIDDEN_TASK")
)
_pred = Span(f"{K}#prediction")
for _label, _key in (
    ("model", "train.held_out_rmse"),
    ("model 3", "train.held_out_rmse_3_step"),
    ("memoryless", "train.baselines.memoryless.rmse"),
    ("memoryless 3", "train.baselines.memoryless.rmse_3_step"),
    ("ar", "train.baselines.linear_ar.rmse"),
    ("ar 3", "train.baselines.linear_ar.rmse_3_step"),
    ("nominal", "train.baselines.nominal.rmse"),
    ("nominal 3", "train.baselines.nominal.rmse_3_step"),
):
    _pred.result(_label, "demo", _key, "{:.4f}")
(
    _pred.result("ratio", "demo", "train.ratio_to_memoryless", "{:.2f}")
    .literal("0.5", "the target ratio (the issue's)")
    .literal("32", "the window (row label)")
    .literal("32", "the linear AR's history, the window (row label)")
    .literal("1", "the memoryless model's window (row label)")
    .literal("3", "the 3-step horizon (column label)")
)
(
    Span(f"{K}#period")
    .result("period", "demo", "loop.period_ms", "{:g}")
    .result("cert p50", "demo", "certify.p50_us", "{:.0f}")
    .result("cert p99", "demo", "certify.p99_us", "{:.0f}")
    .result("cert p50 share", "demo", "loop.period.certified_step_p50_share", "{:.1f}", scale=100)
    .result("cert p99 share", "demo", "loop.period.certified_step_p99_share", "{:.1f}", scale=100)
    .result("tick p50", "demo", "loop.model.step_p50_us", "{:.0f}")
    .result("tick p99", "demo", "loop.model.step_p99_us", "{:.0f}")
    .result("tick p50 share", "demo", "loop.period.model_tick_p50_share", "{:.1f}", scale=100)
    .result("tick p99 share", "demo", "loop.period.model_tick_p99_share", "{:.1f}", scale=100)
    .param(
        "runs",
        lambda: importlib.import_module("tickformer.control.demo").DemoConfig().catch_up_max + 1,
        "{}",
        "DemoConfig.catch_up_max + 1",
    )
    .result("rule need", "demo", "loop.period.rule_need_us", "{:.0f}")
    .result("budget", "demo", "loop.period.budget_us", "{:.0f}")
)
_mon = Span(f"{K}#monitor").result("budget", "demo", "loop.period.budget_us", "{:.0f}")
for _c in ("model", "memoryless"):
    _mon.result(f"{_c} steps", "demo", f"loop.{_c}.contracts.steps", "{:,}")
    for _k in ("input_domain", "output_bound", "latency"):
        _mon.result(f"{_c} {_k}", "demo", f"loop.{_c}.contracts.contracts.{_k}.violations", "{:,}")


_SR = "control-side-runs"


_cl = Span("docs/ssm.md#closed-loop")
for _r in ("r6_ssm", "r6_window_segments"):
    _cl.result(f"{_r} ratio", _SR, f"recipe.{_r}.ratio_mean", "{:.2f}")
    for _seg in ("100-200", "200-400", "400-1000"):  # control_side_runs.SEGMENTS
        _cl.derived(
            f"{_r} segment {_seg}",
            _SR,
            lambda d, r=_r, seg=_seg: statistics.fmean(d["recipe"][r]["tracking_by_segment"][seg]),
            "{:.4f}",
            f"mean over the plants of recipe.{_r}.tracking_by_segment.{_seg}",
        )
_cl.literal("5", "the five plants (column label)").literal("16", "d_state of the run (row label)")
_cl.literal("32", "the window of the demo's recipe (row label)")
_cl.literal("64", "the control-hidden preset's max_len: the training sequence length")
for _a in (100, 200, 400):  # "100-200 / 200-400 / 400-1000": the check reads each range's first bound
    _cl.literal(str(_a), "a segment's first plant tick, control_side_runs.SEGMENTS (column label)")


def _tracking_target() -> float:
    return importlib.import_module("tickformer.control.demo").TRACKING_RATIO_TARGET


_PREV_DEMO_IDENTIFIED = (
    "the previous demo run (2026-12-05 11:00 UTC, commit 775ed94, on another machine's CPU), "
    "IdentifiedMPC on the recipe without closed-loop episodes"
)
_PREV_DEMO = (
    "the previous demo run (2026-12-04 20:44 UTC, commit 3c9e217), HistoryMPC on the horizons-only model"
)
_loop = Span(f"{K}#loop")
for _c in ("model", "memoryless", "nominal", "oracle"):
    (
        _loop.result(f"{_c} virtual rms", "demo", f"loop.{_c}.virtual_time.tracking_rms", "{:.4f}")
        .result(f"{_c} rms", "demo", f"loop.{_c}.tracking_rms", "{:.4f}")
        .result(f"{_c} ticks", "demo", f"loop.{_c}.ticks", "{:,}")
        .result(f"{_c} misses", "demo", f"loop.{_c}.deadline_misses", "{:,}")
        .result(f"{_c} covered", "demo", f"loop.{_c}.misses_covered_by_fallback", "{:,}")
        .result(f"{_c} fallbacks", "demo", f"loop.{_c}.fallbacks", "{:,}")
        .result(f"{_c} p50", "demo", f"loop.{_c}.step_p50_us", "{:.0f}")
        .result(f"{_c} p99", "demo", f"loop.{_c}.step_p99_us", "{:.0f}")
    )
(
    Span(f"{K}#latency")
    .result("p50 first", "demo", "loop.model.step_p50_first_10pct_us", "{:.0f}")
    .result("p50 last", "demo", "loop.model.step_p50_last_10pct_us", "{:.0f}")
    .result("p50 change", "demo", "loop.model.step_p50_change", "{:+.1f}", scale=100)
    .param(
        "tolerance",
        lambda: 100 * importlib.import_module("tickformer.control.demo").P50_DRIFT_TOLERANCE,
        "{:.0f}",
        "control/demo.py P50_DRIFT_TOLERANCE",
    )
    .result("warm ticks", "demo", "loop.model.rss_warm_tick", "{}")
    .result("rss warm", "demo", "loop.model.rss_warm_bytes", "{:.1f}", scale=1e-6)
    .result("rss end", "demo", "loop.model.rss_end_bytes", "{:.1f}", scale=1e-6)
    .result("rss growth", "demo", "loop.verdict.rss.growth_bytes", "{:,}")
    .derived(
        "rss growth pages",
        "demo",
        lambda d: d["loop"]["verdict"]["rss"]["growth_bytes"] / 4096,
        "{:g}",
        "loop.verdict.rss.growth_bytes / 4096 (the page size here)",
    )
    .result("warm ticks (text)", "demo", "loop.model.rss_warm_tick", "{}")
    .literal("10", "the first tenth of the ticks (column label)")
    .literal("10", "the last tenth of the ticks (column label)")
)
(
    _loop.literal("32", "the model's window (column label)")
    .literal("1", "the memoryless model's window (column label)")
    .result("ratio", "demo", "loop.verdict.tracking.model_to_oracle", "{:.2f}")
    .param("target", _tracking_target, "{}", "control/demo.py TRACKING_RATIO_TARGET")
    .result("ratio wall clock", "demo", "loop.verdict.tracking.model_to_oracle_real_time", "{:.2f}")
)


# docs/control.md "The model identifies, a filter estimates": the demo model's held-out
# identification, IdentifiedMPC's loops over 4 seeds (ident4, ident4_fresh20) against the
# horizons-only runs of the same seeds (seeds4_10k, fresh20) and the joint EKF (physics fresh20)
_ID = Span(f"{K}#identification")
_ID.result("theta", "demo", "train.identification.theta_rmse", "{:.4f}")
_ID.result("noise", "demo", "train.identification.noise_rms", "{:.4f}")
_ID.result("omega", "demo", "train.identification.omega_rmse", "{:.3f}")
for _idn in ("g/L", "b/(m L^2)", "k/(m L^2)"):
    _ID.result(
        f"{_idn} rms", "demo", f"train.identification.constants_relative_error_rms.{_idn}", "{:.1f}", 100.0
    )
    _ID.result(
        f"{_idn} mean", "demo", f"train.identification.constants_relative_error_mean.{_idn}", "{:+.1f}", 100.0
    )
_IDD = Span(f"{K}#identified-demo")
for _idn in ("g/L", "b/(m L^2)", "k/(m L^2)"):
    _IDD.result(f"{_idn}", "demo", f"loop.model.identified_relative_error.{_idn}", "{:+.1f}", 100.0)


def _ident(d: Any, run: str) -> Any:
    s = d["ensemble"][run]
    if s["spec"].get("identified") is None or s["spec"]["seeds"] != [0, 1, 2, 3]:
        raise ValueError(f"{run} is not an IdentifiedMPC run of seeds 0-3")
    return s["snapshots"]["10000"]


# docs/control.md "Training in the loop's regime": IdentifiedMPC on models trained with closed-loop
# episodes (loop4, loop4_fresh20) against the recipe without them on the same machine and plants
# (ident4_fresh20_here: loop_share 0)
def _loop_run(d: Any, run: str, share: float | None) -> Any:
    s = d["ensemble"][run]
    if s["spec"].get("loop_share") != share:
        raise ValueError(f"{run} was not run with loop_share {share}")
    return _ident(d, run)


def _loop_fresh(d: Any, run: str, share: float | None) -> Any:
    if d["ensemble"][run]["spec"].get("plants") != [100, 20]:
        raise ValueError(f"{run} is not on the twenty fresh plants (100, 20)")
    return _loop_run(d, run, share)["identified_ratio"]


# README's tracking sentence (docs/control.md "The model identifies, a filter estimates")
(
    Span(f"{ST}#identified")
    .result("demo ratio", "demo", "loop.verdict.tracking.model_to_oracle", "{:.2f}")
    .param("target", _tracking_target, "{}", "control/demo.py TRACKING_RATIO_TARGET")
    .literal("1.77", f"the demo's model / oracle tracking ratio in {_PREV_DEMO_IDENTIFIED}")
    .literal("2.62", f"the demo's model / oracle tracking ratio in {_PREV_DEMO}")
    .derived(
        "worst fresh",
        _SR,
        lambda d: max(statistics.fmean(r) for r in _loop_fresh(d, "loop4_fresh20", None)),
        "{:.2f}",
        "loop4_fresh20 worst seed mean",
    )
    .derived(
        "without best fresh",
        _SR,
        lambda d: min(statistics.fmean(r) for r in _loop_fresh(d, "ident4_fresh20_here", 0)),
        "{:.2f}",
        "ident4_fresh20_here best seed mean",
    )
    .derived(
        "without worst fresh",
        _SR,
        lambda d: max(statistics.fmean(r) for r in _loop_fresh(d, "ident4_fresh20_here", 0)),
        "{:.2f}",
        "ident4_fresh20_here worst seed mean",
    )
)
_smooth = lambda: importlib.import_module("tickformer.control.demo").DemoConfig().smoothing  # noqa: E731
Span(f"{K}#smoothing").param("smoothing", _smooth, "{:g}", "DemoConfig.smoothing")
Span(f"{K}#smoothing-2").param("smoothing", _smooth, "{:g}", "DemoConfig.smoothing")


# --- files: coverage ------------------------------------------------------------------------------------
# --- docs/streaming.md: windowed vs unwindowed accuracy, one stream of 10^6 steps --------------------------
S = "docs/streaming.md"
(
    Span(f"{S}#accuracy")
    .result("steps", "streaming-accuracy", "steps", "{}")
    .result("window", "streaming-accuracy", "window", "{}")
    .result("seed", "streaming-accuracy", "seed", "{}")
    .result("windowed rmse", "streaming-accuracy", "windowed.model_rmse", "{:.4f}")
    .result("unwindowed rmse", "streaming-accuracy", "unwindowed.model_rmse", "{:.4f}")
    .result("baseline rmse", "streaming-accuracy", "unwindowed.baseline_rmse", "{:.4f}")
    .result("rmse ratio", "streaming-accuracy", "rmse_ratio_windowed_over_unwindowed", "{:.2f}")
    .result("windowed vs baseline", "streaming-accuracy", "windowed.ratio", "{:.3f}")
    .result("unwindowed vs baseline", "streaming-accuracy", "unwindowed.ratio", "{:.3f}")
    .derived("date", "streaming-accuracy", lambda d: d["utc"][:10], "{}", "utc (date)")
)
for _point in ("1000", "100000", "1000000"):
    (
        Span(f"{S}#stream-{_point}")
        .result("p50", "bench-streaming", f"stream.checkpoints.{_point}.stats.p50", "{:.1f}")
        .result("p99", "bench-streaming", f"stream.checkpoints.{_point}.stats.p99", "{:.0f}")
        .result("young p50", "bench-streaming", f"stream.checkpoints.{_point}.young_stats.p50", "{:.1f}")
        .result("old/young", "bench-streaming", f"stream.checkpoints.{_point}.old_over_young_p50", "{:.2f}")
        .result("rss", "bench-streaming", f"stream.rss_mib.{_point}", "{:.1f}")
    )
(
    Span(f"{S}#stream-ratios")
    .result("p50 ratio", "bench-streaming", "stream.p50_ratio_last_over_first", "{:.2f}")
    .result("rss ratio", "bench-streaming", "stream.rss_ratio_last_over_first", "{:.4f}")
    .derived("date", "bench-streaming", lambda d: d["date_utc"][:10], "{}", "date_utc (date)")
    .derived(
        "rss rise",
        "bench-streaming",
        lambda d: 1024 * (d["stream"]["rss_mib"]["100000"] - d["stream"]["rss_mib"]["1000"]),
        "{:.0f}",
        "KiB, rss_mib at 1e5 - at 1e3",
    )
)
(
    Span(f"{S}#vs-static")
    .result("window", "bench-streaming", "vs_static.window", "{}")
    .result("windowed p50", "bench-streaming", "vs_static.windowed.p50", "{:.1f}")
    .result("static p50", "bench-streaming", "vs_static.static_max_len_w.p50", "{:.1f}")
    .result("ratio", "bench-streaming", "vs_static.p50_ratio_windowed_over_static", "{:.2f}")
)

FILES: dict[str, tuple[str, str]] = {
    "README.md": ("covered", ""),
    "docs/README.md": ("covered", ""),
    "docs/status.md": ("covered", ""),
    "docs/gpu.md": ("covered", ""),
    "docs/assurance.md": (
        "generated",
        "tickformer prove --assurance, re-rendered from claims/results/prove.json, ieee754.json and "
        "prove_graphs.json",
    ),
    "docs/claims.md": ("covered", ""),
    "docs/architecture.md": ("covered", ""),
    "docs/benchmarks.md": ("covered", ""),
    "docs/certify.md": ("covered", ""),
    "docs/training.md": ("covered", ""),
    "docs/reliability.md": ("covered", ""),
    "docs/codegen.md": ("covered", ""),
    "docs/ssm.md": ("covered", ""),
    "docs/reliability_report.md": (
        "generated",
        "TICKFORMER_RELIABILITY_REPORT=docs/reliability_report.md pytest tests/reliability ... "
        "(its command and date are in it)",
    ),
    "docs/contracts.md": ("covered", ""),
    "docs/control.md": ("covered", ""),
    "docs/export_runtime.md": ("covered", ""),
    "docs/artifact_format.md": ("covered", ""),
    "docs/verify.md": ("covered", ""),
    "docs/streaming.md": ("covered", ""),
}

# Definitional numbers outside spans that look like measurements (versions, thresholds, units).
LITERALS: dict[str, dict[str, str]] = {
    "README.md": {"3.11": "the Python version requirements.lock is made for (make lock)"},
    "docs/README.md": {},
    "docs/status.md": {
        "15": "15%: the factors 0.85 and 1.15 of experiments/control_sensitivity.py FACTORS",
    },
    "docs/gpu.md": {
        "1e-5": "the emulated tests' tolerance (tests/runtime/test_gpu_backends.py)",
        "-1e9": "an example of the additive mask the fp16-range rule flags",
        "10.15": "a TensorRT release number",
        "10": "gpu_check.sh's 10x the manifest tolerance (a threshold)",
        "1": "the claims check's relative tolerance on the fp16 table (rtol=0.01)",
    },
    "docs/claims.md": {"5.3": "an example of a ratio in the rule's description"},
    "docs/architecture.md": {},
    "docs/benchmarks.md": {"2.13": "the torch version compared with", "5": "the 5x target (a threshold)"},
    "docs/contracts.md": {
        "98": "CrossHair's share of z3 Real floats (crosshair/libimpl/builtinslib.py, 0.0.114)",
        "2": "CrossHair's share of z3 IEEE doubles (same source)",
        "1e30": "a test's edge logits (tests/contracts/test_softmax_stability.py)",
        "3.4e38": "a test's edge logits (the fp32 maximum)",
        "1": "the drift query's shortest period, 1 us (verify/proofs/ieee754.py DRIFT_PRE)",
        "10": "the drift query's longest period, 10 s (verify/proofs/ieee754.py DRIFT_PRE)",
        "1.8e308": "the float64 maximum, where CrossHair's OverflowError for the drift twin lies",
        "-87.33": "ln of float32's smallest normal number (verify/proofs/ieee754.py EXP_NORMAL_FROM)",
    },
    "docs/artifact_format.md": {"0": "0 x inf = NaN, an expression, not a measurement"},
    "docs/verify.md": {"3.11": "a Python version (tomllib)"},
    "docs/export_runtime.md": {
        "1.001": "the output bound's rounding factor (export/bounds.py)",
        "1e6": "the Hypothesis tests' input magnitude (tests/contracts/test_model_outputs.py)",
        "-87.3": "ln of float32's smallest normal number, where exp turns subnormal",
        "3e38": "values planted in stale cache rows by the tests",
        "1e-5": "the tolerance's floor (export/bounds.py)",
    },
    "docs/control.md": {
        "1": "the tick budget in ms: half the demo's 2 ms period (DemoConfig)",
        "160": "4 loops x 20,000 ticks x 2 ms, arithmetic on DemoConfig",
        "40": "20,000 ticks x 2 ms, arithmetic on DemoConfig",
        "1e-6": "the EKF's process noise on theta (control/estimation.py HiddenEKF q_theta)",
        "1e-3": "the EKF's process noise on omega (HiddenEKF q_omega)",
        "17": "the demo's candidates (DemoConfig.candidates)",
        "278": "17 x 2 x 32 x 32 floats x 2 (K and V) x 4 bytes, arithmetic on the config",
        "5": "the demo's period in ms (DemoConfig.period_ms)",
        "0.05": "the cost weight w_omega (DemoConfig)",
        "0.25": "the reference amplitude (DemoConfig.amplitude)",
        "4": "the reference period (DemoConfig.ref_period_s)",
        "2": "the demo's period in ms (DemoConfig.period_ms), the delay in ticks, the natural period near 2 s",
        "1.5": "the issue's target ratio to the oracle",
    },
    "docs/certify.md": {
        "2": "the demo's 2 ms period (DemoConfig.period_ms)",
        "5": "the demo's 5 ms period (DemoConfig.period_ms)",
        "10": "duty cycle idle share (10%), and the demo's 10 ms tick budget",
        "95": "RT throttling's 95% and the 95% bootstrap level",
        "1": "the POT tail fraction (1%)",
        "1e-9": "the default exceedance",
        "0.05": "the tests' significance level alpha, and the 0.05 s plant step",
        "20": "the demo's 20 ms period",
        "588": "the demo's per-step budget: 10 ms / 17 (DemoConfig.step_budget_ns)",
        "0.4": "the plant step (model/plant.py)",
        "0.01": "the cost weight w_omega (DemoConfig)",
        "8": "the reference period 8 s (DemoConfig.ref_period_s)",
        "0.42": "asin(u_max / (g/L)) for the plant's u_max and g/L",
    },
}


# --- generated documents ----------------------------------------------------------------------------------
def render_assurance() -> str:
    """docs/assurance.md as `tickformer prove --assurance` renders it from the three committed
    reports: CrossHair (prove.json), binary32 SMT (ieee754.json), graph proofs (prove_graphs.json)."""
    from tickformer.verify import assurance

    smt, graphs = RESULTS["ieee754"].load(), RESULTS["prove-graphs"].load()
    rows = assurance.build_table(
        RESULTS["prove"].load(), tests_root=ROOT / "tests" / "contracts", smt=smt, graphs=graphs
    )
    note = (
        "Proof verdicts from this run (CrossHair and the binary64 drift query), the binary32 SMT report "
        "claims/results/ieee754.json and the graph proofs claims/results/prove_graphs.json."
    )
    return assurance.to_markdown(rows, note, smt=smt, graphs=graphs)


def check_assurance(result) -> None:
    """docs/assurance.md must be what `tickformer prove --assurance` renders from the reports."""
    if render_assurance() != (ROOT / "docs" / "assurance.md").read_text():
        result.fail(
            "docs/assurance.md differs from `tickformer prove --assurance` rendered from claims/results/prove.json, "
            "ieee754.json and prove_graphs.json (regenerate: python claims/check.py --refresh prove)"
        )


def check_bench_readme(result) -> None:
    """benchmarks/README.md must be what benchmarks/report.py renders from benchmarks/results/ (image
    lines aside: the latency histogram needs the raw samples, which are not committed)."""

    def text_of(md: str) -> list[str]:
        return [line for line in md.splitlines() if line.strip() and not line.startswith("![")]

    with tempfile.TemporaryDirectory() as tmp:
        want = bench_report().render(ROOT / "benchmarks" / "results", Path(tmp))
    if text_of(want) != text_of((ROOT / "benchmarks" / "README.md").read_text()):
        result.fail(
            "benchmarks/README.md differs from benchmarks/report.py rendered from benchmarks/results/ "
            "(regenerate: python benchmarks/report.py)"
        )


GENERATED: list[Callable[[Any], None]] = [check_assurance, check_bench_readme]


# --- evaluation, listing, refresh ---------------------------------------------------------------------------
def evaluate(result) -> dict[str, tuple[Any, str]]:
    """Every claim's (value, text). BLAS pinned to one thread, as `make test` and the runtime run:
    the summation order, and so the last bits of the error figures, depend on it."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _evaluate(result)


def _evaluate(result) -> dict[str, tuple[Any, str]]:
    values: dict[str, tuple[Any, str]] = {}
    for c in CLAIMS:
        try:
            v = c.get()
            values[c.key] = (v, c.fmt(v))
        except Exception as exc:  # a missing key, file or module is a failed claim, named
            values[c.key] = (None, f"<error: {type(exc).__name__}: {exc}>")
            result.fail(f"{c.region}: claim {c.name!r}: its source failed ({c.source}): {exc}")
    return values


def listing() -> list[str]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _listing()


def _listing() -> list[str]:
    out = []
    for c in CLAIMS:
        try:
            text = c.fmt(c.get())
        except Exception as exc:
            text = f"<error {exc}>"
        out.append(f"{c.region:28s} {c.name:24s} {text:>14s}  {c.source}")
    return out


def _run(cmd: list[str], **kw) -> None:
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def _slim_certificate(src: Path, dst: Path) -> None:
    cert = json.loads(src.read_text())
    cert.pop("files", None)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(cert, indent=1) + "\n")


def refresh_demo() -> None:
    """The demo, then the certification campaigns of docs/certify.md on its artifact (minutes)."""
    tick = [str(Path(PY).with_name("tickformer"))]
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "demo"
        _run([*tick, "demo", "--out", str(demo)])
        out = ROOT / "claims" / "results" / "demo"
        out.mkdir(parents=True, exist_ok=True)
        summary = json.loads((demo / "demo_summary.json").read_text())
        (out / "demo_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        _slim_certificate(demo / "certify" / "certificate.json", out / "certificate.json")
        for plot in ("tracking.png", "latency.png"):  # docs/control.md shows them
            shutil.copyfile(demo / plot, out / plot)
        art = str(demo / "artifact")
        runs = {
            "c1": ["--budget-us", "1000", "--samples", "50000"],
            "c3": ["--budget-us", "1000", "--samples", "20000", "--cpu", "1", "--realtime"],
        }
        for name, extra in runs.items():
            rep = Path(tmp) / name
            subprocess.run([*tick, "certify", art, *extra, "--quiet", "--out", str(rep)], cwd=ROOT)
            _slim_certificate(
                rep / "certificate.json", ROOT / "claims" / "results" / "certify" / f"{name}.json"
            )
        tiny = Path(tmp) / "tiny_art"
        _run(
            [
                PY,
                "-c",
                f"from tickformer.export.writer import export_params; from tickformer.model import "
                f"init_params, preset; c = preset('tiny'); export_params(c, init_params(c, 1), {str(tiny)!r})",
            ]
        )
        rep = Path(tmp) / "c_grow"
        subprocess.run(
            [
                *tick,
                "certify",
                str(tiny),
                "--backend",
                "numpy-growing",
                "--budget-us",
                "100000",
                "--samples",
                "2000",
                "--n-boot",
                "20",
                "--quiet",
                "--out",
                str(rep),
            ],
            cwd=ROOT,
        )
        _slim_certificate(rep / "certificate.json", ROOT / "claims" / "results" / "certify" / "c_grow.json")


def refresh_test_tiers() -> None:
    """`make test` and `make check` timed from a warm venv (installed: make's stamp is current, so
    neither target installs anything), with the machine's load beside them."""
    import datetime as _dt
    import os
    import platform
    import time

    record: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
    }
    subprocess.run(["make", ".venv/.installed"], cwd=ROOT, check=True, capture_output=True)
    for target in ("test", "check"):
        load = os.getloadavg()
        t0 = time.perf_counter()
        done = subprocess.run(["make", target], cwd=ROOT, capture_output=True, text=True)
        record[f"make_{target}"] = {
            "wall_s": round(time.perf_counter() - t0, 1),
            "exit": done.returncode,  # the first refresh's claims test fails on this file's absence
            "summary": (done.stdout.strip().splitlines() or [""])[-1],
            "load_average_before": [round(v, 2) for v in load],
        }
    record["utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    record["command"] = "python claims/check.py --refresh test-tiers (make test, make check; warm venv)"
    (ROOT / "claims/results/test_tiers.json").write_text(json.dumps(record, indent=2) + "\n")


def refresh_prove() -> None:
    tick = str(Path(PY).with_name("tickformer"))
    _run(
        [
            tick,
            "prove",
            "--json",
            "claims/results/prove.json",
            "--assurance",
            "--assurance-out",
            "docs/assurance.md",
        ]
    )
    data = json.loads((ROOT / "claims/results/prove.json").read_text())  # prove --json writes its utc
    data["command"] = (
        "tickformer prove --json claims/results/prove.json --assurance --assurance-out docs/assurance.md"
    )
    (ROOT / "claims/results/prove.json").write_text(json.dumps(data, indent=2) + "\n")


def refresh_ieee754() -> None:
    """The binary32 SMT report, then docs/assurance.md re-rendered with it (CrossHair not re-run)."""
    tick = str(Path(PY).with_name("tickformer"))
    _run([tick, "prove", "--ieee754", "--json", "claims/results/ieee754.json"])
    data = json.loads((ROOT / "claims/results/ieee754.json").read_text())
    data["command"] = "tickformer prove --ieee754 --json claims/results/ieee754.json"
    (ROOT / "claims/results/ieee754.json").write_text(json.dumps(data, indent=2) + "\n")
    _load_json.cache_clear()
    (ROOT / "docs" / "assurance.md").write_text(render_assurance())


def refresh_prove_graphs() -> None:
    """The graph proofs on reference artifacts, then docs/assurance.md re-rendered with them."""
    _run([PY, "claims/prove_graphs.py", "--out", "claims/results/prove_graphs.json"])
    _load_json.cache_clear()
    (ROOT / "docs" / "assurance.md").write_text(render_assurance())


def refresh_evt() -> None:
    _run([PY, "claims/evt_accuracy.py", "--out", "claims/results/evt_accuracy.json"])


def refresh_verify() -> None:
    _run([PY, "claims/verify_margins.py", "--out", "claims/results/verify_margins.json"])


def refresh_bench_streaming() -> None:
    _run([PY, "-m", "pytest", "benchmarks/test_streaming.py", "-q", "-p", "no:randomly"])


def refresh_control_side_runs() -> None:
    """docs/control.md's recipe side runs, each by the command recorded with it (minutes each)."""
    import shlex

    for run in _load_json("experiments/results/control_side_runs.json")["recipe"].values():
        _run([PY, *shlex.split(run["command"])[1:]])


def refresh_streaming_accuracy() -> None:
    _run([PY, "benchmarks/streaming_accuracy.py", "--steps", "1000", "--window", "32", "--seed", "0"])


def refresh_bench() -> None:
    _run(["make", "bench"])


def refresh(name: str) -> int:
    names = {r.refresh for r in RESULTS.values()}
    fn = RESULTS[name].refresh if name in RESULTS else name if name in names else None
    if fn is None:
        print(f"unknown results file {name!r}; choose one of {sorted(RESULTS)}")
        return 2
    globals()[fn]()
    shutil.rmtree(ROOT / "claims" / "__pycache__", ignore_errors=True)
    return 0


_ = math  # used by claim lambdas added by other sections


# ==========================================================================================================
# Issue 19 (branch claims): docs/codegen.md, docs/training.md, docs/reliability.md. One block, appended, so
# that the branches appending their own spans merge without touching each other's lines.
# ==========================================================================================================
RESULTS.update(
    {
        r.name: r
        for r in (
            ResultsFile("c-step", "benchmarks/results/c_step_bench.json", "datetime", "refresh_c_step"),
        )
    }
)


def refresh_c_step() -> None:
    _run(
        [
            PY,
            "-m",
            "pytest",
            "benchmarks/test_c_step.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "--benchmark-json=benchmarks/results/c_step_bench.json",
        ]
    )


def _c_case(data: dict, case: str) -> dict:
    """The extra_info of the c_step_bench.json benchmark whose case is `case`."""
    return next(b["extra_info"] for b in data["benchmarks"] if b["extra_info"].get("case") == case)


def _c_get(case: str, key: str) -> Callable[[dict], Any]:
    return lambda d: dig(_c_case(d, case), key)


_CSTEP = "c-step"
_INTER, _IN_C, _FLOOR = "ratio/c-vs-ort", "c-step/in-c", "c-step/bandwidth-floor"


def _c_val(case: str, key: str) -> Any:
    return dig(_c_case(RESULTS[_CSTEP].load(), case), key)


def _session_path_us() -> float:
    """What Session.step adds to the C step at N: p50 through Session minus p50 timed in C."""
    return _c_val(_INTER, "stats.c.N.p50") - _c_val(_IN_C, "stats.N.p50")


D = "docs/codegen.md"
_MACHINE = "machine_info"
(
    Span(f"{D}#speed-when")
    .literal("2", "the 2-core VM")
    .derived(
        "ghz",
        _CSTEP,
        lambda d: float(d[_MACHINE]["cpu"]["hz_actual_friendly"].split()[0]),
        "{:.1f}",
        "cpu hz",
    )
    .derived(
        "l2",
        _CSTEP,
        lambda d: d[_MACHINE]["cpu"]["l2_cache_size"] / 2**20,
        "{:.0f}",
        "cpu l2_cache_size (MiB)",
    )
    .literal("2", "lscpu: 2 instances")
    .derived(
        "l3",
        _CSTEP,
        lambda d: d[_MACHINE]["cpu"]["l3_cache_size"] / 2**20,
        "{:.0f}",
        "cpu l3_cache_size (MiB)",
    )
    .derived("load", _CSTEP, lambda d: d[_MACHINE]["tickformer"]["load_average_start"][0], "{:.2f}", "load")
    .derived("date", _CSTEP, lambda d: d[_MACHINE]["tickformer"]["date_utc"][:16], "{}", "date_utc")
)
_SP = Span(f"{D}#speed").result("window", _CSTEP, "benchmarks.0.extra_info.window", "{}")
_SP.literal("1", "position 1 (header)").literal("2", "N/2 (header)")
for _s in ("c", "c-deferred", "ort"):
    for _pos in ("1", "N/2", "N"):
        _SP.derived(
            f"{_s} p50 {_pos}", _CSTEP, _c_get(_INTER, f"stats.{_s}.{_pos}.p50"), "{:.1f}", "p50 (us)"
        )
    _SP.derived(f"{_s} p99", _CSTEP, _c_get(_INTER, f"stats.{_s}.N.p99"), "{:.1f}", "p99 at N (us)")
    _SP.derived(f"{_s} p99.9", _CSTEP, _c_get(_INTER, f"stats.{_s}.N.p99~9"), "{:.1f}", "p99.9 at N (us)")
    _SP.derived(f"{_s} tail", _CSTEP, _c_get(_INTER, f"tail_ratio_at_N.{_s}"), "{:.2f}", "p99.9/p50 at N")
    _SP.derived(f"{_s} n", _CSTEP, _c_get(_INTER, f"stats.{_s}.N.n"), "{}", "n at N")
(
    _SP.derived("in-c p50", _CSTEP, _c_get(_IN_C, "stats.N.p50"), "{:.1f}", "in C p50 at N (us)")
    .derived("in-c p99", _CSTEP, _c_get(_IN_C, "stats.N.p99"), "{:.1f}", "in C p99 at N (us)")
    .derived("in-c p99.9", _CSTEP, _c_get(_IN_C, "stats.N.p99~9"), "{:.1f}", "in C p99.9 at N (us)")
    .derived("in-c tail", _CSTEP, _c_get(_IN_C, "stats.N.tail_ratio"), "{:.2f}", "in C p99.9/p50 at N")
    .derived("in-c n", _CSTEP, _c_get(_IN_C, "stats.N.n"), "{}", "in C n at N")
    .literal("512", "the backend's -mprefer-vector-width=512 (codegen/toolchain.py GCC_FLAGS)")
    .derived("o2 p50", _CSTEP, _c_get(_IN_C, "o2.stats_at_N.p50"), "{:.1f}", "-O2 p50 at N (us)")
    .derived("o2 n", _CSTEP, _c_get(_IN_C, "o2.stats_at_N.n"), "{}", "-O2 n at N")
    .literal("256", "the 256-bit build's -mprefer-vector-width=256 (benchmarks/test_c_step.py)")
    .derived("w256 p50", _CSTEP, _c_get(_IN_C, "w256.stats_at_N.p50"), "{:.1f}", "256-bit p50 at N (us)")
    .derived("w256 n", _CSTEP, _c_get(_IN_C, "w256.stats_at_N.n"), "{}", "256-bit n at N")
    .derived("floor p50", _CSTEP, _c_get(_FLOOR, "pass_us.p50"), "{:.2f}", "floor pass p50 (us)")
    .derived("floor n", _CSTEP, _c_get(_FLOOR, "passes"), "{}", "floor passes")
)
Span(f"{D}#speed-rounds").derived("rounds", _CSTEP, _c_get(_INTER, "rounds"), "{}", "interleaved rounds")
(
    Span(f"{D}#what-changed")
    .literals(
        "the record before, docs/codegen.md of commit e35c3bb (run of 2026-12-04 20:41 UTC)",
        ("2026-12-05", "the date of the change"),
        ("2026-12-04 20:41", "its date"),
        ("13.4", "c p50 at N through Session.step"),
        ("11.2", "in C p50 at N, -O2, 256-bit"),
        ("256", "its vector width"),
        ("8", "lanes of a 256-bit float vector"),
        ("16", "lanes of a 512-bit float vector"),
        ("512", "-mprefer-vector-width=512"),
        ("256", "the narrow build"),
        ("512", "a 512-bit load"),
        ("64", "TF_ALIGN64's bytes"),
        ("256", "GCC's default width on AVX-512 machines"),
    )
    .derived("w256 p50", _CSTEP, _c_get(_IN_C, "w256.stats_at_N.p50"), "{:.1f}", "256-bit p50 at N (us)")
    .derived("o2 p50", _CSTEP, _c_get(_IN_C, "o2.stats_at_N.p50"), "{:.1f}", "-O2 p50 at N (us)")
    .derived(
        "validation", _CSTEP, _c_get(_INTER, "session_validation_us.p50"), "{:.2f}", "session validation p50"
    )
)
(
    Span(f"{D}#session-path")
    .derived("path", _CSTEP, lambda d: _session_path_us(), "{:.1f}", "c p50 at N - in-C p50 at N")
    .derived("c p50", _CSTEP, _c_get(_INTER, "stats.c.N.p50"), "{:.1f}", "c p50 at N")
    .derived("in-c p50", _CSTEP, _c_get(_IN_C, "stats.N.p50"), "{:.1f}", "in C p50 at N")
    .derived(
        "validation", _CSTEP, _c_get(_INTER, "session_validation_us.p50"), "{:.2f}", "session validation p50"
    )
    .derived("saved", _CSTEP, _c_get(_INTER, "deferred_saves_us_at_N"), "{:.2f}", "c-call p50 - c p50 at N")
)
(
    Span(f"{D}#floor")
    .derived("total", _CSTEP, _c_get(_FLOOR, "bytes_per_step.total"), "{:,}", "bytes_per_step.total")
    .derived("weights", _CSTEP, _c_get(_FLOOR, "bytes_per_step.weights"), "{:,}", "bytes_per_step.weights")
    .derived("cache", _CSTEP, _c_get(_FLOOR, "bytes_per_step.cache"), "{:,}", "bytes_per_step.cache")
    .param("rows", lambda: parameter_max_len("control"), "{}", "preset('control').max_len")
    .literal("64", "the floor kernel's 64 accumulators (benchmarks/test_c_step.py)")
    .literal("256", "the floor's 256-bit build")
    .literal("512", "the floor's 512-bit build")
    .derived("bits", _CSTEP, _c_get(_FLOOR, "vector_bits"), "{}", "vector_bits of the faster floor build")
    .derived("floor p50", _CSTEP, _c_get(_FLOOR, "pass_us.p50"), "{:.2f}", "floor pass p50 (us)")
    .derived("GB/s", _CSTEP, _c_get(_FLOOR, "read_GBps_at_p50"), "{:.1f}", "read_GBps_at_p50")
)
(
    Span(f"{D}#targets")
    .literal("5", "the target's 5x")
    .literal("5", "the 5x of the verdict")
    .derived("ratio", _CSTEP, _c_get(_INTER, "ratio_p50_at_N"), "{:.2f}", "ratio_p50_at_N")
    .derived("c p50", _CSTEP, _c_get(_INTER, "stats.c.N.p50"), "{:.1f}", "c p50 at N")
    .derived("ort p50", _CSTEP, _c_get(_INTER, "stats.ort.N.p50"), "{:.1f}", "ort p50 at N")
    .derived(
        "in-c ratio",
        _CSTEP,
        lambda d: dig(_c_case(d, _INTER), "stats.ort.N.p50") / dig(_c_case(d, _IN_C), "stats.N.p50"),
        "{:.1f}",
        "ort p50 at N / in-C p50 at N",
    )
    .derived("c tail", _CSTEP, _c_get(_INTER, "tail_ratio_at_N.c"), "{:.2f}", "c p99.9/p50 at N")
    .derived("ort tail", _CSTEP, _c_get(_INTER, "tail_ratio_at_N.ort"), "{:.2f}", "ort p99.9/p50 at N")
    .derived("c p99.9", _CSTEP, _c_get(_INTER, "stats.c.N.p99~9"), "{:.1f}", "c p99.9 at N")
    .literal("2", "the target's 2x")
    .derived("in-c/floor", _CSTEP, _c_get(_FLOOR, "in_c_p50_over_floor"), "{:.2f}", "in_c_p50_over_floor")
    .derived("in-c p50 b", _CSTEP, _c_get(_IN_C, "stats.N.p50"), "{:.1f}", "in C p50 at N")
    .derived("floor p50", _CSTEP, _c_get(_FLOOR, "pass_us.p50"), "{:.2f}", "floor pass p50")
    .derived(
        "session/floor", _CSTEP, _c_get(_FLOOR, "session_p50_over_floor"), "{:.2f}", "session_p50_over_floor"
    )
    .derived(
        "needed",
        _CSTEP,
        lambda d: dig(_c_case(d, _INTER), "stats.ort.N.p50") / 5,
        "{:.1f}",
        "ort p50 at N / 5",
    )
    .derived("path", _CSTEP, lambda d: _session_path_us(), "{:.1f}", "c p50 at N - in-C p50 at N")
)
# benchmarks/results/c_step.json: the C step beside ORT, rewritten by every run of benchmarks/test_c_step.py
# (`make bench`'s or the c-step refresh's; no date key of its own)
RESULTS["c-step-suite"] = ResultsFile(
    "c-step-suite", "benchmarks/results/c_step.json", "date_utc", "refresh_bench"
)
_ORT_BEFORE_E937CFC_US = 33.0  # latest.json of 2026-12-03, before the ORT step's regression
(
    Span(f"{D}#why-not-5x")
    .literal("5", "the target's 5x")
    .literal("2026-12-04 20:33", "the start of the make bench run (benchmarks/README.md)")
    .run("quiet ort", lambda: step_p50("ort", "N"), "{:.1f}", "benchmarks/results/latest.json ort p50 at N")
    .derived(
        "vs quiet",
        _CSTEP,
        lambda d: step_p50("ort", "N") / dig(_c_case(d, _INTER), "stats.c.N.p50"),
        "{:.1f}",
        "latest.json ort p50 at N / c p50 at N",
    )
    .result("suite ratio", "c-step-suite", "session.ratio_p50_at_N", "{:.2f}")
    .result("suite c p50", "c-step-suite", "session.stats.c.N.p50", "{:.1f}")
    .result("suite ort p50", "c-step-suite", "session.stats.ort.N.p50", "{:.1f}")
    .literal("2.2", f"the ORT step's regression since e937cfc, {_REGRESSION}")
    .literal("2026-12-04", "the date of the regression's section in docs/export_runtime.md")
    .literal("2026-12-03", "the date of the earlier make bench run")
    .literal(f"{_ORT_BEFORE_E937CFC_US}", "ORT p50 at N in the make bench run of 2026-12-03 06:17 UTC")
    .derived(
        "vs 33.0",
        _CSTEP,
        lambda d: _ORT_BEFORE_E937CFC_US / dig(_c_case(d, _INTER), "stats.c.N.p50"),
        "{:.1f}",
        "that ORT p50 / c p50 at N",
    )
    .literal("5", "the target's 5x")
    .run("6.6", lambda: _ORT_BEFORE_E937CFC_US / 5, "{:.1f}", "that ORT p50 / 5")
    .derived("floor p50", _CSTEP, _c_get(_FLOOR, "pass_us.p50"), "{:.2f}", "floor pass p50")
    .derived("path", _CSTEP, lambda d: _session_path_us(), "{:.1f}", "c p50 at N - in-C p50 at N")
    .literal("5", "the target's 5x")
)
(
    Span(f"{D}#tails")
    .derived("in-c p99.9", _CSTEP, _c_get(_IN_C, "stats.N.p99~9"), "{:.1f}", "in C p99.9 at N")
    .derived("in-c p50", _CSTEP, _c_get(_IN_C, "stats.N.p50"), "{:.1f}", "in C p50 at N")
)
RESULTS["c-tails"] = ResultsFile("c-tails", "benchmarks/results/c_tails.json", "utc", "refresh_c_tails")


def refresh_c_tails() -> None:
    _run([PY, "benchmarks/c_tails.py"])


_CT = "c-tails"
(
    Span(f"{D}#tails-robust")
    .literal("600", "4 positions x 150 rounds per subject (benchmarks/test_c_step.py WINDOW, ROUNDS)")
    .result("n", _CT, "plain.c.n", "{:,}")
    .result("last", _CT, "last_positions", "{}")
    .result("rounds", _CT, "rounds", "{}")
    .result("plain c", _CT, "plain.c.tail_ratio", "{:.2f}")
    .result("plain ort", _CT, "plain.ort.tail_ratio", "{:.2f}")
    .result("iso c", _CT, "isolated.c.tail_ratio", "{:.2f}")
    .result("iso ort", _CT, "isolated.ort.tail_ratio", "{:.2f}")
    .literal("1", "the CPU the script pins to (Isolation(cpu=1))")
    .result("iso c p99.9", _CT, "isolated.c.p99~9", "{:.1f}")
    .result("iso c p50", _CT, "isolated.c.p50", "{:.1f}")
    .derived(
        "interruption",
        _CT,
        lambda d: d["isolated"]["c"]["p99.9"] - d["isolated"]["c"]["p50"],
        "{:.0f}",
        "isolated.c p99.9 - p50",
    )
    .literal("0.1", "the 0.1% of steps above the 99.9th percentile")
)
_WIN = "ratio/c-vs-ort-windowed"
(
    Span(f"{D}#speed-windowed")
    .derived("window", _CSTEP, _c_get(_WIN, "window"), "{}", "windowed subject's W")
    .derived("window b", _CSTEP, _c_get(_WIN, "window"), "{}", "windowed subject's W")
    .literal("8", "256 / 32 wraps per round")
    .derived("rounds", _CSTEP, _c_get(_WIN, "rounds"), "{}", "windowed rounds")
    .derived("bytes", _CSTEP, _c_get(_WIN, "bytes_per_step.total"), "{:,}", "windowed bytes_per_step.total")
    .derived("c p50", _CSTEP, _c_get(_WIN, "stats.c.N.p50"), "{:.2f}", "windowed c p50 at N")
    .derived("ort p50", _CSTEP, _c_get(_WIN, "stats.ort.N.p50"), "{:.1f}", "windowed ort p50 at N")
    .derived("ratio", _CSTEP, _c_get(_WIN, "ratio_p50_at_N"), "{:.2f}", "windowed ratio_p50_at_N")
    .derived("c tail", _CSTEP, _c_get(_WIN, "tail_ratio_at_N.c"), "{:.2f}", "windowed c p99.9/p50 at N")
    .derived("ort tail", _CSTEP, _c_get(_WIN, "tail_ratio_at_N.ort"), "{:.2f}", "windowed ort p99.9/p50 at N")
    .derived("in-c", _CSTEP, _c_get(_WIN, "in_c.stats_at_N.p50"), "{:.2f}", "windowed tf_step in C p50 at N")
)


def parameter_max_len(name: str) -> int:
    from tickformer.model import preset

    return preset(name).max_len


# docs/codegen.md: the evidence figures (claims/codegen_evidence.py on the control artifact)
RESULTS["codegen-evidence"] = ResultsFile(
    "codegen-evidence", "claims/results/codegen_evidence.json", "utc", "refresh_codegen_evidence"
)


def _codegen_evidence(out: str, *flags: str) -> None:
    """claims/codegen_evidence.py into `out` (one results file per subject)."""
    _run([PY, "claims/codegen_evidence.py", *flags, "--out", out])


def refresh_codegen_evidence() -> None:
    _codegen_evidence("claims/results/codegen_evidence.json", "--expcheck", "--frama-c")


_CE = "codegen-evidence"
(Span(f"{D}#memory").result("data", _CE, "stack.size.data", "{}").result("bss", _CE, "stack.size.bss", "{}"))
(
    Span(f"{D}#exp")
    .literal("1", "the 1-ULP bound the check asserts (tf_expcheck: max error < 1.0)")
    .result("values", _CE, "expcheck.values", "{:,}")
    .result("max ulp", _CE, "expcheck.max_ulp", "{:.4f}")
    .result("at x", _CE, "expcheck.at_x", "{:.4f}")
    .result("others", _CE, "expcheck.others", "{:,}")
    .result("wrong", _CE, "expcheck.wrong", "{}")
)
Span(f"{D}#exp-small").run("exp(-86.5)", lambda: math.exp(-86.5), "{:.1e}", "math.exp(-86.5)")
Span(f"{D}#ssm-flush").run("exp(-86.5)", lambda: math.exp(-86.5), "{:.1e}", "math.exp(-86.5)")
(
    Span(f"{D}#tanh-split")
    .param(
        "split",
        lambda: importlib.import_module("tickformer.codegen.ssm_kernels").TANH_SMALL,
        "{}",
        "codegen/ssm_kernels.py TANH_SMALL",
    )
    .run(
        "e max",
        lambda: math.exp(-2 * importlib.import_module("tickformer.codegen.ssm_kernels").TANH_SMALL),
        "{:.2f}",
        "exp(-2 TANH_SMALL)",
    )
)
(
    Span(f"{D}#exp-time")
    .result("wall", _CE, "expcheck.wall_s", "{:.0f}")
    .result("cpu", _CE, "expcheck.cpu_s", "{:.0f}")
    .literal("2", "the 2-core VM")
)
Span(f"{D}#exp-numpy").run("numpy exp ulp", exp_ulp, "{:.2f}", "exp_ulp() in claims/registry.py", tol=0.5)
(
    Span(f"{D}#normwise")
    .param(
        "64 u",
        lambda: importlib.import_module("tickformer.codegen.golden").NORMWISE_U,
        "{}",
        "codegen/golden.py NORMWISE_U",
    )
    .run(
        "relative",
        lambda: importlib.import_module("tickformer.codegen.golden").NORMWISE_U * 2.0**-24,
        sci(1),
        "NORMWISE_U * 2^-24",
    )
)
(
    Span(f"{D}#margin")
    .derived(
        "margin",
        _CE,
        lambda d: d["codegen_test"]["golden"]["bound_u"] / d["codegen_test"]["golden"]["normwise_u"],
        "{:.1f}",
        "golden bound_u / normwise_u",
    )
    .result("bound", _CE, "codegen_test.golden.bound_u", "{:.0f}")
    .result("normwise", _CE, "codegen_test.golden.normwise_u", "{:.2f}")
)
(
    Span(f"{D}#golden")
    .result("steps", _CE, "codegen_test.golden.steps", "{}")
    .param("max_len", lambda: parameter_max_len("control"), "{}", "preset('control').max_len")
    .literal("8", "the 8-step sequence after a reset (codegen/golden.py)")
    .result("max abs", _CE, "codegen_test.golden.max_abs", sci(2))
    .result("normwise", _CE, "codegen_test.golden.normwise_u", "{:.2f}")
    .literal("2", "the re-run's tolerance factor (rtol=0.5 of the larger value below)")
    .run(
        "ort max abs",
        lambda: control_equivalence()["equivalence"]["pairs"]["step:ort_vs_numpy"]["max_abs"],
        sci(2),
        "manifest equivalence.pairs['step:ort_vs_numpy'].max_abs of the seeded control export",
        rtol=0.5,
    )
    .run(
        "ort max rel",
        lambda: control_equivalence()["equivalence"]["pairs"]["step:ort_vs_numpy"]["max_rel"],
        sci(2),
        "manifest equivalence.pairs['step:ort_vs_numpy'].max_rel",
        rtol=0.5,
    )
)
(
    Span(f"{D}#stack")
    .result("tf_step", _CE, "stack.worst.tf_step", "{}")
    .result("frame tf_step", _CE, "stack.chain_frames.tf_step.0", "{}")
    .result("frame tf_stage", _CE, "stack.chain_frames.tf_step.1", "{}")
    .result("frame ln", _CE, "stack.chain_frames.tf_step.2", "{}")
    .result("frame pw", _CE, "stack.chain_frames.tf_step.3", "{}")
    .result("native", _CE, "stack_native.worst.tf_step", "{}")
)
(
    Span(f"{D}#size")
    .result("data", _CE, "stack.size.data", "{}")
    .result("bss", _CE, "stack.size.bss", "{}")
    .result("text", _CE, "stack.size.text", "{:,}")
)
Span(f"{D}#cppcheck").result("cpu", _CE, "cppcheck.cpu_s", "{:.1f}")
(
    Span(f"{D}#eva")
    .result("alarms", _CE, "frama_c.alarms", "{}")
    .result("pre valid", _CE, "frama_c.preconditions_valid", "{}")
    .result("pre total", _CE, "frama_c.preconditions_total", "{}")
    .result("assert unknown", _CE, "frama_c.assertions_unknown", "{}")
    .result("functions", _CE, "frama_c.functions_analyzed", "{}")
    .result("of", _CE, "frama_c.functions_total", "{}")
    .result("lo", _CE, "frama_c.output_range.0", "{:.2f}")
    .result("hi", _CE, "frama_c.output_range.1", "{:.2f}")
    .result("bound", _CE, "plan.output_bound", "{:.2f}")
    .result("wall", _CE, "frama_c.wall_s", "{:.0f}")
    .result("cpu", _CE, "frama_c.cpu_s", "{:.0f}")
)
Span(f"{D}#unroll").result("unroll", _CE, "plan.eva_unroll", "{}")
(
    Span(f"{D}#first-load")
    .result("first", _CE, "first_load.first_s", "{:.2f}")
    .result("cached", _CE, "first_load.cached_s", "{:.0f}", scale=1e3)
    .result("load", _CE, "load_average_before.0", "{:.2f}")
)
# docs/codegen.md: the windowed and ssm subjects (claims/codegen_evidence.py --subject ...)
RESULTS["codegen-windowed"] = ResultsFile(
    "codegen-windowed", "claims/results/codegen_windowed.json", "utc", "refresh_codegen_windowed"
)


def refresh_codegen_windowed() -> None:
    _codegen_evidence("claims/results/codegen_windowed.json", "--subject", "windowed", "--frama-c")


_CW = "codegen-windowed"
(
    Span(f"{D}#golden-windowed")
    .param(
        "window", lambda: _preset_field("control-hidden", "window"), "{}", "preset('control-hidden').window"
    )
    .param(
        "max_len",
        lambda: _preset_field("control-hidden", "max_len"),
        "{}",
        "preset('control-hidden').max_len",
    )
    .result("steps", _CW, "codegen_test.golden.steps", "{}")
    .run("first", lambda: 4 * _preset_field("control-hidden", "window") + 1, "{}", "4W + 1")
    .literal("1", "the + 1 of 4W + 1 (codegen/golden.py)")
    .run("second", lambda: 2 * _preset_field("control-hidden", "window") + 1, "{}", "2W + 1")
    .literal("1", "the + 1 of 2W + 1")
    .result("max abs", _CW, "codegen_test.golden.max_abs", sci(2))
    .result("normwise", _CW, "codegen_test.golden.normwise_u", "{:.2f}")
)
(
    Span(f"{D}#rtol-u")
    .derived(
        "rtol",
        _CE,
        lambda d: float(re.search(r"rtol ([\d.e+-]+)", d["codegen_test"]["golden"]["line"]).group(1)),
        sci(2),
        "tf_test's golden line: the artifact's rtol",
    )
    .derived(
        "rtol u",
        _CE,
        lambda d: (
            float(re.search(r"rtol ([\d.e+-]+)", d["codegen_test"]["golden"]["line"]).group(1)) / 2.0**-24
        ),
        "{:.0f}",
        "rtol / 2^-24",
    )
)


(
    Span(f"{D}#evidence-windowed")
    .result("stack", _CW, "stack.worst.tf_step", "{}")
    .result("alarms", _CW, "frama_c.alarms", "{}")
    .result("pre valid", _CW, "frama_c.preconditions_valid", "{}")
    .result("pre total", _CW, "frama_c.preconditions_total", "{}")
    .result("assert unknown", _CW, "frama_c.assertions_unknown", "{}")
    .result("functions", _CW, "frama_c.functions_analyzed", "{}")
    .result("of", _CW, "frama_c.functions_total", "{}")
    .run("ring positions", lambda: 3 * _preset_field("control-hidden", "window"), "{}", "3W")
    .literal("0", "the ring positions start at 0")
    .result("lo", _CW, "frama_c.output_range.0", "{:.2f}")
    .result("hi", _CW, "frama_c.output_range.1", "{:.2f}")
    .result("bound", _CW, "plan.output_bound", "{:.2f}")
    .result("wall", _CW, "frama_c.wall_s", "{:.0f}")
)


RESULTS["codegen-ssm"] = ResultsFile(
    "codegen-ssm", "claims/results/codegen_ssm.json", "utc", "refresh_codegen_ssm"
)


def refresh_codegen_ssm() -> None:
    _codegen_evidence("claims/results/codegen_ssm.json", "--subject", "ssm", "--expcheck", "--frama-c")


_CSS = "codegen-ssm"
(
    Span(f"{D}#golden-ssm")
    .param("d_state", lambda: 16, "{}", "claims/codegen_evidence.py SUBJECTS['ssm']")
    .result("steps", _CSS, "codegen_test.golden.steps", "{}")
    .run("first", lambda: 4 * _preset_field("control", "max_len"), "{}", "4 max_len (codegen/golden.py)")
    .literal("4", "4 max_len")
    .literal("8", "the 8 steps after a reset (codegen/golden.py)")
    .result("max abs", _CSS, "codegen_test.golden.max_abs", sci(2))
    .result("normwise", _CSS, "codegen_test.golden.normwise_u", "{:.2f}")
)
(
    Span(f"{D}#ssmcheck")
    .result("softplus", _CSS, "ssmcheck.softplus.max_u", "{:.3f}")
    .result("softplus n", _CSS, "ssmcheck.softplus.values", "{:,}")
    .literal("-86.5", "tf_expneg's domain edge")
    .result("tanh", _CSS, "ssmcheck.tanh.max_u", "{:.3f}")
    .result("tanh n", _CSS, "ssmcheck.tanh.values", "{:,}")
    .result("keep", _CSS, "ssmcheck.keep.max_u", "{:.3f}")
    .result("keep n", _CSS, "ssmcheck.keep.values", "{:,}")
    .param(
        "assumed",
        lambda: importlib.import_module("tickformer.model.ssm").ELEMENTARY_ERROR_U,
        "{:g}",
        "model/ssm.py ELEMENTARY_ERROR_U",
    )
    .result("broken", _CSS, "ssmcheck.broken", "{}")
    .result("wall", _CSS, "ssmcheck.wall_s", "{:.0f}")
)


(
    Span(f"{D}#evidence-ssm")
    .result("stack", _CSS, "stack.worst.tf_step", "{}")
    .result("alarms", _CSS, "frama_c.alarms", "{}")
    .result("pre valid", _CSS, "frama_c.preconditions_valid", "{}")
    .result("pre total", _CSS, "frama_c.preconditions_total", "{}")
    .result("assert unknown", _CSS, "frama_c.assertions_unknown", "{}")
    .result("functions", _CSS, "frama_c.functions_analyzed", "{}")
    .result("of", _CSS, "frama_c.functions_total", "{}")
    .result("lo", _CSS, "frama_c.output_range.0", "{:.2f}")
    .result("hi", _CSS, "frama_c.output_range.1", "{:.2f}")
    .result("bound", _CSS, "plan.output_bound", "{:.2f}")
    .result("wall", _CSS, "frama_c.wall_s", "{:.0f}")
)


def _preset_field(name: str, field: str) -> Any:
    from tickformer.model import preset

    return getattr(preset(name), field)


LITERALS["docs/codegen.md"] = {
    "512": "the machine's L2 per core, 512 KB (benchmarks/README.md)",
    "32": "the machine's L3, 32 MB",
    "2.10": "the cppcheck version",
}


# docs/training.md: `tickformer train` per task and seed (claims/training_runs.py)
RESULTS["training"] = ResultsFile("training", "claims/results/training.json", "utc", "refresh_training")


def refresh_training() -> None:
    _run([PY, "claims/training_runs.py", "--out", "claims/results/training.json"])


def _run_of(d: dict, spec: str) -> dict:
    return d["runs"][spec]["metrics"]


def _tr(spec: str, key: str) -> Callable[[dict], Any]:
    return lambda d: dig(_run_of(d, spec), key)


def smoothed_target_entropy(eps: float, v: int) -> float:
    """Entropy (nats) of the label-smoothed target (1 - eps) one-hot + eps / V (model/grad.py)."""
    hit, miss = 1 - eps + eps / v, eps / v
    return -(hit * math.log(hit) + (v - 1) * miss * math.log(miss))


def _reverse_floor() -> float:
    from tickformer.model import preset
    from tickformer.model.train import TrainSettings

    eps = TrainSettings.__dataclass_fields__["label_smoothing"].default
    return smoothed_target_entropy(eps, preset("reverse").vocab_size)


_TRR, _TRS = "training", ("reverse:0", "reverse:1", "reverse:2")
T = "docs/training.md"
_RUNS = Span(f"{T}#runs")
for _spec in _TRS:
    _seed = _spec.split(":")[1]
    _RUNS.derived(f"{_spec} exact", _TRR, _tr(_spec, "held_out.exact_match"), "{:.4f}", "exact_match")
    if _seed == "0":
        (
            _RUNS.derived(
                "sequences right",
                _TRR,
                lambda d: round(_run_of(d, "reverse:0")["held_out"]["exact_match"] * 1000),
                "{}",
                "exact_match x held_out_sequences",
            )
            .derived("sequences", _TRR, _tr(_spec, "held_out.held_out_sequences"), "{}", "held_out_sequences")
            .derived(
                "token acc", _TRR, _tr(_spec, "held_out.token_accuracy_teacher_forced"), "{:.4f}", "token acc"
            )
        )
    _RUNS.derived(f"{_spec} loss", _TRR, _tr(_spec, "final_loss_mean_last_50"), "{:.4f}", "final loss")
    if _seed == "0":
        _RUNS.literal("0.99", "the reverse target (exact_match >= 0.99)")
    _RUNS.derived(f"{_spec} wall", _TRR, _tr(_spec, "train_seconds"), "{:.1f}", "train_seconds")
    _RUNS.derived(f"{_spec} cpu", _TRR, _tr(_spec, "train_cpu_seconds"), "{:.1f}", "train_cpu_seconds")
_P0 = "pendulum:0"
for _p in ("pendulum:0", "pendulum:1", "pendulum:2"):  # seeds 1 and 2 since the re-run of 2026-12-04
    _n = "pend" if _p == _P0 else f"pend{_p[-1]}"
    _RUNS.derived(f"{_n} rmse", _TRR, _tr(_p, "held_out.model_rmse"), "{:.4g}", "model_rmse")
    _RUNS.derived(f"{_n} base", _TRR, _tr(_p, "held_out.baseline_rmse"), "{:.4g}", "baseline_rmse")
    _RUNS.derived(f"{_n} ratio", _TRR, _tr(_p, "held_out.ratio"), "{:.3f}", "ratio")
    _RUNS.derived(f"{_n} loss", _TRR, _tr(_p, "final_loss_mean_last_50"), "{:.4g}", "final loss")
    if _p == _P0:
        _RUNS.literal("0.5", "the pendulum target (ratio <= 0.5)")
    _RUNS.derived(f"{_n} wall", _TRR, _tr(_p, "train_seconds"), "{:.1f}", "train_seconds")
    _RUNS.derived(f"{_n} cpu", _TRR, _tr(_p, "train_cpu_seconds"), "{:.1f}", "train_cpu_seconds")
(
    Span(f"{T}#runs-when")
    .derived("date", _TRR, lambda d: d["utc"][:10], "{}", "utc (date)")
    .derived(
        "load lo",
        _TRR,
        lambda d: min(r["load_average_before"][0] for r in d["runs"].values()),
        "{:.2f}",
        "min load_average_before",
    )
    .derived(
        "load hi",
        _TRR,
        lambda d: max(r["load_average_before"][0] for r in d["runs"].values()),
        "{:.2f}",
        "max load_average_before",
    )
)
for _region in ("floor", "floor-tasks"):
    (
        Span(f"{T}#{_region}")
        .run("entropy", _reverse_floor, "{:.3f}", "smoothed_target_entropy(0.1, 13) in claims/registry.py")
        .param(
            "V",
            lambda: importlib.import_module("tickformer.model").preset("reverse").vocab_size,
            "{}",
            "vocab",
        )
    )
(
    Span(f"{T}#floor-tasks")
    .derived(
        "end lo", _TRR, lambda d: min(_run_of(d, s)["final_loss_mean_last_50"] for s in _TRS), "{:.3f}", "min"
    )
    .derived(
        "end hi", _TRR, lambda d: max(_run_of(d, s)["final_loss_mean_last_50"] for s in _TRS), "{:.3f}", "max"
    )
)
Span(f"{T}#ema").param(
    "decay",
    lambda: importlib.import_module("tickformer.model.tasks").TASKS["reverse"].ema_decay,
    "{}",
    "model/tasks.py reverse ema_decay",
)


def _baseline_order(d: dict) -> str:
    return re.search(r"order (\d+)", _run_of(d, _P0)["held_out"]["baseline"]).group(1)


_PA = Span(f"{T}#pendulum-analysis")
for _order in ("1", "2", "4", "8"):
    _PA.literal(_order, f"AR({_order})")
    _PA.derived(
        f"AR{_order}",
        _TRR,
        lambda d, o=_order: next(
            v
            for k, v in _run_of(d, _P0)["held_out"]["baseline_rmse_by_order"].items()
            if re.sub(r"\D", "", k) == o
        ),
        "{:.4f}",
        f"baseline_rmse_by_order AR({_order})",
    )
(
    _PA.derived(
        "trajectories", _TRR, _tr(_P0, "held_out.held_out_trajectories"), "{}", "held_out_trajectories"
    )
    .derived("model theta", _TRR, _tr(_P0, "held_out.model_rmse_raw.theta_rad"), "{:.4f}", "model_rmse_raw")
    .derived("model omega", _TRR, _tr(_P0, "held_out.model_rmse_raw.omega_rad_s"), "{:.4f}", "model_rmse_raw")
    .derived("best order", _TRR, _baseline_order, "{}", "the best order named in held_out.baseline")
    .derived(
        "base theta", _TRR, _tr(_P0, "held_out.baseline_rmse_raw.theta_rad"), "{:.4f}", "baseline_rmse_raw"
    )
    .derived(
        "base omega", _TRR, _tr(_P0, "held_out.baseline_rmse_raw.omega_rad_s"), "{:.4f}", "baseline_rmse_raw"
    )
)


def per_batch_vs_2d() -> tuple[float, float]:
    """docs/training.md's command: the share of entries where x @ w (3-D, BLAS per batch row) and the
    2-D product over all rows differ, and the largest difference relative to max |x @ w|."""
    import numpy as np

    r = np.random.default_rng(0)
    x = r.standard_normal((64, 9, 64), dtype=np.float32)
    w = r.standard_normal((64, 64), dtype=np.float32)
    d = x @ w - (x.reshape(-1, 64) @ w).reshape(x.shape)
    return float(np.mean(d != 0)), float(np.abs(d).max() / np.abs(x @ w).max())


MATMUL = "claims/results/matmul_rounding.json"
# Which kernels BLAS picks for the two products depends on the CPU: the share is one machine's fact,
# so every machine's value is kept, keyed by its CPU model, and never re-run on whatever runs the check.
RESULTS["matmul"] = ResultsFile("matmul", MATMUL, "utc", "refresh_matmul")


def refresh_matmul() -> None:
    """Adds (or replaces) this machine's line in the results file; other machines' lines stay."""
    import platform
    import time

    path = ROOT / MATMUL
    data = json.loads(path.read_text()) if path.exists() else {"machines": {}}
    names = [ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")]
    cpu = names[0] if names else platform.processor() or platform.machine()
    share, rel = per_batch_vs_2d()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    key = re.sub(r"[^a-z0-9]+", "_", cpu.lower()).strip("_")
    data["machines"][key] = {
        "cpu_model": cpu,
        "share": share,
        "max_rel": rel,
        "utc": now,
        "source": "refresh",
    }
    data["utc"] = now
    data["command"] = "python claims/check.py --refresh matmul (docs/training.md's python -c command)"
    path.write_text(json.dumps(data, indent=2) + "\n")


(
    Span(f"{T}#matmul")
    .derived("amd share", "matmul", lambda d: 100 * d["machines"]["amd_epyc"]["share"], "{:.0f}", "percent")
    .result("amd rel", "matmul", "machines.amd_epyc.max_rel", sci(1))
    .derived(
        "xeon share",
        "matmul",
        lambda d: 100 * d["machines"]["intel_r_xeon_r_processor"]["share"],
        "{:.0f}",
        "percent",
    )
)
(
    Span(f"{T}#fix")
    .derived(
        "exact", _TRR, lambda d: min(_run_of(d, s)["held_out"]["exact_match"] for s in _TRS), "{:.3f}", "min"
    )
    .literal("0", "seed 0")
    .literal("1", "seed 1")
    .literal("2", "seed 2")
)


# docs/training.md "Training speed": experiments/compare_commits.py --train, both modes, side by side
RESULTS["training-speed"] = ResultsFile(
    "training-speed", "claims/results/training_speed.json", "utc", "refresh_training_speed"
)
_SPEED_COMMITS = ("684fbb1", "fd9aada", "HEAD")


def refresh_training_speed() -> None:
    """Both runs of docs/training.md's commands into one file (a minute or two)."""
    out = "claims/results/training_speed.json"
    for extra in ([], ["--steady-malloc"]):
        _run(
            [
                PY,
                "experiments/compare_commits.py",
                "--train",
                *extra,
                "--rounds",
                "9",
                "--json",
                out,
                *_SPEED_COMMITS,
            ]
        )


_SHAPES = ("B16xT64", "B4xT256", "reverse B64xT9")
_SPT = Span(f"{T}#speed")
_SPT.derived("date", "training-speed", lambda d: d["modes"]["as_run"]["utc"][:10], "{}", "as_run utc (date)")
_SPT.result("load", "training-speed", "modes.as_run.load_avg_before", "{:.2f}")
for _mode in ("as_run", "steady_malloc"):
    for _shape in _SHAPES:
        _SPT.derived(
            f"{_mode} {_shape} speed-up",
            "training-speed",
            lambda d, m=_mode, sh=_shape: d["modes"][m]["commits"]["HEAD"]["speedup_over_base"][sh]["median"],
            "{:.2f}",
            "median per-round ratio 684fbb1 / HEAD",
        )
    for _commit in _SPEED_COMMITS:
        for _shape in _SHAPES:
            _SPT.derived(
                f"{_mode} {_commit} {_shape} ms",
                "training-speed",
                lambda d, m=_mode, c=_commit, sh=_shape: d["modes"][m]["commits"][c]["median_ms"][sh],
                "{:.1f}",
                "median ms over rounds",
            )
_SPT.derived(
    "lowest round",
    "training-speed",
    lambda d: min(
        v["min"] for m in d["modes"].values() for v in m["commits"]["HEAD"]["speedup_over_base"].values()
    ),
    "{:.2f}",
    "smallest per-round ratio 684fbb1 / HEAD of either mode",
)


def _train_test(name: str) -> Any:
    return getattr(_module("tests/model/test_train.py", "_claims_test_train"), name)


(
    Span(f"{T}#limits")
    .param("reverse", lambda: _train_test("REVERSE_LIMIT"), "{}", "tests/model/test_train.py REVERSE_LIMIT")
    .literal("0.98", "the test's weight-averaging decay (TrainSettings(..., ema_decay=0.98))")
    .param(
        "pendulum", lambda: _train_test("PENDULUM_LIMIT"), "{}", "tests/model/test_train.py PENDULUM_LIMIT"
    )
)
LITERALS["docs/training.md"] = {
    "0.99": "the reverse task's target exact_match >= 0.99 (model/tasks.py), quoted from its message",
    "0.995": "the weight-averaging decay of both tasks (model/tasks.py TASKS)",
    "9.81": "the plant's g/L (model/plant.py PendulumParams)",
    "0.3": "the plant's damping b (model/plant.py)",
    "4": "the plant's |u| <= 4 rad/s^2 (model/plant.py)",
    "0.4": "the control period dt (model/plant.py PendulumParams.dt)",
    "0.05": "the finer control period the note compares with (a setting, not a measurement)",
    "0.25": "an intermediate control period the note compares with (a setting)",
    "0.98": "Adam's beta2 (model/optim.py)",
    "1e-9": "Adam's eps (model/optim.py)",
    "1e-6": "the gradient check's tolerance (tests/model/test_grad.py)",
}


# docs/reliability.md: the counts of the committed report (docs/reliability_report.md, generated by a real
# run: its command and date are in it), re-read from the report's tables.
_REL_REPORT = "docs/reliability_report.md"


@functools.cache
def reliability_report() -> dict:
    """The report's case rows (label -> cases, outcomes), its class table, total and test count."""
    text = (ROOT / _REL_REPORT).read_text()
    rows: dict[str, dict] = {}
    classes: dict[str, int] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit() and ":" in cells[0]:
            outcomes = {}
            for part in cells[2].split(", "):
                name, _, n = part.rpartition(" ")
                if n.isdigit():  # "one line, exit 1 3" splits into a fragment without a count
                    outcomes[name] = int(n)
            rows[cells[0]] = {"cases": int(cells[1]), "outcomes": outcomes}
        elif len(cells) == 4 and all(c.isdigit() for c in cells[1:]):
            classes[cells[0]] = int(cells[2])
    total = re.search(r"Total: (\d+) cases, (\d+) ended in an unexpected exception", text)
    passed = re.search(r"in this run: (\d+) passed", text)
    return {
        "rows": rows,
        "classes": classes,
        "total": int(total.group(1)),
        "unexpected": int(total.group(2)),
        "passed": int(passed.group(1)),
        "run": re.search(r"^Run: (\S+),", text, re.M).group(1),
    }


def _rel_rows(prefix: str) -> list[dict]:
    return [r for label, r in reliability_report()["rows"].items() if label.startswith(prefix)]


def _rel_outcome(prefix: str, outcome: str) -> int:
    return sum(r["outcomes"].get(outcome, 0) for r in _rel_rows(prefix))


def _rel(name: str, fn: Callable[[], Any], what: str) -> tuple:
    return (name, fn, "{:,}", f"{_REL_REPORT}: {what} (the report states its run's date)")


_THREADS = "threads: two threads stepping one session concurrently"
_SIGALRM = "signal: SIGALRM raising KeyboardInterrupt"
_SWAP = "attack: weights.npz swapped with a FIFO link by a racing thread"
_FLIPS = "artifact: one bit flipped in manifest.json"
_RL = Span("docs/reliability.md#results")
for _args in (
    ("passed", lambda: reliability_report()["passed"], "Test results: N passed"),
    ("total", lambda: reliability_report()["total"], "Total: N cases"),
    ("classes", lambda: len(reliability_report()["classes"]), "rows of the class table"),
    ("attack", lambda: reliability_report()["classes"]["attack"], "class attack"),
    ("signing", lambda: reliability_report()["classes"]["signing"], "class signing"),
    ("threads", lambda: reliability_report()["classes"]["threads"], "class threads"),
    ("signal", lambda: reliability_report()["classes"]["signal"], "class signal"),
    ("swap loads", lambda: _rel_outcome(_SWAP, "success"), "racing swap, success"),
    ("swap refusals", lambda: _rel_outcome(_SWAP, "ArtifactError"), "racing swap, ArtifactError"),
    ("busy", lambda: _rel_outcome(_THREADS, "SessionBusy"), "two threads, SessionBusy"),
    ("ran", lambda: _rel_outcome(_THREADS, "success"), "two threads, success"),
    ("sigalrm", lambda: sum(r["cases"] for r in _rel_rows(_SIGALRM)), "SIGALRM rows, cases"),
    ("before", lambda: _rel_outcome(_SIGALRM, "interrupted before commit"), "SIGALRM, before commit"),
    ("after", lambda: _rel_outcome(_SIGALRM, "interrupted after commit"), "SIGALRM, after commit"),
    ("not", lambda: _rel_outcome(_SIGALRM, "not interrupted"), "SIGALRM, not interrupted"),
    ("forced", lambda: sum(r["cases"] for r in _rel_rows("signal: KeyboardInterrupt inside")), "forced"),
    ("flips loaded", lambda: _rel_outcome(_FLIPS, "success"), "manifest bit flips, success"),
    ("flips", lambda: sum(r["cases"] for r in _rel_rows(_FLIPS)), "manifest bit flips, cases"),
):
    _RL.run(*_rel(*_args))
_RL.literal("20", "issue 20")
LITERALS["docs/reliability.md"] = {
    "5": "the attack tests' bound on a refusal's time (< 5 s, tests/reliability/test_attacks.py)",
    "1e308": "the hostile domain bound the CLI tests pass (+-1e308)",
}


# ==========================================================================================================
# Issue 15 (branch ssm): docs/ssm.md. One block, appended (as the blocks above).
# The bench tables are rendered by benchmarks/ssm_report.py from benchmarks/results/ssm_bench.json; every
# number in them is one of the renderer's cells, and the same cells are registered here, so a number typed
# by hand or left stale after a new run fails `make claims`.
# ==========================================================================================================
RESULTS["ssm-bench"] = ResultsFile(
    "ssm-bench", "benchmarks/results/ssm_bench.json", "utc", "refresh_ssm_bench"
)


def refresh_ssm_bench() -> None:
    """The bench (minutes: 12 trainings, 2 x 1e6 steps, full attention up to 1e6 rows). Run it alone:
    under the shared machine's lock, `flock /tmp/tf-heavy.lock python claims/check.py --refresh ssm-bench`."""
    _run([PY, "benchmarks/ssm_bench.py", "--out", "benchmarks/results/ssm_bench.json"])


@functools.cache
def ssm_report():
    return _module("benchmarks/ssm_report.py", "_claims_ssm_report")


def ssm_bench() -> dict:
    return RESULTS["ssm-bench"].load()


_SSM_TABLES = Span("docs/ssm.md#bench-tables")
for _cell in ssm_report().cells(ssm_bench()):
    _SSM_TABLES.derived(
        _cell.name, "ssm-bench", _cell.get, _cell.fmt, f"benchmarks/ssm_report.py cell {_cell.name!r}"
    )
LITERALS["docs/ssm.md"] = {
    "1e-3": "Mamba's Delta initialisation range [1e-3, 1e-1], and the state bound's stall slack (FLOAT_STALL_SLACK)",
    "1e-1": "Mamba's Delta initialisation range [1e-3, 1e-1]",
    "1e-5": "the export tolerance's floor (export/bounds.py)",
    "1e6": "the longest stream length the bench steps (ssm_bench.py --lengths)",
    "1e5": "a stream length of the bench (ssm_bench.py --lengths)",
    "10": "n^2 bytes of a boolean [n, n] mask at n = 1e5, in GB (arithmetic)",
}


def _ssm_model(name: str) -> dict:
    return ssm_bench()["models"][name]


(
    Span("docs/ssm.md#verdict")
    .derived(
        "ssm step faster than windowed",
        "ssm-bench",
        lambda d: (
            100
            * (1 - d["models"]["ssm"]["ort_step"]["p50_us"] / d["models"]["windowed"]["ort_step"]["p50_us"])
        ),
        "{:.0f}",
        "1 - ssm p50 / windowed p50 (ORT step at the task's shapes), percent",
    )
    .derived(
        "ssm rmse above windowed",
        "ssm-bench",
        lambda d: (
            100
            * (
                d["models"]["ssm"]["held_out_rmse"]["mean"] / d["models"]["windowed"]["held_out_rmse"]["mean"]
                - 1
            )
        ),
        "{:.0f}",
        "ssm one-step RMSE / windowed one-step RMSE - 1 (means over the seeds), percent",
    )
    .derived(
        "ssm training cost",
        "ssm-bench",
        lambda d: (
            d["models"]["ssm"]["train_cpu_ms_per_step"] / d["models"]["attention"]["train_cpu_ms_per_step"]
        ),
        "{:.1f}",
        "ssm / full attention training CPU ms per step",
    )
    .param(
        "max_len",
        lambda: _ssm_model("attention")["config"]["max_len"],
        "{}",
        "the bench's full-attention max_len",
    )
)
