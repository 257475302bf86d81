"""What the user declares about a bare ONNX model: the property spec file (its schema SPEC_SCHEMA,
JSON Schema 2020-12, published in docs/verify.md; `load_spec` reads TOML or JSON by suffix and
`check_spec` checks a document against the schema by hand, no dependency, with messages that name
the key and the fix) and the command-line flags (`Flags`). The names a spec uses are checked
against the graph later, when the signature is resolved (inference.py).
Not real-time code.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tickformer.errors import ConfigError, FileRefused
from tickformer.safe_files import read_path
from tickformer.sealed import loads
from tickformer.validation import is_int

SPEC_VERSION = 1
MAX_SPEC_BYTES = 1 << 20
ROLES = ("signal", "ids", "mask", "position", "state")
KINDS = ("kv", "state")  # a cache that grows along a time axis; a fixed-size recurrent state
PATTERNS = ("any", "right", "left")
PREFILLS = ("full", "empty")
SPANS = ("current", "total")

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
    "state_bounded",
    "state_reset",
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
    "a [cache] section without a step graph (cache.step or --step) describes the model as its own step graph",
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
                "batch_axis": {"type": "integer"},
                "kind": {"enum": list(KINDS)},
                "state_bound": {"type": "number", "exclusiveMinimum": 0},
                "pairs": {"type": "object", "additionalProperties": {"type": "string"}},
                "inputs": {"type": "object", "additionalProperties": _STEP_INPUT},
            },
        },
    },
}


# ----------------------------------------------------------------------------- checks


def _spec_error(where: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{where}: {key}: {problem}")


def is_number(v: Any) -> bool:
    """A JSON/TOML number (int or float, not bool)."""
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
        and all(is_number(v) for v in value)
        or isinstance(value, list)
        and value
        and all(isinstance(b, list) and len(b) == 2 and all(is_number(v) for v in b) for b in value)
    ):
        boxes = [value] if is_number(value[0]) else value
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
        if key in doc and not (is_number(doc[key]) and math.isfinite(doc[key]) and doc[key] > 0):
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
                    if b is not None and not (is_number(b) and math.isfinite(b) and b > 0):
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
        for key in ("time_axis", "batch_axis"):
            if key in cache and not is_int(cache[key]):
                raise _spec_error(where, f"cache.{key}", f"{cache[key]!r} must be an axis index")
        if "kind" in cache and cache["kind"] not in KINDS:
            raise _spec_error(
                where,
                "cache.kind",
                f"{cache['kind']!r} is not one of {list(KINDS)} (kv: a cache that grows; state: a fixed-size state)",
            )
        b = cache.get("state_bound")
        if b is not None and not (is_number(b) and math.isfinite(b) and b > 0):
            raise _spec_error(where, "cache.state_bound", f"{b!r} must be a positive finite number")
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
    return name in FOREIGN_PROPERTIES or re.fullmatch(PER_MASK_PATTERN[1:-1], name) is not None


def load_spec(path: str | Path) -> tuple[dict[str, Any], Path]:
    """(checked spec document, the folder relative paths in it are resolved against). TOML for
    .toml, JSON (strict: tickformer.sealed.loads) for .json; read once through safe_files."""
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
        try:
            doc = loads(data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{p}: not valid JSON ({str(exc)[:200]}); the spec must be strict JSON (docs/verify.md has an example)"
            ) from None
    return check_spec(doc, str(p)), p.parent


# ----------------------------------------------------------------------------- the command line


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
    state_bound: float | None = None
    require_domain: bool = (
        True  # False (inspect, check): a missing domain or vocabulary is noted, not an error
    )
