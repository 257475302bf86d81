"""The functions the expressions of claims/claims.toml call: values computed from the code (re-run
by every check, seconds in all) and a few readers of the results files.

An expression sees: the results files by name (`demo`, `c_step`: a JSON object whose `[...]` takes
a dotted key, `demo["loop.model.ticks"]`, `~` for a dot inside a key), the package as `tickformer`
(its modules imported on first use: `tickformer.control.demo.TRACKING_RATIO_TARGET`), every public
name below and Python's builtins. Not part of the package (like benchmarks/).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
__all__ = [  # what an expression may name, besides the results files and builtins
    *("math", "re", "mean", "dig", "tickformer", "pyfile", "default", "sci", "secs", "locked_version"),
    *("evt_test", "spec_statuses", "c_case", "bench_cases", "step_stats", "step_p50", "bench_median_us"),
    *("graph_seconds", "smallest_caught", "loop_fresh", "reliability_report", "rel_rows", "rel_outcome"),
    *("ssm_cells", "your_plant_cells", "your_plant_figure"),
    *("fp16_errors", "score_search_reach", "step_graph_ops", "control_equivalence"),
    *("decode_tol", "distinct_specs", "int_proofs", "bound_constant", "softmax_sum_ratio", "exp_ulp"),
    *("assoc_ratio", "smoothed_target_entropy", "render_assurance", "bench_readme"),
]
mean = statistics.fmean


# --- reading -----------------------------------------------------------------------------------------
def dig(data: Any, key: str) -> Any:
    """data["a"]["b"][0] for key "a.b.0"; `~` stands for a dot inside a key ("p99~9")."""
    for part in key.split("."):
        if isinstance(data, list):
            data = data[int(part)]
        else:
            data = data[part] if part in data else data[part.replace("~", ".")]
    return data


class Doc(dict):
    """A results file's JSON object; `doc["a.b"]` digs (a plain key is a plain key)."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and ("." in key or "~" in key):
            return dig(dict(self), key)
        return super().__getitem__(key)


class _Modules:
    """`tickformer.x.y.NAME`: each module imported when an expression first reaches it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        name = f"{self._name}.{attr}"
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            return getattr(importlib.import_module(self._name), attr)
        return _Modules(name)


tickformer = _Modules("tickformer")


@functools.cache
def pyfile(path: str) -> Any:
    """A Python file of the repository (a test, a benchmark report) loaded as a module."""
    name = "_claims_" + re.sub(r"\W", "_", path.removesuffix(".py"))
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def default(fn: Callable, param: str) -> Any:
    """The default of parameter `param` of `fn` (a function or a dataclass)."""
    return inspect.signature(fn).parameters[param].default


def locked_version(package: str) -> str:
    """The version requirements.lock pins (tests/test_lock.py: the installed one is it)."""
    from lockfile import version

    return version(package)


# --- formats (a `fmt` without braces names one) ---------------------------------------------------------
def sci(digits: int = 1) -> Callable[[float], str]:
    """2.86e-06 -> '2.9e-6' (how the docs write scientific notation)."""

    def f(v: float) -> str:
        mant, exp = f"{v:.{digits}e}".split("e")
        return f"{mant}e{int(exp)}"

    return f


def secs(v: float) -> str:
    """Seconds as docs/contracts.md writes a proof's time: whole from 10 s, one decimal below."""
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


# --- readers of results files ----------------------------------------------------------------------------
def evt_test(cert: dict, prefix: str) -> dict:
    """The EVT test of a certificate whose name starts with `prefix`."""
    return next(t for t in cert["evt"]["tests"] if t["name"].startswith(prefix))


def spec_statuses(report: dict) -> list[str]:
    """The verdict of each distinct spec of a `tickformer prove --json` report (a spec with two
    wrong twins once)."""
    return list({p["spec"]: p["status"] for p in report["proofs"]}.values())


def c_case(data: dict, case: str) -> Doc:
    """The extra_info of the c_step_bench.json benchmark whose case is `case` (`["a.b"]` digs)."""
    return Doc(next(b["extra_info"] for b in data["benchmarks"] if b["extra_info"].get("case") == case))


def bench_cases(bench: dict) -> dict:
    """benchmarks/results/latest.json by case (benchmarks/report.py index_benchmarks)."""
    return pyfile("benchmarks/report.py").index_benchmarks(bench)


def step_stats(bench: dict, impl: str, label: str) -> dict:
    """The step statistics of `impl` at position '1', 'N/2', 'N' or 'all' (us)."""
    return pyfile("benchmarks/report.py").step_stats(bench_cases(bench), impl, label)


def step_p50(bench: dict, impl: str, label: str) -> float:
    return step_stats(bench, impl, label)["p50"]


def bench_median_us(bench: dict, fullname: str) -> float:
    return next(b for b in bench["benchmarks"] if b["fullname"] == fullname)["stats"]["median"] * 1e6


def graph_seconds(report: dict, kind: str, preset: str) -> float:
    """The wall time of the graph proofs of one reference artifact in prove_graphs.json."""
    (a,) = [a for a in report["artifacts"] if a["kind"] == kind and a["preset"] == preset]
    return a["report"]["wall_s"]


def smallest_caught(margins: dict) -> float:
    """The smallest margin by which verify_margins.json's planted bugs fail step_equals_full."""
    return min(
        m["step_equals_full"]["margin"]
        for m in margins["models"].values()
        if m.get("step_equals_full", {}).get("status") == "fail" and "margin" in m["step_equals_full"]
    )


def loop_fresh(side_runs: dict, run: str, share: float | None) -> list:
    """Per seed, the identified/oracle ratios of an IdentifiedMPC run of seeds 0-3 on the twenty
    fresh plants at snapshot 10000, refusing a run made otherwise (loop_share, plants, seeds)."""
    s = side_runs["ensemble"][run]
    spec = s["spec"]
    if spec.get("identified") is None or spec["seeds"] != [0, 1, 2, 3]:
        raise ValueError(f"{run} is not an IdentifiedMPC run of seeds 0-3")
    if spec.get("loop_share") != share:
        raise ValueError(f"{run} was not run with loop_share {share}")
    if spec.get("plants") != [100, 20]:
        raise ValueError(f"{run} is not on the twenty fresh plants (100, 20)")
    return s["snapshots"]["10000"]["identified_ratio"]


@functools.cache
def reliability_report() -> dict:
    """docs/reliability_report.md (generated by a real run, its command and date in it): its case
    rows (label -> cases, outcomes), class table, total and test count."""
    text = (ROOT / "docs/reliability_report.md").read_text()
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
    }


def rel_rows(prefix: str) -> list[dict]:
    return [r for label, r in reliability_report()["rows"].items() if label.startswith(prefix)]


def rel_outcome(prefix: str, outcome: str) -> int:
    return sum(r["outcomes"].get(outcome, 0) for r in rel_rows(prefix))


def ssm_cells(report: dict) -> list[tuple[str, Any, str]]:
    """(name, value, text) of every number of docs/ssm.md's bench tables, as benchmarks/ssm_report.py
    renders them from ssm_bench.json (the span states the tables, so its claims are the cells)."""
    data = dict(report)
    return [(c.name, c.get(data), c.text(data)) for c in pyfile("benchmarks/ssm_report.py").cells(data)]


@functools.cache
def _your_plant() -> Any:
    """benchmarks/your_plant.py, loaded once (its renderer and its figures)."""
    return pyfile("benchmarks/your_plant.py")


def your_plant_cells(report: dict) -> list[tuple[str, Any, str]]:
    """(name, value, text) of every number of docs/your_plant.md's results block, as
    benchmarks/your_plant.py renders them from your_plant.json (the span states the block)."""
    return _your_plant().cells(dict(report))


def your_plant_figure(report: dict, name: str) -> Any:
    """One figure docs/your_plant.md's prose states (benchmarks/your_plant.py `figures`: the
    low-gear draws, per-seed ratios to the oracle, falls), computed from your_plant.json."""
    return _your_plant().figures(dict(report))[name]


# --- values computed from the code ---------------------------------------------------------------------
@functools.cache
def fp16_errors(name: str) -> dict:
    """export.fp16.measure_error of preset `name` (init_params seed 0) over the domain [-10, 10]."""
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
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return float(out.split()[-1])


@functools.cache
def step_graph_ops() -> dict[str, int]:
    """ONNX Runtime's node counts by op type of the control preset's step graph after its optimiser."""
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


def distinct_specs() -> int:
    """The CrossHair specs, each once (a spec with two wrong twins is one spec)."""
    from tickformer.verify.proofs.crosshair import PROOFS

    return len({p.spec_name for p in PROOFS})


def int_proofs(distinct: bool) -> int:
    """The integer-valued CrossHair proofs (a spec with two wrong twins is one spec when distinct)."""
    from tickformer.verify.proofs.crosshair import PROOFS

    ints = [p.spec_name for p in PROOFS if p.values == "int"]
    return len(set(ints)) if distinct else len(ints)


def bound_constant(contract: str, pattern: str) -> str:
    """The number `pattern` captures in the BOUND statement of tickformer.contracts.`contract`."""
    m = re.search(pattern, importlib.import_module(f"tickformer.contracts.{contract}").BOUND)
    if m is None:
        raise KeyError(f"{pattern!r} not in {contract}.BOUND")
    return m.group(1)


@functools.cache
def softmax_sum_ratio(n: int) -> float:
    """Worst |sum p - 1| / weight_sum_bound(n) over 200 rows of N(0, 3^2) scores through the operator."""
    import numpy as np

    from tickformer.contracts.softmax_stability import weight_sum_bound

    weights_of = pyfile("tests/contracts/test_softmax_stability.py").weights_of
    rng = np.random.default_rng(n)
    worst = 0.0
    for _ in range(200):
        p = weights_of((rng.standard_normal(n) * 3).astype(np.float32))
        worst = max(worst, abs(float(p.astype(np.float64).sum()) - 1.0))
    return worst / weight_sum_bound(n, np.float32)


@functools.cache
def exp_ulp() -> float:
    """numpy's float32 exp against float64 over [-87, 88] (2,000,001 points), in ULPs."""
    import numpy as np

    x = np.linspace(-87, 88, 2_000_001, dtype=np.float32)
    y = np.exp(x)
    return float((np.abs(y.astype(np.float64) - np.exp(x.astype(np.float64))) / np.spacing(y)).max())


def assoc_ratio() -> float:
    """The worst merge associativity gap over 3000 triples in [-50, 50], over its bound."""
    import numpy as np

    from tickformer.contracts.softmax_stability import merge_assoc_bound, merge_assoc_gap

    ms = np.random.default_rng(0).uniform(-50, 50, (3000, 3))
    return max(merge_assoc_gap(*map(float, t)) for t in ms) / merge_assoc_bound(3, np.float64)


def smoothed_target_entropy(eps: float, v: int) -> float:
    """Entropy (nats) of the label-smoothed target (1 - eps) one-hot + eps / V (model/grad.py)."""
    hit, miss = 1 - eps + eps / v, eps / v
    return -(hit * math.log(hit) + (v - 1) * miss * math.log(miss))


# --- generated documents -----------------------------------------------------------------------------------
def render_assurance(prove: dict, ieee754: dict, prove_graphs: dict) -> str:
    """docs/assurance.md as `tickformer prove --assurance` renders it from the three reports:
    CrossHair (prove.json), binary32 SMT (ieee754.json), graph proofs (prove_graphs.json)."""
    from tickformer.verify import assurance

    smt, graphs = dict(ieee754), dict(prove_graphs)
    rows = assurance.build_table(dict(prove), tests_root=ROOT / "tests" / "contracts", smt=smt, graphs=graphs)
    note = (
        "Proof verdicts from this run (CrossHair and the binary64 drift query), the binary32 SMT report "
        "claims/results/ieee754.json and the graph proofs claims/results/prove_graphs.json."
    )
    return assurance.to_markdown(rows, note, smt=smt, graphs=graphs)


def bench_readme() -> str:
    """benchmarks/README.md as benchmarks/report.py renders it from benchmarks/results/ (its plots
    need the raw samples, which are not committed: the check leaves the image lines out)."""
    with tempfile.TemporaryDirectory() as tmp:
        return pyfile("benchmarks/report.py").render(ROOT / "benchmarks" / "results", Path(tmp))
