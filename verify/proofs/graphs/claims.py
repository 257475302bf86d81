"""The claims of the graph prover, decided over every state of a position domain: reads only
live rows (step) or causal (full pass), reads every live row / every past input, bounded work
(the package docstring states them), each PROVEN, IF_FINITE ("proven if finite": it holds for
the atoms reaching an output by value, and the others reach it only through a product with an
exactly-zero weight) or FAILED, with the first counterexample.

`GraphSpec` says what to prove about one graph (its position sources, targets and domain);
`prove_graph` interprets the graph at every state and decides; `bounded_work` is the claim the
ssm proofs share. Not real-time code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from tickformer.artifact import graph_rules

from .domains import PositionDomain
from .interpreter import Atoms, Interpreter
from .proto import declared_shape
from .values import Sym, Unsupported, materialize, or_reduce, union_all

PROVEN, IF_FINITE, FAILED = "proven", "proven if finite", "FAILED"


@dataclass
class Claim:
    name: str
    status: str  # PROVEN | IF_FINITE | FAILED
    detail: str


@dataclass
class GraphProof:
    """Every claim about one graph, over every state of its domain."""

    graph: str  # "step", "model"
    where: str  # the file
    domain: str
    states: int
    nodes: int
    seconds: float
    claims: list[Claim] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != FAILED for c in self.claims)

    @property
    def status(self) -> str:
        if not self.ok:
            return FAILED
        return IF_FINITE if any(c.status == IF_FINITE for c in self.claims) else PROVEN

    def to_json(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "file": self.where,
            "domain": self.domain,
            "states": self.states,
            "nodes": self.nodes,
            "seconds": round(self.seconds, 3),
            "status": self.status,
            "claims": [{"name": c.name, "status": c.status, "detail": c.detail} for c in self.claims],
        }


@dataclass(frozen=True)
class GraphSpec:
    """What to prove about one graph: its position sources (input -> position axis), the targets
    (output -> position axis or None), the primary output that must read every live row, and the
    domain."""

    graph: str
    sources: dict[str, int]
    targets: dict[str, int | None]
    primary: str
    domain: PositionDomain
    static: bool  # step graphs: every shape the same at every state
    source_word: str = "row"  # "row" (cache rows) or "input" (time steps)


def _rows(bits: np.ndarray, atoms: Atoms, source: str) -> np.ndarray:
    return atoms.mask(bits, source)


def unpack(words: np.ndarray) -> np.ndarray:
    """bool [n, 64 W] of bitsets [n, W] (atom a = bit a % 64 of word a // 64)."""
    flat = np.ascontiguousarray(words.astype("<u8")).view(np.uint8).reshape(words.shape[0], -1)
    return np.unpackbits(flat, axis=1, bitorder="little").astype(bool)


def _fmt_rows(rows: Iterable[int], limit: int = 6) -> str:
    rows = sorted(rows)
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (f", ... ({len(rows)} in all)" if len(rows) > limit else "")


def prove_graph(model: Any, spec: GraphSpec, where: str, *, stop_at_first: bool = False) -> GraphProof:
    """Interpret `model` at every state of `spec.domain` and decide the claims (module docstring).
    stop_at_first: end at the first state with a counterexample (mutants)."""
    start = time.monotonic()
    proof = GraphProof(spec.graph, where, spec.domain.kind, 0, len(model.graph.node), 0.0)
    pos_input = getattr(spec.domain, "pos_input", None)
    domain_inputs = [pos_input] if pos_input is not None else []
    try:
        interp = Interpreter(model, domain_inputs)
    except Unsupported as exc:
        proof.claims.append(Claim("bounded work", FAILED, str(exc)))
        proof.seconds = time.monotonic() - start
        return proof
    static_shapes = {}
    for vi in model.graph.input:
        if vi.name in interp.inputs:
            dims = declared_shape(vi)
            if all(isinstance(d, int) and d > 0 for d in dims):
                static_shapes[vi.name] = tuple(int(d) for d in dims)
    word = spec.source_word
    stale_any: str | None = None  # first counterexample: a non-live atom in hard deps
    soft_only: dict[str, set[str]] = {}  # source -> sites, for atoms outside the live set reached softly
    dropped: str | None = None
    own_missing: str | None = None
    shapes_first: dict[str, tuple[int, ...]] | None = None
    shape_change: str | None = None
    failure: str | None = None
    states = spec.domain.states()
    for state in states:
        try:
            outs, atoms, sites, shapes = interp.run(state, spec.sources, static_shapes)
        except Unsupported as exc:
            failure = f"at {state.label}: {exc}"
            break
        proof.states += 1
        if shapes_first is None:
            shapes_first = shapes
        elif spec.static and shape_change is None and shapes != shapes_first:
            bad = next(k for k in shapes if shapes[k] != shapes_first.get(k))
            shape_change = (
                f"tensor {bad!r} is {shapes_first.get(bad)} at {states[0].label} "
                f"but {shapes[bad]} at {state.label}"
            )
        w = atoms.words
        for target, t_axis in spec.targets.items():
            val = outs[target]
            if not isinstance(val, Sym):
                continue
            hard = materialize(val.hard, val.shape, True)
            soft = materialize(val.soft, val.shape, True)
            if t_axis is None:
                per_t_h, per_t_s = union_all(hard)[None], union_all(soft)[None]
            else:
                axes = [i for i in range(len(val.shape)) if i != t_axis]
                per_t_h = or_reduce(hard, axes, keepdims=False).reshape(-1, w)
                per_t_s = or_reduce(soft, axes, keepdims=False).reshape(-1, w)
            n_t = per_t_h.shape[0]
            flags_h = unpack(per_t_h)  # [n_t, atoms]
            flags_s = unpack(per_t_s) & ~flags_h
            for source in spec.sources:
                first, n_rows = atoms.offsets[source]
                live = spec.domain.live(state, source, n_t, n_rows)  # [n_t, n_rows]
                h = flags_h[:, first : first + n_rows]
                s = flags_s[:, first : first + n_rows]
                leak = h & ~live
                if leak.any() and stale_any is None:
                    t = int(np.flatnonzero(leak.any(axis=1))[0])
                    at = state.label + ("" if t_axis is None else f", t {t}")
                    stale_any = (
                        f"at {at}: {target} depends on {source} {word}(s) {_fmt_rows(np.flatnonzero(leak[t]))}, "
                        f"which the contract says are not read (live: {_fmt_rows(np.flatnonzero(live[t]))})"
                    )
                soft_leak = (s & ~live).any(axis=0)
                if soft_leak.any():
                    names = {
                        site for site, bits in sites.items() if (_rows(bits, atoms, source) & soft_leak).any()
                    }
                    soft_only.setdefault(source, set()).update(names)
                if target == spec.primary and dropped is None:
                    missing = live & ~h
                    if missing.any():
                        t = int(np.flatnonzero(missing.any(axis=1))[0])
                        at = state.label + ("" if t_axis is None else f", t {t}")
                        dropped = (
                            f"at {at}: {target} does not depend on live {source} {word}(s) "
                            f"{_fmt_rows(np.flatnonzero(missing[t]))} (selected out)"
                        )
            if target == spec.primary and own_missing is None:
                for tap in interp.taps:
                    if not _rows(union_all(hard), atoms, "own:" + tap).any():
                        own_missing = (
                            f"at {state.label}: {target} does not depend on the step's own new row {tap}"
                        )
        if stop_at_first and (stale_any or dropped or own_missing or shape_change):
            break
    proof.seconds = time.monotonic() - start
    n_states = len(states)
    span = f"all {n_states} states ({states[0].label} .. {states[-1].label})" if states else "no states"
    if failure is not None:
        proof.claims.append(Claim("analysis", FAILED, f"cannot analyse the graph {failure}"))
        return proof
    # bounded work
    work = bounded_work(model, interp, spec, shape_change)
    proof.claims.append(work)
    # reads only live rows / causal
    name = "causal" if word == "input" else "reads only live rows"
    if stale_any is not None:
        proof.claims.append(Claim(name, FAILED, stale_any))
    elif soft_only:
        where_txt = "; ".join(f"{src} via {', '.join(sorted(s))}" for src, s in sorted(soft_only.items()))
        # A step graph must not depend on stale cache rows whatever they hold (after a reset they
        # hold the previous sequence, which nothing validates now): "only if finite" fails it. A
        # full pass reads only this call's inputs, finite by the input-domain contract.
        proof.claims.append(
            Claim(
                name,
                FAILED if word == "row" else IF_FINITE,
                f"over {span}: only live {word}s reach the outputs by value, but {word}s outside the live set "
                f"still reach them through a product with an exactly-zero weight ({where_txt}): independent of "
                "them only if they are finite (0 * inf = NaN; a zero result also takes their sign); "
                + (
                    "select the V rows too (stale rows replaced by a zero row, as export/blocks.attend_step does) "
                    "to make it hold whatever they hold"
                    if word == "row"
                    else "holds for finite value vectors (inputs in a finite domain that do not overflow V)"
                ),
            )
        )
    else:
        proof.claims.append(
            Claim(
                name,
                PROVEN,
                f"over {span}: no {word} outside the contract's live set reaches any output",
            )
        )
    every = "reads every past input" if word == "input" else "reads every live row"
    if dropped is not None:
        proof.claims.append(Claim(every, FAILED, dropped))
    elif own_missing is not None:
        proof.claims.append(Claim(every, FAILED, own_missing))
    else:
        own = f" and its own new rows ({', '.join(interp.taps)})" if interp.taps else ""
        proof.claims.append(
            Claim(
                every,
                PROVEN,
                f"over {span}: {spec.primary} has an unselected path from every live {word}{own}",
            )
        )
    return proof


def bounded_work(model: Any, interp: Interpreter, spec: GraphSpec, shape_change: str | None) -> Claim:
    flow = [n.op_type for n in model.graph.node if n.op_type in graph_rules.CONTROL_FLOW_OPS]
    if flow:
        return Claim("bounded work", FAILED, f"control flow: {sorted(set(flow))}")
    symbolic = [
        f"{vi.name}{list(declared_shape(vi))}"
        for vi in list(model.graph.input) + list(model.graph.output)
        if vi.name in interp.inputs + interp.outputs
        and not all(isinstance(d, int) and d > 0 for d in declared_shape(vi))
    ]
    if spec.static and symbolic:
        return Claim("bounded work", FAILED, f"symbolic I/O shapes {symbolic}")
    if shape_change is not None:
        return Claim("bounded work", FAILED, f"the work depends on the position: {shape_change}")
    if spec.static:
        return Claim(
            "bounded work",
            PROVEN,
            f"no control flow; static I/O shapes; every one of the {len(model.graph.node)} nodes has the same "
            "shapes at every position; no shape computed from data",
        )
    windowed = getattr(spec.domain, "window", None) is not None
    bound = (
        "its work grows with T and is fixed by T alone (a windowed model.onnx takes any T)"
        if windowed
        else f"at most {getattr(spec.domain, 'max_len', '?')}"
    )
    return Claim(
        "bounded work",
        PROVEN,
        f"no control flow; the only symbolic dimension is the length (I/O {symbolic}), {bound}; no shape "
        "computed from data",
    )
