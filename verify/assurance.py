"""The assurance table: for every contract, its bound, its CrossHair proofs (and wrong twins), its
Hypothesis property tests (and example counts) and its run-time monitor — generated from the code.

Sources, none hand-copied:
    statement and bound   the contract module's docstring (first line; the "Bound" section)
    proofs and twins      tickformer.verify.proofs.PROOFS (and, when run, their verdicts)
    property tests        the test functions in tests/contracts/ of a source checkout (AST: @given,
                          @settings(max_examples)); the directory is an argument, because an
                          installed package has no tests/ beside it
    monitor               the registry below names the code that checks it at run time
Shown by `tickformer prove --assurance`, written to docs/assurance.md.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .proofs.crosshair import PROOFS, ProofOutcome

DEFAULT_EXAMPLES = 60  # the `ci` Hypothesis profile in tests/conftest.py


@dataclass(frozen=True)
class ContractEntry:
    name: str  # module name in tickformer.contracts
    tests: tuple[tuple[str, tuple[str, ...]], ...]  # (file in tests/contracts, test-name prefixes; () = all)
    monitor: str  # what checks it at run time
    exported: str  # what `tickformer verify` checks on an exported model ("" = nothing)
    # what the proofs are about when it is not a function the runtime calls ("" = the runtime calls
    # the proven functions, or there are none)
    rests_on: str = ""


CONTRACTS: tuple[ContractEntry, ...] = (
    ContractEntry(
        "softmax_stability",
        (("test_softmax_stability.py", ()),),
        "indirect: ContractMonitor output_bound (finite outputs) in check/monitor mode",
        "finite outputs over the domain and its edges",
        "copies, not the runtime's code: the float specs restate model.attention.merge on Python floats "
        "(binary64, math.exp), tied to the operator by test_numpy_merge_agrees_with_scalar_spec; the "
        "binary32 proofs (`tickformer prove --ieee754`) are on merge_row / finalize_row / safe_max, op-for-op "
        "copies tested bit-equal to model.attention (test_merge_row_and_finalize_row_are_the_operator_bit_for_bit)",
    ),
    ContractEntry(
        "masking",
        (("test_masking.py", ()),),
        "none needed at run time: exact by construction (selection); position bookkeeping below",
        "causality; stale-cache isolation after reset (artifacts)",
    ),
    ContractEntry(
        "decode_equivalence",
        (("test_decode_equivalence.py", ()), ("test_model_outputs.py", ("test_runtime_step",))),
        "none at run time (offline equivalence; measured at export, manifest 'equivalence')",
        "step == full pass; numpy vs ORT within the manifest tolerance (artifacts)",
    ),
    ContractEntry(
        "score_bound",
        (("test_score_bound.py", ()),),
        "recorded in the manifest at export; decides fp16 vs fp32 scores",
        "",
    ),
    ContractEntry(
        "input_domain",
        (
            (
                "test_monitor_input_domain.py",
                (
                    "test_inside",
                    "test_nan",
                    "test_out_of",
                    "test_rejects",
                    "test_domain",
                    "test_parse",
                    "test_validate",
                ),
            ),
        ),
        "Session.step validate_input (always); ContractMonitor.check_input (check/monitor)",
        "inputs drawn from the declared domain, edges included; out-of-domain steps rejected without "
        "side effects (artifacts)",
    ),
    ContractEntry(
        "output_bound",
        (("test_monitor_input_domain.py", ("test_monitor",)), ("test_model_outputs.py", ("test_outputs",))),
        "ContractMonitor.check_output (check: raise, monitor: count + worst case)",
        "finite outputs",
    ),
    ContractEntry(
        "latency",
        (
            ("test_integer_specs.py", ("test_over_budget",)),
            ("test_monitor_input_domain.py", ("test_monitor_check", "test_monitor_counts")),
        ),
        "ContractMonitor latency budget per step; control loop deadlines; certification campaign",
        "",
    ),
    ContractEntry(
        "deadline",
        (("test_integer_specs.py", ("test_next_tick", "test_release_time")),),
        "control loop (runtime/control_loop.py) computes its deadlines with these functions",
        "",
    ),
    ContractEntry(
        "position",
        (("test_integer_specs.py", ("test_position", "test_runtime_session")),),
        "Session: ContextFull before touching the cache; commit only after success",
        "a rejected step leaves the position and later outputs unchanged (artifacts)",
    ),
    ContractEntry(
        "state_bound",
        (("test_state_bound.py", ()),),
        "ContractMonitor.check_state on the state each ssm step wrote, before the commit (check/monitor)",
        "ssm artifacts: every layer's state within the manifest's BIBO bound after every step (state_bounded)",
    ),
    ContractEntry(
        "ring_buffer",
        (("test_integer_specs.py", ("test_ring",)),),
        "Session (sliding: ring positions, successor table, block counters), HostCache / commit_rows "
        "(the commit slot), step.onnx (slot_read, window_distance in-graph): tables built by calling "
        "these functions",
        "windowed artifacts: window_isolation, slides_past_max_len, step == windowed full pass across "
        "wrap-around",
    ),
)


def docstring_summary(module_name: str) -> tuple[str, str]:
    """(title, first line of the Bound section) from a contract module's docstring."""
    module = importlib.import_module(f"tickformer.contracts.{module_name}")
    doc = (module.__doc__ or "").strip().splitlines()
    title = doc[0].removeprefix("Contract: ").rstrip(".") if doc else module_name
    bound = ""
    for i, line in enumerate(doc):
        if line.strip().startswith("Bound"):
            rest = [ln.strip() for ln in doc[i + 1 : i + 4] if ln.strip()]
            bound = rest[0] if rest else ""
            break
    return title, getattr(module, "BOUND", bound)


def property_tests(entry: ContractEntry, root: Path) -> list[tuple[str, str]]:
    """(test name, example count) for the entry's tests, read from the test sources (AST) under
    `root` (a checkout's tests/contracts)."""
    out: list[tuple[str, str]] = []
    if not root.is_dir():
        return [(f"{root} not found: pass --tests DIR (a source checkout's tests/contracts)", "-")]
    for filename, prefixes in entry.tests:
        path = root / filename
        if not path.exists():
            out.append((f"{filename} (missing)", "-"))
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            if prefixes and not node.name.startswith(prefixes):
                continue
            out.append((f"{filename}::{node.name}", _examples(node)))
    return out


def _examples(fn: ast.FunctionDef) -> str:
    is_hypothesis = False
    count: int | None = None
    params = 1
    for dec in fn.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        name = ast.unparse(call.func if call else dec)
        if name.endswith("given"):
            is_hypothesis = True
        if call and name.endswith("settings"):
            for kw in call.keywords:
                if (
                    kw.arg == "max_examples"
                    and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, int)
                ):
                    count = kw.value.value
        if (
            call
            and name.endswith("parametrize")
            and len(call.args) >= 2
            and isinstance(call.args[1], (ast.List, ast.Tuple))
        ):
            params *= len(call.args[1].elts)
    if is_hypothesis:
        return f"{count if count is not None else DEFAULT_EXAMPLES} (Hypothesis)"
    return f"{params} case(s)"


def build_table(
    outcomes: list[ProofOutcome] | None = None, *, tests_root: Path = Path("tests/contracts")
) -> list[dict[str, Any]]:
    by_spec = {o.proof.spec_name + "|" + o.proof.twin_name: o for o in outcomes or []}
    rows = []
    for entry in CONTRACTS:
        title, bound = docstring_summary(entry.name)
        proofs = []
        for p in PROOFS:
            if p.contract != entry.name:
                continue
            o = by_spec.get(p.spec_name + "|" + p.twin_name)
            proofs.append(
                {
                    "spec": p.spec.__name__,
                    "values": p.values,
                    "status": o.spec_status if o else "not run",
                    "twin": p.twin.__name__,
                    "twin_status": ("refuted" if o.twin_refuted else "SURVIVED") if o else "not run",
                }
            )
        rows.append(
            {
                "contract": entry.name,
                "statement": title,
                "bound": bound,
                "proofs": proofs,
                "tests": property_tests(entry, tests_root),
                "monitor": entry.monitor,
                "exported": entry.exported,
                "rests_on": entry.rests_on,
            }
        )
    return rows


def to_markdown(rows: list[dict[str, Any]], header_note: str) -> str:
    lines = [
        "# Assurance table",
        "",
        "Generated by `tickformer prove --assurance` from the code (contract docstrings,",
        "`tickformer.verify.proofs.PROOFS`, the test sources in tests/contracts/, the monitor registry in",
        "`tickformer.verify.assurance`). Do not edit by hand; rerun the command.",
        "",
        header_note,
        "",
        "| contract | bound | CrossHair proofs (spec: verdict / wrong twin: verdict) | property tests "
        "(examples) | run-time monitor | `tickformer verify` on exported models |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        proofs = (
            "<br>".join(
                f"`{p['spec']}` ({p['values']}): {p['status']} / `{p['twin']}`: {p['twin_status']}"
                for p in r["proofs"]
            )
            or "—"
        )
        if r.get("rests_on"):
            proofs += f"<br>*rests on:* {r['rests_on']}"
        tests = "<br>".join(f"`{name.split('::')[-1]}`: {n}" for name, n in r["tests"]) or "—"
        bound = (r["bound"] or "—").replace("|", "\\|")
        lines.append(
            f"| **{r['contract']}**<br>{r['statement']} | {bound} | {proofs} | {tests} | {r['monitor']} "
            f"| {r['exported'] or '—'} |"
        )
    lines.append("")
    lines.append(
        "Verdicts: *proven* = CrossHair explored every path (ints: unbounded z3 integers); *no "
        "counterexample (bounded)* = "
        "float specs, where CrossHair models floats mostly as reals (plus NaN/inf forks and a few IEEE-double "
        "iterations) and caps real-based paths at 'unknown': bounded evidence, with the IEEE edges covered by the "
        "Hypothesis tests. A wrong twin must be *refuted* on every run."
    )
    return "\n".join(lines) + "\n"
