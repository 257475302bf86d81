"""Per-input inference for the signature of a bare ONNX model (inference.py's rules): an input's
role from its dtype and name (a recurrent state or cache input: from its pair, pairs.py), its
batch and time axes (from the dims' names where they say batch or time, else by position), its
domain (a signal), vocabulary (ids) or mask convention, each from the spec, else the flags, else
the graph, every inference recorded in the notes; and the size groups dynamic dimensions share (a
union-find over named dims and the batch and time roles; a state input joins only the batch
size). Not real-time code.
"""

from __future__ import annotations

from typing import Any

from tickformer.contracts.input_domain import check_domain
from tickformer.errors import ConfigError

from .graph import GraphIO, Tensor
from .signature import InputSig
from .spec import Flags, is_number

FLOAT_DTYPES = ("float16", "float32", "float64")
BATCH_NAMES = frozenset({"b", "bs", "batch", "batch_size", "batchsize", "n_batch", "num_batch"})
TIME_NAMES = frozenset(
    {"t", "l", "time", "times", "seq", "seq_len", "seqlen", "sequence", "sequence_length", "length", "len"}
    | {"steps", "num_steps", "tokens", "num_tokens", "n_tokens", "frames", "num_frames", "positions"}
)
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class Groups:
    """Union-find over size keys: ("sym", name) for a named dynamic dim, ("role", "batch"|"time")."""

    def __init__(self) -> None:
        self.parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(self, k: tuple[str, str]) -> tuple[str, str]:
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: tuple[str, str], b: tuple[str, str]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if ra[0] == "role" and rb[0] == "sym":  # name a group by its symbol when it has one
                ra, rb = rb, ra
            self.parent[rb] = ra

    def name(self, k: tuple[str, str]) -> str:
        return self.find(k)[1]


def axis_index(value: Any, rank: int, where: str, key: str) -> int | None:
    """A declared axis (negative counts from the end) as an index in [0, rank), None for false / not
    given; ConfigError naming the key when it is outside the rank."""
    if value is False or value is None:
        return None
    axis = value + rank if value < 0 else value
    if not 0 <= axis < rank:
        raise ConfigError(
            f"{where}: {key} = {value} is outside the rank {rank} of that tensor; use 0..{rank - 1}"
        )
    return axis


def _infer_role(t: Tensor, io: GraphIO, notes: list[str]) -> str:
    """The role of an input the spec does not declare, from its dtype and name (noted)."""
    name = t.name.lower()
    if t.dtype in FLOAT_DTYPES:
        return "signal"
    if t.dtype == "bool" or "mask" in name:
        notes.append(f"input {t.name}: role mask (from its {'dtype' if t.dtype == 'bool' else 'name'})")
        return "mask"
    if "position" in name or name in ("pos", "positions"):
        notes.append(f"input {t.name}: role position (from its name): filled with 0..T-1")
        return "position"
    if t.dtype in INT_DTYPES:
        return "ids"
    raise ConfigError(
        f"input {t.name} has dtype {t.dtype}; declare its role in the spec ([inputs.{t.name}] role = ...)"
    )


def _box(value: Any, features: int | None, where: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    boxes = [value] if is_number(value[0]) else value
    pairs = [check_domain(lo, hi) for lo, hi in boxes]
    if len(pairs) > 1 and features is not None and len(pairs) != features:
        raise ConfigError(
            f"{where}: {len(pairs)} intervals given for {features} features (the last axis); give one "
            "[LO, HI] for all or exactly one per feature"
        )
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def named_axis(t: Tensor, names: frozenset[str], other: int | None = None) -> int | None:
    """The one axis of t whose dim name is one of `names` (case-insensitive), else None."""
    found = [a for a, d in enumerate(t.dims) if isinstance(d, str) and d.lower() in names and a != other]
    return found[0] if len(found) == 1 else None


def resolve_inputs(
    tensors: tuple[Tensor, ...],
    io: GraphIO,
    declared: dict[str, Any],
    doc: dict[str, Any],
    flags: Flags,
    groups: Groups,
    where: str,
    notes: list[str],
    *,
    step: bool,
    inherit: dict[str, InputSig] | None = None,
    states: dict[str, tuple[int | None, int | None]] | None = None,
) -> list[tuple[Tensor, dict[str, Any]]]:
    """Per tensor its resolved fields (without groups, which need every tensor first). `states`:
    the inputs that take a recurrent state or cache -> (batch axis, time axis of a cache)."""
    out = []
    states = states or {}
    for t in tensors:
        d = declared.get(t.name, {})
        base = (inherit or {}).get(t.name)
        if d.get("role") is None and t.name in states:
            role = "state"
        else:
            role = d.get("role") or (base.role if base is not None else _infer_role(t, io, notes))
        r: dict[str, Any] = {"role": role}
        # Each axis: declared in the spec; else a state input's own; else the one axis whose dim
        # name says so; else the default of its role and rank.
        own = states.get(t.name, (None, None)) if role == "state" else None
        if role == "signal":
            defaults = (
                0 if t.rank >= 2 else None,
                1 if t.rank == 3 or (t.rank == 2 and t.is_dynamic(1)) else None,
            )
        else:
            defaults = (0 if t.rank >= 1 else None, 1 if t.rank >= 2 else None)
        for i, (key, names) in enumerate((("batch_axis", BATCH_NAMES), ("time_axis", TIME_NAMES))):
            named = named_axis(t, names, r.get("batch_axis"))  # the time axis is not the batch axis
            if key in d:
                r[key] = axis_index(d[key], t.rank, where, f"inputs.{t.name}.{key}")
            elif own is not None:
                r[key] = own[i]
            else:
                r[key] = named if named is not None else defaults[i]
        if r["time_axis"] is not None and r["time_axis"] == r["batch_axis"]:
            raise ConfigError(
                f"{where}: input {t.name}: the batch and time axes are both {r['time_axis']}; declare them"
            )
        if role == "signal":
            if t.dtype not in FLOAT_DTYPES:
                raise ConfigError(
                    f"{where}: input {t.name} ({t.dtype}) cannot be a signal; signals are float tensors"
                )
            features = t.dims[-1] if t.rank and isinstance(t.dims[-1], int) else None
            box = d.get("domain", doc.get("domain"))
            if box is not None:
                r["lo"], r["hi"] = _box(box, features, f"{where}: inputs.{t.name}.domain")
            elif base is not None and base.lo is not None:
                r["lo"], r["hi"] = base.lo, base.hi
            elif flags.domain is not None:
                r["lo"], r["hi"] = (flags.domain[0],), (flags.domain[1],)
            elif base is not None:
                pass  # the full graph's input, noted there
            elif not flags.require_domain:
                notes.append(
                    f"input {t.name}: no domain declared (verify needs --domain or the spec's domain)"
                )
            else:
                raise ConfigError(
                    f"input {t.shown()} declares no input domain; pass --domain LO:HI (e.g. --domain -1:1) "
                    f"or declare it in a spec file ([inputs.{t.name}] domain = [LO, HI])"
                )
        elif role == "ids":
            if t.dtype not in INT_DTYPES:
                raise ConfigError(
                    f"{where}: input {t.name} ({t.dtype}) cannot hold ids; ids are integer tensors"
                )
            if "vocab" in d:
                r["vocab"] = tuple(d["vocab"])
            elif base is not None and base.vocab is not None:
                r["vocab"] = base.vocab
            elif flags.vocab is not None:
                r["vocab"] = flags.vocab
            elif base is not None:
                pass  # the full graph's input, noted there
            elif t.name in io.vocab_hints:
                r["vocab"] = (0, io.vocab_hints[t.name] - 1)
                notes.append(
                    f"input {t.name}: ids in [0, {io.vocab_hints[t.name] - 1}] (the embedding table it indexes "
                    f"has {io.vocab_hints[t.name]} rows)"
                )
            elif not flags.require_domain:
                notes.append(
                    f"input {t.name}: no vocabulary inferred (verify needs --vocab or the spec's vocab)"
                )
            else:
                raise ConfigError(
                    f"input {t.shown()} holds integer ids but no vocabulary could be inferred; pass "
                    f"--vocab LO:HI or declare it in a spec file ([inputs.{t.name}] vocab = [LO, HI])"
                )
        elif role == "mask":
            padding = "padding" in t.name.lower()
            default_valid = 0 if padding else 1
            valid = d.get("valid", base.valid if base is not None else default_valid)
            r["valid"] = int(valid)
            r["pattern"] = d.get("pattern", base.pattern if base is not None else "any")
            if "valid" not in d and base is None:
                notes.append(
                    f"input {t.name}: mask with {r['valid']} = a real position"
                    + (
                        " (its name says padding: nonzero = pad, PyTorch's key_padding_mask)"
                        if padding
                        else ""
                    )
                )
        if step:
            r["span"] = d.get("span", "total" if role == "mask" else "current")
        out.append((t, r))
    return out


def assign_groups(resolved: list[tuple[Tensor, dict[str, Any]]], groups: Groups, where: str) -> None:
    """Join the size groups: a named dim is its own symbol, a dynamic batch axis joins the batch
    role, an unnamed time axis the one named time symbol (ConfigError when there are several)."""
    for t, r in resolved:
        for axis, dim in enumerate(t.dims):
            if r.get("role") == "state" and axis != r.get("batch_axis"):
                continue  # a state's other sizes are its own (a cache starts at length 0)
            if isinstance(dim, str):
                groups.find(("sym", dim))
            if axis == r.get("batch_axis") and not isinstance(dim, int):
                groups.union(("role", "batch"), ("sym", dim) if isinstance(dim, str) else ("role", "batch"))
    # Unnamed time axes join the one named time symbol if there is exactly one, else "time".
    named_time = sorted(
        {
            t.dims[r["time_axis"]]
            for t, r in resolved
            if r.get("time_axis") is not None
            and isinstance(t.dims[r["time_axis"]], str)
            and r.get("role") != "state"
        }  # type: ignore[misc]
    )
    for t, r in resolved:
        ta = r.get("time_axis")
        if ta is None or t.dims[ta] is not None or r.get("role") == "state":
            continue
        if len(named_time) == 1:
            groups.union(("sym", named_time[0]), ("role", "time"))  # type: ignore[arg-type]
        elif len(named_time) > 1:
            raise ConfigError(
                f"{where}: input {t.name}'s time axis {ta} is unnamed and the graph names several time axes "
                f"{named_time}; declare its size in the spec ([inputs.{t.name}] time_axis, and [axes])"
            )


def group_of(t: Tensor, axis: int, r: dict[str, Any], groups: Groups, where: str) -> str | None:
    """The size group of one axis of an input (None: a static axis of no role, or an axis of a
    state other than its batch axis)."""
    dim = t.dims[axis]
    if r.get("role") == "state" and axis != r.get("batch_axis"):
        return None
    if isinstance(dim, int):  # a static batch or time axis still belongs to its role's group
        if axis == r.get("time_axis"):
            return groups.name(("role", "time"))
        if axis == r.get("batch_axis"):
            return groups.name(("role", "batch"))
        return None
    if isinstance(dim, str):
        return groups.name(("sym", dim))
    if axis == r.get("batch_axis"):
        return groups.name(("role", "batch"))
    if axis == r.get("time_axis"):
        return groups.name(("role", "time"))
    return f"{t.name}[{axis}]"  # an unnamed dynamic dimension of its own: needs [axes] in the spec
