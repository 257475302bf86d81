"""The recurrent pairs of a step graph: which input takes the state or cache a step hands on, which
output hands it on, and of which kind each pair is (inference.py's step rules).

    find_pairs(step, declared, full, where, same)   [(past input, present output, how)]: declared
                                  in the spec's [cache.pairs]; else by name (KV_CONVENTIONS,
                                  STATE_SUFFIXES, STATE_PREFIXES: past_key_values.0.key ->
                                  present.0.key, h -> h_n, h0 -> hn, state_in -> state_out, ...;
                                  a name with two candidate outputs is ambiguous and refused);
                                  else, for a separate step graph, by shape (a step input the full
                                  graph does not have and one step output it does not have, of the
                                  same dtype and declared dims, each the only such match)
    pair_kind(past, present, ...)  "kv": a cache that grows along a time axis (the present's size
                                  there differs from the past's: past_key_values [B, H, P, D] ->
                                  present [B, H, P + 1, D]); "state": a fixed-size recurrent state
                                  handed on unchanged in shape (GRU/LSTM h and c [layers, B, H], an
                                  SSM state, any state_in -> state_out)
    batch_axis_of, time_axis_of    the past's batch axis (the axis named like a batch axis of the
                                  other inputs, else 0 for a cache, else a state's one dynamic
                                  axis) and a cache's time axis (its one dynamic axis that grows)

Pure functions of the declared I/O. Not real-time code.
"""

from __future__ import annotations

from tickformer.errors import ConfigError

from .graph import GraphIO, Tensor

KV_CONVENTIONS = (
    ("past_key_values", "present"),
    ("past_key_values", "present_key_values"),
    ("past", "present"),
)
# (input suffix, output suffix): h -> h_n, h0 -> hn, h0 -> h_n, state_in -> state_out, ...
STATE_SUFFIXES = (
    ("_in", "_out"),
    ("_0", "_n"),
    ("0", "_n"),
    ("0", "n"),
    ("", "_n"),
    ("", "n"),
    ("", "_out"),
    ("", "_next"),
    ("", "_new"),
    ("_prev", "_next"),
    ("_prev", ""),
    ("_in", ""),
)
STATE_PREFIXES = (("prev_", "next_"), ("in_", "out_"))
CONVENTIONS_TEXT = (
    "past_key_values.N.key -> present.N.key, past -> present, h -> h_n, h0 -> hn, state_in -> state_out, "
    "prev_X -> next_X"
)
KINDS = ("kv", "state")


def _candidates(name: str) -> tuple[list[str], list[str]]:
    """(names of the KV conventions, names of the state conventions) an input `name` pairs with."""
    kv = [name.replace(a, b) for a, b in KV_CONVENTIONS if a in name]
    state = [
        name[: len(name) - len(si)] + so for si, so in STATE_SUFFIXES if name.endswith(si) and name != si
    ]
    state += [po + name[len(pi) :] for pi, po in STATE_PREFIXES if name.startswith(pi) and name != pi]
    return kv, [s for s in state if s and s != name]


def _fits(a: Tensor, b: Tensor) -> bool:
    """Same dtype and rank, and equal wherever both declare a static size except one axis that
    may grow (a cache)."""
    if a.dtype != b.dtype or a.rank != b.rank:
        return False
    differ = [
        i
        for i, (x, y) in enumerate(zip(a.dims, b.dims))
        if isinstance(x, int) and isinstance(y, int) and x != y
    ]
    return len(differ) <= 1


def find_pairs(
    step: GraphIO,
    declared: dict[str, str] | None,
    full: GraphIO | None,
    where: str,
    *,
    same: bool = False,
) -> list[tuple[str, str, str]]:
    """(past input, present output, how: "declared" | "name" | "shape") of `step` (module
    docstring). same: the step graph is the model itself (names only, never shapes)."""
    outs = {t.name: t for t in step.outputs}
    ins = {t.name: t for t in step.inputs}
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
        return [(p, q, "declared") for p, q in declared.items()]
    pairs: list[tuple[str, str, str]] = []
    taken: set[str] = set()
    for t in step.inputs:
        kv, state = _candidates(t.name)
        found = list(
            dict.fromkeys(c for c in kv + state if c in outs and c not in taken and _fits(t, outs[c]))
        )
        if len(found) > 1:
            raise ConfigError(
                f"{where}: step input {t.name!r} pairs by name with several outputs {found}; declare the one it "
                f'hands on in [cache.pairs] "{t.name}" = "OUTPUT"'
            )
        if found:
            pairs.append((t.name, found[0], "name"))
            taken.add(found[0])
        elif kv and "past" in t.name:
            raise ConfigError(
                f"{where}: step input {t.name!r} looks like a cache input but no step output pairs with it by the "
                f"conventions past_key_values.N.key -> present.N.key or past -> present; declare [cache.pairs] "
                f'"{t.name}" = "OUTPUT"'
            )
    if same or full is None:
        return pairs
    # by shape: the step inputs the full graph does not have, the step outputs it does not have
    paired_in = {p for p, _, _ in pairs}
    full_in = {t.name for t in full.inputs}
    full_out = {t.name for t in full.outputs}
    lone_in = [
        t
        for t in step.inputs
        if t.name not in paired_in and t.name not in full_in and "position" not in t.name.lower()
    ]
    lone_out = [t for t in step.outputs if t.name not in taken and t.name not in full_out]
    for t in lone_in:
        same_shape = [o for o in lone_out if o.dtype == t.dtype and o.dims == t.dims]
        rivals = [
            u
            for u in lone_in
            if u is not t and any(o.dims == u.dims and o.dtype == u.dtype for o in same_shape)
        ]
        if len(same_shape) == 1 and not rivals:
            pairs.append((t.name, same_shape[0].name, "shape"))
            taken.add(same_shape[0].name)
    return pairs


def pair_kind(past: Tensor, present: Tensor, batch_axis: int | None, declared: str | None) -> str:
    """ "kv" or "state" (module docstring); `declared` (the spec's cache.kind) wins."""
    if declared is not None:
        return declared
    grows = [
        a
        for a in range(past.rank)
        if a != batch_axis and past.dims[a] != present.dims[a] and not isinstance(past.dims[a], int)
    ]
    if grows:
        return "kv"
    dynamic = [a for a in range(past.rank) if a != batch_axis and not isinstance(past.dims[a], int)]
    if dynamic and any(a in past.name for a, _ in KV_CONVENTIONS):
        return "kv"  # unnamed dims on both sides: the name says cache
    return "state"


def batch_symbols(io: GraphIO, exclude: set[str]) -> set[str]:
    """The dim names a graph uses on the batch axis (axis 0) of its inputs other than `exclude`."""
    out = set()
    for t in io.inputs:
        if t.name in exclude or not t.rank:
            continue
        if isinstance(t.dims[0], str):
            out.add(t.dims[0])
    return out


def batch_axis_of(t: Tensor, symbols: set[str], kv: bool, declared: int | None) -> int | None:
    """A past's batch axis (module docstring); `declared` (cache.batch_axis) wins."""
    if declared is not None:
        return declared + t.rank if declared < 0 else declared
    named = [a for a, d in enumerate(t.dims) if isinstance(d, str) and d in symbols]
    if len(named) == 1:
        return named[0]
    if kv:
        return 0 if t.rank and not isinstance(t.dims[0], int) else None
    dynamic = [a for a, d in enumerate(t.dims) if not isinstance(d, int)]
    return dynamic[0] if len(dynamic) == 1 else None


def time_axis_of(past: Tensor, present: Tensor | None, batch_axis: int | None) -> tuple[int, bool]:
    """(a cache's time axis, whether it was assumed): the one dynamic non-batch axis whose size
    differs in the present, else the one dynamic non-batch axis, else rank - 2 (assumed)."""
    dynamic = [a for a in range(past.rank) if a != batch_axis and not isinstance(past.dims[a], int)]
    if present is not None:
        grows = [a for a in dynamic if past.dims[a] != present.dims[a]]
        if len(grows) == 1:
            return grows[0], False
    if len(dynamic) == 1:
        return dynamic[0], False
    return past.rank - 2, True
