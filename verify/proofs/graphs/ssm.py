"""The graph proofs of an ssm artifact (the package docstring: ssm artifacts). The step has no
position input and no cache, so its claims are position-free: its only inputs are x and the
state (state-only), every layer's state reaches y (reads its state), a layer's new state reads no
deeper layer's state (layer order), bounded work. The full graph is one Scan, proven causal for
every T from its structure (a forward scan over the time axis of the input, a constant initial
state, the body's outputs a function of (state, x_t) only), its body interpreted once.
Not real-time code.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tickformer.artifact import format as fmt
from tickformer.artifact import graph_rules

from .claims import FAILED, PROVEN, Claim, GraphProof, GraphSpec, bounded_work, unpack
from .domains import PositionDomain, State
from .interpreter import Atoms, Interpreter
from .proto import declared_shape
from .values import Sym, Unsupported, materialize, or_reduce, union_all

# the spec of a graph with no position input (bounded work only)
_SSM_STEP_SPEC = GraphSpec("step", {}, {}, "", PositionDomain(), static=True)


def _single_state() -> State:
    return State("the one state (no position input)", 0, {}, {})


def _dependencies(model: Any, sources: dict[str, int | None]) -> tuple[dict[str, Any], Atoms, Interpreter]:
    """Interpret a graph with no position input once: (outputs, atoms, interpreter). Raises
    Unsupported when a shape is not static or an operator is outside the supported set."""
    interp = Interpreter(model, [])
    static = {}
    for vi in model.graph.input:
        if vi.name in interp.inputs:
            dims = declared_shape(vi)
            if not all(isinstance(d, int) and d > 0 for d in dims):
                raise Unsupported(f"input {vi.name} {list(dims)} has a symbolic dimension")
            static[vi.name] = tuple(int(d) for d in dims)
    outs, atoms, _, _ = interp.run(_single_state(), sources, static)
    return outs, atoms, interp


def _reads(val: Any, atoms: Atoms, source: str, axis: int | None = None, *, soft: bool = False) -> np.ndarray:
    """bool [n_t, count of `source`'s atoms]: which atoms each index along `axis` of the output
    depends on by value (soft=True: also through an exactly-zero factor, for claims of absence)."""
    if not isinstance(val, Sym):
        return np.zeros((1, atoms.offsets[source][1]), dtype=bool)
    bits = materialize(val.hard | val.soft if soft else val.hard, val.shape, True)
    w = atoms.words
    if axis is None:
        per = union_all(bits)[None]
    else:
        per = or_reduce(bits, [i for i in range(len(val.shape)) if i != axis], keepdims=False).reshape(-1, w)
    first, count = atoms.offsets[source]
    return unpack(per)[:, first : first + count]


def prove_ssm_step(model: Any, where: str) -> GraphProof:
    """An ssm step graph (x, state -> y, state_new): state-only, reads every layer's state, layer
    order, bounded work (module docstring)."""
    start = time.monotonic()
    proof = GraphProof("step", where, "position-free (one state)", 1, len(model.graph.node), 0.0)
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi.name for vi in model.graph.input if vi.name not in inits]
    outputs = [vi.name for vi in model.graph.output]
    data = [n for n in inputs if n != fmt.SSM_STATE]
    if fmt.SSM_STATE not in inputs or len(data) != 1 or fmt.SSM_STATE_NEW not in outputs or len(outputs) != 2:
        proof.claims.append(
            Claim(
                "state-only",
                FAILED,
                f"an ssm step has inputs (x, {fmt.SSM_STATE}) and outputs (y, {fmt.SSM_STATE_NEW}); this one "
                f"has {inputs} -> {outputs}",
            )
        )
        proof.seconds = time.monotonic() - start
        return proof
    x, y = data[0], next(o for o in outputs if o != fmt.SSM_STATE_NEW)
    try:
        outs, atoms, interp = _dependencies(model, {fmt.SSM_STATE: 1, x: None})
    except Unsupported as exc:
        proof.claims.append(Claim("analysis", FAILED, f"cannot analyse the graph: {exc}"))
        proof.seconds = time.monotonic() - start
        return proof
    proof.claims.append(bounded_work(model, interp, _SSM_STEP_SPEC, None))
    proof.claims.append(
        Claim(
            "state-only",
            PROVEN,
            f"the graph's only inputs are {x} and {fmt.SSM_STATE} (no position, no cache): the step is the "
            "same function of (x, state) at every position of a stream of any length",
        )
    )
    n_layers = atoms.offsets[fmt.SSM_STATE][1]
    y_state = _reads(outs[y], atoms, fmt.SSM_STATE)[0]
    y_x = _reads(outs[y], atoms, x)[0]
    new_state = _reads(outs[fmt.SSM_STATE_NEW], atoms, fmt.SSM_STATE, axis=1)  # [L (new), L (old)]
    new_x = _reads(outs[fmt.SSM_STATE_NEW], atoms, x, axis=1)  # [L, 1]
    if not (y_state.all() and y_x.all() and new_x.all() and np.diagonal(new_state).all()):
        missing = [f"layer {i}" for i in np.flatnonzero(~y_state)] + ([x] if not y_x.all() else [])
        proof.claims.append(
            Claim(
                "reads its state",
                FAILED,
                f"{y} does not depend on {', '.join(missing) or 'x'}, or a layer's new state not on its own "
                f"state and {x}",
            )
        )
    else:
        proof.claims.append(
            Claim(
                "reads its state",
                PROVEN,
                f"{y} depends on {x} and on the state of each of the {n_layers} layers; each layer's new state "
                f"on its own state and {x}",
            )
        )
    any_state = _reads(outs[fmt.SSM_STATE_NEW], atoms, fmt.SSM_STATE, axis=1, soft=True)
    deeper = np.triu(any_state, k=1)  # new state of layer i reading the state of a layer j > i
    if deeper.any():
        i, j = (int(v) for v in np.argwhere(deeper)[0])
        proof.claims.append(
            Claim(
                "layer order",
                FAILED,
                f"the new state of layer {i} depends on the state of layer {j} > {i}",
            )
        )
    else:
        proof.claims.append(
            Claim(
                "layer order",
                PROVEN,
                "the new state of layer l depends on the states of layers <= l only (a deeper layer's state "
                "cannot reach a shallower one)",
            )
        )
    proof.seconds = time.monotonic() - start
    return proof


def _body_model(model: Any, body: Any) -> Any:
    """The Scan body as a model of its own: its inputs and outputs, the outer graph's initializers
    it reads (outer scope), the outer opsets."""
    from onnx import helper

    used = {i for n in body.node for i in n.input}
    inits = [t for t in model.graph.initializer if t.name in used]
    graph = helper.make_graph(list(body.node), body.name, list(body.input), list(body.output), inits)
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def prove_ssm_model(model: Any, where: str) -> GraphProof:
    """An ssm full graph: one forward Scan over axis 1 of the input, from a constant state; causal
    and bounded for every T by its structure, every past input read through the carried state."""
    from onnx import helper

    start = time.monotonic()
    proof = GraphProof("model", where, "Scan structure, every length T", 0, len(model.graph.node), 0.0)

    def fail(name: str, why: str) -> GraphProof:
        proof.claims.append(Claim(name, FAILED, why))
        proof.seconds = time.monotonic() - start
        return proof

    inits = {t.name for t in model.graph.initializer}
    consts = inits | {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    scans = [n for n in model.graph.node if n.op_type == "Scan"]
    flow = [n.op_type for n in model.graph.node if n.op_type in graph_rules.CONTROL_FLOW_OPS]
    if len(inputs) != 1 or len(scans) != 1 or len(flow) != 1:
        return fail(
            "analysis",
            f"an ssm full graph has one input and exactly one Scan (no other control flow); this one has inputs "
            f"{[i.name for i in inputs]} and control flow {flow}",
        )
    x, scan = inputs[0].name, scans[0]
    a = {at.name: helper.get_attribute_value(at) for at in scan.attribute}
    n_scan = int(a.get("num_scan_inputs", 0))
    states, scanned = (
        list(scan.input)[: len(scan.input) - n_scan],
        list(scan.input)[len(scan.input) - n_scan :],
    )
    directions = list(a.get("scan_input_directions", [])) + list(a.get("scan_output_directions", []))
    n_state = len(states)
    scan_outputs = list(scan.output)[n_state:]
    shape = declared_shape(inputs[0])
    problems = []
    if scanned != [x] or list(a.get("scan_input_axes", [0])) != [1]:
        problems.append(
            f"its scan input is {scanned} on axes {list(a.get('scan_input_axes', [0]))}, not {x} on 1"
        )
    if any(d != 0 for d in directions):
        problems.append(f"it scans in reverse (directions {directions}): output t would read later inputs")
    if any(s not in consts for s in states):
        problems.append(f"its initial state {[s for s in states if s not in consts]} is not a constant")
    if len(shape) < 2 or isinstance(shape[1], int) and shape[1] < 1:
        problems.append(f"input {x} {list(shape)} has no time axis 1")
    consumers = [n.name or n.op_type for n in model.graph.node if x in n.input and n is not scan]
    if consumers:
        problems.append(f"{x} is also read outside the Scan, by {consumers}")
    outs = [o.name for o in model.graph.output]
    producers = {o: n for n in model.graph.node for o in n.output}
    y = outs[0] if len(outs) == 1 else None
    while y is not None and y in producers and producers[y].op_type == "Identity":
        y = producers[y].input[0]
    if y not in scan_outputs or list(a.get("scan_output_axes", [0])) != [1] * len(scan_outputs):
        problems.append(f"the output {outs} is not the Scan's scan output along axis 1")
    if problems:
        return fail("causal", "; ".join(problems))
    body = a["body"]
    try:
        body_model = _body_model(model, body)
        body_in = [vi.name for vi in body.input]
        body_out = [vi.name for vi in body.output]
        k = n_state + scan_outputs.index(y)  # the body output that becomes the graph output
        got, atoms, interp = _dependencies(body_model, {name: None for name in body_in})
    except Unsupported as exc:
        return fail("analysis", f"cannot analyse the Scan body: {exc}")
    x_t, carried = body_in[-1], body_in[:n_state]
    y_t, carried_out = got[body_out[k]], [got[o] for o in body_out[:n_state]]
    proof.states = 1
    body_work = bounded_work(body_model, interp, _SSM_STEP_SPEC, None)
    if body_work.status == FAILED:
        return fail("bounded work", f"the Scan body: {body_work.detail}")
    proof.claims.append(
        Claim(
            "bounded work",
            PROVEN,
            f"one Scan whose trip count is T, the length of {x} on axis 1 (a graph input: no loop count "
            f"computed from data); its body, the same at every iteration: {body_work.detail}",
        )
    )
    proof.claims.append(
        Claim(
            "causal",
            PROVEN,
            f"for every T, by the Scan's structure: iteration t reads {x}[:, t] and the state carried from "
            "iterations < t only (forward scan, constant initial state, the body a function of (state, x_t)); "
            f"{outs[0]}[:, t] is iteration t's scan output, so it depends on {x}[:, t'] for t' <= t only",
        )
    )
    reach = all(_reads(y_t, atoms, s)[0].all() for s in carried + [x_t]) and all(
        _reads(c, atoms, x_t)[0].all() and all(_reads(c, atoms, s)[0].any() for s in carried)
        for c in carried_out
    )
    proof.claims.append(
        Claim(
            "reads every past input",
            PROVEN if reach else FAILED,
            f"the body's scan output depends on x_t and the carried state, and the carried state out on x_t and "
            f"the state in: {outs[0]}[:, t] has a path from every {x}[:, t'], t' <= t"
            if reach
            else "the body's output or carried state does not depend on x_t and the state in",
        )
    )
    proof.seconds = time.monotonic() - start
    return proof
