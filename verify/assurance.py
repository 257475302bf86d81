"""The assurance table: for every contract, what each piece of evidence rests on -- proven on the
exported graph, proven on the runtime's function, proven on binary32 (SMT), property-tested (N
examples), monitored -- with verdicts, honest counts and solver times, generated from the code
and the proof reports.

Sources, none hand-copied:
    statement and bound   the contract module's docstring (first line) and its one-line BOUND
    CrossHair proofs      tickformer.verify.proofs.PROOFS (each spec's role: the runtime calls it,
                          a lemma over functions it calls, a reference nothing calls, or a
                          binary64 restatement of the operator) and the report of a run
                          (`tickformer prove --json`: verdicts, CPU seconds, twin counterexamples)
    binary32 (SMT)        the report of `tickformer prove --ieee754 --json` (claims/results/ieee754.json)
    exported graphs       the report of the graph proofs on reference artifacts
                          (claims/prove_graphs.py -> claims/results/prove_graphs.json)
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

from .proofs.crosshair import LEMMA, PROOFS, REFERENCE, RESTATEMENT, RUNTIME

DEFAULT_EXAMPLES = 60  # the `ci` Hypothesis profile in tests/conftest.py

# The labels the table uses, one per kind of evidence (issue 18).
GRAPH = "proven on the exported graph"
FUNCTION = "proven on the runtime's function"
LEMMA_LABEL = "proven lemma about the runtime's functions"
REFERENCE_LABEL = "proven on a reference definition (not called at run time)"
RESTATED = "on a binary64 restatement of the operator (not the code that runs)"
SMT = "proven on binary32 (SMT)"
TESTED = "property-tested"
MONITORED = "monitored"


@dataclass(frozen=True)
class ContractEntry:
    name: str  # module name in tickformer.contracts
    tests: tuple[tuple[str, tuple[str, ...]], ...]  # (file in tests/contracts, test-name prefixes; () = all)
    monitor: str  # what checks it at run time, or why nothing does
    exported: str  # what `tickformer verify` checks on an exported model ("" = nothing)
    monitored: bool = True  # `monitor` names a run-time check (False: it says why there is none)
    smt: bool = False  # the binary32 SMT claims belong here
    # the graph-proof claims that belong here: (artifact kinds of the reference artifacts, claim name)
    graph_claims: tuple[tuple[tuple[str, ...], str], ...] = ()


STATIC, ALL_KINDS = ("decoder", "encoder-decoder"), ("decoder", "encoder-decoder", "windowed", "ssm")


CONTRACTS: tuple[ContractEntry, ...] = (
    ContractEntry(
        "softmax_stability",
        (("test_softmax_stability.py", ()),),
        "indirect: ContractMonitor output_bound (finite outputs) in check/monitor mode",
        "finite outputs over the domain and its edges",
        smt=True,
    ),
    ContractEntry(
        "masking",
        (("test_masking.py", ()),),
        "none needed at run time: exact by construction (selection)",
        "causality; stale-cache isolation after reset (artifacts)",
        monitored=False,
        graph_claims=(
            (STATIC, "reads only live rows"),
            (STATIC, "reads every live row"),
            (ALL_KINDS, "causal"),
            (ALL_KINDS, "reads every past input"),
        ),
    ),
    ContractEntry(
        "decode_equivalence",
        (("test_decode_equivalence.py", ()), ("test_model_outputs.py", ("test_runtime_step",))),
        "none at run time (offline equivalence; measured at export, manifest 'equivalence')",
        "step == full pass; numpy vs ORT within the manifest tolerance (artifacts)",
        monitored=False,
    ),
    ContractEntry(
        "score_bound",
        (("test_score_bound.py", ()),),
        "none at run time: recorded in the manifest at export; decides fp16 vs fp32 scores",
        "",
        monitored=False,
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
        "ContractMonitor latency budget per step; control loop deadlines; certification campaign "
        "(timing itself is measured, never proven)",
        "",
        graph_claims=((ALL_KINDS, "bounded work"),),
    ),
    ContractEntry(
        "deadline",
        (("test_integer_specs.py", ("test_next_tick", "test_release_time")),),
        "none: the control loop (runtime/control_loop.py) computes its deadlines with these functions",
        "",
        monitored=False,
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
        (("test_integer_specs.py", ("test_ring", "test_recent")),),
        "none: Session (sliding: ring positions, successor table, block counters), HostCache / commit_rows "
        "(the commit slot), step.onnx (slot_read, window_distance in-graph) run on tables built by calling "
        "these functions (call-site tests)",
        "windowed artifacts: window_isolation, slides_past_max_len, step == windowed full pass across "
        "wrap-around",
        graph_claims=((("windowed",), "reads only live rows"), (("windowed",), "reads every live row")),
        monitored=False,
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


def _count(examples: str) -> int:
    head = examples.split(" ", 1)[0]
    return int(head) if head.isdigit() else 0


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _crosshair_label(role: str, status: str) -> str:
    if role == RESTATEMENT:
        verdict = "proven" if status == "proven" else status
        return f"{verdict} {RESTATED}"
    if status != "proven":
        return f"{status} (CrossHair)"
    return {RUNTIME: FUNCTION, LEMMA: LEMMA_LABEL, REFERENCE: REFERENCE_LABEL}[role]


def _twin_refutation(p: dict[str, Any]) -> str:
    for c in p.get("twin_conditions", []):
        if c.get("verdict") == "counterexample":
            return c.get("message", "")
    return ""


def build_table(
    prove: dict[str, Any] | None = None,
    *,
    tests_root: Path = Path("tests/contracts"),
    smt: dict[str, Any] | None = None,
    graphs: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per contract: statement, bound, every piece of evidence with its label, verdict and
    time, the property tests, monitor and `verify` column. `prove`, `smt`, `graphs`: the JSON
    reports of `tickformer prove --json`, `prove --ieee754 --json` and claims/prove_graphs.py
    (None: shown as 'not run')."""
    by_pair = {(p["spec"], p["twin"]): p for p in (prove or {}).get("proofs", [])}
    rows = []
    for entry in CONTRACTS:
        title, bound = docstring_summary(entry.name)
        evidence = []
        for proof in PROOFS:
            if proof.contract != entry.name:
                continue
            p = by_pair.get((proof.spec_name, proof.twin_name))
            status = p["status"] if p else "not run"
            cpu = sum(c["cpu_s"] for c in p["conditions"]) if p else None
            twin_cpu = sum(c["cpu_s"] for c in p["twin_conditions"]) if p else None
            evidence.append(
                {
                    "kind": "crosshair",
                    "label": _crosshair_label(proof.role, status),
                    "what": proof.spec.__name__,
                    "role": proof.role,
                    "sites": list(proof.sites),
                    "status": status,
                    "seconds": cpu,
                    "twin": proof.twin.__name__,
                    "twin_status": ("refuted" if p["twin_refuted"] else "SURVIVED") if p else "not run",
                    "twin_by": "z3 binary64 (SMT)" if proof.refuter == "smt-binary64" else "CrossHair",
                    "twin_seconds": twin_cpu,
                    "twin_counterexample": _twin_refutation(p) if p else "",
                }
            )
        if entry.smt:
            for c in (
                (smt or {}).get("claims", []) if smt else [{"claim": "binary32 claims", "status": "not run"}]
            ):
                evidence.append(
                    {
                        "kind": "smt",
                        "label": SMT if c.get("status") == "proven" else f"{c.get('status')} (SMT)",
                        "what": f"{c.get('claim')}: {c.get('statement', '')} [{c.get('function', '')}]",
                        "status": c.get("status"),
                        "seconds": c.get("solver_s"),
                        "twin": _short(c.get("twin", "-")),
                        "twin_status": c.get("twin_status", "not run"),
                        "twin_by": "z3 binary32 (SMT)",
                        "twin_seconds": c.get("twin_solver_s"),
                        "twin_counterexample": c.get("twin_counterexample", ""),
                    }
                )
        for kinds, claim in entry.graph_claims:
            hits = [
                (a, g, c)
                for a in (graphs or {}).get("artifacts", [])
                if a["kind"] in kinds
                for g in a["report"]["graphs"]
                for c in g["claims"]
                if c["name"] == claim
            ]
            statuses = sorted({c["status"] for _, _, c in hits})
            status = "not run" if not hits else " / ".join(statuses)
            label = GRAPH if status == "proven" else f"{GRAPH}: {status}"
            where = sorted({f"{a['kind']} {g['graph']}" for a, g, _ in hits})
            evidence.append(
                {
                    "kind": "graph",
                    "label": label,
                    "what": claim
                    + (
                        f" on {', '.join(where)} ({sum(g['states'] for _, g, _ in hits)} states)"
                        if hits
                        else ""
                    ),
                    "status": status,
                    "seconds": round(sum(g["seconds"] for _, g, _ in hits), 2) if hits else None,
                }
            )
        tests = property_tests(entry, tests_root)
        rows.append(
            {
                "contract": entry.name,
                "statement": title,
                "bound": bound,
                "evidence": evidence,
                "tests": tests,
                "examples": sum(_count(n) for _, n in tests),
                "monitor": entry.monitor,
                "monitored": entry.monitored,
                "exported": entry.exported,
            }
        )
    return rows


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Honest counts: distinct CrossHair specs (a spec with two twins counts once) by verdict and
    role, twins, SMT claims, graph claims."""
    specs: dict[str, tuple[str, str]] = {}
    twins = refuted = smt = smt_proven = smt_refuted = 0
    for r in rows:
        for e in r["evidence"]:
            if e["kind"] == "crosshair":
                specs[e["what"]] = (e["status"], e["role"])
                twins += 1
                refuted += e["twin_status"] == "refuted"
            elif e["kind"] == "smt" and e["status"] != "not run":
                smt += 1
                smt_proven += e["status"] == "proven"
                smt_refuted += e["twin_status"] == "refuted"
    statuses = [s for s, _ in specs.values()]
    return {
        "specs": len(specs),
        "proven": statuses.count("proven"),
        "bounded": statuses.count("no counterexample (bounded)"),
        "not run": statuses.count("not run"),
        "failed": len(specs)
        - statuses.count("proven")
        - statuses.count("no counterexample (bounded)")
        - statuses.count("not run"),
        "on runtime functions": sum(role == RUNTIME for _, role in specs.values()),
        "lemmas": sum(role == LEMMA for _, role in specs.values()),
        "references": sum(role == REFERENCE for _, role in specs.values()),
        "restatements": sum(role == RESTATEMENT for _, role in specs.values()),
        "twins": twins,
        "refuted": refuted,
        "smt claims": smt,
        "smt proven": smt_proven,
        "smt refuted": smt_refuted,
    }


def _secs(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f} s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(
    rows: list[dict[str, Any]],
    header_note: str,
    *,
    smt: dict[str, Any] | None = None,
    graphs: dict[str, Any] | None = None,
) -> str:
    n = counts(rows)
    lines = [
        "# Assurance table",
        "",
        "Generated by `tickformer prove --assurance` from the code (contract docstrings,",
        "`tickformer.verify.proofs.PROOFS` and the roles it gives each spec, the test sources in tests/contracts/,",
        "the monitor registry in `tickformer.verify.assurance`) and the proof reports named below. Do not edit",
        "by hand; rerun the command.",
        "",
        header_note,
        "",
        f"**Counts.** {n['specs']} distinct CrossHair specs: {n['proven']} proven over all paths, {n['bounded']} "
        f"no counterexample (bounded), {n['failed']} failed"
        + (f", {n['not run']} not run" if n["not run"] else "")
        + "; by what they are about: "
        f"{n['on runtime functions']} are functions the runtime or a graph builder calls, {n['lemmas']} lemmas about "
        f"such functions, {n['references']} reference definitions nothing calls at run time, {n['restatements']} a "
        f"binary64 restatement of the softmax operator. {n['refuted']} of {n['twins']} wrong twins refuted. "
        f"{n['smt proven']} of {n['smt claims']} binary32 claims proven by SMT on the operator itself, "
        f"{n['smt refuted']} of {n['smt claims']} of their twins refuted.",
        "",
        "Labels: *" + FUNCTION + "* (CrossHair, every path, over unbounded ints; the spec is the function "
        "the runtime calls, its call sites tested); *"
        + LEMMA_LABEL
        + "*; *"
        + REFERENCE_LABEL
        + "*; *"
        + SMT
        + "* (z3 FPSort Float32, RNE, on model.attention's own functions); *"
        + GRAPH
        + "* (`tickformer prove ART`, exhaustive over the position domain, on reference artifacts below); "
        "*no counterexample (bounded)* (CrossHair's floats are mostly reals: evidence, not proof); *"
        + TESTED
        + " (N examples)*; *"
        + MONITORED
        + "* (checked at run time). Times: CPU seconds of the conditions (CrossHair), solver seconds (SMT), "
        "interpretation seconds (graphs).",
        "",
        "| contract | bound | what it rests on | "
        + TESTED
        + " (examples) | "
        + MONITORED
        + " | `tickformer verify` on exported models |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        parts = []
        for e in r["evidence"]:
            if e["kind"] == "crosshair":
                where = ""
                if e["role"] == RUNTIME and e["sites"]:
                    where = f", called by {', '.join(e['sites'])}"
                elif e["role"] == LEMMA and e["sites"]:
                    where = f", about {', '.join(e['sites'])}"
                parts.append(
                    f"**{e['label']}** `{e['what']}` ({_secs(e['seconds'])}{where}); twin `{e['twin']}`: "
                    f"{e['twin_status']} by {e['twin_by']}"
                )
            elif e["kind"] == "smt":
                parts.append(
                    f"**{e['label']}** {e['what']} ({_secs(e['seconds'])}); twin `{e['twin']}`: {e['twin_status']}"
                )
            else:
                parts.append(f"**{e['label']}**: {e['what']} ({_secs(e['seconds'])})")
        tested = f"**{TESTED} ({r['examples']} examples)**<br>" + (
            "<br>".join(f"`{name.split('::')[-1]}`: {k}" for name, k in r["tests"]) or "—"
        )
        monitor = f"**{MONITORED}**: {r['monitor']}" if r["monitored"] else r["monitor"]
        lines.append(
            f"| **{r['contract']}**<br>{_cell(r['statement'])} | {_cell(r['bound'] or '—')} | "
            f"{_cell('<br>'.join(parts) or '—')} | {tested} | {_cell(monitor)} | {_cell(r['exported'] or '—')} |"
        )
    lines += ["", "## Wrong twins and their counterexamples", ""]
    lines += ["| spec / claim | wrong twin | refuted by | time | counterexample |", "|---|---|---|---|---|"]
    for r in rows:
        for e in r["evidence"]:
            if e["kind"] in ("crosshair", "smt"):
                what = e["what"].split(":")[0] if e["kind"] == "smt" else e["what"]
                lines.append(
                    f"| {_cell(what)} | `{e['twin']}` | {e['twin_by']} | {_secs(e['twin_seconds'])} | "
                    f"{_cell(e['twin_counterexample'] or e['twin_status'])} |"
                )
    if smt:
        mb = smt.get("m_bitwise_commutative") or {}
        lines += [
            "",
            f"## binary32 (SMT): {smt.get('tool', '')}",
            "",
            "The claims run model.attention.merge / finalize / _safe_max themselves on symbolic binary32 values "
            "(one row, one value column; the arrays are elementwise over rows and columns). Which backends this "
            "covers: the numpy operator (numpy backend, training). ONNX Runtime and TensorRT run the exported "
            "graph's one Softmax: graph-level only (the graph proofs below). The generated C has its own merge "
            "(codegen/kernels.py): not covered.",
            "",
            "| claim | function | status | paths | solver time |",
            "|---|---|---|---|---|",
        ]
        for c in smt.get("claims", []):
            lines.append(
                f"| {_cell(c['claim'] + ': ' + c['statement'])} | `{c['function']}` | {c['status']} | {c['paths']} | "
                f"{_secs(c['solver_s'])} |"
            )
        if mb:
            lines += [
                "",
                f"Not claimed: m bit for bit commutative (np.maximum's tie on +-0): {mb.get('status')} "
                f"({_secs(mb.get('solver_s'))}): {_cell(mb.get('counterexample', ''))}. l, acc and the finalized "
                "output are bit-exact.",
            ]
    if graphs:
        lines += [
            "",
            "## Proofs on the exported graphs (reference artifacts)",
            "",
            f"`{graphs.get('command', 'python claims/prove_graphs.py')}`: {graphs.get('note', '')}",
            "",
            "| artifact | graph | domain (states) | claim | status | time |",
            "|---|---|---|---|---|---|",
        ]
        for a in graphs.get("artifacts", []):
            for g in a["report"]["graphs"]:
                for i, c in enumerate(g["claims"]):
                    lines.append(
                        f"| {a['kind']} ({a['preset']}) | {g['graph']} | {g['domain']} ({g['states']}) | {c['name']} | "
                        f"{c['status']} | {_secs(g['seconds']) if i == 0 else ''} |"
                    )
    return "\n".join(lines) + "\n"
