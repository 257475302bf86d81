"""Our attention artifacts' graphs as graph-prover specs: the step graph (format.step_signature:
pos, k_cache.i rows on axis 3, v_cache.i rows on axis 2; a static cache of max_len rows, or a ring
of W rows for a windowed artifact) and the full pass (one input with a symbolic length T on axis
1), and `prove_model_proto`, which recognises one of them by its inputs and proves it.
Not real-time code.
"""

from __future__ import annotations

from typing import Any

from tickformer.artifact import format as fmt

from .claims import FAILED, Claim, GraphProof, GraphSpec, prove_graph
from .domains import FullLengths, PositionDomain, RingPositions, StepPositions
from .proto import declared_shape
from .values import Unsupported


def step_spec(model: Any, max_len: int | None = None, window: int | None = None) -> GraphSpec:
    """The spec of a step graph (format.step_signature): pos [1], k_cache.i [B, H, dh, N] (rows on
    axis 3), v_cache.i [B, H, N, dh] (rows on axis 2); targets: every output."""
    ins = {vi.name: declared_shape(vi) for vi in model.graph.input}
    if "pos" not in ins:
        raise Unsupported("not a step graph: it has no 'pos' input")
    sources: dict[str, int] = {}
    i = 0
    while fmt.k_cache(i) in ins and fmt.v_cache(i) in ins:
        sources[fmt.k_cache(i)], sources[fmt.v_cache(i)] = 3, 2
        i += 1
    if not sources:
        raise Unsupported("not a step graph: no k_cache.0 / v_cache.0 inputs")
    n = ins[fmt.v_cache(0)][2]
    if not isinstance(n, int) or n < 1:
        raise Unsupported(f"{fmt.v_cache(0)} has no static row count ({ins[fmt.v_cache(0)]})")
    if window is None and any(t.name == "ring_slot" for t in model.graph.initializer):
        window = n  # our windowed step graph (export/graphs.py): a ring of W rows
    outs = [vi.name for vi in model.graph.output]
    if window is not None:
        if window != n:
            raise Unsupported(f"the ring cache has {n} rows but the window is {window}")
        # the session feeds the ring position r in [0, 3W) (runtime/session.py, contracts R11)
        domain: PositionDomain = RingPositions(window, 3 * window)
        return GraphSpec("step", sources, {o: None for o in outs}, outs[0], domain, static=True)
    if max_len is not None and max_len != n:
        raise Unsupported(f"the cache has {n} rows but max_len is {max_len}")
    return GraphSpec("step", sources, {o: None for o in outs}, outs[0], StepPositions(n), static=True)


def model_spec(model: Any, max_len: int, window: int | None = None, layers: int = 1) -> GraphSpec:
    """The spec of a full-pass graph: one input [B, T, ...] (tokens [B, T]) with T symbolic, one
    output [B, T, ...]; y[t] against x[t'] along axis 1."""
    ins = [vi for vi in model.graph.input if vi.name not in {t.name for t in model.graph.initializer}]
    outs = list(model.graph.output)
    if len(ins) != 1 or len(outs) != 1:
        raise Unsupported(
            f"a full-pass graph has one input and one output; this one has {[i.name for i in ins]} -> "
            f"{[o.name for o in outs]}"
        )
    shape = declared_shape(ins[0])
    if len(shape) < 2 or isinstance(shape[1], int):
        raise Unsupported(f"input {ins[0].name} {list(shape)} has no symbolic length on axis 1")
    if not all(isinstance(d, int) and d > 0 for i, d in enumerate(shape) if i != 1):
        raise Unsupported(f"input {ins[0].name} {list(shape)}: only the length may be symbolic")
    domain = FullLengths(max_len, ins[0].name, shape, 1, window, layers)
    return GraphSpec(
        "model",
        {ins[0].name: 1},
        {outs[0].name: 1},
        outs[0].name,
        domain,
        static=False,
        source_word="input",
    )


def prove_model_proto(
    model: Any,
    where: str,
    *,
    max_len: int | None = None,
    window: int | None = None,
    layers: int = 1,
    stop_at_first: bool = False,
) -> GraphProof:
    """Prove one of our graphs, recognised by its inputs: a step graph (pos, k_cache.i, v_cache.i)
    or a full pass (one input with a symbolic length; needs max_len)."""
    names = {vi.name for vi in model.graph.input}
    try:
        if "pos" in names:
            spec = step_spec(model, max_len, window)
        else:
            if max_len is None:
                raise Unsupported(
                    "a full-pass graph has a symbolic length T: pass --max-len N (the artifact's max_len)"
                )
            spec = model_spec(model, max_len, window, layers)
    except Unsupported as exc:
        return GraphProof(
            "?",
            where,
            "?",
            0,
            len(model.graph.node),
            0.0,
            [Claim("analysis", FAILED, str(exc))],
        )
    proof = prove_graph(model, spec, where, stop_at_first=stop_at_first)
    domain = spec.domain
    if isinstance(domain, FullLengths) and domain.window is not None:
        note = (
            f" [window W = {domain.window}, {domain.layers} layer(s): y[t] may read the last "
            f"{domain.receptive_field()} inputs; lengths T <= {domain.max_len} only: this model.onnx accepts "
            "longer T, which the enumeration does not cover]"
        )
        for c in proof.claims:
            if c.name in ("causal", "reads every past input"):
                c.detail += note
    return proof
