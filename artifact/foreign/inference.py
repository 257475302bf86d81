"""The signature of a bare ONNX model (and of its step graph) from the graph, the spec file and
the command-line flags: `resolve`, and `open_signature`, which reads the files first.

Precedence: what the spec declares wins; command-line flags (--domain, --vocab, --output-bound,
--max-t) fill in what it leaves out; the rest is inferred from the graph, and every inference is
recorded in `Signature.notes` (inspect prints them). Inference rules:

    float input                 role signal; batch axis 0; time axis 1 when rank 3, or rank 2
                                with a dynamic axis 1; domain from --domain (required)
    int input named *mask*      role mask, 1 = a real position (names with "padding": 1 = pad)
    bool input                  role mask, True = real (names with "padding": True = pad)
    int input named *position*  role position: filled with 0..T-1 (a step: its position)
    other int input             role ids; vocabulary [0, V-1] from the Gather it feeds (an
                                embedding table of V rows), else from --vocab
    batch and time axes         the axis whose dim name says batch (batch, batch_size, B, ...)
                                or time (time, seq, sequence, T, length, ...), else by position
    recurrent pairs             a step input and the step output it hands on (pairs.py): a KV
                                cache (past_key_values.N.key -> present.N.key, past -> present)
                                or a fixed-size state (h -> h_n, h0 -> hn, state_in -> state_out),
                                by name, else by shape; a model without --step whose own inputs
                                and outputs pair by name is its own step graph; the full graph's
                                state inputs get role "state" (fed the reset state: zeros, a
                                cache of length 0); prefill "full" when the full graph outputs
                                every present, else "empty" (the steps start from the reset state)
    dynamic sizes               batch axes share one size (1..2), time axes one size (1..max_t)
                                unless the graph names them differently; any other dynamic
                                dimension needs a range in the spec's [axes]
    refused                     an input axis declared of size 0 (an empty tensor); a fixed batch
                                or time axis is noted with the export argument that frees it

Not real-time code (the file reads are `open_signature`'s).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tickformer.errors import ConfigError

from .control_flow import unbounded
from .exporters import describe, dynamic_hint, fixed_axes
from .graph import GraphIO, graph_io, read_graph
from .pairs import (
    CONVENTIONS_TEXT,
    batch_axis_of,
    batch_symbols,
    find_pairs,
    pair_kind,
    time_axis_of,
)
from .roles import Groups, assign_groups, axis_index, group_of, resolve_inputs
from .signature import CacheSig, InputSig, OutputSig, Signature
from .spec import SPEC_VERSION, Flags, load_spec

DEFAULT_BATCH = (1, 2)  # the batch sizes tried when neither the graph nor the spec fixes them


def resolve(
    full_path: Path,
    full: GraphIO,
    doc: dict[str, Any] | None,
    flags: Flags,
    *,
    step: GraphIO | None = None,
    step_path: Path | None = None,
) -> Signature:
    """The Signature of a bare model (and of its step graph) from the graph, the checked spec
    document (or None) and the flags (module docstring: precedence and inference)."""
    doc = doc or {"version": SPEC_VERSION}
    where = "spec"
    notes: list[str] = []
    groups = Groups()
    declared_in = doc.get("inputs", {})
    declared_out = doc.get("outputs", {})
    for section, names, have in (
        ("inputs", declared_in, [t.name for t in full.inputs]),
        ("outputs", declared_out, [t.name for t in full.outputs]),
    ):
        for name in names:
            if name not in have:
                raise ConfigError(
                    f"{where}: {section}.{name} is not a graph {section[:-1]}; use one of {have}"
                )
    _refuse_zero_dims(full_path, full)
    if step is not None:
        _refuse_zero_dims(step_path or full_path, step)
    cache_doc = doc.get("cache", {})
    pairing = _pairing(full, step, cache_doc, declared_in, where)
    if pairing is not None and step is None:
        step, step_path = full, full_path  # the model is its own step graph
    states = (
        {} if pairing is None else {p: pairing.axes[p] for p in pairing.pasts if full.input(p) is not None}
    )
    resolved = resolve_inputs(
        full.inputs, full, declared_in, doc, flags, groups, where, notes, step=False, states=states
    )
    assign_groups(resolved, groups, where)
    inputs = [
        InputSig(
            t.name,
            t.dtype,
            t.dims,
            groups=tuple(group_of(t, a, r, groups, where) for a in range(t.rank)),
            **r,
        )
        for t, r in resolved
    ]
    # Output groups: a named dim shared with an input joins that input's group.
    sym_groups = {d: groups.name(("sym", d)) for t in full.inputs for d in t.dims if isinstance(d, str)}
    batch_group = next((i.groups[i.batch_axis] for i in inputs if i.batch_axis is not None), None)
    batch_static = next(
        (
            i.dims[i.batch_axis]
            for i in inputs
            if i.batch_axis is not None and isinstance(i.dims[i.batch_axis], int)
        ),
        None,
    )
    time_groups = [g for g in dict.fromkeys(i.time_group for i in inputs) if g is not None]
    present_names = set() if pairing is None else {q for _, q in pairing.pairs}
    step_sig: CacheSig | None = None
    outputs = []
    for t in full.outputs:
        d = declared_out.get(t.name, {})
        g = tuple(sym_groups.get(dim) if isinstance(dim, str) else None for dim in t.dims)
        is_cache = t.name in present_names
        ba: int | None
        if "batch_axis" in d:
            ba = axis_index(d["batch_axis"], t.rank, where, f"outputs.{t.name}.batch_axis")
        elif batch_group is not None and batch_group in g:
            ba = g.index(batch_group)
        elif t.rank >= 1 and batch_group is not None and (t.dims[0] is None or t.dims[0] == batch_static):
            ba = 0  # an unnamed dynamic axis 0, or the static batch size of the inputs
        else:
            ba = None
        if "time_axis" in d:
            ta = axis_index(d["time_axis"], t.rank, where, f"outputs.{t.name}.time_axis")
        elif is_cache and pairing is not None and pairing.kinds.get(pairing.past_of(t.name)) == "state":
            ta = None  # a fixed-size state has no time axis
        else:
            ta = next((a for a, gg in enumerate(g) if gg is not None and gg in time_groups and a != ba), None)
            if ta is None and time_groups and t.rank >= 2:
                cand = [t.rank - 2] if is_cache else [1]
                static_t = next((i.dims[i.time_axis] for i in inputs if i.time_axis is not None), None)
                ta = next(
                    (
                        a
                        for a in cand
                        if a != ba
                        and g[a] is None
                        and (not isinstance(t.dims[a], int) or t.dims[a] == static_t)
                    ),
                    None,
                )
                if ta is not None:
                    notes.append(
                        f"output {t.name}: time axis {ta} assumed (an unnamed axis of the time length); declare "
                        "it if not"
                    )
        groups_out = list(g)
        if ta is not None and groups_out[ta] is None and time_groups:
            groups_out[ta] = time_groups[0]
        if (
            ba is not None
            and groups_out[ba] is None
            and batch_group is not None
            and not isinstance(t.dims[ba], int)
        ):
            groups_out[ba] = batch_group
        bound = d.get("bound", doc.get("output_bound", flags.output_bound))
        outputs.append(
            OutputSig(
                t.name,
                t.dtype,
                t.dims,
                tuple(groups_out),
                ba,
                ta,
                None if bound is None else float(bound),
                is_cache,
            )
        )
    # Size ranges.
    all_groups = [g for sig in (*inputs, *outputs) for g in sig.groups if g is not None]
    dynamic = frozenset(
        g for i in inputs for g, d in zip(i.groups, i.dims) if g is not None and not isinstance(d, int)
    )
    static = {g: d for i in inputs for g, d in zip(i.groups, i.dims) if g is not None and isinstance(d, int)}
    axes_doc = doc.get("axes", {})
    known_keys: dict[str, str] = {}
    for key in axes_doc:
        if ("sym", key) in groups.parent:  # a dimension the graph names (also "batch" or "time")
            known_keys[groups.name(("sym", key))] = key
        elif key in ("batch", "time"):
            k = ("role", key)
            if k not in groups.parent:
                raise ConfigError(f"{where}: axes.{key}: the graph has no dynamic {key} axis; remove it")
            known_keys[groups.name(k)] = key
        elif key in dynamic:
            known_keys[key] = key
        else:
            raise ConfigError(
                f"{where}: axes.{key} is not a dynamic dimension of the graph's inputs; use one of {sorted(dynamic)}"
            )
    ranges: dict[str, tuple[int, int]] = {}
    for g in dict.fromkeys(all_groups):
        if g not in dynamic:
            if g in static:
                ranges[g] = (static[g], static[g])
            continue
        if g in known_keys:
            lo, hi = axes_doc[known_keys[g]]
            ranges[g] = (int(lo), int(hi))
        elif g == batch_group:
            ranges[g] = DEFAULT_BATCH
        elif g in time_groups:
            ranges[g] = (1, flags.max_t)
        else:
            raise ConfigError(
                f"{where}: the dynamic dimension {g!r} has no size range; declare one in a spec file ([axes] "
                f'"{g}" = [LO, HI])'
            )
    for g, (lo, hi) in ranges.items():
        if lo < 1 and g not in time_groups:
            raise ConfigError(f"{where}: axes.{g} = [{lo}, {hi}]: sizes must be >= 1")
        if lo < 1:
            ranges[g] = (1, hi) if hi >= 1 else (1, 1)
    # Causality.
    causal = doc.get("causal", flags.causal if flags.causal is not None else True)
    if causal is False:
        causal_group = None
    elif isinstance(causal, str):
        if causal not in time_groups and causal in sym_groups:
            causal = sym_groups[causal]
        if causal not in time_groups:
            raise ConfigError(
                f"{where}: causal = {causal!r} is not a time axis of the graph; use one of {time_groups} or false"
            )
        causal_group = causal
    else:
        causal_group = time_groups[0] if time_groups else None
        if len(time_groups) > 1:
            notes.append(
                f'causality along {causal_group!r} (the first time axis of {time_groups}); set causal = "NAME" '
                "in the spec for another"
            )
    if step is not None and pairing is not None:
        step_sig = _resolve_step(step, step_path, full, inputs, cache_doc, flags, where, notes, pairing)
        outputs = [
            dataclasses.replace(o, cache=True) if o.name in {p for _, p in step_sig.pairs} else o
            for o in outputs
        ]
    fixed = _fixed_hint(full, inputs, outputs, step_sig)
    if fixed:
        notes.append(fixed)
    skip = tuple(dict.fromkeys([*doc.get("skip", []), *flags.skip]))
    return Signature(
        path=full_path,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        ranges=ranges,
        dynamic=frozenset(g for g in ranges if g in dynamic),
        causal_group=causal_group,
        cache=step_sig,
        skip=skip,
        tolerance_factor=float(doc.get("tolerance_factor", 1.0)),
        notes=tuple(notes),
        opset=full.opset,
        producer=full.producer,
        fixed=fixed,
    )


def _refuse_zero_dims(path: Path, io: GraphIO) -> None:
    """ConfigError naming an input axis declared of size 0 (ONNX's dim_value 0: an empty axis)."""
    for t in io.inputs:
        for a in io.zero_dims.get(t.name, ()):
            dims = ", ".join("0" if b == a else "?" if d is None else str(d) for b, d in enumerate(t.dims))
            raise ConfigError(
                f"{path}: input {t.name} declares axis {a} of size 0 ({t.dtype}[{dims}]): ONNX reads 0 as an "
                "empty axis, not 'any size', and verify cannot draw values for it; re-export with the real size "
                "there, or with a name (a dim_param) to make the axis dynamic"
            )


class _Pairing:
    """The recurrent pairs found (pairs.py) with each past's kind, batch axis and cache time axis."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []
        self.how: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        self.axes: dict[str, tuple[int | None, int | None]] = {}  # past -> (batch axis, time axis)
        self.assumed: set[str] = set()  # pasts whose time axis was assumed

    @property
    def pasts(self) -> list[str]:
        return [p for p, _ in self.pairs]

    def past_of(self, present: str) -> str | None:
        return next((p for p, q in self.pairs if q == present), None)


def _pairing(
    full: GraphIO, step: GraphIO | None, cache_doc: dict[str, Any], declared_in: dict[str, Any], where: str
) -> _Pairing | None:
    """The recurrent pairs of the step graph, or of the model itself when there is no step graph
    (by name only, or as [cache.pairs] declares); None when the model has none."""
    same = step is None
    graph = full if same else step
    assert graph is not None
    found = find_pairs(graph, cache_doc.get("pairs"), None if same else full, where, same=same)
    if same:  # an input the spec declares with another role is not a state
        found = [f for f in found if declared_in.get(f[0], {}).get("role", "state") == "state"]
        if not found:
            if cache_doc:
                raise ConfigError(
                    f"{where}: the spec has a [cache] section but no step graph, and the model's own inputs and "
                    f"outputs pair by no convention ({CONVENTIONS_TEXT}); set cache.step, pass --step STEP.onnx, "
                    "or declare [cache.pairs]"
                )
            return None
    elif not found:
        raise ConfigError(
            f"{where}: the step graph has no state or cache inputs (paired with a step output by name: "
            f"{CONVENTIONS_TEXT}; or by shape: one step input and one step output of the same shape that the "
            "full graph does not have); declare [cache.pairs] in a spec file"
        )
    out = _Pairing()
    symbols = batch_symbols(graph, {p for p, _, _ in found}) | batch_symbols(full, {p for p, _, _ in found})
    declared_kind = cache_doc.get("kind")
    for past, present, how in found:
        t, q = graph.input(past), graph.output(present)
        assert t is not None and q is not None
        if t.rank != q.rank:
            raise ConfigError(
                f"{where}: {past} ({t.shown()}) and {present} ({q.shown()}) have different ranks; a step hands on a "
                "state or cache of the same rank: declare the right pair in [cache.pairs]"
            )
        kv_named = any(a in past for a in ("past", "key", "value", "kv"))
        ba = batch_axis_of(t, symbols, kv_named, cache_doc.get("batch_axis"))
        kind = pair_kind(t, q, ba, declared_kind)
        if kind == "kv" and "batch_axis" not in cache_doc and not kv_named:
            ba = batch_axis_of(t, symbols, True, None)
        ta: int | None = None
        if kind == "kv":
            if "time_axis" in cache_doc:
                ta = axis_index(cache_doc["time_axis"], t.rank, where, "cache.time_axis")
            else:
                ta, assumed = time_axis_of(t, q, ba)
                if assumed:
                    out.assumed.add(past)
        out.pairs.append((past, present))
        out.how[past], out.kinds[past], out.axes[past] = how, kind, (ba, ta)
    return out


def _fixed_hint(
    full: GraphIO, inputs: list[InputSig], outputs: list[OutputSig], step_sig: CacheSig | None
) -> str:
    """A note for a batch or time axis the export fixed, with the export argument that frees it."""
    drawn = [i for i in inputs if i.role in ("signal", "ids", "mask")]
    single_step = (
        step_sig is not None
        and step_sig.same
        and all(i.time_axis is None or i.dims[i.time_axis] == 1 for i in drawn)
    )
    fixed_in = fixed_axes(drawn, time=not single_step)
    if not fixed_in:
        return ""
    fixed_out = fixed_axes([o for o in outputs if not o.cache], time=not single_step)
    what = describe(fixed_in, {i.name: i.dims for i in inputs})
    return (
        f"fixed by the export: {what}; verify tries only those sizes. To make them dynamic, "
        f"{dynamic_hint(full.exporter, fixed_in, fixed_out)}"
    )


def _resolve_step(
    step: GraphIO,
    step_path: Path | None,
    full: GraphIO,
    full_inputs: list[InputSig],
    cache_doc: dict[str, Any],
    flags: Flags,
    where: str,
    notes: list[str],
    pairing: _Pairing,
) -> CacheSig:
    assert step_path is not None
    same = step is full
    pairs = pairing.pairs
    past_names = {p for p, _ in pairs}
    pasts = tuple(t for t in step.inputs if t.name in past_names)
    others = tuple(t for t in step.inputs if t.name not in past_names)
    by_name = {i.name: i for i in full_inputs}
    declared = cache_doc.get("inputs", {})
    for name in declared:
        if step.input(name) is None or name in past_names:
            raise ConfigError(
                f"{where}: cache.inputs.{name} is not a (non-cache) input of the step graph; remove it"
            )
    for t in others:
        if t.name not in by_name and t.name not in declared and "position" not in t.name.lower():
            raise ConfigError(
                f"{where}: step input {t.name!r} is neither a state or cache input nor an input of the full graph "
                f"({sorted(by_name)}); pair it with the output it hands on in [cache.pairs], or declare it in "
                f'[cache.inputs.{t.name}] (a position input: role = "position")'
            )
    resolved = resolve_inputs(
        others, step, declared, {"version": 1}, flags, Groups(), where, notes, step=True, inherit=by_name
    )
    inputs = []
    for t, r in resolved:
        groups: tuple[str | None, ...] = tuple(
            None if isinstance(d, int) else f"step:{t.name}[{a}]" for a, d in enumerate(t.dims)
        )
        ta = r.get("time_axis")
        if ta is not None and r.get("span") == "current" and isinstance(t.dims[ta], int) and t.dims[ta] != 1:
            if same:
                raise ConfigError(
                    f"{full_inputs[0].name if full_inputs else 'the model'}: the model's inputs {sorted(past_names)} "
                    f"pair with its outputs, so it is its own step graph, but input {t.name} has a static length "
                    f"{t.dims[ta]} on its time axis {ta}; a step takes one position: export it with a dynamic "
                    "time axis, or pass the step graph with --step (or declare the pairs away in the spec: "
                    f'[inputs.NAME] role = "signal")'
                )
            raise ConfigError(
                f"step input {t.name} has a static length {t.dims[ta]} on its time axis {ta}; a step takes one "
                "position (length 1)"
            )
        inputs.append(InputSig(t.name, t.dtype, t.dims, groups=groups, **r))
    time_axis: dict[str, int] = {}
    batch_axis: dict[str, int | None] = {}
    for t in pasts:
        ba, ta = pairing.axes[t.name]
        batch_axis[t.name] = ba
        if ta is not None:
            time_axis[t.name] = ta
            if t.name in pairing.assumed:
                notes.append(
                    f"cache input {t.name}: positions accumulate along axis {ta} (assumed; cache.time_axis)"
                )
    full_outs = {t.name for t in full.outputs}
    presents = {p for _, p in pairs}
    prefill = cache_doc.get("prefill") or ("full" if presents <= full_outs else "empty")
    if prefill == "full" and not presents <= full_outs:
        missing = sorted(presents - full_outs)
        raise ConfigError(
            f'{where}: cache.prefill = "full" but the full graph has no outputs {missing[:2]}; use prefill = "empty"'
        )
    shared = tuple(t.name for t in step.outputs if t.name in full_outs and t.name not in presents)
    if not shared and prefill == "empty":
        raise ConfigError(
            f"{where}: the step graph's outputs {[t.name for t in step.outputs]} share no name with the full "
            f"graph's outputs {sorted(full_outs)}; step == full compares outputs of the same name"
        )
    for p, q in pairs:
        t = step.input(p)
        assert t is not None
        kind = pairing.kinds[p]
        what = (
            f"a KV cache {t.shown()}, positions along axis {time_axis[p]}"
            if kind == "kv"
            else f"a recurrent state {t.shown()}"
        )
        ba = batch_axis[p]
        notes.append(
            f"{p} -> {q}: {what}, batch axis {ba if ba is not None else 'none'} (from its "
            f"{'declaration' if pairing.how[p] == 'declared' else pairing.how[p]})"
        )
    own = "the model is its own step graph; " if same else ""
    notes.append(f"recurrent pairs: {len(pairs)}; {own}prefill {prefill}")
    return CacheSig(
        step_path,
        tuple(pairs),
        time_axis,
        prefill,
        tuple(inputs),
        pasts,
        step.outputs,
        shared,
        kinds=dict(pairing.kinds),
        batch_axis=batch_axis,
        state_bound=cache_doc.get("state_bound", flags.state_bound),
        same=same,
    )


def open_signature(
    path: str | Path,
    *,
    spec: str | Path | None = None,
    flags: Flags | None = None,
    files: dict[str, tuple[int, str]] | None = None,
) -> tuple[Signature, bytes, bytes | None]:
    """Read MODEL.onnx (and its step graph: --step, or the spec's cache.step relative to the spec
    file), read and check the spec file, resolve. Returns (signature, model bytes, step bytes);
    a model that is its own step graph returns its bytes as the step bytes. `files` gets
    {file name: (bytes, sha256)} of every file read (graph.read_graph)."""
    flags = flags or Flags()
    doc, base = load_spec(spec) if spec is not None else (None, Path("."))
    data, model = read_graph(path, files)
    full = graph_io(model, str(path))
    step_path: Path | None = flags.step
    spec_step = (doc or {}).get("cache", {}).get("step")
    if spec_step is not None:
        declared = (base / spec_step) if not Path(spec_step).is_absolute() else Path(spec_step)
        if step_path is not None and Path(step_path).resolve() != declared.resolve():
            raise ConfigError(
                f"--step {step_path} and the spec's cache.step {declared} name different graphs; give one of them"
            )
        step_path = declared
    step_data = step_io = None
    warnings = [f"{Path(path).name}: {f.line()}" for f in unbounded(model)]
    if step_path is not None:
        step_data, step_model = read_graph(step_path, files)
        step_io = graph_io(step_model, str(step_path))
        warnings += [f"{Path(step_path).name}: {f.line()}" for f in unbounded(step_model)]
    sig = resolve(Path(path), full, doc, flags, step=step_io, step_path=step_path)
    if sig.cache is not None and sig.cache.same:
        step_data = data
    return sig.replace(warnings=tuple(warnings)), data, step_data
