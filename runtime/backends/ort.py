"""ONNX Runtime (CPU) backend: step.onnx over a host-resident static KV cache.

Session options (`session_options`) are chosen for latency and determinism: one intra-op thread
(no thread-pool wake-ups; results independent of scheduling), one inter-op thread, sequential
execution, full graph optimisation (constant folding of the transposed weights, LayerNorm and
MatMul+Add fusions), memory arena and memory patterns on (static shapes: the allocation plan is
reused every run). Binding strategy, chosen by measurement (docs/export_runtime.md):
`binding="iobinding"` (default) binds every input and output to the preallocated host buffers
once, so a step copies nothing and allocates nothing on the Python side (measured ~10% faster
than "run" for the control preset); `binding="run"` feeds the buffers to `InferenceSession.run`
and copies its three fresh outputs into the staging buffers.

Real-time: "iobinding": zero net Python blocks per step after the first. "run": the output
arrays are freed before `step` returns, but ORT's binding keeps a bounded few hundred small
blocks over the first ~30,000 calls (tests/runtime/test_allocation.py).
Source: ONNX Runtime Python API (onnxruntime.ai/docs/api/python/api_summary.html),
performance tuning (onnxruntime.ai/docs/performance/tune-performance/threading.html).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnxruntime as ort

from tickformer.errors import BackendError, ConfigError
from tickformer.export.graphs import io_names
from tickformer.runtime.artifact import Artifact

from .base import Backend

BINDINGS = ("run", "iobinding")


def session_options(threads: int = 1, *, optimization: str = "all") -> ort.SessionOptions:
    """Latency/determinism options shared by the CPU and GPU ORT backends. Not real-time."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ConfigError(f"threads={threads!r} must be a positive integer (1 = deterministic, lowest jitter)")
    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    if optimization not in levels:
        raise ConfigError(f"optimization={optimization!r} is not one of {sorted(levels)}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = levels[optimization]
    opts.enable_cpu_mem_arena = True
    opts.enable_mem_pattern = True
    opts.use_deterministic_compute = True
    opts.log_severity_level = 3  # errors only
    return opts


class OrtBackend(Backend):
    """ONNX Runtime with the CPU execution provider."""

    name = "ort"
    static_cache = True
    providers: Sequence[Any] = ("CPUExecutionProvider",)

    def __init__(self, artifact: Artifact, *, threads: int = 1, binding: str = "iobinding", optimization: str = "all") -> None:
        super().__init__(artifact)
        if binding not in BINDINGS:
            raise ConfigError(f"binding={binding!r} is not one of {BINDINGS}")
        self.binding = binding
        self._opts = session_options(threads, optimization=optimization)
        cfg, batch = self.config, artifact.batch
        self._step = self._session("step")
        self._full = self._session("model") if cfg.arch == "decoder" else None
        self._encoder = self._session("encoder") if cfg.arch == "encoder-decoder" else None
        in_name, out_name = io_names(cfg)
        x_shape, x_dtype = ((batch, 1), np.int64) if cfg.inputs == "tokens" else ((batch, 1, cfg.d_in), np.float32)
        self._bufs: dict[str, np.ndarray] = {
            in_name: np.zeros(x_shape, dtype=x_dtype),
            "pos": np.zeros(1, dtype=np.int64),
            "k_cache": np.zeros(self.cache_shape, dtype=np.float32),  # [L, B, H, N, dh]
            "v_cache": np.zeros(self.cache_shape, dtype=np.float32),
        }
        if cfg.arch == "encoder-decoder":
            self._bufs["cross_k"] = np.zeros(self.cache_shape, dtype=np.float32)
            self._bufs["cross_v"] = np.zeros(self.cache_shape, dtype=np.float32)
            self._bufs["src_valid"] = np.zeros((batch, cfg.max_len), dtype=np.bool_)
        self._outs: dict[str, np.ndarray] = {
            out_name: np.zeros(self.step_output_shape, dtype=np.float32),  # [B, 1, d_out | V]
            "k_new": np.zeros(self.row_shape, dtype=np.float32),  # [L, B, H, 1, dh]
            "v_new": np.zeros(self.row_shape, dtype=np.float32),
        }
        self._x = self._bufs[in_name]
        self._pos = self._bufs["pos"]
        self._y = self._outs[out_name]
        self._out_names = list(self._outs)
        self._out_list = list(self._outs.values())
        self._io = self._bind() if binding == "iobinding" else None

    def _session(self, graph: str) -> ort.InferenceSession:
        path = self.artifact.graph_path(graph)
        try:
            return ort.InferenceSession(str(path), sess_options=self._opts, providers=list(self.providers))
        except Exception as exc:  # ORT raises its own pybind exception types
            raise BackendError(f"onnxruntime cannot load {path}: {exc}") from exc

    def _bind(self) -> ort.IOBinding:
        """Bind every step input and output to the preallocated host buffers, once."""
        io = self._step.io_binding()
        for name, arr in self._bufs.items():
            io.bind_input(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        for name, arr in self._outs.items():
            io.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        return io

    # --- real-time path ------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time safe after warm-up (see module docstring). Never writes the cache."""
        np.copyto(self._x, x)
        self._pos[0] = pos
        try:
            if self._io is not None:
                self._step.run_with_iobinding(self._io)
            else:
                results = self._step.run(self._out_names, self._bufs)
                for dst, src in zip(self._out_list, results):
                    np.copyto(dst, src)
        except Exception as exc:
            raise BackendError(f"onnxruntime step failed at position {pos}: {exc}") from exc
        return self._y

    def commit(self, pos: int) -> None:
        """Real-time safe: two row copies into the host cache."""
        self._bufs["k_cache"][:, :, :, pos] = self._outs["k_new"][:, :, :, 0]
        self._bufs["v_cache"][:, :, :, pos] = self._outs["v_new"][:, :, :, 0]

    # --- not real-time -------------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        if self._full is None:
            raise BackendError("this artifact has no full-pass graph (encoder-decoder); use generate()")
        in_name = io_names(self.config)[0]
        try:
            return self._full.run(None, {in_name: x})[0]
        except Exception as exc:
            raise BackendError(f"onnxruntime full pass failed: {exc}") from exc

    def set_source(self, src: np.ndarray, src_valid: np.ndarray) -> None:
        if self._encoder is None:
            raise NotImplementedError("decoder-only artifacts have no source")
        try:
            cross_k, cross_v = self._encoder.run(["cross_k", "cross_v"], {"src": src, "src_valid": src_valid})
        except Exception as exc:
            raise BackendError(f"onnxruntime encoder failed: {exc}") from exc
        np.copyto(self._bufs["cross_k"], cross_k)  # in place: IOBinding keeps pointing at these buffers
        np.copyto(self._bufs["cross_v"], cross_v)
        np.copyto(self._bufs["src_valid"], src_valid)

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        return self._bufs["k_cache"], self._bufs["v_cache"]

    def close(self) -> None:
        self._io = None
        self._step = self._full = self._encoder = None  # type: ignore[assignment]


BACKENDS = {"ort": OrtBackend}
