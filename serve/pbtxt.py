"""Protocol-buffer text format, written: Triton's config.pbtxt from nested Python values.

Triton reads a model's config.pbtxt as the text format of its ModelConfig message
(model_config.proto). We write it from plain values so that writing a repository needs no
protobuf; the tests parse every file we write with protobuf's own text_format into tritonclient's
model_config_pb2.ModelConfig, which refuses any field, enum or type the schema does not have.

    dict            a message: `key: value`, `key { ... }`, or `key [ {...}, {...} ]` for a list
                    of messages
    list            a repeated scalar: `key: [ 1, 2 ]`
    Enum("NAME")    an enum value, written bare
    str / bool / int / float   quoted and escaped / true|false / as is

Not real-time (file writing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Enum:
    """An enum value (written bare: TYPE_FP32, KIND_CPU, CONTROL_SEQUENCE_START)."""

    name: str


def _scalar(value: Any) -> str:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a double-quoted string with C-style escapes: text format reads it
    raise TypeError(f"cannot write {type(value).__name__} in a config.pbtxt")


def render(message: dict[str, Any], indent: int = 0) -> str:
    """The text format of `message` (module docstring), one field per line."""
    pad, lines = "  " * indent, []
    for key, value in message.items():
        if isinstance(value, dict):
            lines += [f"{pad}{key} {{", render(value, indent + 1), f"{pad}}}"]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{pad}{key} [")
            for j, item in enumerate(value):
                lines += [
                    f"{pad}  {{",
                    render(item, indent + 2),
                    f"{pad}  }}" + ("," if j < len(value) - 1 else ""),
                ]
            lines.append(f"{pad}]")
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: [ {', '.join(_scalar(v) for v in value)} ]")
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return "\n".join(line for line in lines if line)
