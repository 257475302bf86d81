"""ONNX Runtime on the GPU: `ort-cuda` (CUDA execution provider) and `ort-trt` (TensorRT EP).

The step graph runs with device-side IOBinding: every step input and output is a CUDA `OrtValue`
allocated once (`OrtValue.ortvalue_from_shape_and_type(..., "cuda", device)`) and bound once
(`bind_ortvalue_input` / `bind_ortvalue_output`), the KV cache included, so the cache never
leaves the GPU. A step copies x and pos into their device values in place (`update_inplace`,
same address), runs `run_with_iobinding`, and copies y back. With `cuda_graph=True` the provider
captures the step into a CUDA graph and replays it (CUDA EP: provider option
`enable_cuda_graph`; TensorRT EP: `trt_cuda_graph_enable`), which requires exactly this: fixed
device addresses for every input and output, and every node placed on the GPU provider. If the
session cannot be created with graph capture (e.g. ORT leaves a shape node on the CPU), the
backend builds it without, sets `self.cuda_graph = False` and `self.cuda_graph_reason`, and warns.

`commit(pos)` writes k_new/v_new into cache row pos: on the device with one strided
`cudaMemcpy2D` per cache when cuda-python is installed (`self.commit_mode == "device"`), else
through a host mirror of the cache and one fixed-size `update_inplace` (`"host-mirror"`: the same
cost at every position, but a full-cache copy). Either way the step itself never writes the cache.

`ort-trt` keeps TensorRT's engine cache and timing cache inside the artifact (ART/ort-trt-cache/,
options trt_engine_cache_enable/_path, trt_timing_cache_enable/_path); ONNX Runtime names the
cached engines by a hash of the graph and checks them itself -- they are not manifest-hashed
files (the `tensorrt` backend's engines are). Full-pass profile: T pinned to 1..max_len via
trt_profile_min/opt/max_shapes. TF32: the CUDA EP gets use_tf32=0 (fp32 means fp32); the
TensorRT EP exposes no TF32 switch in the options used here, so `ort-trt` fp32 results are
compared with the TF32-level bound (same unit roundoff as fp16, 2^-11) in the GPU tests.

Real-time: after the constructor's warm-up runs, `step` allocates one small array per call (the
y copy from `OrtValue.numpy()`), `commit` none on the device path. Not real-time: everything else.
Sources (facts only): ONNX Runtime Python API (IOBinding, OrtValue), "CUDA Execution Provider"
and "TensorRT Execution Provider" docs (provider options, CUDA graphs, EP caches).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.errors import BackendError, BackendUnavailable, ConfigError
from tickformer.export.graphs import io_names
from tickformer.runtime.artifact import Artifact

from .base import Backend

ORT_TRT_CACHE = "ort-trt-cache"
_DEVICE = "cuda"


def _ort() -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        raise BackendUnavailable("onnxruntime is not installed: pip install 'tickformer[gpu]' (onnxruntime-gpu)") from None
    return ort


class OrtCudaBackend(Backend):
    """ONNX Runtime, CUDA execution provider, device-side IOBinding, optional CUDA graph."""

    name = "ort-cuda"
    static_cache = True
    provider = "CUDAExecutionProvider"

    def __init__(self, artifact: Artifact, *, device_id: int = 0, cuda_graph: bool = True,
                 precision: str | None = None, workspace_mib: int = 1024) -> None:
        super().__init__(artifact)
        if not isinstance(device_id, int) or device_id < 0:
            raise ConfigError(f"device_id={device_id!r} must be a non-negative integer")
        if precision not in (None, "fp32", "fp16"):
            raise ConfigError(f"precision={precision!r} is not one of None, 'fp32', 'fp16'")
        ort = _ort()
        available = ort.get_available_providers()
        if self.provider not in available:
            raise BackendUnavailable(
                f"backend {self.name!r} needs onnxruntime's {self.provider}, which this onnxruntime does not have "
                f"(available: {available}); install onnxruntime-gpu on a machine with an NVIDIA GPU: "
                "pip install 'tickformer[gpu]'"
            )
        self._ort = ort
        self.device_id, self.precision, self.workspace_mib = device_id, precision, workspace_mib
        from .ort import session_options

        self._opts = session_options(1)
        cfg, batch = self.config, artifact.batch
        self._in_name, self._out_name = io_names(cfg)
        self.cuda_graph, self.cuda_graph_reason = False, "disabled by option"
        self._step = self._step_session(cuda_graph)
        self._aux = self._session("model" if cfg.arch == "decoder" else "encoder", cuda_graph=False)
        # Host staging and device values, allocated once.
        x_shape, x_dtype = ((batch, 1), np.int64) if cfg.inputs == "tokens" else ((batch, 1, cfg.d_in), np.float32)
        self._x = np.zeros(x_shape, dtype=x_dtype)
        self._pos = np.zeros(1, dtype=np.int64)
        self._y = np.zeros(self.step_output_shape, dtype=np.float32)  # [B, 1, d_out | V]
        shapes: dict[str, tuple[tuple[int, ...], Any]] = {
            self._in_name: (x_shape, x_dtype), "pos": ((1,), np.int64),
            "k_cache": (self.cache_shape, np.float32), "v_cache": (self.cache_shape, np.float32),
        }
        if cfg.arch == "encoder-decoder":
            shapes.update({"cross_k": (self.cache_shape, np.float32), "cross_v": (self.cache_shape, np.float32),
                           "src_valid": ((batch, cfg.max_len), np.bool_)})
        outs = {self._out_name: (self.step_output_shape, np.float32), "k_new": (self.row_shape, np.float32),
                "v_new": (self.row_shape, np.float32)}
        self._vals = {name: self._device_zeros(shape, dtype) for name, (shape, dtype) in {**shapes, **outs}.items()}
        self._io = self._step.io_binding()
        for name in shapes:
            self._io.bind_ortvalue_input(name, self._vals[name])
        for name in outs:
            self._io.bind_ortvalue_output(name, self._vals[name])
        self._cudart = self._try_cudart()
        self.commit_mode = "device" if self._cudart is not None else "host-mirror"
        self._mirror = None if self._cudart is not None else (np.zeros(self.cache_shape, np.float32), np.zeros(self.cache_shape, np.float32))
        for _ in range(3):  # warm-up; with cuda_graph the provider captures during these runs
            self._run_step()

    # --- construction (not real-time) -----------------------------------------------------------
    def _provider_options(self, cuda_graph: bool, graph: str) -> list[Any]:
        # use_tf32 = 0: fp32 MatMul/Conv stay fp32 (TF32 rounds inputs to 10 mantissa bits, u = 2^-11).
        cuda = {"device_id": str(self.device_id), "enable_cuda_graph": "1" if cuda_graph else "0", "use_tf32": "0"}
        return [(self.provider, cuda)]

    def _session(self, graph: str, *, cuda_graph: bool) -> Any:
        path = self.artifact.graph_path(graph)
        try:
            sess = self._ort.InferenceSession(str(path), sess_options=self._opts,
                                              providers=self._provider_options(cuda_graph, graph))
        except Exception as exc:  # ORT raises its own pybind exception types
            text = str(exc)
            if "CUDA" in text and ("no CUDA-capable device" in text or "cudaErrorNoDevice" in text or "driver" in text.lower()):
                raise BackendUnavailable(f"backend {self.name!r}: no usable CUDA GPU ({text.splitlines()[0]})") from None
            raise BackendError(f"onnxruntime cannot load {path} on {self.provider}: {text}") from exc
        if sess.get_providers()[0] != self.provider:
            raise BackendUnavailable(f"backend {self.name!r}: onnxruntime fell back to {sess.get_providers()} "
                                     f"(is a GPU visible and CUDA installed?)")
        return sess

    def _step_session(self, cuda_graph: bool) -> Any:
        if not cuda_graph:
            return self._session("step", cuda_graph=False)
        try:
            sess = self._session("step", cuda_graph=True)
            self.cuda_graph, self.cuda_graph_reason = True, "captured by the provider during warm-up"
            return sess
        except (BackendError, BackendUnavailable) as exc:
            if isinstance(exc, BackendUnavailable):
                raise
            self.cuda_graph_reason = f"CUDA-graph capture unavailable ({str(exc).splitlines()[0]}); using plain runs"
            warnings.warn(f"{self.name} backend: {self.cuda_graph_reason}", RuntimeWarning, stacklevel=3)
            return self._session("step", cuda_graph=False)

    def _device_zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self._ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, dtype=dtype), _DEVICE, self.device_id)

    @staticmethod
    def _try_cudart() -> Any:
        try:
            from tickformer.export.engine_build import require_cudart

            return require_cudart()
        except BackendUnavailable:
            return None

    def _run_step(self) -> None:
        self._step.run_with_iobinding(self._io)

    # --- real-time path -------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time after warm-up (module docstring). Never writes the cache."""
        np.copyto(self._x, x)
        self._pos[0] = pos
        try:
            self._vals[self._in_name].update_inplace(self._x)  # same device address: graph replay sees it
            self._vals["pos"].update_inplace(self._pos)
            self._run_step()
            np.copyto(self._y, self._vals[self._out_name].numpy())
        except Exception as exc:
            raise BackendError(f"{self.name} step failed at position {pos}: {exc}") from exc
        return self._y

    def commit(self, pos: int) -> None:
        """Device path: two strided device copies. Host-mirror path: a row write and a
        fixed-size upload per cache."""
        if self._cudart is not None:
            from tickformer.export.engine_build import cuda_check

            c = self._cudart
            dh = self.cache_shape[-1]
            row = dh * 4
            rows = int(np.prod(self.cache_shape[:3]))
            for new, cache in (("k_new", "k_cache"), ("v_new", "v_cache")):
                dst = self._vals[cache].data_ptr() + pos * row
                cuda_check(c.cudaMemcpy2D(dst, self.artifact.max_len * row, self._vals[new].data_ptr(), row, row, rows,
                                          c.cudaMemcpyKind.cudaMemcpyDeviceToDevice), "cudaMemcpy2D commit")
            return
        assert self._mirror is not None
        for (new, cache), host in zip((("k_new", "k_cache"), ("v_new", "v_cache")), self._mirror):
            host[:, :, :, pos] = self._vals[new].numpy()[:, :, :, 0]
            self._vals[cache].update_inplace(host)

    # --- not real-time --------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        if self.config.arch != "decoder":
            raise BackendError("this artifact has no full-pass graph (encoder-decoder); use generate()")
        try:
            return self._aux.run(None, {self._in_name: x})[0]
        except Exception as exc:
            raise BackendError(f"{self.name} full pass failed: {exc}") from exc

    def set_source(self, src: np.ndarray, src_valid: np.ndarray) -> None:
        if self.config.arch != "encoder-decoder":
            raise NotImplementedError("decoder-only artifacts have no source")
        try:
            cross_k, cross_v = self._aux.run(["cross_k", "cross_v"], {"src": src, "src_valid": src_valid})
        except Exception as exc:
            raise BackendError(f"{self.name} encoder failed: {exc}") from exc
        self._vals["cross_k"].update_inplace(np.ascontiguousarray(cross_k, dtype=np.float32))
        self._vals["cross_v"].update_inplace(np.ascontiguousarray(cross_v, dtype=np.float32))
        self._vals["src_valid"].update_inplace(np.ascontiguousarray(src_valid, dtype=np.bool_))

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        return self._vals["k_cache"].numpy(), self._vals["v_cache"].numpy()

    def close(self) -> None:
        self._io = None
        self._vals = {}
        self._step = self._aux = None


class OrtTensorRTBackend(OrtCudaBackend):
    """ONNX Runtime, TensorRT execution provider (CUDA EP for anything TensorRT does not take),
    engine and timing caches in the artifact."""

    name = "ort-trt"
    provider = "TensorrtExecutionProvider"

    def _provider_options(self, cuda_graph: bool, graph: str) -> list[Any]:
        cache_dir = Path(self.artifact.root) / ORT_TRT_CACHE
        cache_dir.mkdir(exist_ok=True)
        trt: dict[str, Any] = {
            "device_id": str(self.device_id),
            "trt_max_workspace_size": str(self.workspace_mib << 20),
            "trt_fp16_enable": "True" if self.precision == "fp16" else "False",
            "trt_engine_cache_enable": "True",
            "trt_engine_cache_path": str(cache_dir),
            "trt_timing_cache_enable": "True",
            "trt_timing_cache_path": str(cache_dir),
            "trt_cuda_graph_enable": "True" if cuda_graph else "False",
        }
        spec = self.artifact.graph_spec(graph)
        dynamic = [i for i in spec["inputs"] if any(not isinstance(d, int) for d in i["shape"])]
        if dynamic:  # the full pass: T in 1..max_len, optimised at max_len
            def shapes(t: int) -> str:
                return ",".join(f"{i['name']}:" + "x".join(str(t if d == "T" else d) for d in i["shape"]) for i in dynamic)
            trt.update({"trt_profile_min_shapes": shapes(1), "trt_profile_opt_shapes": shapes(self.artifact.max_len),
                        "trt_profile_max_shapes": shapes(self.artifact.max_len)})
        cuda = {"device_id": str(self.device_id), "use_tf32": "0"}
        return [(self.provider, trt), ("CUDAExecutionProvider", cuda)]


BACKENDS = {"ort-cuda": OrtCudaBackend, "ort-trt": OrtTensorRTBackend}
