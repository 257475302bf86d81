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

from tickformer.errors import BackendError, BackendUnavailable, TickformerError

if TYPE_CHECKING:
    from tickformer.model.config import Config

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


def backend_class(name: str, config: "Config | None" = None) -> "type[Backend]":
    """The class registered as `name`; with the artifact's `config`, refused in one line where it
    does not run that artifact: its block kind (`Backend.refuses`, BackendUnavailable with the
    reason) or a windowed artifact without a ring cache (BackendError naming the backends with
    one). Not real-time safe (imports)."""
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
    if config is None:
        return cls
    if config.block in cls.refuses:  # the reason names the backend to use instead
        raise BackendUnavailable(
            f"backend {name!r} does not run {config.block} artifacts: {cls.refuses[config.block]}"
        )
    if config.window is not None and not cls.ring_cache:
        raise BackendError(
            f"backend {name!r} has no ring KV cache, which a windowed artifact (window {config.window}) needs, "
            f"so it refuses it; use a backend that has one: {', '.join(ring_cache_backends())}"
        )
    return cls


def ring_cache_backends() -> list[str]:
    """The registered backends whose class runs windowed artifacts (`Backend.ring_cache`), for
    messages. Imports each backend module (their engines load lazily); a module that cannot be
    imported here is left out. Not real-time."""
    names = []
    for name in REGISTRY:
        try:
            if backend_class(name).ring_cache:
                names.append(name)
        except TickformerError:
            continue
    return names
