"""Backend registry: names -> modules, imported lazily (only the backend you ask for is loaded).

Each backend module defines `BACKENDS: dict[str, type[Backend]]`, one class per engine for both
block kinds (runtime/backends/base.py). A missing module, or one whose import fails (engine not
installed), raises `BackendUnavailable` naming the extra to install; so does a backend that does
not run the artifact's block kind (`Backend.refuses`: the reason, and the backends that do).
Polygraphy-style: one module per backend, the same inner shape.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tickformer.errors import BackendUnavailable

if TYPE_CHECKING:
    from .base import Backend

# name -> (module, what to install if it cannot be imported)
REGISTRY: dict[str, tuple[str, str]] = {
    "numpy": ("tickformer.runtime.backends.numpy", "nothing (numpy is a core dependency)"),
    "numpy-growing": ("tickformer.runtime.backends.numpy", "nothing (numpy is a core dependency)"),
    "ort": ("tickformer.runtime.backends.ort", "pip install 'tickformer[cpu]' (onnxruntime)"),
    "ort-cuda": (
        "tickformer.runtime.backends.ort_gpu",
        "pip install 'tickformer[gpu]' (onnxruntime-gpu) on a machine with an NVIDIA GPU",
    ),
    "ort-trt": (
        "tickformer.runtime.backends.ort_gpu",
        "pip install 'tickformer[gpu]' (onnxruntime-gpu with TensorRT) on a machine with an NVIDIA GPU",
    ),
    "tensorrt": (
        "tickformer.runtime.backends.tensorrt",
        "pip install 'tickformer[tensorrt]' (tensorrt, cuda-python) on a machine with an NVIDIA GPU",
    ),
    "c": ("tickformer.runtime.backends.c", "a C compiler on PATH (apt-get install gcc); see docs/codegen.md"),
}


def backend_class(name: str, block: str = "attention") -> "type[Backend]":
    """The class registered as `name`, for artifacts of block kind `block` ("attention" | "ssm").
    Not real-time safe (imports)."""
    if name not in REGISTRY:
        raise BackendUnavailable(f"unknown backend {name!r}; choose one of {sorted(REGISTRY)}")
    module_name, extra = REGISTRY[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise BackendUnavailable(
                f"backend {name!r} is not part of this build ({module_name} is missing)"
            ) from None
        raise BackendUnavailable(
            f"backend {name!r} needs {exc.name!r}, which is not installed: {extra}"
        ) from None
    except ImportError as exc:
        raise BackendUnavailable(f"backend {name!r} cannot be imported ({exc}): {extra}") from None
    backends = getattr(module, "BACKENDS", {})
    if name not in backends:
        raise BackendUnavailable(
            f"backend {name!r}: {module_name} does not provide it (BACKENDS has {sorted(backends)})"
        )
    cls = backends[name]
    if block in cls.refuses:  # the reason names the backend to use instead
        raise BackendUnavailable(f"backend {name!r} does not run {block} artifacts: {cls.refuses[block]}")
    return cls
