"""Strict in-process stand-ins for `cuda.bindings.runtime`, `tensorrt` and onnxruntime-gpu.

Not a test module: tests/runtime/test_gpu_backends.py imports it. The fakes enforce the CUDA
semantics the GPU backends rely on, so a missing synchronisation, a wrong copy kind or a capture
taken too early fails a test instead of passing silently (facts from the CUDA Runtime API
reference, "API synchronization behavior" and "Stream capture"; TensorRT developer guide "CUDA
Graphs"; ONNX Runtime IOBinding):

- **Two address spaces.** `cudaMalloc` memory lives in a device arena (numpy buffers keyed by
  pointer). The pointer value is the address of a host block filled with 0xFF bytes: a host read
  through a device pointer sees NaN (float32) / -1 (int64), never the data, and a host write
  never reaches the device (the poison is checked at every synchronisation and raises
  `DeviceMemoryViolation`). `cudaMallocHost` memory is real host memory (pinned): the only
  memory both the host and the copy engine see.
- **Copy kinds checked** against where the pointers lie (cudaMemcpyDefault infers them): a
  host-to-device copy whose destination is not device memory, or whose source is, is
  cudaErrorInvalidValue. Copies must stay inside their allocation; cudaMemcpy2D width must not
  exceed either pitch.
- **Streams are queues.** Async copies, memsets, TensorRT enqueues and graph launches are queued
  on their stream and run only when it is synchronised (`cudaStreamSynchronize`,
  `cudaEventSynchronize` up to the event, `cudaDeviceSynchronize`); until then a host read of
  pinned memory sees the old bytes. Only non-blocking streams exist (the backends create nothing
  else), so no stream is ordered against another or against the legacy default stream.
- **Synchronous copies, as documented:** host-to-device from pageable memory stages the bytes and
  leaves the transfer queued on the legacy default stream (the documented "DMA to final
  destination may not have completed"); device-to-device performs no host synchronisation (queued
  on the legacy stream); device-to-host and pinned host-to-device complete before returning
  (after the legacy stream's earlier work). Nothing orders the legacy stream against a
  non-blocking stream.
- **Capture** (`cudaStreamBeginCapture`, global mode) records only what is enqueued on the
  capturing stream; a graph launch queues the recorded work on the launch stream. While any
  capture is open, capture-unsafe calls (cudaMalloc, cudaMallocHost, cudaFree, synchronous copies,
  any synchronisation) fail with cudaErrorStreamCaptureUnsupported and invalidate the capture,
  so `cudaStreamEndCapture` reports cudaErrorStreamCaptureInvalidated.
- **TensorRT's first enqueue on an execution context does one-time initialisation** that
  allocates device memory (why the developer guide says to enqueue once before capturing): inside
  a capture it fails and `execute_async_v3` returns False.
- **ONNX Runtime's run is asynchronous on its own stream** (as with the run option
  `disable_synchronize_execution_providers=1`): `run_with_iobinding` queues the run on the
  session's stream, and only `IOBinding.synchronize_inputs()` / `synchronize_outputs()` wait for it.
  `OrtValue.update_inplace` / `.numpy()` copy at once and are ordered against nothing, since ORT
  documents no stream for them. Code that relies on Run's default end-of-run synchronisation, or
  on which stream ORT's own copies use, fails here.

An "engine" is the ONNX graph handed to the fake builder, executed by onnxruntime on CPU when its
queued enqueue runs. This checks the host-side orchestration, not TensorRT's or CUDA's numerics
or speed.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
import types
from typing import Any, Callable

import numpy as np

POISON = 0xFF


class DeviceMemoryViolation(AssertionError):
    """Host code wrote through a device pointer (the poisoned shadow block changed)."""


class cudaError_t(enum.IntEnum):
    cudaSuccess = 0
    cudaErrorInvalidValue = 1
    cudaErrorInvalidPitchValue = 12
    cudaErrorInvalidDevicePointer = 17
    cudaErrorInvalidResourceHandle = 400
    cudaErrorStreamCaptureUnsupported = 900
    cudaErrorStreamCaptureInvalidated = 901


E = cudaError_t


class _Stream:
    """A non-blocking stream: a FIFO of pending operations, or a capture list while capturing."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue: list[tuple[int, Callable[[], None], str]] = []
        self.capture: list[tuple[Callable[[], None], str]] | None = None
        self.capture_invalid = False

    def __int__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<fake stream {self.name}>"


class _Event:
    def __init__(self) -> None:
        self.stream: _Stream | None = None
        self.seq = -1


class _Alloc:
    """A device allocation: the data (numpy) and the poisoned host block its pointer names."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data = np.zeros(max(size, 1), np.uint8)
        self.shadow = ctypes.create_string_buffer(bytes([POISON]) * (size + 512), size + 512)
        self.ptr = -(-ctypes.addressof(self.shadow) // 256) * 256  # cudaMalloc is 256-byte aligned
        self.off = self.ptr - ctypes.addressof(self.shadow)

    def poisoned(self) -> bool:
        raw = ctypes.string_at(self.ptr, self.size)
        return raw.count(POISON) == self.size


class FakeCuda(types.ModuleType):
    """`cuda.bindings.runtime` with the semantics in the module docstring. Results are tuples
    (err, *values) like cuda-python's; `err` is a cudaError_t."""

    class cudaMemcpyKind(enum.IntEnum):
        cudaMemcpyHostToHost = 0
        cudaMemcpyHostToDevice = 1
        cudaMemcpyDeviceToHost = 2
        cudaMemcpyDeviceToDevice = 3
        cudaMemcpyDefault = 4

    class cudaStreamCaptureMode(enum.IntEnum):
        cudaStreamCaptureModeGlobal = 0

    cudaError_t = cudaError_t
    cudaStreamNonBlocking = 1

    def __init__(self, gpu: bytes = b"Fake GPU", cc: tuple[int, int] = (8, 7)) -> None:
        super().__init__("cuda.bindings.runtime")
        self.gpu, self.cc = gpu, cc
        self.launches = 0  # cudaGraphLaunch calls
        self.fail_capture = False  # make cudaStreamEndCapture fail (an engine that cannot be captured)
        self.device: dict[int, _Alloc] = {}  # ptr -> allocation
        self.pinned: dict[int, tuple[Any, int]] = {}  # ptr -> (ctypes buffer, bytes)
        self.streams: dict[int, _Stream] = {}
        self.legacy = _Stream("legacy default")
        self._seq = itertools.count()
        self.log: list[str] = []  # executed operations, in execution order

    # --- address spaces -------------------------------------------------------------------------
    def _device_at(self, ptr: int, n: int) -> tuple[_Alloc, int] | None:
        """(allocation, offset) when [ptr, ptr + n) starts in device memory; raises when it runs
        past the allocation's end."""
        for base, a in self.device.items():
            if base <= ptr < base + max(a.size, 1):
                if ptr + n > base + a.size:
                    raise _CudaFail(E.cudaErrorInvalidValue, f"{n} bytes at {ptr:#x} run past the allocation")
                return a, ptr - base
        return None

    def _pinned_at(self, ptr: int, n: int) -> bool:
        for base, (_, size) in self.pinned.items():
            if base <= ptr < base + size:
                if ptr + n > base + size:
                    raise _CudaFail(E.cudaErrorInvalidValue, f"{n} bytes at {ptr:#x} run past pinned memory")
                return True
        return False

    def space(self, ptr: int, n: int) -> str:
        """'device', 'pinned' or 'pageable' (host memory the fake did not allocate)."""
        if self._device_at(ptr, n) is not None:
            return "device"
        return "pinned" if self._pinned_at(ptr, n) else "pageable"

    def _read(self, ptr: int, n: int) -> bytes:
        where = self._device_at(ptr, n)
        if where is None:
            return ctypes.string_at(ptr, n)
        a, off = where
        return a.data[off : off + n].tobytes()

    def _write(self, ptr: int, data: bytes) -> None:
        where = self._device_at(ptr, len(data))
        if where is None:
            ctypes.memmove(ptr, data, len(data))
        else:
            a, off = where
            a.data[off : off + len(data)] = np.frombuffer(data, np.uint8)

    # Test-side access to device memory (a debugger's view; backends never get this).
    def peek(self, ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = int(np.prod(shape)) * dtype.itemsize
        if self._device_at(ptr, n) is None:
            raise AssertionError(f"peek: {ptr:#x} is not device memory")
        return np.frombuffer(self._read(ptr, n), dtype).reshape(shape).copy()

    def poke(self, ptr: int, arr: np.ndarray) -> None:
        arr = np.ascontiguousarray(arr)
        if self._device_at(ptr, arr.nbytes) is None:
            raise AssertionError(f"poke: {ptr:#x} is not device memory")
        self._write(ptr, arr.tobytes())

    def malloc_internal(self, n: int) -> int:
        """Device memory for the fake ORT's OrtValues (ORT's own allocator, not the CUDA API)."""
        a = _Alloc(n)
        self.device[a.ptr] = a
        return a.ptr

    def _check_poison(self) -> None:
        for base, a in self.device.items():
            if not a.poisoned():
                raise DeviceMemoryViolation(f"host code wrote through device pointer {base:#x}")

    # --- streams, capture -------------------------------------------------------------------------
    def _stream(self, handle: Any) -> _Stream:
        if handle is None or (isinstance(handle, int) and handle == 0):
            return self.legacy
        if isinstance(handle, _Stream):
            return handle
        s = self.streams.get(int(handle))
        if s is None:
            raise _CudaFail(E.cudaErrorInvalidResourceHandle, f"unknown stream {handle!r}")
        return s

    def stream_from_handle(self, handle: int) -> _Stream:
        return self._stream(handle)

    def _capturing(self) -> list[_Stream]:
        return [s for s in self.streams.values() if s.capture is not None]

    def _unsafe(self, what: str) -> None:
        """A capture-unsafe call: refused (and the open captures invalidated) during a capture."""
        open_ = self._capturing()
        if open_:
            for s in open_:
                s.capture_invalid = True
            raise _CudaFail(E.cudaErrorStreamCaptureUnsupported, f"{what} during stream capture")

    def enqueue(self, handle: Any, op: Callable[[], None], what: str) -> None:
        s = self._stream(handle)
        if s.capture is not None:
            s.capture.append((op, what))
        else:
            s.queue.append((next(self._seq), op, what))

    def in_flight(self) -> list[str]:
        """Queued work not yet run, on every stream: what a host read cannot rely on yet."""
        return [f"{s.name}: {what}" for s in [self.legacy, *self.streams.values()] for _, _, what in s.queue]

    def _flush(self, s: _Stream, upto: int | None = None) -> None:
        while s.queue and (upto is None or s.queue[0][0] <= upto):
            _, op, what = s.queue.pop(0)
            self.log.append(f"{s.name}: {what}")
            op()
        self._check_poison()

    def _flush_all(self) -> None:
        pending = sorted(
            (seq, s) for s in [self.legacy, *self.streams.values()] for seq, _, _ in s.queue
        )  # one valid interleaving: submission order
        for seq, s in pending:
            self._flush(s, upto=seq)
        self._check_poison()

    # --- the API ---------------------------------------------------------------------------------
    def cudaGetDeviceCount(self):
        return E.cudaSuccess, 1

    def cudaGetDevice(self):
        return E.cudaSuccess, 0

    def cudaGetDeviceProperties(self, d):
        return E.cudaSuccess, types.SimpleNamespace(name=self.gpu, major=self.cc[0], minor=self.cc[1])

    def cudaGetLastError(self):
        return (E.cudaSuccess,)

    def cudaMalloc(self, n):
        return _call(lambda: (self._unsafe("cudaMalloc"), self.malloc_internal(n))[1])

    def cudaMallocHost(self, n):
        def run():
            self._unsafe("cudaMallocHost")
            buf = ctypes.create_string_buffer(n + 256)
            ptr = -(-ctypes.addressof(buf) // 256) * 256
            self.pinned[ptr] = (buf, n)
            return ptr

        return _call(run)

    def cudaFree(self, p):
        def run():
            self._unsafe("cudaFree")
            self._flush_all()  # cudaFree synchronises the device first
            if self.device.pop(p, None) is None:
                raise _CudaFail(E.cudaErrorInvalidDevicePointer, f"cudaFree of {p:#x}")

        return _call(run)

    def cudaFreeHost(self, p):
        def run():
            self._unsafe("cudaFreeHost")
            self._flush_all()
            if self.pinned.pop(p, None) is None:
                raise _CudaFail(E.cudaErrorInvalidValue, f"cudaFreeHost of {p:#x}")

        return _call(run)

    def cudaStreamCreateWithFlags(self, flags):
        if flags != self.cudaStreamNonBlocking:
            raise NotImplementedError("the fake models non-blocking streams only")
        s = _Stream(f"stream {len(self.streams) + 1}")
        self.streams[int(s)] = s
        return E.cudaSuccess, s

    def cudaStreamDestroy(self, handle):
        def run():
            s = self._stream(handle)
            self._flush(s)  # pending work completes; the handle is gone
            self.streams.pop(int(s), None)

        return _call(run)

    def cudaStreamSynchronize(self, handle):
        def run():
            self._unsafe("cudaStreamSynchronize")
            self._flush(self._stream(handle))

        return _call(run)

    def cudaDeviceSynchronize(self):
        return _call(lambda: (self._unsafe("cudaDeviceSynchronize"), self._flush_all()))

    def cudaEventCreate(self):
        return E.cudaSuccess, _Event()

    def cudaEventRecord(self, event, handle):
        def run():
            s = self._stream(handle)
            if s.capture is not None:
                raise NotImplementedError("events inside a capture are not modelled")
            event.stream, event.seq = s, next(self._seq)

        return _call(run)

    def cudaEventSynchronize(self, event):
        def run():
            self._unsafe("cudaEventSynchronize")
            if event.stream is not None:
                self._flush(event.stream, upto=event.seq)

        return _call(run)

    def cudaEventDestroy(self, event):
        return (E.cudaSuccess,)

    def _check_kind(self, kind, dst, src, n_dst, n_src) -> tuple[str, str]:
        d, s = self.space(dst, n_dst), self.space(src, n_src)
        want = {
            0: ("host", "host"),
            1: ("device", "host"),
            2: ("host", "device"),
            3: ("device", "device"),
        }.get(int(kind))
        if int(kind) == 4:
            return d, s
        if want is None:
            raise _CudaFail(E.cudaErrorInvalidValue, f"unknown cudaMemcpyKind {kind!r}")
        have = tuple("device" if x == "device" else "host" for x in (d, s))
        if have != want:
            raise _CudaFail(
                E.cudaErrorInvalidValue,
                f"{self.cudaMemcpyKind(int(kind)).name}: dst is {d} memory, src is {s} memory",
            )
        return d, s

    def _copy2d_op(self, dst, dpitch, src, spitch, width, height) -> Callable[[], None]:
        def op():
            for r in range(height):
                self._write(dst + r * dpitch, self._read(src + r * spitch, width))

        return op

    def _check2d(self, dst, dpitch, src, spitch, width, height, kind):
        if width > dpitch or width > spitch:
            raise _CudaFail(E.cudaErrorInvalidPitchValue, f"width {width} > pitch ({dpitch}, {spitch})")
        span_d = (height - 1) * dpitch + width if height else 0
        span_s = (height - 1) * spitch + width if height else 0
        return self._check_kind(kind, dst, src, span_d, span_s)

    def cudaMemsetAsync(self, p, value, n, handle):
        def run():
            if self.space(p, n) != "device":
                raise _CudaFail(E.cudaErrorInvalidValue, f"cudaMemsetAsync on host memory {p:#x}")
            self.enqueue(handle, lambda: self._write(p, bytes([value & 0xFF]) * n), f"memset {n} B")

        return _call(run)

    def cudaMemcpyAsync(self, dst, src, n, kind, handle):
        return self.cudaMemcpy2DAsync(dst, n, src, n, n, 1, kind, handle, _name="cudaMemcpyAsync")

    def cudaMemcpy2DAsync(
        self, dst, dpitch, src, spitch, width, height, kind, handle, _name="cudaMemcpy2DAsync"
    ):
        def run():
            d, s = self._check2d(dst, dpitch, src, spitch, width, height, kind)
            self.enqueue(
                handle, self._copy2d_op(dst, dpitch, src, spitch, width, height), f"{_name} {s}->{d}"
            )

        return _call(run)

    def cudaMemcpy(self, dst, src, n, kind):
        return self.cudaMemcpy2D(dst, n, src, n, n, 1, kind, _name="cudaMemcpy")

    def cudaMemcpy2D(self, dst, dpitch, src, spitch, width, height, kind, _name="cudaMemcpy2D"):
        def run():
            self._unsafe(_name)
            d, s = self._check2d(dst, dpitch, src, spitch, width, height, kind)
            op = self._copy2d_op(dst, dpitch, src, spitch, width, height)
            if d == "device" and s == "device":  # no host-side synchronisation at all
                self.enqueue(self.legacy, op, f"{_name} device->device")
                return
            self._flush(self.legacy)  # earlier legacy-stream work first
            if d == "device" and s == "pageable":  # bytes staged now, the transfer may still be in flight
                staged = [self._read(src + r * spitch, width) for r in range(height)]

                def dma():
                    for r, row in enumerate(staged):
                        self._write(dst + r * dpitch, row)

                self.enqueue(self.legacy, dma, f"{_name} pageable->device (staged)")
                return
            op()  # device->host, pinned->device, host->host: complete on return

        return _call(run)

    def cudaStreamBeginCapture(self, handle, mode):
        def run():
            s = self._stream(handle)
            if s is self.legacy:
                raise _CudaFail(E.cudaErrorStreamCaptureUnsupported, "capture on the legacy stream")
            s.capture, s.capture_invalid = [], False

        return _call(run)

    def cudaStreamEndCapture(self, handle):
        s = self._stream(handle)
        ops, s.capture = s.capture, None
        if ops is None:
            return E.cudaErrorInvalidValue, None
        if s.capture_invalid or self.fail_capture:
            return E.cudaErrorStreamCaptureInvalidated, None
        return E.cudaSuccess, list(ops)

    def cudaGraphInstantiateWithFlags(self, graph, flags):
        return E.cudaSuccess, list(graph)

    def cudaGraphLaunch(self, graph_exec, handle):
        def run():
            self.launches += 1
            ops = list(graph_exec)

            def replay():
                for op, _ in ops:
                    op()

            self.enqueue(handle, replay, f"graph launch ({len(ops)} nodes)")

        return _call(run)

    def cudaGraphExecDestroy(self, g):
        return (E.cudaSuccess,)

    cudaGraphDestroy = cudaGraphExecDestroy


class _CudaFail(Exception):
    def __init__(self, err: cudaError_t, detail: str) -> None:
        super().__init__(detail)
        self.err = err


def _call(fn: Callable[[], Any]) -> tuple:
    """Run an API body; a _CudaFail becomes cuda-python's (err,) result, a value (err, value)."""
    try:
        value = fn()
    except _CudaFail as exc:
        return (exc.err,)
    return (E.cudaSuccess,) if value is None or isinstance(value, tuple) else (E.cudaSuccess, value)


def install_cuda(monkeypatch, sys_modules: dict, cuda: FakeCuda) -> None:
    """Make `from cuda.bindings import runtime` return `cuda`."""
    pkg, bindings = types.ModuleType("cuda"), types.ModuleType("cuda.bindings")
    pkg.bindings, bindings.runtime = bindings, cuda
    monkeypatch.setitem(sys_modules, "cuda", pkg)
    monkeypatch.setitem(sys_modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys_modules, "cuda.bindings.runtime", cuda)


# --- tensorrt ----------------------------------------------------------------------------------------
def make_fake_trt(stats: dict, cuda: FakeCuda) -> types.ModuleType:
    """`tensorrt` with the documented call shapes; an engine is its ONNX graph, run by onnxruntime
    on CPU over the device arena when its queued enqueue executes."""
    import onnx
    import onnxruntime as ort

    trt = types.ModuleType("tensorrt")
    trt.__file__ = "<fake tensorrt>"
    trt.__version__ = "10.3.0.30"
    trt.Logger = type("Logger", (), {"WARNING": 2, "__init__": lambda self, sev=2: None})
    trt.NetworkDefinitionCreationFlag = enum.IntEnum("NetworkDefinitionCreationFlag", {"STRONGLY_TYPED": 1})
    trt.BuilderFlag = enum.IntEnum("BuilderFlag", {"FP16": 0, "TF32": 7, "VERSION_COMPATIBLE": 12})
    trt.MemoryPoolType = enum.IntEnum("MemoryPoolType", {"WORKSPACE": 0})
    trt.HardwareCompatibilityLevel = enum.IntEnum("HardwareCompatibilityLevel", {"NONE": 0, "AMPERE_PLUS": 1})
    trt.TensorIOMode = enum.IntEnum("TensorIOMode", {"INPUT": 1, "OUTPUT": 2})
    trt.Dims = tuple
    elem = {1: np.float32, 7: np.int64, 9: np.bool_, 10: np.float16}
    trt.nptype = lambda t: t

    def dims_of(vi):
        return tuple(d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim)

    class Network:
        def __init__(self, flags):
            self.flags, self.model = flags, None

        @property
        def num_inputs(self):
            return len(self.model.graph.input)

        def get_input(self, i):
            vi = self.model.graph.input[i]
            return types.SimpleNamespace(name=vi.name, shape=dims_of(vi))

    class Parser:
        num_errors = 0

        def __init__(self, network, logger):
            self.network = network

        def parse(self, data):
            self.network.model = onnx.load_from_string(bytes(data))
            return True

    class Cache:
        def __init__(self, data):
            self.data = bytes(data) or b"fake timing cache"

        def serialize(self):
            return self.data

    class Config:
        def __init__(self):
            self.flags, self.profiles, self.cache = set(), [], None
            self.hardware_compatibility_level = None

        def set_memory_pool_limit(self, pool, size):
            self.workspace = size

        def set_flag(self, f):
            self.flags.add(f)

        def clear_flag(self, f):
            self.flags.discard(f)

        def create_timing_cache(self, data):
            return Cache(data)

        def set_timing_cache(self, cache, ignore):
            self.cache = cache
            return True

        def get_timing_cache(self):
            return self.cache

        def add_optimization_profile(self, p):
            self.profiles.append(p)

    class Profile(dict):
        def set_shape(self, name, lo, opt, hi):
            assert lo == opt == hi, "profiles must be min = opt = max"
            self[name] = tuple(opt)

    class Builder:
        def __init__(self, logger):
            pass

        def create_network(self, flags=0):
            return Network(flags)

        def create_builder_config(self):
            return Config()

        def create_optimization_profile(self):
            return Profile()

        def build_serialized_network(self, network, config):
            stats["builds"].append(
                {
                    "flags": set(config.flags),
                    "strongly_typed": bool(network.flags),
                    "profiles": list(config.profiles),
                }
            )
            return network.model.SerializeToString()

    class Context:
        def __init__(self, engine):
            self.engine, self.addr, self.in_shape = engine, {}, {}
            self.initialised = False

        def set_input_shape(self, name, dims):
            self.in_shape[name] = tuple(dims)
            return True

        def get_tensor_shape(self, name):
            shape = self.engine.get_tensor_shape(name)
            if -1 not in shape:
                return shape
            if name in self.in_shape:
                return self.in_shape[name]
            t = next(iter(self.in_shape.values()))[1]  # our only symbol is T, the input's dim 1
            return tuple(t if d == -1 else d for d in shape)

        def set_tensor_address(self, name, ptr):  # "The pointer must have at least 256-byte alignment."
            stats["addresses"].append(ptr)
            if ptr % 256:
                return False
            self.addr[name] = ptr
            return True

        def execute_async_v3(self, stream_handle):
            if not self.initialised:  # one-time work on the first enqueue: allocates device memory
                err, *_ = cuda.cudaMalloc(4096)
                if err != 0:
                    stats["enqueue_errors"].append(f"first enqueue: {err.name}")
                    return False
                self.initialised = True
            e = self.engine
            shapes = {
                n: (self.get_tensor_shape(n), np.dtype(e.get_tensor_dtype(n))) for n in e.inputs + e.outputs
            }
            for n, (shape, dtype) in shapes.items():  # every I/O address must be device memory
                nbytes = int(np.prod(shape)) * dtype.itemsize
                if n not in self.addr or cuda.space(self.addr[n], nbytes) != "device":
                    stats["enqueue_errors"].append(f"{n}: not bound to device memory")
                    return False

            def op():
                feeds = {n: cuda.peek(self.addr[n], *shapes[n]) for n in e.inputs}
                outs = e.session.run(e.outputs, feeds)
                for n, val in zip(e.outputs, outs):
                    cuda.poke(self.addr[n], np.asarray(val, dtype=shapes[n][1]).reshape(shapes[n][0]))
                stats["runs"] += 1

            cuda.enqueue(cuda.stream_from_handle(stream_handle), op, "execute_async_v3")
            return True

    class Engine:
        def __init__(self, data):
            self.model = onnx.load_from_string(data)
            self.session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
            g = self.model.graph
            self.inputs = [vi.name for vi in g.input]
            self.outputs = [vi.name for vi in g.output]
            self.vis = {vi.name: vi for vi in list(g.input) + list(g.output)}
            self.num_io_tensors = len(self.vis)

        def get_tensor_name(self, i):
            return (self.inputs + self.outputs)[i]

        def get_tensor_mode(self, name):
            return trt.TensorIOMode.INPUT if name in self.inputs else trt.TensorIOMode.OUTPUT

        def get_tensor_shape(self, name):
            return dims_of(self.vis[name])

        def get_tensor_dtype(self, name):
            return elem[self.vis[name].type.tensor_type.elem_type]

        def create_execution_context(self):
            return Context(self)

    class Runtime:
        engine_host_code_allowed = False

        def __init__(self, logger):
            pass

        def deserialize_cuda_engine(self, data):
            stats["deserialized"] += 1
            return Engine(bytes(data))

    trt.Builder, trt.OnnxParser, trt.Runtime = Builder, Parser, Runtime
    return trt


# --- onnxruntime-gpu ---------------------------------------------------------------------------------
def make_fake_ort(record: list, cuda: FakeCuda) -> types.ModuleType:
    """onnxruntime as ort_gpu.py sees it: 'cuda' OrtValues in the fake device arena, GPU providers
    mapped onto the real CPU session, each run queued on the session's own stream."""
    import onnxruntime as real

    fake = types.ModuleType("onnxruntime")
    fake.get_available_providers = lambda: [
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]

    class OrtValue:
        def __init__(self, ptr, shape, dtype):
            self._ptr, self._shape, self._dtype = ptr, tuple(shape), np.dtype(dtype)

        @staticmethod
        def ortvalue_from_numpy(arr, device, device_id):
            assert device == "cuda", f"GPU backends keep their values on the device, not {device!r}"
            arr = np.ascontiguousarray(arr)
            value = OrtValue(cuda.malloc_internal(arr.nbytes), arr.shape, arr.dtype)
            cuda.poke(value._ptr, arr)
            return value

        def data_ptr(self):
            return self._ptr

        def shape(self):
            return list(self._shape)

        def update_inplace(self, arr):  # a copy now, ordered against no stream (ORT documents none)
            arr = np.ascontiguousarray(arr, dtype=self._dtype)
            assert arr.shape == self._shape, (arr.shape, self._shape)
            cuda.poke(self._ptr, arr)

        def numpy(self):  # likewise: whatever the device memory holds right now
            return cuda.peek(self._ptr, self._shape, self._dtype)

    class IOBinding:
        def __init__(self, session):
            self._session, self.inputs, self.outputs = session, {}, {}

        def _bind(self, table, name, device, device_id, dtype, shape, ptr):
            assert device == "cuda", f"{name}: bound to {device!r}, not the device"
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            assert cuda.space(ptr, nbytes) == "device", f"{name}: {ptr:#x} is not device memory"
            table[name] = (ptr, tuple(shape), np.dtype(dtype))

        def bind_input(self, name, device, device_id, dtype, shape, ptr):
            self._bind(self.inputs, name, device, device_id, dtype, shape, ptr)

        def bind_output(self, name, device, device_id, dtype, shape, ptr):
            self._bind(self.outputs, name, device, device_id, dtype, shape, ptr)

        def synchronize_inputs(self):
            cuda._flush(self._session.stream)

        def synchronize_outputs(self):
            cuda._flush(self._session.stream)

    class Session:
        def __init__(self, model, sess_options=None, providers=()):
            assert isinstance(model, bytes), (
                "GPU sessions are made from the verified graph bytes, never a path"
            )
            record.append(providers)
            self._s = real.InferenceSession(
                model, sess_options=sess_options, providers=["CPUExecutionProvider"]
            )
            self._first = providers[0][0]
            err, self.stream = cuda.cudaStreamCreateWithFlags(cuda.cudaStreamNonBlocking)  # ORT's own stream
            self.runs = 0

        def get_providers(self):
            return [self._first, "CPUExecutionProvider"]

        def io_binding(self):
            return IOBinding(self)

        def run_with_iobinding(self, io, run_options=None):
            inputs, outputs = dict(io.inputs), dict(io.outputs)

            def op():
                feeds = {n: cuda.peek(ptr, shape, dt) for n, (ptr, shape, dt) in inputs.items()}
                names = list(outputs)
                for n, val in zip(names, self._s.run(names, feeds)):
                    ptr, shape, dt = outputs[n]
                    cuda.poke(ptr, np.asarray(val, dtype=dt).reshape(shape))
                self.runs += 1

            cuda.enqueue(self.stream, op, "ort run")

        def __getattr__(self, name):
            return getattr(self._s, name)

    fake.InferenceSession, fake.OrtValue = Session, OrtValue
    # What onnxruntime-gpu shares with the CPU package (session options are made with them).
    fake.SessionOptions, fake.GraphOptimizationLevel, fake.ExecutionMode = (
        real.SessionOptions,
        real.GraphOptimizationLevel,
        real.ExecutionMode,
    )
    fake.RunOptions = real.RunOptions
    return fake
