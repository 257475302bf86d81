"""A property's counterexample kept: the arrays of the shrunk example and a 'meta' JSON string
(the property and the message) in DIR/<property>.npz, written atomically (tickformer.durable).
The runner saves a failing or crashing example here; a plan's sweep (foreign_plan) saves its
own. Not real-time code.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from tickformer.durable import atomic_write

from .checks import Arrays


def save_counterexample(out_dir: Path, name: str, message: str, arrays: Arrays) -> str:
    """DIR/<name>.npz with the arrays and a 'meta' JSON string; written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.npz"
    payload = {k.replace("/", "_"): np.asarray(v) for k, v in arrays.items()}
    payload["meta"] = np.array(json.dumps({"property": name, "message": message}))
    buffer = io.BytesIO()
    np.savez(buffer, **payload)  # type: ignore[arg-type]
    atomic_write(path, buffer.getvalue())
    return str(path)
