"""`tickformer serve ART --repo DIR`: a Triton model repository serving an artifact's streams.

Two forms of the same model (docs/serving.md):

    python       (default) Triton's Python backend: REPO/NAME/config.pbtxt, REPO/NAME/1/model.py
                 (imports serve/triton_model.py) and REPO/NAME/1/artifact/ (the artifact's
                 verified files, read again and verified by the model at load). Each stream's
                 state lives in the model's slot pool (slots.py), keyed by correlation id
                 (streams.py). Runs on the tritonserver that nvidia-pytriton ships (server.py).
    onnxruntime  Triton's onnxruntime backend with implicit state: REPO/NAME/1/model.onnx
                 (implicit.py: the artifact's batch-1 step graph scanned over the rows of a
                 dynamic batch, each row one sequence at its own position) and the
                 sequence_batching `state` entries that keep every sequence's caches (or ssm
                 state) and position in the server. For NVIDIA's tritonserver container (its
                 onnxruntime backend); not runnable with the bundled server.

Both use the sequence batcher with the "oldest" strategy (requests of distinct sequences batched
into one execution), max_sequence_idle_microseconds (an abandoned stream is forgotten and frees
its slot) and the START / END / READY / CORRID controls (the Python form; the onnxruntime form
needs none: Triton resets the state at START itself).

Capacity (`slots`): the python form's pool rows. `when_full="queue"`: max_candidate_sequences =
slots, so Triton holds a sequence beyond capacity in its backlog until a stream ends or idles
out; "refuse": max_candidate_sequences = 2 x slots, so the model answers a START beyond its
slots with a one-line "server full" error at once (streams.py).

Not real-time (file writing).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tickformer.artifact import format as fmt
from tickformer.artifact.reader import Artifact, open_artifact
from tickformer.durable import write_synced
from tickformer.errors import ConfigError, WriteError

from .pbtxt import Enum, render
from .slots import check_servable
from .triton_model import ARTIFACT_DIR

FORMS = ("python", "onnxruntime")
WHEN_FULL = ("queue", "refuse")

MODEL_PY = '''"""Triton Python-backend model written by `tickformer serve` (docs/serving.md): the streams of
the artifact in ./artifact, one slot of a preallocated pool per stream, keyed by correlation id.
Needs tickformer in the server's Python environment (make serve builds .venv-serve)."""

from tickformer.serve.triton_model import TritonPythonModel  # noqa: F401
'''


@dataclass(frozen=True)
class ServeConfig:
    """How the repository serves: model `name`, `slots` streams, the idle timeout `idle_s`
    (seconds), `when_full` ("queue" | "refuse"), Triton's `max_queue_delay_us` (how long the
    batcher waits to fill a batch; 0: it does not wait, the requests that arrive while the model
    executes form the next batch), `form` ("python" | "onnxruntime")."""

    name: str = "tickformer"
    slots: int = 64
    idle_s: float = 30.0
    when_full: str = "queue"
    max_queue_delay_us: int = 0
    form: str = "python"

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ConfigError(
                f"model name {self.name!r}: use letters, digits, '_' or '-', e.g. --name tickformer"
            )
        if self.slots < 1:
            raise ConfigError(f"--slots {self.slots}: serve at least 1 stream, e.g. --slots 64")
        if not self.idle_s > 0:
            raise ConfigError(
                f"--idle {self.idle_s}: the idle timeout is a positive number of seconds, e.g. --idle 30"
            )
        if self.when_full not in WHEN_FULL:
            raise ConfigError(f"--when-full {self.when_full!r}: one of {', '.join(WHEN_FULL)}")
        if self.max_queue_delay_us < 0:
            raise ConfigError(f"--queue-delay-us {self.max_queue_delay_us}: 0 or more microseconds")
        if self.form not in FORMS:
            raise ConfigError(f"--form {self.form!r}: one of {', '.join(FORMS)}")

    @property
    def max_candidate_sequences(self) -> int:
        return self.slots if self.when_full == "queue" else 2 * self.slots


def _type(dtype: str) -> Enum:
    return Enum({"float32": "TYPE_FP32", "int64": "TYPE_INT64", "bool": "TYPE_BOOL"}[dtype])


def io_spec(artifact: Artifact) -> tuple[dict[str, Any], dict[str, Any]]:
    """The per-request input and output of the python form: x [S, d_in] (tokens [S]) and
    y [S, d_out] (logits [S, V]); S = -1, the rows of a request (1, or a tick-batched group)."""
    cfg = artifact.config
    in_name, out_name = fmt.io_names(cfg)
    x_dims = [-1] if cfg.inputs == "tokens" else [-1, cfg.d_in]
    x = {
        "name": in_name,
        "data_type": _type("int64" if cfg.inputs == "tokens" else "float32"),
        "dims": x_dims,
    }
    y = {"name": out_name, "data_type": _type("float32"), "dims": [-1, fmt.out_width(cfg)]}
    return x, y


def _control(name: str, kind: str) -> dict[str, Any]:
    if kind == "CONTROL_SEQUENCE_CORRID":
        control: dict[str, Any] = {"kind": Enum(kind), "data_type": Enum("TYPE_UINT64")}
    else:
        control = {"kind": Enum(kind), "int32_false_true": [0, 1]}
    return {"name": name, "control": [control]}


CONTROLS = (
    ("START", "CONTROL_SEQUENCE_START"),
    ("END", "CONTROL_SEQUENCE_END"),
    ("READY", "CONTROL_SEQUENCE_READY"),
    ("CORRID", "CONTROL_SEQUENCE_CORRID"),
)


def python_config(artifact: Artifact, serve: ServeConfig) -> dict[str, Any]:
    """config.pbtxt of the python form, as pbtxt.render takes it."""
    x, y = io_spec(artifact)
    return {
        "name": serve.name,
        "backend": "python",
        "max_batch_size": serve.slots,
        "input": [x],
        "output": [y],
        "sequence_batching": {
            "max_sequence_idle_microseconds": round(serve.idle_s * 1e6),
            "control_input": [_control(name, kind) for name, kind in CONTROLS],
            "oldest": {
                "max_candidate_sequences": serve.max_candidate_sequences,
                "max_queue_delay_microseconds": serve.max_queue_delay_us,
            },
        },
        "instance_group": [{"count": 1, "kind": Enum("KIND_CPU")}],  # one pool: one instance
        "parameters": [
            {"key": "slots", "value": {"string_value": str(serve.slots)}},
            {"key": "idle_s", "value": {"string_value": repr(serve.idle_s)}},
        ],
    }


def _artifact_files(artifact: Artifact) -> dict[str, bytes]:
    """The artifact's verified files (read once at open), its manifest and signature, to copy."""
    files = {name: artifact.file_bytes(name) for name in artifact.manifest["files"]}
    assert artifact.manifest_bytes is not None  # open_artifact keeps them
    files[fmt.MANIFEST] = artifact.manifest_bytes
    sig = artifact.root / fmt.SIGNATURE
    if sig.is_file() and not sig.is_symlink():
        files[fmt.SIGNATURE] = sig.read_bytes()
    return files


def model_files(artifact: Artifact, serve: ServeConfig) -> dict[str, bytes]:
    """{path relative to REPO/NAME: bytes} of the model directory."""
    if serve.form == "onnxruntime":
        from .implicit import onnxruntime_files  # onnx: an optional dependency

        return onnxruntime_files(artifact, serve)
    files = {
        "config.pbtxt": (render(python_config(artifact, serve)) + "\n").encode(),
        "1/model.py": MODEL_PY.encode(),
    }
    for name, data in _artifact_files(artifact).items():
        files[f"1/{ARTIFACT_DIR}/{name}"] = data
    return files


def write_repository(
    art: str | os.PathLike[str],
    repo: str | os.PathLike[str],
    serve: ServeConfig,
    *,
    trust: str | os.PathLike[str] | None = None,
) -> Path:
    """Verify the artifact (the reader: hashes, format; its signature by the `trust` key when
    given) and write REPO/NAME for it, all or nothing (a previous REPO/NAME is replaced only once
    the new one is complete). Returns the model directory. Other models in REPO are left alone."""
    artifact = open_artifact(art, trust=trust)
    check_servable(artifact)
    files = model_files(artifact, serve)
    target = Path(repo) / serve.name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{serve.name}.tmp-", dir=target.parent))
        try:
            for rel, data in files.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                write_synced(tmp / rel, data)
            os.chmod(tmp, 0o755)
            if target.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{serve.name}.old-", dir=target.parent))
                os.replace(target, old / serve.name)
                os.replace(tmp, target)
                shutil.rmtree(old)
            else:
                os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except WriteError:
        raise
    except OSError as exc:
        raise WriteError(
            f"{target}: cannot write the model repository ({exc.strerror}); check the path"
        ) from exc
    return target
