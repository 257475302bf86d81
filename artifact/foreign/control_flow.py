"""Control flow in a bare ONNX model: every Loop, Scan and If, in every subgraph (a Loop inside an
If's branch included), with what bounds its work. `check` and `inspect` warn about a Loop whose
trip count is unbounded -- absent (it runs until its condition turns false), computed at run time,
or a constant above LOOP_LIMIT (torch's scripted `while` loops export as a Loop of 2^63 - 1 trips
ended by the condition) -- because one run of such a graph may never end: `verify` and `certify`
stop it at their wall-clock budget (tickformer.runtime.budget) and name this warning.

    control_flow(model) -> [Flow]   one per Loop / Scan / If, outermost first
    Flow.severity                   "warning" (an unbounded Loop) or "note" (a bounded Loop, a Scan,
                                    an If); Flow.where the path to the node; Flow.text one line

Pure function of the parsed graph. Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LOOP_LIMIT = 1 << 20  # a Loop of more trips than this is reported as unbounded


@dataclass(frozen=True)
class Flow:
    op: str
    where: str  # e.g. "If 'cond' then_branch > Loop 'loop'"
    severity: str  # "warning" | "note"
    trips: int | None  # a Loop's constant trip count, else None
    text: str

    def line(self) -> str:
        return f"{self.where}: {self.text}"

    @property
    def short(self) -> str:
        """'Loop 'l' in If 'c' then_branch: a Loop of 2^62 trips' (the text's first clause)."""
        return f"{self.where}: {self.text.split(':')[0].split(' (')[0]}"


def _label(node: Any) -> str:
    name = node.name or (node.output[0] if node.output else "")
    return f"{node.op_type} {name!r}" if name else f"{node.op_type} (unnamed)"


def _constants(graph: Any) -> dict[str, Any]:
    """name -> numpy value of the graph's initializers and Constant nodes' outputs."""
    from onnx import numpy_helper

    out: dict[str, Any] = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value" and a.HasField("t"):
                    out[node.output[0]] = numpy_helper.to_array(a.t)
                elif a.name in ("value_int", "value_float"):
                    out[node.output[0]] = a.i if a.name == "value_int" else a.f
    return out


def _trips(value: Any) -> str:
    n = int(value)
    return f"2^{n.bit_length() - 1}" if n > LOOP_LIMIT and n & (n - 1) == 0 else f"{n}"


def _loop(node: Any, consts: dict[str, Any], where: str) -> Flow:
    m = node.input[0] if len(node.input) > 0 else ""
    if not m:
        return Flow(
            "Loop",
            where,
            "warning",
            None,
            "a Loop with no trip count: it runs until its condition turns false, which no bound guarantees "
            "(one run may never end); give it a trip count (torch: a for loop over a fixed range)",
        )
    if m not in consts:
        return Flow(
            "Loop",
            where,
            "warning",
            None,
            f"a Loop whose trip count {m!r} is computed at run time: no bound on its work follows from the graph; "
            "make it a constant or bound it by an input's size",
        )
    n = int(consts[m].reshape(-1)[0]) if hasattr(consts[m], "reshape") else int(consts[m])
    if n > LOOP_LIMIT:
        return Flow(
            "Loop",
            where,
            "warning",
            n,
            f"a Loop of {_trips(n)} trips (over {LOOP_LIMIT}): bounded only by its condition, so one run may never "
            "end (torch exports a scripted while loop so); bound it by a constant trip count",
        )
    return Flow("Loop", where, "note", n, f"a Loop of at most {n} trips")


def control_flow(model: Any) -> list[Flow]:
    """Every Loop, Scan and If of `model` (module docstring), outermost first."""
    found: list[Flow] = []
    stack: list[tuple[Any, str, dict[str, Any]]] = [(model.graph, "", {})]
    while stack:
        graph, path, outer = stack.pop(0)
        consts = {**outer, **_constants(graph)}  # a subgraph sees its enclosing graphs' values
        for node in graph.node:
            where = f"{path} > {_label(node)}" if path else _label(node)
            if node.op_type == "Loop":
                found.append(_loop(node, consts, where))
            elif node.op_type == "Scan":
                found.append(
                    Flow("Scan", where, "note", None, "a Scan: one trip per position of its scan inputs")
                )
            elif node.op_type == "If":
                found.append(
                    Flow(
                        "If",
                        where,
                        "note",
                        None,
                        "an If: each run takes one branch (the examples may not reach both)",
                    )
                )
            for attr in node.attribute:
                subs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
                stack += [(g, f"{where} {attr.name}", consts) for g in subs]
    return found


def unbounded(model: Any) -> list[Flow]:
    """The warnings of control_flow: Loops whose trip count is unbounded."""
    return [f for f in control_flow(model) if f.severity == "warning"]
