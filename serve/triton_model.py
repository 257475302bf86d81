"""The Triton Python-backend model of `tickformer serve`: Triton's side of streams.StreamTable.

The repository's `1/model.py` imports `TritonPythonModel` from here, so the server's Python (the
backend stub's, .venv-serve) must have tickformer installed. Triton's Python backend API
(`triton_python_backend_utils`, imported when the stub loads the model): `initialize(args)` gets
the model config as JSON, `execute(requests)` returns one InferenceResponse per request, an
error as a TritonError in it; `finalize()` at unload.

Inputs of a request (config.pbtxt, repository.py): x [1, S, d_in] float32 (tokens [1, S] int64),
the sequence batcher's controls START, END, READY [1, 1] int32 and CORRID [1, 1] uint64; output
y [1, S, d_out] (logits [1, S, V]). One instance (instance_group count 1): the slot pool lives in
this process, so a second instance would see none of the first one's streams.

Not real-time (a server).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.artifact.reader import open_artifact

from .slots import SlotPool
from .streams import Request, StreamTable

ARTIFACT_DIR = "artifact"  # beside model.py in the version directory


def _flag(pb_utils: Any, request: Any, name: str) -> bool:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return tensor is not None and bool(tensor.as_numpy().reshape(-1)[0])


def _corrid(pb_utils: Any, request: Any) -> int:
    tensor = pb_utils.get_input_tensor_by_name(request, "CORRID")
    if tensor is not None:
        return int(tensor.as_numpy().reshape(-1)[0])
    return int(request.correlation_id())


class TritonPythonModel:
    """Triton's Python backend calls these (module docstring)."""

    def initialize(self, args: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils  # the stub provides it

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        root = Path(args["model_repository"]) / args["model_version"] / ARTIFACT_DIR
        artifact = open_artifact(root)  # verified: every hash (and the manifest's self-hash)
        pool = SlotPool(artifact, int(params["slots"]))
        self.table = StreamTable(pool, idle_s=float(params["idle_s"]))
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]

    def execute(self, requests: list[Any]) -> list[Any]:
        pb = self.pb
        parsed = [
            Request(
                corrid=_corrid(pb, r),
                x=pb.get_input_tensor_by_name(r, self.input_name).as_numpy()[0],  # [S, d_in] | [S]
                start=_flag(pb, r, "START"),
                end=_flag(pb, r, "END"),
                ready=_flag(pb, r, "READY"),
            )
            for r in requests
        ]
        responses = []
        for result in self.table.execute(parsed):
            if result.error is not None:
                responses.append(pb.InferenceResponse(output_tensors=[], error=pb.TritonError(result.error)))
            else:
                assert result.y is not None
                y = np.ascontiguousarray(result.y[None], dtype=np.float32)  # [1, S, out]
                responses.append(pb.InferenceResponse(output_tensors=[pb.Tensor(self.output_name, y)]))
        return responses

    def finalize(self) -> None:
        self.table.held.clear()
