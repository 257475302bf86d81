"""Symbolic checks of the contracts' pure-Python specifications with CrossHair.

Each `Proof` names a specification in `tickformer.contracts` (a top-level pure function with
PEP 316 `pre:`/`post:` conditions in its docstring), what it is relative to the code that runs
(`role`: the runtime calls it at `sites`, or a lemma, a reference, a binary64 restatement), and a
deliberately wrong twin in `tickformer.verify.proofs.wrong_twins`. Every post-condition of the
spec is checked by CrossHair's symbolic execution (`crosshair.core.ConditionCheckable`, the
engine behind `crosshair check --analysis_kind=PEP316 --report_all`); the twin is checked against
the *spec's* conditions (read from the spec, never restated) and must be refuted.

Verdicts, as CrossHair reports them (crosshair.statespace.MessageType):
    confirmed       every execution path was explored and the condition held: a proof, for the
                    model CrossHair uses (below);
    not confirmed   no counterexample within the per-condition budget, but not every path was
                    exhausted: bounded evidence, not a proof;
    counterexample  a concrete input breaking the condition (the message names it).
    vacuous         no input satisfying the preconditions was found: nothing was checked. A
                    failure of the spec (its `pre:` conditions contradict each other, or are
                    beyond the solver), never a pass.

Verdicts that depend on time (CrossHair's per-condition and per-path budgets and z3's query
timeouts are wall-clock) are not accepted from a shared run alone: a spec found vacuous, an
integer spec not confirmed, or a twin not refuted is re-run alone, one process at a time, with
RETRY_FACTOR times the budget (`run_proofs`), and only that verdict stands. On a loaded 2-core
machine the shared run found `ring_buffer.window_covered` vacuous (no path's solver call for its
preconditions finished within the per-path budget); alone with more time it is proven.

How CrossHair models the values (crosshair-tool 0.0.114, the version requirements.lock pins;
libimpl/builtinslib.py):
    int    z3 unbounded integers, like Python's ints: proofs over int specs (masks, ring buffer,
           position, deadlines, latency) cover all integers, no overflow to model.
    float  per iteration it picks a z3 *Real* (~98%) or a z3 IEEE-754 double (~2%); a
           real-based float is further forked into finite / NaN / -inf / +inf. A path on which
           a real-based float took part is capped at "unknown" (statespace.cap_result_at_unknown),
           so most float conditions end "not confirmed" even when no counterexample exists.
           math.exp has no symbolic model: its argument is realized (made concrete), so claims
           through exp are searched with concrete values, not decided. Reals cannot exhibit
           rounding, overflow or underflow; those IEEE claims come from the IEEE-sort
           iterations or from the NaN/inf forks, and otherwise are covered by Hypothesis at the
           edges (tests/contracts/test_softmax_stability.py: 1e30 logits, tiny spreads, fp16).

Not real-time code; runs in worker processes (2 by default, one per CI core), each condition
bounded by CPU seconds, the whole run by a wall-clock budget.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable

from tickformer.contracts import deadline, latency, masking, position, ring_buffer, softmax_stability

from . import wrong_twins as twins

# What a spec is, relative to the code that runs (the assurance table's labels):
RUNTIME = "runtime"  # the spec function itself is called by the runtime or a graph builder (`sites`)
LEMMA = "lemma"  # a property over functions the runtime calls (its body calls them)
REFERENCE = "reference"  # a definition nothing calls at run time (tests and other specs use it)
RESTATEMENT = "restatement"  # the operator's arithmetic restated on Python floats (binary64)
ROLES = (RUNTIME, LEMMA, REFERENCE, RESTATEMENT)


@dataclass(frozen=True)
class Proof:
    """One specification, the contract it belongs to, and its wrong twin."""

    contract: str  # key in tickformer.verify.assurance.CONTRACTS
    spec: Callable[..., Any]
    twin: Callable[..., Any]
    values: str  # "int" or "float": which CrossHair model applies (see module docstring)
    role: str = RUNTIME  # one of ROLES
    # RUNTIME: the package files (relative to the package root) that import and call the spec;
    # tests/verify/test_prove.py checks each by AST. LEMMA: the runtime functions it is about.
    sites: tuple[str, ...] = ()
    # how the twin is refuted: "crosshair" (against the spec's conditions), or "smt-binary64" (the
    # float-drift twin: z3 on binary64 under realistic preconditions, drift.release_drift;
    # CrossHair's only counterexample for it is an OverflowError at periods near 1.8e308, which
    # is not the reason the twin is wrong)
    refuter: str = "crosshair"

    @property
    def spec_name(self) -> str:
        return f"{self.spec.__module__}.{self.spec.__qualname__}"

    @property
    def twin_name(self) -> str:
        return f"{self.twin.__module__}.{self.twin.__qualname__}"


_SS, _M, _RB = softmax_stability, masking, ring_buffer
_SESSION, _GRAPHS, _NUMPY = "runtime/session.py", "export/graphs.py", "runtime/backends/numpy.py"
PROOFS: tuple[Proof, ...] = (
    Proof("softmax_stability", _SS.merged_max, twins.merged_max_arith, "float", RESTATEMENT),
    Proof("softmax_stability", _SS.safe_max, twins.safe_max_identity, "float", RESTATEMENT),
    Proof(
        "softmax_stability", _SS.rescale_exponents, twins.rescale_exponents_unguarded, "float", RESTATEMENT
    ),
    Proof("softmax_stability", _SS.rescale_factor, twins.rescale_factor_flush, "float", RESTATEMENT),
    Proof("softmax_stability", _SS.merge_scalar, twins.merge_scalar_unguarded, "float", RESTATEMENT),
    Proof("softmax_stability", _SS.merge_assoc_gap, twins.merge_assoc_gap_linear_exp, "float", RESTATEMENT),
    Proof("masking", _M.causal_allowed, twins.causal_allowed_strict, "int", RUNTIME, (_GRAPHS,)),
    Proof(
        "masking",
        _M.window_allowed,
        twins.window_allowed_off_by_one,
        "int",
        RUNTIME,
        (_GRAPHS, "model/transformer.py"),
    ),
    Proof("masking", _M.padding_allowed, twins.padding_allowed_inclusive, "int", REFERENCE),
    Proof("masking", _M.cache_row_live, twins.cache_row_live_inclusive, "int", RUNTIME, (_GRAPHS, _NUMPY)),
    Proof(
        "ring_buffer", _RB.ring_slot, twins.ring_slot_shifted, "int", RUNTIME, ("runtime/backends/layout.py",)
    ),
    Proof("ring_buffer", _RB.slots_distinct, twins.slots_distinct_mod_wrong, "int", LEMMA, ("ring_slot",)),
    Proof("ring_buffer", _RB.evicted_position, twins.evicted_position_early, "int", REFERENCE),
    Proof("ring_buffer", _RB.recent_slot, twins.recent_slot_off_by_one, "int", REFERENCE),
    Proof(
        "ring_buffer", _RB.window_distance, twins.window_distance_reversed, "int", RUNTIME, (_GRAPHS, _NUMPY)
    ),
    Proof("ring_buffer", _RB.held_position, twins.held_position_overwritten, "int", REFERENCE),
    Proof("ring_buffer", _RB.slot_read, twins.slot_read_evicted, "int", RUNTIME, (_GRAPHS, _NUMPY)),
    Proof("ring_buffer", _RB.slot_read, twins.slot_read_ignores_start, "int", RUNTIME, (_GRAPHS, _NUMPY)),
    Proof(
        "ring_buffer",
        _RB.window_covered,
        twins.window_covered_short_ring,
        "int",
        LEMMA,
        ("slot_read", "ring_slot"),
    ),
    Proof("ring_buffer", _RB.ring_position, twins.ring_position_period_w, "int", RUNTIME, (_SESSION,)),
    Proof("ring_buffer", _RB.ring_step, twins.ring_step_wraps_to_zero, "int", LEMMA, ("next_ring_position",)),
    Proof(
        "ring_buffer",
        _RB.ring_reads_alike,
        twins.ring_reads_alike_mod_w,
        "int",
        LEMMA,
        ("slot_read", "window_distance"),
    ),
    Proof(
        "ring_buffer",
        _RB.blocks_tracked,
        twins.blocks_tracked_in_place,
        "int",
        LEMMA,
        ("block_write", "block_counter", "next_ring_position", "absolute_position"),
    ),
    Proof("position", position.can_step, twins.can_step_strict, "int", RUNTIME, (_SESSION,)),
    Proof(
        "position",
        position.step_position,
        twins.step_position_advance_on_failure,
        "int",
        RUNTIME,
        (_SESSION,),
    ),
    Proof(
        "deadline",
        deadline.release_time,
        twins.release_time_float,
        "int",
        RUNTIME,
        ("runtime/control_loop.py",),
        refuter="smt-binary64",
    ),
    Proof(
        "deadline", deadline.next_tick, twins.next_tick_overskip, "int", RUNTIME, ("runtime/control_loop.py",)
    ),
    Proof(
        "deadline", deadline.next_tick, twins.next_tick_burst, "int", RUNTIME, ("runtime/control_loop.py",)
    ),
    Proof(
        "latency",
        latency.over_budget_ns,
        twins.over_budget_ns_abs,
        "int",
        RUNTIME,
        ("runtime/monitor.py", "runtime/control_loop.py"),
    ),
)

CONFIRMED, NOT_CONFIRMED, COUNTEREXAMPLE, VACUOUS, ERROR, NOT_RUN = (
    "confirmed",
    "not confirmed",
    "counterexample",
    "vacuous",
    "error",
    "not run",
)


@dataclass(frozen=True)
class ConditionResult:
    function: str  # the function run (spec or twin)
    spec: str  # whose conditions
    condition: str  # the post-condition's source text
    verdict: str  # CONFIRMED | NOT_CONFIRMED | COUNTEREXAMPLE | ERROR | NOT_RUN
    message: str
    cpu_s: float


def _resolve(qualname: str) -> Callable[..., Any]:
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name)


def check_conditions(
    spec_name: str, target_name: str, per_condition_s: float, stop_at_counterexample: bool
) -> list[ConditionResult]:
    """Run CrossHair on every post-condition of `spec_name`, executing `target_name` (the spec
    itself, or its wrong twin). Runs in a worker process; arguments are names (picklable)."""
    import crosshair.core_and_libs  # noqa: F401  registers CrossHair's models of the stdlib
    from crosshair.condition_parser import condition_parser
    from crosshair.core import ConditionCheckable
    from crosshair.fnutil import FunctionInfo
    from crosshair.options import DEFAULT_OPTIONS, AnalysisKind, AnalysisOptionSet
    from crosshair.statespace import MessageType

    spec, target = _resolve(spec_name), _resolve(target_name)
    options = DEFAULT_OPTIONS.overlay(
        AnalysisOptionSet(
            analysis_kind=[AnalysisKind.PEP316], per_condition_timeout=per_condition_s, report_all=True
        )
    )
    with condition_parser([AnalysisKind.PEP316]) as parser:
        conditions = parser.get_fn_conditions(FunctionInfo.from_fn(spec))
    if conditions is None or not conditions.post:
        return [
            ConditionResult(target_name, spec_name, "", ERROR, "spec has no PEP 316 post-conditions", 0.0)
        ]
    conditions = dataclasses.replace(conditions, fn=target, src_fn=target)
    results: list[ConditionResult] = []
    for post in conditions.post:
        start = time.process_time()
        checkable = ConditionCheckable(
            FunctionInfo.from_fn(target), options, dataclasses.replace(conditions, post=[post])
        )
        messages = list(checkable.analyze())
        cpu = time.process_time() - start
        states = [m.state for m in messages]
        if not messages or all(s == MessageType.CONFIRMED for s in states):
            verdict, text = CONFIRMED, "confirmed over all paths"
        elif any(s in (MessageType.POST_FAIL, MessageType.EXEC_ERR, MessageType.POST_ERR) for s in states):
            verdict = COUNTEREXAMPLE
            text = next(
                m.message
                for m in messages
                if m.state in (MessageType.POST_FAIL, MessageType.EXEC_ERR, MessageType.POST_ERR)
            )
        elif any(s == MessageType.SYNTAX_ERR for s in states):
            verdict, text = ERROR, messages[0].message
        elif any(s == MessageType.PRE_UNSAT for s in states):
            verdict = VACUOUS
            text = f"no input satisfying the preconditions found within {per_condition_s:g} s (vacuous)"
        else:
            verdict, text = NOT_CONFIRMED, "no counterexample within the budget (paths not exhausted)"
        results.append(
            ConditionResult(target_name, spec_name, post.expr_source, verdict, text, round(cpu, 3))
        )
        if stop_at_counterexample and verdict == COUNTEREXAMPLE:
            break
    return results


def refute_by_drift(spec_name: str, twin_name: str, timeout_s: float) -> list[ConditionResult]:
    """The float-drift twin refuted for the reason it exists: z3 on binary64 finds a realistic
    start, period and tick >= 1 (DRIFT_PRE) where it differs from the exact release time; the
    witness is replayed through both functions (verify/proofs/drift.release_drift). Runs in a
    worker process."""
    from . import drift  # z3 (an optional dependency of the proofs) is imported with it

    start = time.process_time()
    verdict = drift.release_drift(timeout_ms=int(timeout_s * 1000))
    cpu = time.process_time() - start
    state = COUNTEREXAMPLE if verdict.status == "counterexample" else NOT_CONFIRMED
    condition = (
        f"binary64 (z3 FPSort Float64, RNE): twin == exact release under {drift.drift_preconditions()}"
    )
    message = verdict.counterexample if state == COUNTEREXAMPLE else f"not refuted: {verdict.counterexample}"
    return [ConditionResult(twin_name, spec_name, condition, state, message, round(cpu, 3))]


@dataclass(frozen=True)
class ProofOutcome:
    proof: Proof
    spec_results: list[ConditionResult]
    twin_results: list[ConditionResult]

    @property
    def spec_ok(self) -> bool:
        return bool(self.spec_results) and all(
            r.verdict in (CONFIRMED, NOT_CONFIRMED) for r in self.spec_results
        )

    @property
    def vacuous(self) -> bool:
        return any(r.verdict == VACUOUS for r in self.spec_results)

    @property
    def spec_status(self) -> str:
        if not self.spec_ok:
            return "FAILED"
        return (
            "proven"
            if all(r.verdict == CONFIRMED for r in self.spec_results)
            else "no counterexample (bounded)"
        )

    @property
    def twin_refuted(self) -> bool:
        return any(r.verdict == COUNTEREXAMPLE for r in self.twin_results)

    @property
    def ok(self) -> bool:
        return self.spec_ok and self.twin_refuted


# A twin's per-condition budget, as a multiple of the spec's. A twin check stops at its first
# counterexample, so the extra budget is spent only on conditions the twin satisfies before the
# one it breaks. merge_scalar_unguarded's counterexample (both states empty) took 1.7-2.0 s CPU
# of a 2 s budget, and a CI run under load missed it.
TWIN_BUDGET = 2.0
# z3's budget for the binary64 drift query (3-9 s on the loaded 2-core CI machine).
DRIFT_TIMEOUT_S = 60.0
# A time-dependent verdict (module docstring) is re-run alone with this many times the budget.
RETRY_FACTOR = 4.0


def _needs_retry(key: tuple[str, str], results: list[ConditionResult], values: dict[str, str]) -> bool:
    """Whether a shared-run verdict could be the machine's load rather than the spec's: vacuous
    anywhere; an integer spec not confirmed (CrossHair decides integer specs over all paths); a
    twin not refuted."""
    spec, target = key
    if any(r.verdict == VACUOUS for r in results):
        return True
    if spec == target:
        return values.get(spec) == "int" and any(r.verdict == NOT_CONFIRMED for r in results)
    return not any(r.verdict == COUNTEREXAMPLE for r in results)


def _retried(results: list[ConditionResult], budget_s: float) -> list[ConditionResult]:
    """The re-run's verdicts, each message saying it comes from the re-run alone; a condition
    still vacuous says what that means and what to fix."""
    out = []
    for r in results:
        if r.verdict == VACUOUS:
            message = (
                f"vacuous: no input satisfying the preconditions found, even re-run alone with "
                f"{budget_s:g} s per condition; nothing was checked -- fix the spec's `pre:` conditions "
                f"(contradictory, or beyond the solver)"
            )
        else:
            message = f"{r.message} (re-run alone with {budget_s:g} s per condition)"
        out.append(dataclasses.replace(r, message=message))
    return out


def run_proofs(
    proofs: tuple[Proof, ...] = PROOFS,
    *,
    per_condition_s: float = 4.0,
    total_s: float = 240.0,
    jobs: int = 2,
    on_result: Callable[[str, str], None] | None = None,
) -> list[ProofOutcome]:
    """Run every spec (all conditions) and every twin (until refuted) in `jobs` processes.

    Specs are shared between proofs (one spec may have two twins) and checked once. A verdict
    that may be the load's (`_needs_retry`) is then re-run alone, one at a time, with
    RETRY_FACTOR times its budget, and the re-run's verdict stands. Anything not finished within
    `total_s` wall-clock seconds is reported as NOT_RUN (which fails the run).
    """
    specs = sorted({p.spec_name for p in proofs})
    tasks: dict[tuple[str, str], tuple[str, str, float, bool]] = {}
    for name in specs:
        tasks[(name, name)] = (name, name, per_condition_s, False)
    smt: dict[tuple[str, str], tuple[str, str, float]] = {}
    for p in proofs:
        if p.refuter == "smt-binary64":
            smt[(p.spec_name, p.twin_name)] = (p.spec_name, p.twin_name, DRIFT_TIMEOUT_S)
        else:
            tasks[(p.spec_name, p.twin_name)] = (
                p.spec_name,
                p.twin_name,
                per_condition_s * TWIN_BUDGET,
                True,
            )
    done: dict[tuple[str, str], list[ConditionResult]] = {}
    deadline_s = time.monotonic() + total_s
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(refute_by_drift, *args): key for key, args in smt.items()}  # longest first
        futures.update({pool.submit(check_conditions, *args): key for key, args in tasks.items()})
        try:
            for fut in as_completed(futures, timeout=max(0.0, deadline_s - time.monotonic())):
                key = futures[fut]
                done[key] = fut.result()
                if on_result is not None:
                    on_result(*key)
        except TimeoutError:
            for fut in futures:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
    values = {p.spec_name: p.values for p in proofs}
    for key in [k for k, r in done.items() if _needs_retry(k, r, values)]:
        left = deadline_s - time.monotonic()
        if left <= 0:
            break
        with ProcessPoolExecutor(max_workers=1) as alone:
            if key in smt:
                spec, twin, budget = smt[key]
                fut = alone.submit(refute_by_drift, spec, twin, budget * RETRY_FACTOR)
                budget *= RETRY_FACTOR
            else:
                spec, target, budget, stop = tasks[key]
                budget *= RETRY_FACTOR
                fut = alone.submit(check_conditions, spec, target, budget, stop)
            try:
                done[key] = _retried(fut.result(timeout=left), budget)
            except TimeoutError:
                alone.shutdown(wait=False, cancel_futures=True)
                break
        if on_result is not None:
            on_result(*key)
    outcomes = []
    for p in proofs:
        missing = [
            ConditionResult(
                p.spec_name, p.spec_name, "", NOT_RUN, f"total budget of {total_s:.0f} s exhausted", 0.0
            )
        ]
        spec_r = done.get((p.spec_name, p.spec_name), missing)
        twin_r = done.get((p.spec_name, p.twin_name), [dataclasses.replace(missing[0], function=p.twin_name)])
        outcomes.append(ProofOutcome(p, spec_r, twin_r))
    return outcomes


def outcomes_to_json(outcomes: list[ProofOutcome], wall_s: float) -> dict[str, Any]:
    return {
        "tool": "crosshair",
        "wall_s": round(wall_s, 2),
        "ok": all(o.ok for o in outcomes),
        "proofs": [
            {
                "contract": o.proof.contract,
                "spec": o.proof.spec_name,
                "values": o.proof.values,
                "role": o.proof.role,
                "sites": list(o.proof.sites),
                "status": o.spec_status,
                "conditions": [dataclasses.asdict(r) for r in o.spec_results],
                "twin": o.proof.twin_name,
                "twin_refuter": o.proof.refuter,
                "twin_refuted": o.twin_refuted,
                "twin_conditions": [dataclasses.asdict(r) for r in o.twin_results],
            }
            for o in outcomes
        ],
    }
