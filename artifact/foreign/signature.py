"""The signature of a bare ONNX model, resolved (inference.py): what verify and certify need to
know about it -- per input its role (signal, ids, mask, position), domain, batch and time axes;
per output its axes and bound; the size range of every dynamic dimension; the axis causality is
checked along; the recurrent pairs of a step graph (`CacheSig`: KV caches that grow, fixed-size
states such as a GRU's h, each with its kind, batch axis and, for a cache, its time axis). `Signature.spec()` writes it
back as a spec document (`inspect --json` prints it, `verify --spec` reads it). Not real-time code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .graph import Tensor
from .spec import SPEC_VERSION


@dataclass(frozen=True)
class InputSig:
    """One graph input, resolved. `groups[axis]` names the size group of a dynamic axis (None:
    static). lo/hi: per-feature bounds of a signal (length 1: every feature); vocab: ids range."""

    name: str
    dtype: str
    dims: tuple[int | str | None, ...]
    role: str  # signal | ids | mask | position | state (fed the reset state: zeros, or a cache of length 0)
    groups: tuple[str | None, ...]
    batch_axis: int | None = None
    time_axis: int | None = None
    lo: tuple[float, ...] | None = None
    hi: tuple[float, ...] | None = None
    vocab: tuple[int, int] | None = None
    valid: int = 1  # mask: the value of a real position
    pattern: str = "any"
    span: str = "current"  # step graphs: "current" = this position, "total" = past + this position

    @property
    def time_group(self) -> str | None:
        return self.groups[self.time_axis] if self.time_axis is not None else None

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role}
        if self.role == "signal" and self.lo is not None and self.hi is not None:
            out["domain"] = (
                [self.lo[0], self.hi[0]] if len(self.lo) == 1 else [[a, b] for a, b in zip(self.lo, self.hi)]
            )
        if self.vocab is not None:
            out["vocab"] = list(self.vocab)
        out["batch_axis"] = self.batch_axis if self.batch_axis is not None else False
        out["time_axis"] = self.time_axis if self.time_axis is not None else False
        if self.role == "mask":
            out["valid"], out["pattern"] = self.valid, self.pattern
        if self.role == "state":
            out.pop("time_axis")
        return out


@dataclass(frozen=True)
class OutputSig:
    name: str
    dtype: str
    dims: tuple[int | str | None, ...]
    groups: tuple[str | None, ...]
    batch_axis: int | None = None
    time_axis: int | None = None
    bound: float | None = None
    cache: bool = False  # a present (KV cache) output of the full graph

    @property
    def time_group(self) -> str | None:
        return self.groups[self.time_axis] if self.time_axis is not None else None

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "batch_axis": self.batch_axis if self.batch_axis is not None else False,
            "time_axis": self.time_axis if self.time_axis is not None else False,
        }
        if self.bound is not None:
            out["bound"] = self.bound
        return out


@dataclass(frozen=True)
class CacheSig:
    """The step graph of a recurrent model and how its state or cache is fed back: each pair
    (past input, present output) is a KV cache ("kv": grows by one position along its time axis
    per step) or a fixed-size state ("state": GRU/LSTM h and c, an SSM state)."""

    step: Path
    pairs: tuple[tuple[str, str], ...]  # (past input of the step graph, present output)
    time_axis: dict[str, int]  # a cache's past input -> the axis along which positions accumulate
    prefill: str  # "full": the full graph's present outputs fill the cache; "empty": from the reset state
    inputs: tuple[InputSig, ...]  # every step input that is not a past input
    pasts: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]  # every step output
    shared: tuple[str, ...]  # step outputs that are also non-cache full outputs (compared)
    kinds: dict[str, str] = field(default_factory=dict)  # past -> "kv" | "state" (absent: "kv")
    batch_axis: dict[str, int | None] = field(default_factory=dict)  # past -> its batch axis
    state_bound: float | None = None  # declared bound on every |state| (state_bounded)
    same: bool = False  # the model is its own step graph (no --step: its pairs are its own I/O)

    def kind(self, past: str) -> str:
        return self.kinds.get(past, "kv")

    @property
    def states(self) -> list[tuple[str, str]]:
        """The fixed-size state pairs."""
        return [(p, q) for p, q in self.pairs if self.kind(p) == "state"]

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"prefill": self.prefill, "pairs": dict(self.pairs)}
        if not self.same:  # absolute: the spec may be saved anywhere
            out = {"step": str(Path(self.step).resolve()), **out}
        kinds = set(self.kind(p) for p, _ in self.pairs)
        if len(kinds) == 1:
            out["kind"] = kinds.pop()
        if self.state_bound is not None:
            out["state_bound"] = self.state_bound
        out["inputs"] = {i.name: {**i.spec(), "span": i.span} for i in self.inputs}
        return out

    def describe(self) -> list[dict[str, Any]]:
        """One entry per pair: past, present, kind, batch axis, time axis (a cache)."""
        return [
            {
                "past": p,
                "present": q,
                "kind": self.kind(p),
                "batch_axis": self.batch_axis.get(p),
                "time_axis": self.time_axis.get(p) if self.kind(p) == "kv" else None,
            }
            for p, q in self.pairs
        ]


@dataclass(frozen=True)
class Signature:
    """What verify/certify need to know about a bare ONNX model (module docstring)."""

    path: Path
    inputs: tuple[InputSig, ...]
    outputs: tuple[OutputSig, ...]
    ranges: dict[str, tuple[int, int]]  # size group -> sizes tried (lo == hi for a static size)
    dynamic: frozenset[str]  # the groups the graph declares dynamic
    causal_group: str | None  # the time group causality is checked along (None: not checked)
    cache: CacheSig | None
    skip: tuple[str, ...] = ()
    tolerance_factor: float = 1.0
    notes: tuple[str, ...] = field(default=())
    opset: int | None = None
    producer: str = ""
    warnings: tuple[str, ...] = field(default=())  # control flow with unbounded trip counts (control_flow.py)
    fixed: str = ""  # a batch or time axis the export fixed, with the export argument that frees it

    def input(self, name: str) -> InputSig:
        return next(i for i in self.inputs if i.name == name)

    @property
    def time_groups(self) -> list[str]:
        seen: list[str] = []
        for i in self.inputs:
            g = i.time_group
            if g is not None and g not in seen:
                seen.append(g)
        return seen

    @property
    def batch_group(self) -> str | None:
        return next((i.groups[i.batch_axis] for i in self.inputs if i.batch_axis is not None), None)

    def replace(self, **changes: Any) -> "Signature":
        return dataclasses.replace(self, **changes)

    def spec(self) -> dict[str, Any]:
        """This signature as a spec document: `inspect --json` prints it, `verify --spec` reads it back."""
        doc: dict[str, Any] = {
            "version": SPEC_VERSION,
            "causal": self.causal_group if self.causal_group is not None else False,
            "axes": {g: list(r) for g, r in self.ranges.items() if g in self.dynamic},
            "inputs": {i.name: i.spec() for i in self.inputs},
            "outputs": {o.name: o.spec() for o in self.outputs},
        }
        if self.cache is not None:
            doc["cache"] = self.cache.spec()
        if self.skip:
            doc["skip"] = list(self.skip)
        if self.tolerance_factor != 1.0:
            doc["tolerance_factor"] = self.tolerance_factor
        return doc

    def describe(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "opset": self.opset,
            "producer": self.producer,
            "inputs": [
                {"name": i.name, "dtype": i.dtype, "dims": list(i.dims), **i.spec()} for i in self.inputs
            ],
            "outputs": [
                {"name": o.name, "dtype": o.dtype, "dims": list(o.dims), **o.spec()} for o in self.outputs
            ],
            "sizes": {g: list(r) for g, r in self.ranges.items()},
            "dynamic": sorted(self.dynamic),
            "causal": self.causal_group,
            "cache": None
            if self.cache is None
            else {**self.cache.spec(), "pairs_detail": self.cache.describe()},
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }
