"""CUDA and TensorRT Python modules, imported lazily, for the GPU backends and the engine builder.

Every GPU code path goes through these functions, so a machine without TensorRT, cuda-python or
a GPU gets one `BackendUnavailable` line naming what to install, and nothing imports a GPU
module at package import time. Sources (facts only): cuda-python `cuda.bindings.runtime`
(cudaGetDeviceCount, cudaGetDevice, cudaGetDeviceProperties); TensorRT Python API (Dims).
Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tickformer.errors import BackendError, BackendUnavailable

INSTALL_HINT = "pip install 'tickformer[tensorrt]' (tensorrt, cuda-python) on a machine with an NVIDIA GPU"


@dataclass(frozen=True)
class DeviceInfo:
    """Where an engine is built or loaded: TensorRT version, GPU name, compute capability."""

    tensorrt: str
    gpu: str
    compute_capability: tuple[int, int]


def require_tensorrt() -> ModuleType:
    """The `tensorrt` module, or BackendUnavailable naming what is missing.

    Note: the tensorrt-stubs package installs a stub-only `tensorrt/` folder, which Python
    imports as an empty namespace package; that is not TensorRT, and is reported as missing."""
    try:
        import tensorrt as trt
    except ImportError:
        raise BackendUnavailable(f"TensorRT is not installed: {INSTALL_HINT}") from None
    if getattr(trt, "__file__", None) is None or not hasattr(trt, "Builder"):
        raise BackendUnavailable(f"TensorRT is not installed (only type stubs found): {INSTALL_HINT}")
    return trt


def require_cudart() -> ModuleType:
    """cuda-python's runtime bindings (`cuda.bindings.runtime`, or `cuda.cudart` before 12.6)."""
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        try:
            from cuda import cudart  # type: ignore[no-redef]
        except ImportError:
            raise BackendUnavailable(f"cuda-python is not installed: {INSTALL_HINT}") from None
    return cudart


def cuda_check(result: Any, what: str) -> Any:
    """Unpack a cuda-python call result (err, *values); raise BackendError naming the call."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise BackendError(f"CUDA {what} failed: {getattr(err, 'name', err)}")
    return values[0] if len(values) == 1 else tuple(values)


def device_info(trt: ModuleType, cudart: ModuleType) -> DeviceInfo:
    """TensorRT version and the current GPU; BackendUnavailable when there is no GPU."""
    err, count = cudart.cudaGetDeviceCount()
    if int(err) != 0 or count < 1:
        raise BackendUnavailable(
            f"no CUDA GPU is visible (cudaGetDeviceCount: {getattr(err, 'name', err)}, {count} devices)"
        )
    device = cuda_check(cudart.cudaGetDevice(), "cudaGetDevice")
    props = cuda_check(cudart.cudaGetDeviceProperties(device), "cudaGetDeviceProperties")
    name = props.name.decode("utf-8", "replace") if isinstance(props.name, bytes) else str(props.name)
    return DeviceInfo(
        tensorrt=str(trt.__version__),
        gpu=name.rstrip("\x00").strip(),
        compute_capability=(int(props.major), int(props.minor)),
    )


def dims_tuple(dims: Any) -> tuple[int, ...]:
    """A TensorRT Dims as a tuple of ints (Dims supports len() and indexing)."""
    return tuple(int(dims[j]) for j in range(len(dims)))
