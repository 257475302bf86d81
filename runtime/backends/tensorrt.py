"""TensorRT backend: the artifact's engines on one GPU, the state resident on the device; one
class for both block kinds (base.py), the state of the kind in a device store shared with the
ONNX Runtime GPU backends (device.py: DeviceCache, DeviceState).

Everything is allocated once, in the constructor: the KV cache stacked -- K transposed
[L, B, H, dh, N] (the step graph's k_cache.i layout), V [L, B, H, N, dh] -- and the staged rows
stacked [L, B, H, 1, dh] as one device buffer each (`cudaMalloc`, zeroed once; the
cross K/V of an encoder-decoder likewise), one device buffer per other engine I/O tensor, pinned
host staging for the per-step input x, the position and the output y (`cudaMallocHost`, viewed
as numpy arrays in the session's layout [B, 1, d_in] / [B, 1, d_out]: the same bytes as the
graph's [B, d_in] / [B, d_out]), and one dedicated non-blocking stream. The step graph takes one
tensor per layer (format 2, `tickformer.artifact.format.step_signature`): layer i's k_cache.i / k_new.i / ...
is bound to slice i of its stack, at base + i * pitch, where the pitch is the slice rounded up to
256 bytes (`layer_pitch`: TensorRT requires every tensor address to be 256-byte aligned; a
[B, H, 1, dh] row slice is often not a multiple of 256). Every tensor address is bound once with
`IExecutionContext.set_tensor_address`, so a step is:

    H2D x, pos (pinned -> device)  ->  execute_async_v3(stream)  ->  D2H y  ->  sync

After one warm enqueue (TensorRT may allocate or initialise on the first enqueue), that sequence
is captured into a CUDA graph (`cudaStreamBeginCapture` / `EndCapture`,
`cudaGraphInstantiateWithFlags`) and each step replays it with one `cudaGraphLaunch`. If capture
fails (some engines are not capturable), the backend falls back to the plain sequence, sets
`self.cuda_graph = False`, `self.cuda_graph_reason`, and warns once. `commit(pos)` copies the
staged K/V rows into cache position pos (windowed: row ring_slot(pos, W), layout.commit_rows)
with fixed-size strided `cudaMemcpy2DAsync`s, device to device (device.DeviceCache,
`layout.commit_copies`): K into column
pos of [dh, N] (rows of one float), V into row pos of [N, dh] (rows of dh floats); one copy per
stack when the pitches equal the slices (all layers at once), else one per layer. The step
never writes the cache, so a failed step leaves it unchanged. `cache()` returns the logical
layout, K transposed back on the host.

Engines are taken from the manifest only: before deserializing, the TensorRT version, GPU and
compute capability recorded at build time must match this machine, and the engine's bytes must
hash to the manifest's sha256 (runtime/backends/tensorrt_engine.py: engine_entry, engine_bytes). After
deserializing, the step engine's I/O names, shapes and dtypes must equal `step_signature`
exactly (BackendError otherwise: an engine built from another graph format is refused).

Real-time: after construction, `step` and `commit` allocate no numpy arrays and do bounded work
(a fixed graph launch or a fixed enqueue, fixed-size copies); the cuda-python calls return small
result tuples, which is the only Python-side allocation. `full`, `set_source` and `cache` are
not real-time.

ssm artifacts (docs/ssm.md): the step engine's I/O is x, state -> y, state_new
(`format.ssm_step_signature`, checked against the engine by the same check). The state is
double-buffered on the device as on the host (device.DeviceState): two `cudaMalloc`
buffers [B, L, D, N]; parity 0's execution context reads buffer 0 and writes buffer 1, a second
context of the same engine (`_Engine.add_context`) has the two addresses swapped, each context
gets its warm enqueue and its own captured CUDA graph, and the step at position p replays graph
p & 1 -- fixed addresses, and the commit is the session's position store alone. `reset` is a
`cudaMemsetAsync` of buffer 0, `commit_candidate` (peek) the B - 1 fixed-size row copies of row
i over the staged buffer, the state reads copies into pinned buffers made at load: each on the
stream, then its sync. The full pass is the Scan graph's engine pinned to T = max_len, zero-padded
(exact by causality); T > max_len is refused. fp32 only (the fp16 policy covers attention graphs;
`build_engines` refuses fp16 for ssm artifacts).

Sources (facts only): NVIDIA TensorRT Python API (Runtime, ICudaEngine.get_tensor_*,
IExecutionContext.set_tensor_address / set_input_shape / execute_async_v3), TensorRT developer
guide "CUDA Graphs" (warm enqueue, then capture), cuda-python `cuda.bindings.runtime`.
"""

from __future__ import annotations

import ctypes
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from tickformer import validation
from tickformer.artifact.format import io_names, step_signature
from tickformer.artifact.reader import Artifact
from tickformer.errors import BackendError, BackendUnavailable

from .base import StoreBackend
from .cuda import cuda_check, device_info, dims_tuple, require_cudart, require_tensorrt
from .device import DeviceCache, DeviceState
from .layout import layer_pitch, stacked_shapes
from .tensorrt_engine import engine_bytes, engine_entry

if TYPE_CHECKING:
    import tensorrt as trt


class _Buffers:
    """Device and pinned-host allocations, freed together. Not real-time."""

    def __init__(self, cudart: Any) -> None:
        self.cudart = cudart
        self.device: list[int] = []
        self.host: list[int] = []

    def device_zeros(self, nbytes: int, stream: Any) -> int:
        ptr = int(cuda_check(self.cudart.cudaMalloc(max(nbytes, 1)), "cudaMalloc"))
        self.device.append(ptr)
        cuda_check(self.cudart.cudaMemsetAsync(ptr, 0, max(nbytes, 1), stream), "cudaMemsetAsync")
        return ptr

    def pinned(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        nbytes = max(int(np.prod(shape)) * dtype.itemsize, 1)
        ptr = int(cuda_check(self.cudart.cudaMallocHost(nbytes), "cudaMallocHost"))
        self.host.append(ptr)
        raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
        view = np.frombuffer(memoryview(raw).cast("B"), dtype=np.uint8, count=nbytes)
        arr = view[: int(np.prod(shape)) * dtype.itemsize].view(dtype).reshape(shape)
        arr[...] = 0
        return arr

    def free(self) -> None:
        for ptr in self.device:
            self.cudart.cudaFree(ptr)
        for ptr in self.host:
            self.cudart.cudaFreeHost(ptr)
        self.device, self.host = [], []


class _Engine:
    """One deserialized engine, its execution context and a device buffer per I/O tensor."""

    def __init__(
        self,
        runtime: "trt.Runtime",
        data: bytes,
        bufs: _Buffers,
        stream: Any,
        *,
        shapes: dict[str, tuple[int, ...]],
        shared: dict[str, int],
    ) -> None:
        import tensorrt as trt

        engine = runtime.deserialize_cuda_engine(data)
        if engine is None:
            raise BackendError("TensorRT could not deserialize the engine (see the TensorRT log); rebuild it")
        self.engine: trt.ICudaEngine = engine
        context = engine.create_execution_context()
        if context is None:
            raise BackendError("TensorRT could not create an execution context (out of device memory?)")
        self.context: trt.IExecutionContext = context
        self.ptr: dict[str, int] = {}
        self.shape: dict[str, tuple[int, ...]] = {}
        self.dtype: dict[str, np.dtype] = {}
        self.inputs: list[str] = []
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            dims = dims_tuple(engine.get_tensor_shape(name))
            if is_input:
                self.inputs.append(name)
                if any(d < 0 for d in dims):  # the pinned profile dim (T = max_len)
                    dims = shapes[name]
                    if not context.set_input_shape(name, dims):
                        raise BackendError(f"engine rejects input shape {dims} for {name!r}; rebuild it")
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            dims = dims_tuple(context.get_tensor_shape(name))
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            nbytes = int(np.prod(dims)) * dtype.itemsize
            ptr = shared.get(name)
            if ptr is None:
                ptr = bufs.device_zeros(nbytes, stream)
            self.ptr[name], self.shape[name], self.dtype[name] = ptr, dims, dtype
            if not context.set_tensor_address(name, ptr):
                raise BackendError(f"TensorRT refused the device address of {name!r}")

    def add_context(self, overrides: dict[str, int]) -> "trt.IExecutionContext":
        """One more execution context of this engine (static shapes only), bound to the same
        addresses as the first except `overrides` (name -> device pointer). Not real-time."""
        context = self.engine.create_execution_context()
        if context is None:
            raise BackendError("TensorRT could not create an execution context (out of device memory?)")
        for name, ptr in self.ptr.items():
            if not context.set_tensor_address(name, overrides.get(name, ptr)):
                raise BackendError(f"TensorRT refused the device address of {name!r}")
        self.__dict__.setdefault("extra", []).append(context)
        return context

    def release(self) -> None:
        """Drop the contexts before the engine (TensorRT's required destruction order)."""
        self.__dict__.pop("extra", None)
        self.__dict__.pop("context", None)
        self.__dict__.pop("engine", None)


class TensorRTBackend(StoreBackend):
    """TensorRT engines from the artifact's manifest, one stream, CUDA-graph replay per step;
    both block kinds (the state of the kind in a device store: device.py)."""

    name = "tensorrt"
    static_cache = True
    ring_cache = True  # commit writes row ring_slot(pos, W) (layout.commit_rows)
    _cudart: Any  # cuda-python's runtime module, None once closed
    _stream: Any
    _bufs: _Buffers
    _aux: _Engine
    _step: _Engine

    def __init__(self, artifact: Artifact, *, precision: str | None = None, cuda_graph: bool = True) -> None:
        super().__init__(artifact)
        validation.one_of(precision, "precision", (None, "fp32", "fp16"))
        ssm = self.block == "ssm"
        if ssm and precision == "fp16":
            raise BackendError(
                "backend 'tensorrt': precision 'fp16' is not available for ssm artifacts (the fp16 policy covers "
                "attention graphs, docs/ssm.md); build and load fp32 engines"
            )
        self.supports_peek = ssm  # commit_candidate: the state's B - 1 device row copies
        aux = "model" if self.config.arch == "decoder" else "encoder"
        step_data, aux_data = self._open_engines(artifact, "fp32" if ssm else precision, aux)
        self._graphs: list[tuple[Any, Any]] = []  # (graph, instantiated graph) per parity
        self.cuda_graph = False
        self.cuda_graph_reason = "disabled by option" if not cuda_graph else "not captured yet"
        try:
            self._setup(step_data, aux, aux_data)
            for context in range(len(self._contexts)):  # a warm enqueue on each: TensorRT's one-time work
                self._enqueue_step(context)
            self._sync()
            if cuda_graph:
                self._capture()
            self.reset()
        except BaseException:
            self.close()
            raise

    # --- construction (not real-time) -----------------------------------------------------------
    def _open_engines(self, artifact: Artifact, precision: str | None, aux: str) -> tuple[bytes, bytes]:
        """(step engine bytes, aux engine bytes); sets the runtime, stream and buffers."""
        require_tensorrt()
        cudart = require_cudart()
        import tensorrt as trt

        self._cudart = cudart
        here = device_info(trt, cudart)  # BackendUnavailable without a GPU
        manifest, root = artifact.manifest, artifact.root
        self.precision, step_entry = engine_entry(manifest, "step", precision)
        _, aux_entry = engine_entry(manifest, aux, self.precision)
        # Compatibility and hashes are checked here, before any byte is deserialized.
        step_data = engine_bytes(root, manifest, step_entry, here)
        aux_data = engine_bytes(root, manifest, aux_entry, here)
        self.device = here
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        if step_entry.get("version_compatible") or aux_entry.get("version_compatible"):
            self._runtime.engine_host_code_allowed = True  # trusted: hash-verified through the manifest
        self._stream = cuda_check(
            cudart.cudaStreamCreateWithFlags(cudart.cudaStreamNonBlocking), "cudaStreamCreateWithFlags"
        )
        self._bufs = _Buffers(cudart)
        return step_data, aux_data

    def _sync(self) -> None:
        cuda_check(self._cudart.cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")

    def _run_aux(self) -> None:
        if not self._aux.context.execute_async_v3(int(self._stream)):
            raise BackendError("TensorRT execute_async_v3 failed in the full/encoder engine")
        self._sync()

    def _h2d(self, ptr: int, arr: np.ndarray) -> None:
        """Upload on this backend's stream and wait: ordered before the engine run enqueued next
        (a synchronous cudaMemcpy from pageable memory would run on the legacy default stream,
        which is not ordered against this non-blocking stream, and may return before the
        transfer has landed)."""
        arr = np.ascontiguousarray(arr)
        kind = self._cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        cuda_check(
            self._cudart.cudaMemcpyAsync(ptr, arr.ctypes.data, arr.nbytes, kind, self._stream),
            "cudaMemcpyAsync",
        )
        self._sync()  # arr must outlive the transfer

    def _d2h(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Download on this backend's stream (after its earlier work) and wait."""
        out = np.empty(shape, dtype=dtype)
        kind = self._cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        cuda_check(
            self._cudart.cudaMemcpyAsync(out.ctypes.data, ptr, out.nbytes, kind, self._stream),
            "cudaMemcpyAsync",
        )
        self._sync()
        return out

    def _enqueue_step(self, parity: int = 0) -> None:
        """The step sequence on the stream (captured into a CUDA graph, or run as is): x (and the
        attention step's pos) up, the execution context of this parity (attention: its one), y down."""
        c, s = self._cudart, self._step
        h2d, d2h = c.cudaMemcpyKind.cudaMemcpyHostToDevice, c.cudaMemcpyKind.cudaMemcpyDeviceToHost
        cuda_check(
            c.cudaMemcpyAsync(s.ptr[self._in_name], self._x.ctypes.data, self._x.nbytes, h2d, self._stream),
            "cudaMemcpyAsync x",
        )
        if self._pos is not None:
            cuda_check(
                c.cudaMemcpyAsync(s.ptr["pos"], self._pos.ctypes.data, self._pos.nbytes, h2d, self._stream),
                "cudaMemcpyAsync pos",
            )
        if not self._contexts[parity].execute_async_v3(int(self._stream)):
            raise BackendError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        cuda_check(
            c.cudaMemcpyAsync(self._y.ctypes.data, s.ptr[self._out_name], self._y.nbytes, d2h, self._stream),
            "cudaMemcpyAsync y",
        )

    def _full_padded(self, x: np.ndarray) -> np.ndarray:
        """Causal full pass on the model engine, pinned to T = max_len: x is zero-padded to
        max_len and the first T rows are returned (row t depends on inputs 0..t only)."""
        e, t = self._aux, x.shape[1]
        if (
            t > self.artifact.max_len
        ):  # windowed and ssm artifacts: model.onnx takes any T, this engine does not
            raise BackendError(
                f"the TensorRT model engine is built for T <= max_len {self.artifact.max_len}, got T = {t}; "
                "stream it with step() or run the full pass on backend ort"
            )
        padded = np.zeros(e.shape[self._in_name], dtype=e.dtype[self._in_name])  # [B, N, ...]
        padded[:, :t] = x
        self._h2d(e.ptr[self._in_name], padded)
        self._run_aux()
        y = self._d2h(e.ptr[self._out_name], e.shape[self._out_name], e.dtype[self._out_name])
        return np.ascontiguousarray(y[:, :t])

    def _setup(self, step_data: bytes, aux: str, aux_data: bytes) -> None:
        cfg, batch, n = self.config, self.artifact.batch, self.artifact.max_len
        in_name, out_name = io_names(cfg)
        self._in_name, self._out_name = in_name, out_name
        self.store = self._device_store()
        # The step engine bound to the store's addresses of parity 0 (layer i's k_cache.i at slice i
        # of its stack; ssm: state buffer 0 read, buffer 1 written), its signature checked once.
        self._step = _Engine(
            self._runtime, step_data, self._bufs, self._stream, shapes={}, shared=self.store.addresses(0)
        )
        s = self._step
        sig = step_signature(cfg, batch)  # the ssm kind's is format.ssm_step_signature
        want = {
            name: (tuple(shape), np.dtype(dtype))
            for key in ("inputs", "outputs")
            for name, (dtype, shape) in sig[key].items()
        }
        have = {name: (s.shape[name], s.dtype[name]) for name in s.shape}
        if have != want or set(s.inputs) != set(sig["inputs"]):
            bad = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k)) or sorted(
                set(s.inputs) ^ set(sig["inputs"])
            )
            raise BackendError(
                f"step engine tensors {bad[:4]} do not match the {self.block} step signature "
                f"(engine {[have.get(k) for k in bad[:2]]}, expected {[want.get(k) for k in bad[:2]]}); rebuild it"
            )
        # One execution context per parity of the store: ssm parity 1 is a second context of the same
        # engine, same x and y, the state addresses swapped.
        self._contexts = [s.context] + [
            s.add_context(self.store.addresses(p)) for p in range(1, self.store.parities)
        ]
        self._parity = self.store.parities - 1  # pos & this: the context (and graph) of pos's parity
        # Pinned staging in the session's layout (x [B, 1, d_in] or tokens [B, 1], y [B, 1, d_out]):
        # the same bytes as the graph's [B, d_in] / [B] / [B, d_out], so the copies are plain memcpys.
        x_shape = (batch, 1) if cfg.inputs == "tokens" else (batch, 1, cfg.d_in)
        self._x = self._bufs.pinned(x_shape, s.dtype[in_name])
        self._pos = self._bufs.pinned(s.shape["pos"], s.dtype["pos"]) if "pos" in s.shape else None
        self._y = self._bufs.pinned(self.step_output_shape, s.dtype[out_name])
        if aux == "model":
            shapes = {in_name: (batch, n) + ((cfg.d_in,) if cfg.inputs == "continuous" else ())}
            self._aux = _Engine(self._runtime, aux_data, self._bufs, self._stream, shapes=shapes, shared={})
        else:  # the encoder writes its contiguous cross K/V [L, B, H, N, dh]; set_source spreads it
            self._aux = _Engine(
                self._runtime,
                aux_data,
                self._bufs,
                self._stream,
                shapes={},
                shared={"src_valid": s.ptr["src_valid"]},
            )
            for name in ("cross_k", "cross_v"):
                if self._aux.shape.get(name) != self.cache_shape or self._aux.dtype[name] != np.float32:
                    raise BackendError(
                        f"encoder engine output {name!r} has shape {self._aux.shape.get(name)}, "
                        f"expected {self.cache_shape}; rebuild it"
                    )
        self._sync()

    def _device_store(self) -> DeviceCache | DeviceState:
        """The state of the block kind at fixed device addresses, one allocation each (cudaMalloc:
        256-byte aligned, zeroed): the ssm state's two buffers (read into pinned buffers), or the
        stacked caches, staged rows (and cross K/V), layer i's tensor at base + i * pitch."""
        f32 = np.dtype(np.float32)
        if self.block == "ssm":
            nbytes = int(np.prod(self.state_shape)) * f32.itemsize
            base = (
                self._bufs.device_zeros(nbytes, self._stream),
                self._bufs.device_zeros(nbytes, self._stream),
            )
            read = (self._bufs.pinned(self.state_shape, f32), self._bufs.pinned(self.state_shape, f32))
            return DeviceState(self._cudart, self._stream, self._sync, base, self.state_shape, read)
        stacks = stacked_shapes(self.cache_shape, self.row_shape, cross=self.config.arch == "encoder-decoder")
        self._pitch = {name: layer_pitch(shape, f32.itemsize) for name, shape in stacks.items()}
        self._dev = {  # name -> device address of the stack
            name: self._bufs.device_zeros(self.config.n_layers * pitch, self._stream)
            for name, (_, pitch) in self._pitch.items()
        }
        return DeviceCache(
            self._cudart,
            self._stream,
            self._sync,
            self._dev,
            self._pitch,
            stacks,
            self.cache_shape,
            self.config.window,
        )

    def _capture(self) -> None:
        """One CUDA graph per parity (each context warmed already); on failure fall back to
        plain enqueues, for all, and say so."""
        c = self._cudart
        try:
            mode = c.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal
            for parity in range(len(self._contexts)):
                cuda_check(c.cudaStreamBeginCapture(self._stream, mode), "cudaStreamBeginCapture")
                try:
                    self._enqueue_step(parity)
                finally:
                    graph = cuda_check(c.cudaStreamEndCapture(self._stream), "cudaStreamEndCapture")
                graph_exec = cuda_check(
                    c.cudaGraphInstantiateWithFlags(graph, 0), "cudaGraphInstantiateWithFlags"
                )
                self._graphs.append((graph, graph_exec))
            self.cuda_graph, self.cuda_graph_reason = (
                True,
                "one graph per parity, captured after warm enqueues",
            )
        except (BackendError, RuntimeError) as exc:
            c.cudaGetLastError()  # clear the sticky capture error; the stream stays usable
            self._destroy_graphs()
            self.cuda_graph, self.cuda_graph_reason = (
                False,
                f"CUDA-graph capture failed ({exc}); using plain enqueue",
            )
            warnings.warn(f"tensorrt backend: {self.cuda_graph_reason}", RuntimeWarning, stacklevel=3)

    def _destroy_graphs(self) -> None:
        c = self._cudart
        for graph, graph_exec in getattr(self, "_graphs", []):
            c.cudaGraphExecDestroy(graph_exec)
            c.cudaGraphDestroy(graph)
        self._graphs = []

    # --- real-time path -------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time safe (module docstring): x (and pos) into pinned memory, replay the graph of
        pos's parity (or enqueue it), wait; y is in the pinned output. Never writes the committed
        state (ssm: reads buffer pos & 1, writes the other)."""
        np.copyto(self._x, x)
        if self._pos is not None:
            self._pos[0] = pos
        parity = pos & self._parity
        try:
            if self._graphs:
                cuda_check(
                    self._cudart.cudaGraphLaunch(self._graphs[parity][1], self._stream), "cudaGraphLaunch"
                )
            else:
                self._enqueue_step(parity)
            self._sync()
        except BackendError as exc:
            raise BackendError(f"tensorrt step failed at position {pos}: {exc}") from exc
        return self._y

    # --- not real-time --------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        """Causal full pass on the model engine (ssm: the Scan graph's), zero-padded to T = max_len
        (`_full_padded`); T > max_len refused."""
        if self.config.arch != "decoder":
            raise BackendError("this artifact has no full-pass graph (encoder-decoder); use generate()")
        return self._full_padded(x)

    def set_source(self, src: np.ndarray, src_valid: np.ndarray) -> None:
        if self.config.arch != "encoder-decoder":
            raise NotImplementedError("decoder-only artifacts have no source")
        e = self._aux
        self._h2d(e.ptr["src"], src.astype(e.dtype["src"], copy=False))
        self._h2d(
            e.ptr["src_valid"], src_valid.astype(e.dtype["src_valid"], copy=False)
        )  # shared with the step
        self._run_aux()
        c = self._cudart
        for name in ("cross_k", "cross_v"):  # [L, B, H, N, dh] contiguous -> L slices at the step's pitch
            slice_bytes, pitch = self._pitch[name]
            cuda_check(
                c.cudaMemcpy2DAsync(
                    self._dev[name],
                    pitch,
                    e.ptr[name],
                    slice_bytes,
                    slice_bytes,
                    self.config.n_layers,
                    c.cudaMemcpyKind.cudaMemcpyDeviceToDevice,
                    self._stream,
                ),
                "cudaMemcpy2DAsync cross",
            )
        self._sync()

    def close(self) -> None:
        """Free the CUDA graphs, engines (contexts first), buffers and stream. Idempotent."""
        c = getattr(self, "_cudart", None)
        if c is None:
            return
        self._destroy_graphs()
        for attr in ("_step", "_aux"):
            engine = self.__dict__.pop(attr, None)
            if engine is not None:
                engine.release()  # contexts before engines, engines before their buffers
        if hasattr(self, "_bufs"):
            self._bufs.free()
        if getattr(self, "_stream", None) is not None:
            c.cudaStreamDestroy(self._stream)
            self._stream = None
        self._cudart = None


def _unavailable_reason() -> str | None:
    """Why this backend cannot run here (None: it might). For test skips; not real-time."""
    try:
        require_tensorrt()
        cudart = require_cudart()
        err, count = cudart.cudaGetDeviceCount()
        if int(err) != 0 or count < 1:
            return "no CUDA GPU visible"
    except BackendUnavailable as exc:
        return str(exc)
    return None


BACKENDS = {"tensorrt": TensorRTBackend}
