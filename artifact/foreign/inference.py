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
    step input *past*           a cache input; its present output by the common conventions
                                past_key_values.N.key -> present.N.key (and past -> present)
    dynamic sizes               batch axes share one size (1..2), time axes one size (1..max_t)
                                unless the graph names them differently; any other dynamic
                                dimension needs a range in the spec's [axes]

Not real-time code (the file reads are `open_signature`'s).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tickformer.errors import ConfigError

from .graph import GraphIO, graph_io, read_graph
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
    resolved = resolve_inputs(full.inputs, full, declared_in, doc, flags, groups, where, notes, step=False)
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
    time_groups = [g for g in dict.fromkeys(i.time_group for i in inputs) if g is not None]
    present_names: set[str] = set()
    step_sig: CacheSig | None = None
    cache_doc = doc.get("cache", {})
    if step is not None:
        present_names = {present for _, present in _pairs(step, cache_doc.get("pairs"), where)}
    outputs = []
    for t in full.outputs:
        d = declared_out.get(t.name, {})
        g = tuple(sym_groups.get(dim) if isinstance(dim, str) else None for dim in t.dims)
        is_cache = t.name in present_names
        ba: int | None
        if "batch_axis" in d:
            ba = axis_index(d["batch_axis"], t.rank, where, f"outputs.{t.name}.batch_axis")
        else:
            ba = (
                0
                if t.rank >= 1
                and batch_group is not None
                and (g[0] == batch_group or not isinstance(t.dims[0], int))
                else None
            )
        if "time_axis" in d:
            ta = axis_index(d["time_axis"], t.rank, where, f"outputs.{t.name}.time_axis")
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
        if key in ("batch", "time"):
            k = ("role", key)
            if k not in groups.parent:
                raise ConfigError(f"{where}: axes.{key}: the graph has no dynamic {key} axis; remove it")
            known_keys[groups.name(k)] = key
        elif ("sym", key) in groups.parent:
            known_keys[groups.name(("sym", key))] = key
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
    if step is not None:
        step_sig = _resolve_step(step, step_path, full, inputs, cache_doc, flags, where, notes)
        outputs = [
            dataclasses.replace(o, cache=True) if o.name in {p for _, p in step_sig.pairs} else o
            for o in outputs
        ]
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
    )


def _pairs(step: GraphIO, declared: dict[str, str] | None, where: str) -> list[tuple[str, str]]:
    """(past input, present output) of a step graph: declared, else by convention."""
    outs = {t.name for t in step.outputs}
    ins = {t.name for t in step.inputs}
    if declared:
        for past, present in declared.items():
            if past not in ins:
                raise ConfigError(
                    f"{where}: cache.pairs: {past!r} is not an input of the step graph; use one of {sorted(ins)}"
                )
            if present not in outs:
                raise ConfigError(
                    f"{where}: cache.pairs: {present!r} is not an output of the step graph; use one of {sorted(outs)}"
                )
        return list(declared.items())
    pairs = []
    for t in step.inputs:
        if "past" not in t.name:
            continue
        for cand in (
            t.name.replace("past_key_values", "present"),
            t.name.replace("past_key_values", "present_key_values"),
            t.name.replace("past", "present"),
        ):
            if cand in outs:
                pairs.append((t.name, cand))
                break
        else:
            raise ConfigError(
                f"{where}: step input {t.name!r} looks like a cache input but no step output pairs with it by the "
                f"conventions past_key_values.N.key -> present.N.key or past -> present; declare [cache.pairs] "
                f'"{t.name}" = "OUTPUT"'
            )
    if not pairs:
        raise ConfigError(
            f"{where}: the step graph has no cache inputs (named past_key_values.N.key / past*); declare "
            "[cache.pairs] in a spec file"
        )
    return pairs


def _resolve_step(
    step: GraphIO,
    step_path: Path | None,
    full: GraphIO,
    full_inputs: list[InputSig],
    cache_doc: dict[str, Any],
    flags: Flags,
    where: str,
    notes: list[str],
) -> CacheSig:
    assert step_path is not None
    pairs = _pairs(step, cache_doc.get("pairs"), where)
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
                f"{where}: step input {t.name!r} is neither a cache input nor an input of the full graph "
                f'({sorted(by_name)}); declare it in [cache.inputs.{t.name}] (a position input: role = "position")'
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
            raise ConfigError(
                f"step input {t.name} has a static length {t.dims[ta]} on its time axis {ta}; a step takes one "
                "position (length 1)"
            )
        inputs.append(InputSig(t.name, t.dtype, t.dims, groups=groups, **r))
    time_axis: dict[str, int] = {}
    for t in pasts:
        if "time_axis" in cache_doc:
            time_axis[t.name] = axis_index(cache_doc["time_axis"], t.rank, where, "cache.time_axis") or 0
            continue
        dyn = [a for a in range(1, t.rank) if not isinstance(t.dims[a], int)]
        if len(dyn) == 1:
            time_axis[t.name] = dyn[0]
        else:
            time_axis[t.name] = t.rank - 2
            notes.append(
                f"cache input {t.name}: positions accumulate along axis {t.rank - 2} (assumed; cache.time_axis)"
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
    if not shared:
        raise ConfigError(
            f"{where}: the step graph's outputs {[t.name for t in step.outputs]} share no name with the full "
            f"graph's outputs {sorted(full_outs)}; step == full compares outputs of the same name"
        )
    notes.append(
        f"KV-cache pair: {len(pairs)} cache tensors ({pairs[0][0]} -> {pairs[0][1]}, ...), prefill {prefill}"
    )
    return CacheSig(step_path, tuple(pairs), time_axis, prefill, tuple(inputs), pasts, step.outputs, shared)


def open_signature(
    path: str | Path, *, spec: str | Path | None = None, flags: Flags | None = None
) -> tuple[Signature, bytes, bytes | None]:
    """Read MODEL.onnx (and its step graph: --step, or the spec's cache.step relative to the spec
    file), read and check the spec file, resolve. Returns (signature, model bytes, step bytes)."""
    flags = flags or Flags()
    doc, base = load_spec(spec) if spec is not None else (None, Path("."))
    data, model = read_graph(path)
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
    if step_path is None and (doc or {}).get("cache"):
        raise ConfigError(
            "the spec has a [cache] section but no step graph; set cache.step or pass --step STEP.onnx"
        )
    step_data = step_io = None
    if step_path is not None:
        step_data, step_model = read_graph(step_path)
        step_io = graph_io(step_model, str(step_path))
    sig = resolve(Path(path), full, doc, flags, step=step_io, step_path=step_path)
    return sig, data, step_data
