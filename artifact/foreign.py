"""Bare ONNX models users bring (not our artifacts): their declared I/O, a property spec file, and
the signature `verify`, `certify`, `check` and `inspect` work from (docs/verify.md).

    read_graph(path)             the bytes and ModelProto of a .onnx file, read once through
                                 `tickformer.safe_files` (a regular file; a FIFO never blocks);
                                 tensors kept in external files are refused (nothing but the
                                 file itself is ever read)
    graph_io(model)              every graph input and output: name, dtype, dims (int static, str
                                 symbolic, None unnamed dynamic)
    load_spec(path)              a spec file (TOML or JSON, by suffix), parsed and checked
                                 against SPEC_SCHEMA with errors naming the key and the fix
    resolve(full, step, doc, flags)   the Signature: per input its role (signal, ids, mask,
                                 position), domain, batch and time axes; per output its axes and
                                 bound; the size range of every dynamic dimension; the KV-cache
                                 pairing of a step graph (past -> present)

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

Pure functions of the parsed graph and spec except `read_graph`/`load_spec` (file reads). Not
real-time code.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickformer.errors import ArtifactError, ConfigError, FileRefused
from tickformer.validation import is_int

SPEC_VERSION = 1
MAX_SPEC_BYTES = 1 << 20
ROLES = ("signal", "ids", "mask", "position")
PATTERNS = ("any", "right", "left")
PREFILLS = ("full", "empty")
SPANS = ("current", "total")
DEFAULT_BATCH = (1, 2)
PASSTHROUGH_OPS = frozenset({"Cast", "Unsqueeze", "Squeeze", "Reshape", "Identity", "Flatten", "Expand"})
FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

# The properties `verify` checks on a bare model, in the order it runs them (its plan,
# verify/properties/plans.py foreign_plan, yields exactly these; with several mask inputs,
# padding_mask is one property per mask, named padding_mask[INPUT]). A spec's `skip` and
# --skip name them; "padding_mask" skips every mask's.
FOREIGN_PROPERTIES = (
    "dynamic_axes",
    "runs_in_domain",
    "finite_outputs",
    "output_bound",
    "causality",
    "padding_mask",
    "step_equals_full",
    "optimizations_agree",
    "onnx_reference",
)
PER_MASK_PATTERN = r"^padding_mask\[.+\]$"

# The spec file's schema (JSON Schema 2020-12), published in docs/verify.md. `check_spec` checks
# these rules by hand (no dependency), with messages that name the key and the fix, and the
# rules a schema cannot express (SCHEMA_CANNOT_EXPRESS); `resolve` then checks the names against
# the graph. tests/verify/test_spec.py runs both on the same documents (jsonschema where installed).
SCHEMA_CANNOT_EXPRESS = (
    "every interval [LO, HI] is non-empty, LO <= HI (domain, vocab, axes)",
    "numbers are finite (domain, bound, output_bound, tolerance_factor: TOML can write inf, nan and numbers "
    "past the float range)",
    "names exist in the graph (inputs, outputs, axes, causal, cache.pairs, cache.inputs, padding_mask[INPUT])",
    "a domain with one [LO, HI] per feature has as many as the input's last axis",
    "a [cache] section has a step graph (cache.step or --step)",
    "integers are written without a fraction (JSON Schema counts 2.0 as an integer; the spec does not)",
)
_RANGE = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2}
_AXIS = {"oneOf": [{"type": "integer"}, {"const": False}]}
_BOX = {
    "oneOf": [
        {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
        {
            "type": "array",
            "items": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
            "minItems": 1,
        },
    ]
}
_INPUT = {  # [inputs.NAME]: an input of the full graph
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "role": {"enum": list(ROLES)},
        "domain": _BOX,
        "vocab": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
        "batch_axis": _AXIS,
        "time_axis": _AXIS,
        "valid": {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 1}, {"type": "boolean"}]},
        "pattern": {"enum": list(PATTERNS)},
    },
}
_STEP_INPUT = {  # [cache.inputs.NAME]: a step graph's input also says which span of positions it covers
    **_INPUT,
    "properties": {**_INPUT["properties"], "span": {"enum": list(SPANS)}},
}
_OUTPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "bound": {"type": "number", "exclusiveMinimum": 0},
        "batch_axis": _AXIS,
        "time_axis": _AXIS,
    },
}
SPEC_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "tickformer verify property spec",
    "type": "object",
    "additionalProperties": False,
    "required": ["version"],
    "properties": {
        "version": {"const": SPEC_VERSION},  # jsonschema: true is not 1
        "causal": {"oneOf": [{"type": "boolean"}, {"type": "string"}]},
        "domain": _BOX,
        "output_bound": {"type": "number", "exclusiveMinimum": 0},
        "skip": {
            "type": "array",
            "items": {
                "anyOf": [{"enum": list(FOREIGN_PROPERTIES)}, {"type": "string", "pattern": PER_MASK_PATTERN}]
            },
        },
        "tolerance_factor": {"type": "number", "exclusiveMinimum": 0},
        "axes": {"type": "object", "additionalProperties": _RANGE},
        "inputs": {"type": "object", "additionalProperties": _INPUT},
        "outputs": {"type": "object", "additionalProperties": _OUTPUT},
        "cache": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "step": {"type": "string", "minLength": 1},
                "prefill": {"enum": list(PREFILLS)},
                "time_axis": {"type": "integer"},
                "pairs": {"type": "object", "additionalProperties": {"type": "string"}},
                "inputs": {"type": "object", "additionalProperties": _STEP_INPUT},
            },
        },
    },
}


# ----------------------------------------------------------------------------- the graph


@dataclass(frozen=True)
class Tensor:
    """A graph input or output as the graph declares it."""

    name: str
    dtype: str  # numpy dtype name
    dims: tuple[int | str | None, ...]  # int: static; str: symbolic (dim_param); None: unnamed dynamic

    @property
    def rank(self) -> int:
        return len(self.dims)

    def is_dynamic(self, axis: int) -> bool:
        return not isinstance(self.dims[axis], int)

    def shown(self) -> str:
        return f"{self.name} {self.dtype}[{', '.join('?' if d is None else str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class GraphIO:
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    opset: int | None
    producer: str
    vocab_hints: dict[str, int]  # int input -> rows of the embedding table it indexes (Gather)

    def input(self, name: str) -> Tensor | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> Tensor | None:
        return next((t for t in self.outputs if t.name == name), None)


def read_graph(path: str | Path) -> tuple[bytes, Any]:
    """(bytes, onnx.ModelProto) of the .onnx file at `path`, read once (safe_files.read_path);
    ArtifactError naming the file and the fix if it cannot be read or parsed, or keeps tensors in
    external files (they would be read by path, outside the one loader)."""
    import onnx

    from tickformer.artifact.graph_rules import external_tensors
    from tickformer.safe_files import read_path

    p = Path(path)
    try:
        data = read_path(p)
    except FileRefused as exc:
        raise ArtifactError(f"{exc}; pass a .onnx file") from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ArtifactError(f"{p}: not an ONNX model ({first[:200]}); pass a valid .onnx file") from None
    if not len(model.graph.output):
        raise ArtifactError(f"{p}: not an ONNX model (the graph has no outputs); pass a valid .onnx file")
    external = external_tensors(model)
    if external:
        raise ArtifactError(
            f"{p}: tensors {external[:3]} keep their data in external files, which verify does not read; "
            "save the model with every tensor inside the file (onnx.save(model, path, "
            "save_as_external_data=False))"
        )
    return data, model


def _dims(value_info: Any) -> tuple[int | str | None, ...]:
    shape = value_info.type.tensor_type.shape
    out: list[int | str | None] = []
    for d in shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(str(d.dim_param))
        else:
            out.append(None)
    return tuple(out)


def _dtype(value_info: Any, where: str) -> str:
    import numpy as np
    from onnx import helper

    t = value_info.type
    if not t.HasField("tensor_type"):
        raise ArtifactError(
            f"{where}: {value_info.name!r} is not a tensor (sequence, map or optional); verify feeds tensors only"
        )
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)).name
    except Exception:
        raise ArtifactError(
            f"{where}: {value_info.name!r} has element type {t.tensor_type.elem_type}, which numpy has no dtype "
            "for; verify feeds float, int and bool tensors"
        ) from None


def _vocab_hints(model: Any) -> dict[str, int]:
    """int graph input -> rows V of the initializer a Gather (axis 0) indexes with it, following
    Cast/Unsqueeze/Reshape/... from the input (an embedding lookup: ids in [0, V-1])."""
    g = model.graph
    inits = {i.name: list(i.dims) for i in g.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in g.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    hints: dict[str, int] = {}
    for inp in g.input:
        if inp.name in inits:
            continue
        frontier, seen = [inp.name], {inp.name}
        while frontier and inp.name not in hints:
            value = frontier.pop()
            for node in consumers.get(value, []):
                if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == value:
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    table = inits.get(node.input[0])
                    if table and axis == 0:
                        hints[inp.name] = int(table[0])
                        break
                elif node.op_type in PASSTHROUGH_OPS and node.input and node.input[0] == value:
                    for out in node.output:
                        if out not in seen:
                            seen.add(out)
                            frontier.append(out)
    return hints


def graph_io(model: Any, where: str = "model") -> GraphIO:
    """The declared inputs (initializers excluded) and outputs of an onnx.ModelProto."""
    g = model.graph
    init_names = {i.name for i in g.initializer}
    inputs = tuple(Tensor(v.name, _dtype(v, where), _dims(v)) for v in g.input if v.name not in init_names)
    outputs = tuple(Tensor(v.name, _dtype(v, where), _dims(v)) for v in g.output)
    opset = next((int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), None)
    return GraphIO(
        inputs, outputs, opset, f"{model.producer_name} {model.producer_version}".strip(), _vocab_hints(model)
    )


# ----------------------------------------------------------------------------- the spec file


def _spec_error(where: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{where}: {key}: {problem}")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_keys(where: str, key: str, value: Any, known: dict[str, Any]) -> None:
    if not isinstance(value, dict):
        raise _spec_error(where, key, f"must be a table (TOML [{key}] / a JSON object), got {value!r:.60}")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise _spec_error(
            where, key, f"unknown key {unknown[0]!r}; use one of {sorted(known)} (docs/verify.md)"
        )


def _check_box(where: str, key: str, value: Any) -> None:
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(_is_number(v) for v in value)
        or isinstance(value, list)
        and value
        and all(isinstance(b, list) and len(b) == 2 and all(_is_number(v) for v in b) for b in value)
    ):
        boxes = [value] if _is_number(value[0]) else value
        for lo, hi in boxes:
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise _spec_error(where, key, f"[{lo}, {hi}] must be finite numbers")
            if lo > hi:
                raise _spec_error(where, key, f"[{lo}, {hi}] is empty (LO > HI); swap the bounds")
        return
    raise _spec_error(
        where,
        key,
        f"{value!r:.80} must be [LO, HI] (one interval for every feature) or [[LO, HI], ...] (one per "
        "feature, the last axis)",
    )


def _check_axis(where: str, key: str, value: Any) -> None:
    if not (value is False or is_int(value)):
        raise _spec_error(where, key, f"{value!r} must be an axis index (an integer) or false (no such axis)")


def _is_range(value: Any) -> bool:
    """[LO, HI]: two integers with 0 <= LO <= HI."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(is_int(v) for v in value)
        and 0 <= value[0] <= value[1]
    )


def _check_input(where: str, key: str, value: Any, *, step: bool) -> None:
    known = (_STEP_INPUT if step else _INPUT)["properties"]
    _check_keys(where, key, value, known)
    if "role" in value and value["role"] not in ROLES:
        raise _spec_error(where, f"{key}.role", f"{value['role']!r} is not one of {list(ROLES)}")
    if "domain" in value:
        _check_box(where, f"{key}.domain", value["domain"])
    if "vocab" in value and not _is_range(value["vocab"]):
        raise _spec_error(
            where, f"{key}.vocab", f"{value['vocab']!r} must be [LO, HI], integer ids with 0 <= LO <= HI"
        )
    for axis in ("batch_axis", "time_axis"):
        if axis in value:
            _check_axis(where, f"{key}.{axis}", value[axis])
    if "valid" in value and not (
        isinstance(value["valid"], bool) or (is_int(value["valid"]) and value["valid"] in (0, 1))
    ):
        raise _spec_error(where, f"{key}.valid", f"{value['valid']!r} must be 1, 0, true or false")
    if "pattern" in value and value["pattern"] not in PATTERNS:
        raise _spec_error(where, f"{key}.pattern", f"{value['pattern']!r} is not one of {list(PATTERNS)}")
    if "span" in value and value["span"] not in SPANS:
        raise _spec_error(where, f"{key}.span", f"{value['span']!r} is not one of {list(SPANS)}")


def check_spec(doc: Any, where: str = "spec") -> dict[str, Any]:
    """`doc` checked against SPEC_SCHEMA; ConfigError naming the key and the fix. Returns doc."""
    _check_keys(where, "(top level)", doc, SPEC_SCHEMA["properties"])
    if not is_int(doc.get("version")) or doc["version"] != SPEC_VERSION:
        raise _spec_error(
            where,
            "version",
            f"{doc.get('version')!r} is not a spec version this tickformer reads; set version = 1",
        )
    if "causal" in doc and not isinstance(doc["causal"], (bool, str)):
        raise _spec_error(
            where, "causal", f"{doc['causal']!r} must be true, false or the name of a time axis"
        )
    if "domain" in doc:
        _check_box(where, "domain", doc["domain"])
    for key in ("output_bound", "tolerance_factor"):
        if key in doc and not (_is_number(doc[key]) and math.isfinite(doc[key]) and doc[key] > 0):
            raise _spec_error(where, key, f"{doc[key]!r} must be a positive finite number")
    if "skip" in doc:
        if not (isinstance(doc["skip"], list) and all(isinstance(s, str) for s in doc["skip"])):
            raise _spec_error(where, "skip", f"{doc['skip']!r} must be a list of property names")
        unknown = [s for s in doc["skip"] if not is_property_name(s)]
        if unknown:
            raise _spec_error(
                where,
                "skip",
                f"{unknown[0]!r} is not a property of a bare model; use one of {list(FOREIGN_PROPERTIES)} "
                "(or padding_mask[INPUT] for one mask input)",
            )
    if "axes" in doc:
        if not isinstance(doc["axes"], dict):
            raise _spec_error(where, "axes", "must be a table of NAME = [LO, HI]")
        for name, r in doc["axes"].items():
            if not _is_range(r):
                raise _spec_error(where, f"axes.{name}", f"{r!r} must be [LO, HI], sizes with 0 <= LO <= HI")
    for section, step in (("inputs", False), ("outputs", False)):
        if section in doc:
            if not isinstance(doc[section], dict):
                raise _spec_error(where, section, "must be a table of tables, one per graph " + section[:-1])
            for name, value in doc[section].items():
                if section == "inputs":
                    _check_input(where, f"inputs.{name}", value, step=step)
                else:
                    _check_keys(where, f"outputs.{name}", value, _OUTPUT["properties"])
                    b = value.get("bound")
                    if b is not None and not (_is_number(b) and math.isfinite(b) and b > 0):
                        raise _spec_error(
                            where, f"outputs.{name}.bound", f"{b!r} must be a positive finite number"
                        )
                    for axis in ("batch_axis", "time_axis"):
                        if axis in value:
                            _check_axis(where, f"outputs.{name}.{axis}", value[axis])
    if "cache" in doc:
        cache = doc["cache"]
        _check_keys(where, "cache", cache, SPEC_SCHEMA["properties"]["cache"]["properties"])
        if "step" in cache and not (isinstance(cache["step"], str) and cache["step"]):
            raise _spec_error(where, "cache.step", f"{cache['step']!r} must be the path of the step graph")
        if "prefill" in cache and cache["prefill"] not in PREFILLS:
            raise _spec_error(where, "cache.prefill", f"{cache['prefill']!r} is not one of {list(PREFILLS)}")
        if "time_axis" in cache and not is_int(cache["time_axis"]):
            raise _spec_error(where, "cache.time_axis", f"{cache['time_axis']!r} must be an axis index")
        if "pairs" in cache:
            pairs = cache["pairs"]
            if not (isinstance(pairs, dict) and all(isinstance(v, str) for v in pairs.values())):
                raise _spec_error(where, "cache.pairs", 'must be a table of PAST_INPUT = "PRESENT_OUTPUT"')
        if "inputs" in cache and not isinstance(cache["inputs"], dict):
            raise _spec_error(where, "cache.inputs", "must be a table of tables, one per step graph input")
        for name, value in cache.get("inputs", {}).items():
            _check_input(where, f"cache.inputs.{name}", value, step=True)
    return doc


def is_property_name(name: str) -> bool:
    """A name `skip` may use for a bare model: one of FOREIGN_PROPERTIES or padding_mask[INPUT]
    (whether INPUT is a mask input of the graph is checked against the signature)."""
    import re

    return name in FOREIGN_PROPERTIES or re.fullmatch(PER_MASK_PATTERN[1:-1], name) is not None


def load_spec(path: str | Path) -> tuple[dict[str, Any], Path]:
    """(checked spec document, the folder relative paths in it are resolved against). TOML for
    .toml, JSON (strict: tickformer.sealed.loads) for .json; read once through safe_files."""
    from tickformer.safe_files import read_path

    p = Path(path)
    if p.suffix not in (".toml", ".json"):
        raise ConfigError(f"--spec {p}: use a .toml or .json spec file (docs/verify.md)")
    try:
        data = read_path(p, max_bytes=MAX_SPEC_BYTES)
    except FileRefused as exc:
        raise ConfigError(f"--spec {exc}; pass a spec file (.toml or .json, docs/verify.md)") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not UTF-8 text; save it as UTF-8") from None
    if p.suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            try:
                import tomli as tomllib  # type: ignore[no-redef]
            except ImportError:
                raise ConfigError(
                    f"{p}: reading TOML needs Python >= 3.11 or `pip install tomli`; or write the spec as JSON"
                ) from None
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"{p}: not valid TOML ({exc}); correct the line it names (the spec must be TOML)"
            ) from None
    else:
        from tickformer.sealed import loads

        try:
            doc = loads(data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{p}: not valid JSON ({str(exc)[:200]}); the spec must be strict JSON (docs/verify.md has an example)"
            ) from None
    return check_spec(doc, str(p)), p.parent


# ----------------------------------------------------------------------------- the signature


@dataclass(frozen=True)
class InputSig:
    """One graph input, resolved. `groups[axis]` names the size group of a dynamic axis (None:
    static). lo/hi: per-feature bounds of a signal (length 1: every feature); vocab: ids range."""

    name: str
    dtype: str
    dims: tuple[int | str | None, ...]
    role: str
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
    """The step graph of a KV-cache pair and how its cache is fed back."""

    step: Path
    pairs: tuple[tuple[str, str], ...]  # (past input of the step graph, present output)
    time_axis: dict[str, int]  # past input -> the axis along which positions accumulate
    prefill: str  # "full": the full graph's present outputs fill the cache; "empty": from length 0
    inputs: tuple[InputSig, ...]  # every step input that is not a past input
    pasts: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]  # every step output
    shared: tuple[str, ...]  # step outputs that are also non-cache full outputs (compared)

    def spec(self) -> dict[str, Any]:
        return {
            "step": str(self.step),
            "prefill": self.prefill,
            "pairs": dict(self.pairs),
            "inputs": {i.name: {**i.spec(), "span": i.span} for i in self.inputs},
        }


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
            "cache": None if self.cache is None else self.cache.spec(),
            "notes": list(self.notes),
        }


@dataclass
class Flags:
    """What the command line says about a bare model (None: not given)."""

    domain: tuple[float, float] | None = None
    vocab: tuple[int, int] | None = None
    output_bound: float | None = None
    max_t: int = 16
    causal: bool | None = None
    step: Path | None = None
    skip: tuple[str, ...] = ()
    require_domain: bool = (
        True  # False (inspect, check): a missing domain or vocabulary is noted, not an error
    )


class _Groups:
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


def _axis(value: Any, rank: int, where: str, key: str) -> int | None:
    if value is False or value is None:
        return None
    axis = value + rank if value < 0 else value
    if not 0 <= axis < rank:
        raise ConfigError(
            f"{where}: {key} = {value} is outside the rank {rank} of that tensor; use 0..{rank - 1}"
        )
    return axis


def _infer_role(t: Tensor, io: GraphIO, notes: list[str]) -> str:
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
    from tickformer.contracts.input_domain import check_domain

    boxes = [value] if _is_number(value[0]) else value
    pairs = [check_domain(lo, hi) for lo, hi in boxes]
    if len(pairs) > 1 and features is not None and len(pairs) != features:
        raise ConfigError(
            f"{where}: {len(pairs)} intervals given for {features} features (the last axis); give one "
            "[LO, HI] for all or exactly one per feature"
        )
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def _resolve_inputs(
    tensors: tuple[Tensor, ...],
    io: GraphIO,
    declared: dict[str, Any],
    doc: dict[str, Any],
    flags: Flags,
    groups: _Groups,
    where: str,
    notes: list[str],
    *,
    step: bool,
    inherit: dict[str, InputSig] | None = None,
) -> list[tuple[Tensor, dict[str, Any]]]:
    """Per tensor its resolved fields (without groups, which need every tensor first)."""
    out = []
    for t in tensors:
        d = declared.get(t.name, {})
        base = (inherit or {}).get(t.name)
        role = d.get("role") or (base.role if base is not None else _infer_role(t, io, notes))
        r: dict[str, Any] = {"role": role}
        if "batch_axis" in d:
            r["batch_axis"] = _axis(d["batch_axis"], t.rank, where, f"inputs.{t.name}.batch_axis")
        else:
            r["batch_axis"] = 0 if t.rank >= 1 and (role != "signal" or t.rank >= 2) else None
        if "time_axis" in d:
            r["time_axis"] = _axis(d["time_axis"], t.rank, where, f"inputs.{t.name}.time_axis")
        elif role == "signal":
            r["time_axis"] = 1 if t.rank == 3 or (t.rank == 2 and t.is_dynamic(1)) else None
        else:
            r["time_axis"] = 1 if t.rank >= 2 else None
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


def _assign_groups(resolved: list[tuple[Tensor, dict[str, Any]]], groups: _Groups, where: str) -> None:
    for t, r in resolved:
        for axis, dim in enumerate(t.dims):
            if isinstance(dim, str):
                groups.find(("sym", dim))
            if axis == r.get("batch_axis") and not isinstance(dim, int):
                groups.union(("role", "batch"), ("sym", dim) if isinstance(dim, str) else ("role", "batch"))
    # Unnamed time axes join the one named time symbol if there is exactly one, else "time".
    named_time = sorted(
        {
            t.dims[r["time_axis"]]
            for t, r in resolved
            if r.get("time_axis") is not None and isinstance(t.dims[r["time_axis"]], str)
        }  # type: ignore[misc]
    )
    for t, r in resolved:
        ta = r.get("time_axis")
        if ta is None or t.dims[ta] is not None:
            continue
        if len(named_time) == 1:
            groups.union(("sym", named_time[0]), ("role", "time"))  # type: ignore[arg-type]
        elif len(named_time) > 1:
            raise ConfigError(
                f"{where}: input {t.name}'s time axis {ta} is unnamed and the graph names several time axes "
                f"{named_time}; declare its size in the spec ([inputs.{t.name}] time_axis, and [axes])"
            )


def _group_of(t: Tensor, axis: int, r: dict[str, Any], groups: _Groups, where: str) -> str | None:
    dim = t.dims[axis]
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
    groups = _Groups()
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
    resolved = _resolve_inputs(full.inputs, full, declared_in, doc, flags, groups, where, notes, step=False)
    _assign_groups(resolved, groups, where)
    inputs = [
        InputSig(
            t.name,
            t.dtype,
            t.dims,
            groups=tuple(_group_of(t, a, r, groups, where) for a in range(t.rank)),
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
            ba = _axis(d["batch_axis"], t.rank, where, f"outputs.{t.name}.batch_axis")
        else:
            ba = (
                0
                if t.rank >= 1
                and batch_group is not None
                and (g[0] == batch_group or not isinstance(t.dims[0], int))
                else None
            )
        if "time_axis" in d:
            ta = _axis(d["time_axis"], t.rank, where, f"outputs.{t.name}.time_axis")
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
    resolved = _resolve_inputs(
        others, step, declared, {"version": 1}, flags, _Groups(), where, notes, step=True, inherit=by_name
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
            time_axis[t.name] = _axis(cache_doc["time_axis"], t.rank, where, "cache.time_axis") or 0
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
