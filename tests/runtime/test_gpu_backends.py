"""GPU backends (`tensorrt`, `ort-cuda`, `ort-trt`): same session API and state guarantees as CPU.

On machines without a GPU (CI, development): the backends must refuse with one clear
BackendUnavailable naming what is missing (tested here, always). With a GPU: the tests marked
`gpu` build engines, step through every position and compare with the numpy backend within the
artifact's tolerance (fp32) or the recorded fp16 bound; they are skipped with the reason
otherwise. Nothing in this file pretends a GPU result.
"""

from __future__ import annotations

import ctypes
import enum
import sys
import types

import numpy as np
import pytest

import tickformer.runtime as rt
from tickformer.errors import BackendUnavailable
from tickformer.export.writer import export_artifact
from tickformer.model.checkpoint import Checkpoint
from tickformer.model.config import preset
from tickformer.model.transformer import init_params

GPU_BACKENDS = ("tensorrt", "ort-cuda", "ort-trt")


def make_artifact(root, preset_name="tiny"):
    cfg = preset(preset_name)
    export_artifact(Checkpoint(config=cfg, params=init_params(cfg, seed=0), meta={}), root)
    return root


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    return make_artifact(tmp_path_factory.mktemp("gpu") / "art")


def gpu_unavailable(backend: str) -> str | None:
    """Why `backend` cannot run here, or None."""
    if backend == "tensorrt":
        from tickformer.runtime.backends.tensorrt import _unavailable_reason

        return _unavailable_reason()
    import onnxruntime as ort

    needed = {"ort-cuda": "CUDAExecutionProvider", "ort-trt": "TensorrtExecutionProvider"}[backend]
    if needed not in ort.get_available_providers():
        return f"onnxruntime has no {needed} here"
    return None


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_without_gpu_the_backend_refuses_in_one_line(artifact, backend):
    if gpu_unavailable(backend) is None:
        pytest.skip(f"{backend} is available here; the refusal path is not reachable")
    with pytest.raises(BackendUnavailable) as info:
        rt.load(artifact, backend=backend)
    message = str(info.value)
    assert "\n" not in message and "tickformer[" in message  # names the extra to install


def test_cli_build_refuses_without_tensorrt(artifact, capsys):
    from tickformer.cli import main

    if gpu_unavailable("tensorrt") is None:
        pytest.skip("TensorRT is available here")
    assert main(["build", str(artifact), "--backend", "tensorrt"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


# --- with a GPU ------------------------------------------------------------------------------------
def _require(backend):
    reason = gpu_unavailable(backend)
    if reason is not None:
        pytest.skip(f"needs a GPU: {reason}")


def _built(artifact, precision="fp32"):
    from tickformer.runtime.backends.tensorrt_engine import BuildOptions, build_engines

    # fp16 through the project's policy (export/fp16.py), strongly typed, on TensorRT 10 and 11.
    build_engines(
        artifact,
        BuildOptions(precision=precision, workspace_mib=256, convert=True if precision == "fp16" else None),
    )
    return artifact


def _step_all(session, x):
    ys = np.stack(
        [session.step(x[:, t : t + 1]).copy() for t in range(x.shape[1])], axis=1
    )  # [B, T, 1, d_out]
    return ys[:, :, 0]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_gpu_backend_matches_numpy_over_every_position(tmp_path, backend):
    _require(backend)
    art = make_artifact(tmp_path / "art")
    if backend == "tensorrt":
        _built(art, "fp32")
    ref_session = rt.load(art, backend="numpy")
    tol = rt.open_artifact(art).tolerance
    cfg = preset("tiny")
    x = np.random.default_rng(0).uniform(-10, 10, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    ref = _step_all(ref_session, x)
    with rt.load(art, backend=backend) as session:
        got = _step_all(session, x)
        full = session.run(x[:, :5])
        if backend == "ort-trt":  # TF32 may be on inside the TensorRT EP: unit roundoff 2^-11, as fp16
            from tickformer.export.fp16 import error_bound

            bound = error_bound(n_layers=cfg.n_layers)
            assert np.abs(got - ref).max() / np.abs(ref).max() <= bound
            assert np.abs(full - ref[:, :5]).max() / np.abs(ref).max() <= bound
        else:  # fp32 kept fp32 (TF32 cleared / use_tf32=0); kernels sum in other orders: 10x tolerance
            np.testing.assert_allclose(got, ref, atol=tol["atol"] * 10, rtol=tol["rtol"] * 10)
            np.testing.assert_allclose(full, ref[:, :5], atol=tol["atol"] * 10, rtol=tol["rtol"] * 10)
        be = session.backend
        assert isinstance(getattr(be, "cuda_graph", None), bool) and isinstance(be.cuda_graph_reason, str)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_step_without_commit_leaves_the_cache_unchanged(tmp_path, backend):
    _require(backend)
    art = make_artifact(tmp_path / "art")
    if backend == "tensorrt":
        _built(art, "fp32")
    cfg = preset("tiny")
    with rt.load(art, backend=backend) as session:
        be = session.backend
        k0, v0 = (c.copy() for c in be.cache())
        be.step(np.ones((1, 1, cfg.d_in), np.float32), 0)  # the backend half of a step, no commit
        k1, v1 = be.cache()
        assert np.array_equal(k0, k1) and np.array_equal(v0, v1)
        be.commit(0)
        assert not np.array_equal(k0, be.cache()[0])


@pytest.mark.gpu
def test_tensorrt_fp16_engine_within_recorded_bound(tmp_path):
    _require("tensorrt")
    from tickformer.export.fp16 import error_bound

    art = _built(make_artifact(tmp_path / "art"), "fp16")
    cfg = preset("tiny")
    x = np.random.default_rng(1).uniform(-10, 10, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    ref = _step_all(rt.load(art, backend="numpy"), x)
    with rt.load(art, backend="tensorrt", precision="fp16") as session:
        got = _step_all(session, x)
    assert np.abs(got - ref).max() / np.abs(ref).max() <= error_bound(n_layers=cfg.n_layers)


# --- emulated device: the host-side orchestration, without a GPU ------------------------------------
# The fakes below stand in for `tensorrt` and `cuda.bindings.runtime` with the documented call
# shapes: device memory is real host memory addressed by integer pointers, copies are memmoves,
# stream capture records the enqueued operations and a graph launch replays them, and an
# "engine" is the ONNX graph the builder was given, executed by onnxruntime on CPU. This proves
# the backend's bookkeeping (binding, staging, capture/replay, strided commit, padding, encoder
# sharing, manifest checks before deserializing) -- it says nothing about TensorRT's numerics
# or speed, which only benchmarks/gpu_check.sh on hardware can measure.


class _Stream:
    def __init__(self):
        self.capture = None

    def __int__(self):
        return id(self)


class FakeCuda(types.ModuleType):
    class cudaMemcpyKind(enum.IntEnum):
        cudaMemcpyHostToHost = 0
        cudaMemcpyHostToDevice = 1
        cudaMemcpyDeviceToHost = 2
        cudaMemcpyDeviceToDevice = 3

    class cudaStreamCaptureMode(enum.IntEnum):
        cudaStreamCaptureModeGlobal = 0

    cudaStreamNonBlocking = 1

    def __init__(self, gpu=b"Fake GPU", cc=(8, 7)):
        super().__init__("cuda.bindings.runtime")
        self.mem, self.gpu, self.cc, self.launches, self.fail_capture = {}, gpu, cc, 0, False
        self.size = {}  # ptr -> bytes of each live allocation

    def _alloc(self, n):  # cudaMalloc returns 256-byte aligned memory
        buf = ctypes.create_string_buffer(n + 256)
        ptr = -(-ctypes.addressof(buf) // 256) * 256
        self.mem[ptr], self.size[ptr] = buf, n
        return 0, ptr

    def _inside(self, ptr, n):
        """False when [ptr, ptr + n) starts in one of our allocations and runs past its end
        (memory the fake did not allocate, e.g. an OrtValue's, is not checked)."""
        for base, size in self.size.items():
            if base <= ptr < base + size:
                return ptr + n <= base + size
        return True

    def _copy2d(self, dst, dpitch, src, spitch, width, height):
        """cudaMemcpy2D's documented semantics: `height` rows of `width` bytes, row r read at
        src + r * spitch and written at dst + r * dpitch; width must not exceed either pitch
        (cudaErrorInvalidPitchValue = 12). A copy out of its allocation is cudaErrorInvalidValue (1)
        here rather than silent corruption."""
        if width > dpitch or width > spitch:
            return 12
        if height and not (
            self._inside(dst, (height - 1) * dpitch + width)
            and self._inside(src, (height - 1) * spitch + width)
        ):
            return 1
        return 0

    cudaMalloc = cudaMallocHost = _alloc

    def cudaFree(self, p):
        self.mem.pop(p, None)
        self.size.pop(p, None)
        return (0,)

    cudaFreeHost = cudaFree

    def _do(self, stream, op):
        if stream is not None and stream.capture is not None:
            stream.capture.append(op)
        else:
            op()
        return (0,)

    def cudaMemsetAsync(self, p, v, n, stream):
        return self._do(stream, lambda: ctypes.memset(p, v, n))

    def cudaMemcpyAsync(self, dst, src, n, kind, stream):
        return self._do(stream, lambda: ctypes.memmove(dst, src, n))

    def cudaMemcpy(self, dst, src, n, kind):
        ctypes.memmove(dst, src, n)
        return (0,)

    def cudaMemcpy2DAsync(self, dst, dpitch, src, spitch, width, height, kind, stream):
        err = self._copy2d(dst, dpitch, src, spitch, width, height)
        if err:
            return (err,)

        def op():
            for r in range(height):
                ctypes.memmove(dst + r * dpitch, src + r * spitch, width)

        return self._do(stream, op)

    def cudaMemcpy2D(self, dst, dpitch, src, spitch, width, height, kind):
        return self.cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, None)

    def cudaStreamCreateWithFlags(self, flags):
        return 0, _Stream()

    def cudaStreamSynchronize(self, s):
        return (0,)

    def cudaStreamDestroy(self, s):
        return (0,)

    def cudaStreamBeginCapture(self, s, mode):
        s.capture = []
        return (0,)

    def cudaStreamEndCapture(self, s):
        ops, s.capture = s.capture, None
        return (1, None) if self.fail_capture else (0, ops)

    def cudaGraphInstantiateWithFlags(self, ops, flags):
        return 0, list(ops)

    def cudaGraphLaunch(self, ops, s):
        self.launches += 1
        for op in ops:
            op()
        return (0,)

    def cudaGraphExecDestroy(self, g):
        return (0,)

    cudaGraphDestroy = cudaGraphExecDestroy

    def cudaGetLastError(self):
        return (0,)

    def cudaGetDeviceCount(self):
        return 0, 1

    def cudaGetDevice(self):
        return 0, 0

    def cudaGetDeviceProperties(self, d):
        return 0, types.SimpleNamespace(name=self.gpu, major=self.cc[0], minor=self.cc[1])


def _np_view(ptr, shape, dtype):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=np.uint8).view(dtype).reshape(shape)


def make_fake_trt(stats):
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
            stream = stats["streams"][stream_handle]

            def op():
                e = self.engine
                feeds = {
                    n: _np_view(self.addr[n], self.get_tensor_shape(n), e.get_tensor_dtype(n)).copy()
                    for n in e.inputs
                }
                outs = e.session.run(e.outputs, feeds)
                for n, val in zip(e.outputs, outs):
                    dst = _np_view(self.addr[n], self.get_tensor_shape(n), e.get_tensor_dtype(n))
                    dst[...] = val
                stats["runs"] += 1

            return stream.capture.append(op) or True if stream.capture is not None else (op() or True)

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


@pytest.fixture
def emulated(monkeypatch):
    """Install the fake tensorrt and cuda-python modules; yields (stats, fake cudart)."""
    stats = {"builds": [], "deserialized": 0, "runs": 0, "streams": {}, "addresses": []}
    cuda = FakeCuda()
    orig_create = cuda.cudaStreamCreateWithFlags

    def create(flags):
        err, s = orig_create(flags)
        stats["streams"][int(s)] = s
        return err, s

    cuda.cudaStreamCreateWithFlags = create
    pkg, bindings = types.ModuleType("cuda"), types.ModuleType("cuda.bindings")
    pkg.bindings, bindings.runtime = bindings, cuda
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_trt(stats))
    monkeypatch.setitem(sys.modules, "cuda", pkg)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", cuda)
    return stats, cuda


def _emulated_build(art, **options):
    from tickformer.runtime.backends.tensorrt_engine import BuildOptions, build_engines

    return build_engines(art, BuildOptions(**options))


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_emulated_tensorrt_backend_matches_numpy(tmp_path, emulated, cuda_graph):
    stats, cuda = emulated
    art = make_artifact(tmp_path / "art")
    records = _emulated_build(art, precision="fp32")
    assert {r.graph for r in records} == {"model", "step"}
    assert all(b["strongly_typed"] and not b["flags"] for b in stats["builds"])  # fp32: typed, TF32 cleared
    assert any(b["profiles"] for b in stats["builds"])  # the full pass got its min = opt = max profile
    assert (art / "trt-timing.cache").is_file()
    cfg = preset("tiny")
    x = np.random.default_rng(0).uniform(-10, 10, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    ref = _step_all(rt.load(art, backend="numpy"), x)
    with rt.load(art, backend="tensorrt", cuda_graph=cuda_graph) as session:
        be = session.backend
        assert be.cuda_graph is cuda_graph
        launches = cuda.launches
        got = _step_all(session, x)
        assert cuda.launches - launches == (cfg.max_len if cuda_graph else 0)  # one replay per step
        np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(session.run(x[:, :5]), ref[:, :5], atol=1e-5, rtol=1e-5)
        k, v = be.cache()  # the device cache holds exactly the rows the CPU backend commits
        with rt.load(art, backend="ort") as cpu:
            _step_all(cpu, x)
            k_ref, v_ref = cpu.backend.cache()
        np.testing.assert_allclose(k, k_ref, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(v, v_ref, atol=1e-5, rtol=1e-5)


def test_emulated_step_without_commit_leaves_device_cache_unchanged(tmp_path, emulated):
    art = make_artifact(tmp_path / "art")
    _emulated_build(art, precision="fp32")
    cfg = preset("tiny")
    with rt.load(art, backend="tensorrt") as session:
        be = session.backend
        k0, v0 = be.cache()
        y = be.step(np.ones((1, 1, cfg.d_in), np.float32), 0)
        assert y is be.step(np.ones((1, 1, cfg.d_in), np.float32), 0)  # the same pinned buffer every call
        k1, _ = be.cache()
        assert np.array_equal(k0, k1)
        be.commit(3)
        k2, v2 = be.cache()
        changed = np.argwhere(np.any(k2 != k0, axis=(0, 1, 2, 4)))[:, 0]
        assert list(changed) == [3]  # exactly row 3, every layer and head
        assert list(np.argwhere(np.any(v2 != v0, axis=(0, 1, 2, 4)))[:, 0]) == [3]


@pytest.mark.parametrize(
    "shape", [(2, 1, 4, 8, 16), (3, 2, 2, 5, 3)]
)  # [L, B, H, N, dh]: unpadded, padded layers
def test_commit_copies_write_exactly_position_p(shape):
    """The commit geometry (layout.commit_copies, used by tensorrt and ort-cuda/ort-trt) against
    numpy, through the fake's pitch-exact cudaMemcpy2D: K [L, B, H, dh, N] gets column p, V
    [L, B, H, N, dh] row p, nothing else changes, and the copy count does not depend on p."""
    from tickformer.runtime.backends.layout import commit_copies, layer_pitch

    cuda, rng = FakeCuda(), np.random.default_rng(7)
    layers, batch, heads, n, dh = shape
    stored = {
        "k_cache": (layers, batch, heads, dh, n),
        "v_cache": shape,
        "k_new": (layers, batch, heads, 1, dh),
        "v_new": (layers, batch, heads, 1, dh),
    }
    pitch = {name: layer_pitch(s) for name, s in stored.items()}
    base = {name: cuda._alloc(layers * pitch[name][1])[1] for name in stored}
    padded = any(sl != pt for sl, pt in pitch.values())
    assert padded == (shape[-1] == 3)  # both branches are exercised

    def logical(name):  # the stack's layer slices, skipping the padding (a view of "device" memory)
        raw = _np_view(base[name], (layers, pitch[name][1] // 4), np.float32)
        return raw[:, : pitch[name][0] // 4].reshape(stored[name])

    for name in stored:
        logical(name)[...] = rng.standard_normal(stored[name])
    ops = commit_copies(base, pitch, shape)
    assert len(ops) == (2 * layers if padded else 2)
    for p in (0, n - 1, 2):
        k0, v0 = logical("k_cache").copy(), logical("v_cache").copy()
        for name in ("k_new", "v_new"):
            logical(name)[...] = rng.standard_normal(stored[name])
        for dst, dpitch, src, spitch, width, height in ops:
            assert cuda.cudaMemcpy2D(dst + p * width, dpitch, src, spitch, width, height, 3) == (0,)
        k0[..., p] = logical("k_new")[:, :, :, 0]
        v0[:, :, :, p] = logical("v_new")[:, :, :, 0]
        assert np.array_equal(logical("k_cache"), k0) and np.array_equal(logical("v_cache"), v0)


def test_emulated_capture_failure_falls_back_and_says_so(tmp_path, emulated):
    stats, cuda = emulated
    art = make_artifact(tmp_path / "art")
    _emulated_build(art, precision="fp32")
    cuda.fail_capture = True
    with pytest.warns(RuntimeWarning, match="CUDA-graph capture failed"):
        session = rt.load(art, backend="tensorrt")
    assert session.backend.cuda_graph is False and "plain enqueue" in session.backend.cuda_graph_reason
    cfg = preset("tiny")
    x = np.random.default_rng(1).uniform(-10, 10, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    np.testing.assert_allclose(
        _step_all(session, x), _step_all(rt.load(art, backend="numpy"), x), atol=1e-5, rtol=1e-5
    )


def test_emulated_fp16_build_uses_the_policy_graph(tmp_path, emulated):
    from tickformer.export.fp16 import error_bound

    stats, _ = emulated
    art = make_artifact(tmp_path / "art")
    _emulated_build(art, precision="fp16", convert=True)
    assert all(b["strongly_typed"] and not b["flags"] for b in stats["builds"])
    cfg = preset("tiny")
    x = np.random.default_rng(2).uniform(-10, 10, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    ref = _step_all(rt.load(art, backend="numpy"), x)
    got = _step_all(rt.load(art, backend="tensorrt", precision="fp16"), x)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert 0 < err <= error_bound(n_layers=cfg.n_layers)
    # TensorRT 10 without --convert: the weak-typing FP16 builder flag on the fp32 graph.
    stats["builds"].clear()
    _emulated_build(art, precision="fp16", convert=None)
    assert all(
        (not b["strongly_typed"]) and any(f.name == "FP16" for f in b["flags"]) for b in stats["builds"]
    )


def test_emulated_engine_for_another_gpu_is_refused_before_deserializing(tmp_path, emulated):
    stats, cuda = emulated
    art = make_artifact(tmp_path / "art")
    _emulated_build(art, precision="fp32")
    cuda.gpu, cuda.cc = b"Other GPU", (9, 0)
    with pytest.raises(BackendUnavailable, match="rebuild it on this GPU"):
        rt.load(art, backend="tensorrt")
    assert stats["deserialized"] == 0


def test_emulated_encoder_decoder_step_matches_ort(tmp_path, emulated):
    art = make_artifact(tmp_path / "art", "tiny-seq2seq")
    _emulated_build(art, precision="fp32")
    cfg = preset("tiny-seq2seq")
    src = np.random.default_rng(3).integers(0, cfg.vocab_size, (1, 5), dtype=np.int64)
    toks = np.random.default_rng(4).integers(0, cfg.vocab_size, (1, cfg.max_len), dtype=np.int64)
    outs = {}
    for backend in ("ort", "tensorrt"):
        with rt.load(art, backend=backend) as session:
            session.set_source(src)
            outs[backend] = np.stack([session.step(toks[:, t : t + 1]).copy() for t in range(cfg.max_len)])
    np.testing.assert_allclose(outs["tensorrt"], outs["ort"], atol=1e-5, rtol=1e-5)


def test_emulated_cli_build_records_options_in_the_manifest(tmp_path, emulated, capsys):
    from tickformer.cli import main

    art = make_artifact(tmp_path / "art")
    cache = tmp_path / "timing.cache"
    argv = [
        "build",
        str(art),
        "--backend",
        "tensorrt",
        "--precision",
        "fp16",
        "--workspace",
        "64",
        "--timing-cache",
        str(cache),
        "--version-compatible",
        "--hardware-compat",
        "ampere+",
        "--graph",
        "step",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("built step: step.fp16.")
    assert cache.read_bytes() == b"fake timing cache"
    entry = rt.open_artifact(art).manifest["engines"]["fp16"]["step"]
    assert (
        entry["version_compatible"] and entry["hardware_compat"] == "ampere+" and entry["workspace_mib"] == 64
    )
    assert (
        entry["tensorrt"] == "10.3.0.30"
        and entry["gpu"] == "Fake GPU"
        and entry["compute_capability"] == "8.7"
    )
    assert entry["onnx_sha256"] == rt.open_artifact(art).manifest["files"]["step.onnx"]["sha256"]


def make_fake_ort(record):
    """onnxruntime as seen by ort_gpu.py, with 'cuda' memory and GPU providers mapped onto the
    real CPU ones: exercises binding, in-place updates, warm-up and commit, not the GPU."""
    import onnxruntime as real

    fake = types.ModuleType("onnxruntime")
    fake.get_available_providers = lambda: [
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]

    class IOBinding:
        """The real binding; 'cuda' addresses are host addresses here."""

        def __init__(self, io):
            self._io = io

        def bind_input(self, name, device, device_id, dtype, shape, ptr):
            assert device == "cuda"
            self._io.bind_input(name, "cpu", 0, dtype, shape, ptr)

        def bind_output(self, name, device, device_id, dtype, shape, ptr):
            assert device == "cuda"
            self._io.bind_output(name, "cpu", 0, dtype, shape, ptr)

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

        def get_providers(self):
            return [self._first, "CPUExecutionProvider"]

        def io_binding(self):
            return IOBinding(self._s.io_binding())

        def run_with_iobinding(self, io):
            self._s.run_with_iobinding(io._io)

        def __getattr__(self, name):
            return getattr(self._s, name)

    class OrtValue:
        @staticmethod
        def ortvalue_from_numpy(arr, device, device_id):
            assert device == "cuda"
            return real.OrtValue.ortvalue_from_numpy(arr, "cpu", 0)

    fake.InferenceSession, fake.OrtValue = Session, OrtValue
    # What onnxruntime-gpu shares with the CPU package (session options are made with them).
    fake.SessionOptions, fake.GraphOptimizationLevel, fake.ExecutionMode = (
        real.SessionOptions,
        real.GraphOptimizationLevel,
        real.ExecutionMode,
    )
    return fake


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
@pytest.mark.parametrize("device_commit", [False, True])
def test_emulated_ort_gpu_backends_match_numpy(tmp_path, monkeypatch, backend, device_commit, request):
    art = make_artifact(tmp_path / "art")  # exported with the real onnxruntime
    record = []
    monkeypatch.setitem(sys.modules, "onnxruntime", make_fake_ort(record))
    if device_commit:
        request.getfixturevalue("emulated")  # cuda-python present: commit on the "device"
    cfg = preset("tiny")
    x = np.random.default_rng(5).uniform(-10, 10, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    with rt.load(art, backend=backend) as session:
        be = session.backend
        assert be.commit_mode == ("device" if device_commit else "host-mirror")
        assert be.cuda_graph is True
        got = _step_all(session, x)
        full = session.run(x[:, :4])
    ref = _step_all(rt.load(art, backend="numpy"), x)
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(full, ref[:, :4], atol=1e-5, rtol=1e-5)
    step_opts = dict(record[0][0][1])
    if backend == "ort-cuda":
        assert step_opts["enable_cuda_graph"] == "1" and step_opts["use_tf32"] == "0"
    else:
        assert step_opts["trt_cuda_graph_enable"] == "True" and step_opts["trt_engine_cache_enable"] == "True"
        assert step_opts["trt_engine_cache_path"].endswith("ort-trt-cache")
        model_opts = dict(record[1][0][1])
        assert (
            model_opts["trt_profile_min_shapes"] == "x:1x1x3"
            and model_opts["trt_profile_max_shapes"] == f"x:1x{cfg.max_len}x3"
        )


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
def test_emulated_ort_gpu_encoder_decoder_step_matches_ort(tmp_path, monkeypatch, backend):
    art = make_artifact(tmp_path / "art", "tiny-seq2seq")
    cfg = preset("tiny-seq2seq")
    src = np.random.default_rng(3).integers(0, cfg.vocab_size, (1, 5), dtype=np.int64)
    toks = np.random.default_rng(4).integers(0, cfg.vocab_size, (1, cfg.max_len), dtype=np.int64)
    with rt.load(art, backend="ort") as session:  # the CPU reference, before the fake is installed
        session.set_source(src)
        ref = np.stack([session.step(toks[:, t : t + 1]).copy() for t in range(cfg.max_len)])
        k_ref, v_ref = (c.copy() for c in session.backend.cache())
    monkeypatch.setitem(sys.modules, "onnxruntime", make_fake_ort([]))
    with rt.load(art, backend=backend) as session:
        session.set_source(src)  # the encoder's stacked cross K/V, bound per layer into the step
        got = np.stack([session.step(toks[:, t : t + 1]).copy() for t in range(cfg.max_len)])
        k, v = (c.copy() for c in session.backend.cache())  # the fake's "device" memory goes with close()
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(k, k_ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(v, v_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
def test_emulated_ort_gpu_runs_only_verified_graph_bytes(tmp_path, monkeypatch, backend):
    from tickformer.errors import ArtifactError
    from tickformer.runtime.backends import backend_class

    monkeypatch.setitem(sys.modules, "onnxruntime", make_fake_ort([]))
    art = make_artifact(tmp_path / "art")
    artifact = rt.open_artifact(art)  # hashes verified here
    data = (art / "step.onnx").read_bytes()
    (art / "step.onnx").write_bytes(b"\x00")  # swapped after the check: never read (bytes kept at open)
    backend_class(backend)(artifact).close()  # runs the verified bytes (the fake refuses paths)
    (art / "step.onnx").write_bytes(data)
    artifact = rt.open_artifact(art)
    step = artifact.manifest["graphs"]["step"]
    step["inputs"] = [dict(i, name="k_cache") if i["name"] == "k_cache.0" else i for i in step["inputs"]]
    with pytest.raises(ArtifactError, match="do not match manifest.json"):  # session signature checked
        backend_class(backend)(artifact)


def test_emulated_tensorrt_refuses_an_engine_of_another_step_signature(tmp_path, emulated, monkeypatch):
    from tickformer.errors import BackendError
    from tickformer.runtime.backends import tensorrt as trt_backend

    art = make_artifact(tmp_path / "art")
    _emulated_build(art, precision="fp32")
    real = trt_backend.step_signature

    def other(config, batch):  # what a stacked-cache (format 1) engine would have to match
        sig = real(config, batch)
        sig["inputs"]["k_cache.0"] = ("float32", [config.n_layers, *sig["inputs"]["k_cache.0"][1]])
        return sig

    monkeypatch.setattr(trt_backend, "step_signature", other)
    with pytest.raises(BackendError, match="k_cache.0.*rebuild it"):
        rt.load(art, backend="tensorrt")


def test_emulated_failed_build_leaves_no_orphan_and_the_old_manifest(tmp_path, emulated, monkeypatch):
    from tickformer.errors import ExportError
    from tickformer.runtime.backends import tensorrt_engine as eb

    art = make_artifact(tmp_path / "art")
    before = (art / "manifest.json").read_bytes()
    files_before = sorted(p.name for p in art.iterdir())
    real_build = eb.build_serialized
    calls = []

    def flaky(onnx_bytes, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise ExportError("the TensorRT ONNX parser rejected the graph: (emulated failure)")
        return real_build(onnx_bytes, **kw)

    monkeypatch.setattr(eb, "build_serialized", flaky)
    with pytest.raises(ExportError):
        eb.build_engines(art, eb.BuildOptions())
    assert (art / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in art.iterdir()) == files_before  # first engine removed, no cache written
