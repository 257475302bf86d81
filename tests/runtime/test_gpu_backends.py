"""GPU backends (`tensorrt`, `ort-cuda`, `ort-trt`): same session API and state guarantees as CPU.

On machines without a GPU (CI, development): the backends must refuse with one clear
BackendUnavailable naming what is missing (tested here, always). With a GPU: the tests marked
`gpu` build engines, step through every position and compare with the numpy backend within the
artifact's tolerance (fp32) or the recorded fp16 bound; they are skipped with the reason
otherwise. Nothing in this file pretends a GPU result.
"""

from __future__ import annotations

import ctypes
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import tickformer.runtime as rt
from tickformer.errors import BackendUnavailable
from tickformer.export.writer import export_artifact
from tickformer.model.checkpoint import Checkpoint
from tickformer.model.config import preset
from tickformer.model.transformer import init_params

sys.path.insert(0, str(Path(__file__).parent))  # for `import _gpu_fakes` (importlib import mode)
import _gpu_fakes as fakes  # noqa: E402

GPU_BACKENDS = ("tensorrt", "ort-cuda", "ort-trt")


def make_artifact(root, preset_name="tiny", window=None):
    cfg = preset(preset_name) if window is None else preset(preset_name).replace(window=window)
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
    from tickformer.export.engines import BuildOptions, build_engines

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
# tests/runtime/_gpu_fakes.py stands in for `cuda.bindings.runtime`, `tensorrt` and onnxruntime-gpu
# with the semantics the backends rely on, strictly: separate host and device address spaces,
# copy kinds checked against the pointers, async work queued per stream and run only when the
# stream is synchronised, capture recording only the capturing stream, TensorRT's first enqueue
# allocating, ONNX Runtime's run asynchronous on its own stream. An "engine" is the ONNX graph the
# builder was given, run by onnxruntime on CPU. This proves the backends' bookkeeping and ordering
# (binding, staging, synchronisation, capture/replay, strided commit, padding, encoder sharing,
# manifest checks before deserializing) -- nothing about TensorRT's or CUDA's numerics or speed,
# which only benchmarks/gpu_check.sh on hardware can measure. The mutation tests at the end plant
# known ordering bugs in copies of the backend sources and require these checks to catch each.


@pytest.fixture
def device():
    """The fake GPU: one device arena and its streams, shared by the fake cuda-python and ORT."""
    return fakes.FakeCuda()


@pytest.fixture
def emulated(monkeypatch, device):
    """Install the fake tensorrt and cuda-python modules; yields (stats, fake cudart)."""
    stats = {"builds": [], "deserialized": 0, "runs": 0, "addresses": [], "enqueue_errors": []}
    monkeypatch.setitem(sys.modules, "tensorrt", fakes.make_fake_trt(stats, device))
    fakes.install_cuda(monkeypatch, sys.modules, device)
    return stats, device


def _emulated_build(art, **options):
    from tickformer.export.engines import BuildOptions, build_engines

    return build_engines(art, BuildOptions(**options))


def _tiny_inputs(seed, steps=None):
    """steps: the stream's length, max_len unless given (a windowed session slides past max_len)."""
    cfg = preset("tiny")
    n = cfg.max_len if steps is None else steps
    return cfg, np.random.default_rng(seed).uniform(-10, 10, (1, n, cfg.d_in)).astype(np.float32)


# Checks shared by the plain tests and the mutation tests: each raises (AssertionError or the
# backend's error) when the backend is wrong.
def check_tensorrt_matches_numpy(art, stats, cuda, *, cuda_graph, steps=None):
    cfg, x = _tiny_inputs(0, steps)
    ref = _step_all(rt.load(art, backend="numpy"), x)
    with rt.load(art, backend="tensorrt", cuda_graph=cuda_graph) as session:
        be = session.backend
        assert be.cuda_graph is cuda_graph, be.cuda_graph_reason
        launches = cuda.launches
        got = _step_all(session, x)
        assert cuda.launches - launches == (x.shape[1] if cuda_graph else 0)  # one replay per step
        np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(session.run(x[:, :5]), ref[:, :5], atol=1e-5, rtol=1e-5)
        k, v = be.cache()  # the device cache holds exactly the rows the CPU backend commits
    with rt.load(art, backend="ort") as cpu:
        _step_all(cpu, x)
        k_ref, v_ref = cpu.backend.cache()
    np.testing.assert_allclose(k, k_ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(v, v_ref, atol=1e-5, rtol=1e-5)


def check_step_output_ready_on_return(art, device, backend, **options):
    """The backend half of a step returns y complete, before commit (the session's contract
    checks read it there), at every position; step and commit each return with no device work
    in flight (the next host write of x, or a cache read, must not race them)."""
    cfg, x = _tiny_inputs(3)
    ref = _step_all(rt.load(art, backend="numpy"), x)
    with rt.load(art, backend=backend, **options) as session:
        be = session.backend
        for t in range(cfg.max_len):
            y = be.step(x[:, t : t + 1], t).copy()  # before commit: nothing else synchronises
            assert device.in_flight() == [], f"after step {t}"
            np.testing.assert_allclose(y[:, 0], ref[:, t], atol=1e-5, rtol=1e-5, err_msg=f"position {t}")
            be.commit(t)
            assert device.in_flight() == [], f"after commit {t}"


def check_ort_gpu_matches_numpy(art, backend, record, steps=None):
    cfg, x = _tiny_inputs(5, steps)
    with rt.load(art, backend=backend) as session:
        be = session.backend
        assert be.cuda_graph is True
        got = _step_all(session, x)
        full = session.run(x[:, :4])
        k, v = (c.copy() for c in be.cache())
        commit_mode = be.commit_mode
    ref = _step_all(rt.load(art, backend="numpy"), x)
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(full, ref[:, :4], atol=1e-5, rtol=1e-5)
    with rt.load(art, backend="numpy") as cpu:
        _step_all(cpu, x)
        k_ref, v_ref = cpu.backend.cache()
    np.testing.assert_allclose(k, k_ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(v, v_ref, atol=1e-5, rtol=1e-5)
    return commit_mode


# --- the fake itself enforces what it claims ------------------------------------------------------
def test_fake_cuda_refuses_wrong_kinds_and_defers_async_work(device):
    c, h2d, d2h = (
        device,
        device.cudaMemcpyKind.cudaMemcpyHostToDevice,
        device.cudaMemcpyKind.cudaMemcpyDeviceToHost,
    )
    dev = c.cudaMalloc(64)[1]
    _, pinned = c.cudaMallocHost(64)
    host = (ctypes.c_float * 16).from_address(pinned)
    src = np.arange(16, dtype=np.float32)
    assert np.isnan(np.frombuffer((ctypes.c_float * 16).from_address(dev), np.float32)).all()  # poison
    assert c.cudaMemcpy(dev, src.ctypes.data, 64, d2h)[0] == 1  # kind says D2H, pointers say H2D
    assert c.cudaMemcpy(src.ctypes.data, dev, 64, h2d)[0] == 1
    assert c.cudaMemcpy(dev, src.ctypes.data, 128, h2d)[0] == 1  # past the allocation
    _, s = c.cudaStreamCreateWithFlags(c.cudaStreamNonBlocking)
    assert c.cudaMemcpyAsync(dev, src.ctypes.data, 64, h2d, s) == (0,)
    assert c.cudaMemcpyAsync(pinned, dev, 64, d2h, s) == (0,)
    assert list(host) == [0.0] * 16  # queued, not run: a host read before sync sees stale data
    assert c.cudaStreamSynchronize(s) == (0,)
    assert list(host) == list(src)
    # synchronous device-to-device: queued on the legacy stream, not ordered against `s`
    dev2 = c.cudaMalloc(64)[1]
    assert c.cudaMemcpy(dev2, dev, 64, c.cudaMemcpyKind.cudaMemcpyDeviceToDevice) == (0,)
    assert c.cudaStreamSynchronize(s) == (0,) and not c.peek(dev2, (16,), np.float32).any()
    assert c.cudaDeviceSynchronize() == (0,) and np.array_equal(c.peek(dev2, (16,), np.float32), src)
    # a host write through a device pointer is caught at the next synchronisation
    (ctypes.c_float * 16).from_address(dev)[0] = 1.0
    with pytest.raises(fakes.DeviceMemoryViolation):
        c.cudaStreamSynchronize(s)


def test_fake_capture_records_only_the_capturing_stream_and_refuses_unsafe_calls(device):
    c, h2d = device, device.cudaMemcpyKind.cudaMemcpyHostToDevice
    dev = c.cudaMalloc(8)[1]
    _, a = c.cudaStreamCreateWithFlags(c.cudaStreamNonBlocking)
    _, b = c.cudaStreamCreateWithFlags(c.cudaStreamNonBlocking)
    one, two = np.array([1.0], np.float64), np.array([2.0], np.float64)
    assert c.cudaStreamBeginCapture(a, 0) == (0,)
    assert c.cudaMemcpyAsync(dev, one.ctypes.data, 8, h2d, a) == (0,)  # recorded
    assert c.cudaMemcpyAsync(dev, two.ctypes.data, 8, h2d, b) == (0,)  # another stream: queued there
    err, graph = c.cudaStreamEndCapture(a)
    assert err == 0 and len(graph) == 1
    assert c.cudaStreamSynchronize(b) == (0,) and c.peek(dev, (1,), np.float64)[0] == 2.0
    _, exe = c.cudaGraphInstantiateWithFlags(graph, 0)
    assert c.cudaGraphLaunch(exe, a) == (0,) and c.peek(dev, (1,), np.float64)[0] == 2.0  # queued
    assert c.cudaStreamSynchronize(a) == (0,) and c.peek(dev, (1,), np.float64)[0] == 1.0
    assert c.cudaStreamBeginCapture(a, 0) == (0,)
    assert c.cudaMalloc(16)[0] == 900  # capture-unsafe: refused, and the capture is invalidated
    assert c.cudaStreamEndCapture(a)[0] == 901


# --- tensorrt ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cuda_graph", [True, False])
def test_emulated_tensorrt_backend_matches_numpy(tmp_path, emulated, cuda_graph):
    stats, cuda = emulated
    art = make_artifact(tmp_path / "art")
    records = _emulated_build(art, precision="fp32")
    assert {r.graph for r in records} == {"model", "step"}
    assert all(b["strongly_typed"] and not b["flags"] for b in stats["builds"])  # fp32: typed, TF32 cleared
    assert any(b["profiles"] for b in stats["builds"])  # the full pass got its min = opt = max profile
    assert (art / "trt-timing.cache").is_file()
    check_tensorrt_matches_numpy(art, stats, cuda, cuda_graph=cuda_graph)
    assert stats["enqueue_errors"] == []


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_emulated_tensorrt_step_output_ready_when_step_returns(tmp_path, emulated, cuda_graph):
    art = make_artifact(tmp_path / "art")
    _emulated_build(art, precision="fp32")
    check_step_output_ready_on_return(art, emulated[1], "tensorrt", cuda_graph=cuda_graph)


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
def test_commit_copies_write_exactly_position_p(shape, device):
    """The commit geometry (layout.commit_copies, used by tensorrt and ort-cuda/ort-trt) against
    numpy, through the fake's pitch-exact cudaMemcpy2DAsync: K [L, B, H, dh, N] gets column p, V
    [L, B, H, N, dh] row p, nothing else changes, and the copy count does not depend on p."""
    from tickformer.runtime.backends.layout import commit_copies, layer_pitch

    cuda, rng = device, np.random.default_rng(7)
    _, stream = cuda.cudaStreamCreateWithFlags(cuda.cudaStreamNonBlocking)
    layers, batch, heads, n, dh = shape
    stored = {
        "k_cache": (layers, batch, heads, dh, n),
        "v_cache": shape,
        "k_new": (layers, batch, heads, 1, dh),
        "v_new": (layers, batch, heads, 1, dh),
    }
    pitch = {name: layer_pitch(s) for name, s in stored.items()}
    base = {name: cuda.cudaMalloc(layers * pitch[name][1])[1] for name in stored}
    padded = any(sl != pt for sl, pt in pitch.values())
    assert padded == (shape[-1] == 3)  # both branches are exercised

    def logical(name):  # the stack's layer slices, skipping the padding (read from the device)
        raw = cuda.peek(base[name], (layers, pitch[name][1] // 4), np.float32)
        return raw[:, : pitch[name][0] // 4].reshape(stored[name])

    def store(name, value):
        raw = cuda.peek(base[name], (layers, pitch[name][1] // 4), np.float32)
        raw[:, : pitch[name][0] // 4] = value.reshape(layers, -1)
        cuda.poke(base[name], raw)

    for name in stored:
        store(name, rng.standard_normal(stored[name]).astype(np.float32))
    ops = commit_copies(base, pitch, shape)
    assert len(ops) == (2 * layers if padded else 2)
    for p in (0, n - 1, 2):
        k0, v0 = logical("k_cache"), logical("v_cache")
        for name in ("k_new", "v_new"):
            store(name, rng.standard_normal(stored[name]).astype(np.float32))
        for dst, dpitch, src, spitch, width, height in ops:
            assert cuda.cudaMemcpy2DAsync(dst + p * width, dpitch, src, spitch, width, height, 3, stream) == (
                0,
            )
        assert cuda.cudaStreamSynchronize(stream) == (0,)
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
    cfg, x = _tiny_inputs(1)
    np.testing.assert_allclose(
        _step_all(session, x), _step_all(rt.load(art, backend="numpy"), x), atol=1e-5, rtol=1e-5
    )


# Seeded and deterministic (the fp16 policy graph run by ORT CPU): the emulated engine's normwise
# error against numpy for this artifact (tiny, init_params seed 0) and input (rng(2), [-10, 10])
# measured 8.2e-4. Allowed: within a factor 2 of it either way, so a change of the fp16 policy or
# the graph that doubles the error (or an engine that silently stays fp32) fails here. The recorded
# error_bound (3.9e-2, ~48x this) is the engineering bound for hardware, checked by the GPU test.
FP16_EMULATED_MEASURED = 8.2e-4


def test_emulated_fp16_build_uses_the_policy_graph(tmp_path, emulated):
    from tickformer.export.fp16 import error_bound

    stats, _ = emulated
    art = make_artifact(tmp_path / "art")
    _emulated_build(art, precision="fp16", convert=True)
    assert all(b["strongly_typed"] and not b["flags"] for b in stats["builds"])
    cfg, _ = _tiny_inputs(0)
    x = np.random.default_rng(2).uniform(-10, 10, (1, cfg.max_len, cfg.d_in)).astype(np.float32)
    ref = _step_all(rt.load(art, backend="numpy"), x)
    got = _step_all(rt.load(art, backend="tensorrt", precision="fp16"), x)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert FP16_EMULATED_MEASURED / 2 <= err <= 2 * FP16_EMULATED_MEASURED, err
    assert err <= error_bound(n_layers=cfg.n_layers)
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


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_emulated_tensorrt_windowed_artifact_across_wraparound(tmp_path, emulated, cuda_graph):
    """A windowed artifact (ring of 4 rows, 84 steps: 21 wraps, 5x past max_len 16, the 20W+ streams
    of issue 13): the device commit writes row ring_slot(pos, W), the outputs and the device ring
    equal the numpy and ORT CPU backends'."""
    stats, cuda = emulated
    art = make_artifact(tmp_path / "art", window=4)
    _emulated_build(art, precision="fp32")
    check_tensorrt_matches_numpy(art, stats, cuda, cuda_graph=cuda_graph, steps=21 * 4)
    assert stats["enqueue_errors"] == []


# --- ort-cuda, ort-trt -------------------------------------------------------------------------------
def _install_fake_ort(monkeypatch, device, record=None):
    fake = fakes.make_fake_ort([] if record is None else record, device)  # before sys.modules changes
    monkeypatch.setitem(sys.modules, "onnxruntime", fake)
    return fake


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
@pytest.mark.parametrize("device_commit", [False, True])
def test_emulated_ort_gpu_backends_match_numpy(tmp_path, monkeypatch, device, backend, device_commit):
    art = make_artifact(tmp_path / "art")  # exported with the real onnxruntime
    record = []
    _install_fake_ort(monkeypatch, device, record)
    if device_commit:  # cuda-python present: commit on the "device"
        fakes.install_cuda(monkeypatch, sys.modules, device)
    mode = check_ort_gpu_matches_numpy(art, backend, record)
    assert mode == ("device" if device_commit else "host-mirror")
    step_opts = dict(record[0][0][1])
    if backend == "ort-cuda":
        assert step_opts["enable_cuda_graph"] == "1" and step_opts["use_tf32"] == "0"
    else:
        cfg = preset("tiny")
        assert step_opts["trt_cuda_graph_enable"] == "True" and step_opts["trt_engine_cache_enable"] == "True"
        assert step_opts["trt_engine_cache_path"].endswith("ort-trt-cache")
        model_opts = dict(record[1][0][1])
        assert (
            model_opts["trt_profile_min_shapes"] == "x:1x1x3"
            and model_opts["trt_profile_max_shapes"] == f"x:1x{cfg.max_len}x3"
        )


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
@pytest.mark.parametrize("device_commit", [False, True])
def test_emulated_ort_gpu_windowed_artifact_across_wraparound(
    tmp_path, monkeypatch, device, backend, device_commit
):
    """Windowed artifact on ORT CUDA / TensorRT EP: both commit paths (device copies, host
    mirror) write row ring_slot(pos, W); 84 steps (21 wraps, past max_len 16) over a ring of 4 equal
    the numpy backend."""
    art = make_artifact(tmp_path / "art", window=4)
    _install_fake_ort(monkeypatch, device)
    if device_commit:
        fakes.install_cuda(monkeypatch, sys.modules, device)
    mode = check_ort_gpu_matches_numpy(art, backend, [], steps=21 * 4)
    assert mode == ("device" if device_commit else "host-mirror")


@pytest.mark.parametrize("device_commit", [False, True])
def test_emulated_ort_gpu_step_output_ready_when_step_returns(tmp_path, monkeypatch, device, device_commit):
    art = make_artifact(tmp_path / "art")
    _install_fake_ort(monkeypatch, device)
    if device_commit:
        fakes.install_cuda(monkeypatch, sys.modules, device)
    check_step_output_ready_on_return(art, device, "ort-cuda")


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
def test_emulated_ort_gpu_encoder_decoder_step_matches_ort(tmp_path, monkeypatch, device, backend):
    art = make_artifact(tmp_path / "art", "tiny-seq2seq")
    cfg = preset("tiny-seq2seq")
    src = np.random.default_rng(3).integers(0, cfg.vocab_size, (1, 5), dtype=np.int64)
    toks = np.random.default_rng(4).integers(0, cfg.vocab_size, (1, cfg.max_len), dtype=np.int64)
    with rt.load(art, backend="ort") as session:  # the CPU reference, before the fake is installed
        session.set_source(src)
        ref = np.stack([session.step(toks[:, t : t + 1]).copy() for t in range(cfg.max_len)])
        k_ref, v_ref = (c.copy() for c in session.backend.cache())
    _install_fake_ort(monkeypatch, device)
    fakes.install_cuda(monkeypatch, sys.modules, device)
    with rt.load(art, backend=backend) as session:
        session.set_source(src)  # the encoder's stacked cross K/V, bound per layer into the step
        got = np.stack([session.step(toks[:, t : t + 1]).copy() for t in range(cfg.max_len)])
        k, v = (c.copy() for c in session.backend.cache())
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(k, k_ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(v, v_ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
def test_emulated_ort_gpu_runs_only_verified_graph_bytes(tmp_path, monkeypatch, device, backend):
    from tickformer.errors import ArtifactError
    from tickformer.runtime.backends import backend_class

    art = make_artifact(tmp_path / "art")
    _install_fake_ort(monkeypatch, device)
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
    from tickformer.export import engines as eb

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


# --- mutation tests: planted ordering bugs the checks above must catch -------------------------------
# Each mutation is a textual change to a backend module's source; the mutant module replaces the
# real one in sys.modules for one test (the registry imports backends by module name), and the check
# named beside it must fail. An anchor that no longer matches the source fails the test too, so a
# refactor cannot silently retire a mutation.
TRT = "tickformer.runtime.backends.tensorrt"
ORT_GPU = "tickformer.runtime.backends.ort_gpu"
DEVICE = "tickformer.runtime.backends.device"  # the device stores both engines use
# The backend half of a TensorRT step: wait for the stream before returning y.
TRT_STEP_SYNC = ("                self._enqueue_step(parity)\n            self._sync()\n        except BackendError",
                 "                self._enqueue_step(parity)\n        except BackendError")  # fmt: skip
TRT_WARM = "            for context in range(len(self._contexts)):  # a warm enqueue on each"
ORT_RUN_SYNC = "        io.synchronize_outputs()  # y and the staged rows (ssm: state_new) are written\n"
MUTATIONS = {
    # TensorRTBackend.step returns without waiting for its stream: y is read before it is written.
    "tensorrt: step without _sync()": (TRT, *TRT_STEP_SYNC, "tensorrt-ready"),
    # The host-to-device copy of x given the device-to-host kind.
    "tensorrt: x copied with cudaMemcpyDeviceToHost": (
        TRT,
        "c.cudaMemcpyAsync(s.ptr[self._in_name], self._x.ctypes.data, self._x.nbytes, h2d, self._stream)",
        "c.cudaMemcpyAsync(s.ptr[self._in_name], self._x.ctypes.data, self._x.nbytes, d2h, self._stream)",
        "tensorrt-match",
    ),
    # Capture without the warm enqueue: TensorRT's first enqueue allocates inside the capture.
    "tensorrt: no warm enqueue before capture": (
        TRT,
        TRT_WARM + ": TensorRT's one-time work\n                self._enqueue_step(context)\n",
        TRT_WARM + "\n                pass\n",
        "tensorrt-match",
    ),
    # full()/set_source uploads with a synchronous cudaMemcpy (legacy stream, pageable memory).
    "tensorrt: _h2d with a synchronous cudaMemcpy": (
        TRT,
        "            self._cudart.cudaMemcpyAsync(ptr, arr.ctypes.data, arr.nbytes, kind, self._stream),",
        "            self._cudart.cudaMemcpy(ptr, arr.ctypes.data, arr.nbytes, kind),",
        "tensorrt-match",
    ),
    # The commit as it was: a synchronous device-to-device cudaMemcpy2D, ordered against nothing.
    "device: commit with a synchronous cudaMemcpy2D": (
        DEVICE,
        "                c.cudaMemcpy2DAsync(dst + row * width, dpitch, src, spitch, width, height, kind, stream),",
        "                c.cudaMemcpy2D(dst + row * width, dpitch, src, spitch, width, height, kind),",
        "ort-match",
    ),
    # The commit's copies enqueued on its stream, never waited for.
    "device: commit without synchronising its stream": (
        DEVICE,
        '                "cudaMemcpy2DAsync commit",\n            )\n        self._sync()\n',
        '                "cudaMemcpy2DAsync commit",\n            )\n',
        "ort-match",
    ),
    # ORT's run not waited for: step returns while the run (y, k_new, v_new) is still in flight.
    "ort_gpu: run without synchronize_outputs()": (ORT_GPU, ORT_RUN_SYNC, "", "ort-ready"),
}


def _plant(monkeypatch, module_name, old, new):
    """The mutant of `module_name` in sys.modules for this test; a mutant of the device stores
    also re-runs the backend modules that import them, so they bind the mutant's classes."""
    import importlib
    import inspect

    dependents = [ORT_GPU, TRT] if module_name == DEVICE else []
    for name, (before, after) in [(module_name, (old, new)), *((d, ("", "")) for d in dependents)]:
        module = importlib.import_module(name)
        source = inspect.getsource(module)
        assert not before or source.count(before) == 1, (
            f"mutation anchor not found once in {name}: {before!r}"
        )
        mutant = types.ModuleType(name)
        mutant.__package__, mutant.__file__ = module.__package__, module.__file__
        monkeypatch.setitem(sys.modules, name, mutant)  # before the exec: dependents import it
        exec(compile(source.replace(before, after) if before else source, f"{module.__file__} (mutant)", "exec"),
             mutant.__dict__)  # fmt: skip


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_is_caught(name, tmp_path, monkeypatch, device):
    from tickformer.errors import BackendError

    module_name, old, new, check = MUTATIONS[name]
    art = make_artifact(tmp_path / "art")
    record = []
    if check.startswith("ort"):
        _install_fake_ort(monkeypatch, device, record)
        fakes.install_cuda(monkeypatch, sys.modules, device)
    else:
        stats = {"builds": [], "deserialized": 0, "runs": 0, "addresses": [], "enqueue_errors": []}
        monkeypatch.setitem(sys.modules, "tensorrt", fakes.make_fake_trt(stats, device))
        fakes.install_cuda(monkeypatch, sys.modules, device)
        _emulated_build(art, precision="fp32")
    run_check = {
        "tensorrt-match": lambda: check_tensorrt_matches_numpy(art, stats, device, cuda_graph=True),
        "tensorrt-ready": lambda: check_step_output_ready_on_return(art, device, "tensorrt"),
        "ort-match": lambda: check_ort_gpu_matches_numpy(art, "ort-cuda", record),
        "ort-ready": lambda: check_step_output_ready_on_return(art, device, "ort-cuda"),
    }[check]
    run_check()  # the unmutated backend passes the check in this very setting
    _plant(monkeypatch, module_name, old, new)
    with pytest.raises((AssertionError, BackendError)), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a failed capture warns before the check fails
        run_check()


# --- ssm artifacts on the GPU backends (runtime/backends/ort_gpu.py, tensorrt.py "ssm artifacts") ----
# The same emulation. An ssm artifact exported with batch K (K candidates of one stream, for
# peek) is stepped well past max_len on each GPU backend and compared with the numpy backend
# (outputs and the whole state, within the emulation's 1e-5: an "engine" is onnxruntime on CPU);
# peek + commit(i) is compared bit for bit with a plain step of the same backend; reset replays
# bit for bit; a failed or refused step leaves the device state; the monitor's state check reads
# the staged device buffer. Mutants of the double buffering, the synchronisation and the peek
# commit's copies are planted below and must fail these checks.
SSM_K = 3
SSM_CONFIG = preset("tiny").replace(block="ssm", d_state=3)
SSM_STEPS = 3 * SSM_CONFIG.max_len  # past max_len: no ContextFull, and both parities many times


def make_ssm_artifact(root):
    from tickformer.export.writer import export_params

    export_params(SSM_CONFIG, init_params(SSM_CONFIG, seed=4), root, batch=SSM_K)
    return root


def _ssm_inputs(seed, steps=SSM_STEPS):
    rng = np.random.default_rng(seed)
    return rng.uniform(-10, 10, (steps, SSM_K, 1, SSM_CONFIG.d_in)).astype(np.float32)  # [T, K, 1, d_in]


def _gpu_ssm_setup(art, backend, monkeypatch, device, *, device_copies=True):
    """Install the fakes a backend needs (tensorrt: build its engines first)."""
    if backend == "tensorrt":
        stats = {"builds": [], "deserialized": 0, "runs": 0, "addresses": [], "enqueue_errors": []}
        monkeypatch.setitem(sys.modules, "tensorrt", fakes.make_fake_trt(stats, device))
        fakes.install_cuda(monkeypatch, sys.modules, device)
        _emulated_build(art, precision="fp32")
        return stats
    _install_fake_ort(monkeypatch, device)
    if device_copies:
        fakes.install_cuda(monkeypatch, sys.modules, device)
    return None


def check_ssm_matches_numpy(art, backend, device, **options):
    """Stream SSM_STEPS steps (contracts on: the state monitor reads the device's staged buffer),
    compare outputs and state with numpy; the full pass; reset then replay bit for bit."""
    xs = _ssm_inputs(6)
    ref = rt.load(art, backend="numpy")
    want = np.stack([ref.step(xs[t]).copy() for t in range(SSM_STEPS)])
    with rt.load(art, backend=backend, contracts="check", **options) as s:
        be = s.backend
        assert be.cuda_graph is options.get("cuda_graph", True), be.cuda_graph_reason  # as asked, or say why
        got = np.stack([s.step(xs[t]).copy() for t in range(SSM_STEPS)])
        assert device.in_flight() == []
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(s.state(), ref.state(), atol=1e-5, rtol=1e-5)
        assert s.monitor.summary()["contracts"]["state_bound"]["violations"] == 0
        seq = np.ascontiguousarray(xs[:10, :, 0].transpose(1, 0, 2))  # [K, 10, d_in]
        np.testing.assert_allclose(s.run(seq), ref.run(seq), atol=1e-5, rtol=1e-5)
        s.reset()  # then the steps at once: nothing in between synchronises for the reset
        again = np.stack([s.step(xs[t]).copy() for t in range(SSM_STEPS)])
        np.testing.assert_array_equal(again, got)
        s.reset()
        assert s.position == 0 and not s.state().any()
        return be


def check_ssm_peek_equals_step(art, backend, device, **options):
    """peek + commit(i) on one session == a plain step with every row = candidate i on another,
    bit for bit (outputs and the whole device state), with the K rows one state; nothing left
    in flight after peek or commit."""
    xs = _ssm_inputs(7, steps=2 * SSM_CONFIG.max_len)
    a = rt.load(art, backend=backend, **options)
    b = rt.load(art, backend=backend, **options)
    try:
        for t in range(xs.shape[0]):
            ya = a.peek(xs[t]).copy()
            choice = (2 * t + 1) % SSM_K
            a.commit(choice)
            assert device.in_flight() == [], f"after commit {t}"
            yb = b.step(np.ascontiguousarray(np.broadcast_to(xs[t, choice], xs[t].shape)))
            np.testing.assert_array_equal(ya[choice], yb[choice], err_msg=f"tick {t}")
            state = a.state().copy()
            np.testing.assert_array_equal(state, b.state(), err_msg=f"tick {t}")
            for row in range(1, SSM_K):
                np.testing.assert_array_equal(state[row], state[0])
    finally:
        a.close()
        b.close()


def check_ssm_ready_on_return(art, backend, device, **options):
    """The backend half of a step returns y and the staged state complete, with no device work
    in flight, at every position (the session's contract checks read them there)."""
    xs = _ssm_inputs(8)
    ref = rt.load(art, backend="numpy")
    with rt.load(art, backend=backend, **options) as s:
        be = s.backend
        for t in range(SSM_CONFIG.max_len):
            y = be.step(xs[t], t).copy()  # the backend alone: nothing else synchronises
            assert device.in_flight() == [], f"after step {t}"
            np.testing.assert_allclose(y, ref.step(xs[t]), atol=1e-5, rtol=1e-5, err_msg=f"position {t}")
            np.testing.assert_allclose(be.staged_state(t), ref.state(), atol=1e-5, rtol=1e-5)
            be.commit(t)  # the no-op hook; the next position reads the buffer just written


@pytest.mark.parametrize("backend", ["tensorrt", "ort-cuda", "ort-trt"])
@pytest.mark.parametrize("cuda_graph", [True, False])
def test_emulated_ssm_backend_matches_numpy_past_max_len(tmp_path, monkeypatch, device, backend, cuda_graph):
    art = make_ssm_artifact(tmp_path / "art")
    stats = _gpu_ssm_setup(art, backend, monkeypatch, device)
    launches = device.launches
    be = check_ssm_matches_numpy(art, backend, device, cuda_graph=cuda_graph)
    if backend == "tensorrt":
        assert stats["enqueue_errors"] == []
        # one replay per step (the two graphs alternate), none without graphs
        assert device.launches - launches == (2 * SSM_STEPS if cuda_graph else 0)
    else:
        assert be.commit_mode == "device"


@pytest.mark.parametrize("backend", ["tensorrt", "ort-cuda", "ort-trt"])
def test_emulated_ssm_peek_commit_equals_a_plain_step(tmp_path, monkeypatch, device, backend):
    art = make_ssm_artifact(tmp_path / "art")
    _gpu_ssm_setup(art, backend, monkeypatch, device)
    check_ssm_peek_equals_step(art, backend, device)


@pytest.mark.parametrize("backend", ["tensorrt", "ort-cuda"])
def test_emulated_ssm_step_output_ready_when_step_returns(tmp_path, monkeypatch, device, backend):
    art = make_ssm_artifact(tmp_path / "art")
    _gpu_ssm_setup(art, backend, monkeypatch, device)
    check_ssm_ready_on_return(art, backend, device)


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt"])
def test_emulated_ort_gpu_ssm_without_cuda_python_goes_through_the_host(
    tmp_path, monkeypatch, device, backend
):
    """No cuda-python: reset, peek's commit and the state reads go through the host (commit_mode
    "host"); the results are the same."""
    art = make_ssm_artifact(tmp_path / "art")
    _gpu_ssm_setup(art, backend, monkeypatch, device, device_copies=False)
    be = check_ssm_matches_numpy(art, backend, device)
    assert be.commit_mode == "host"
    check_ssm_peek_equals_step(art, backend, device)


@pytest.mark.parametrize("backend", ["tensorrt", "ort-cuda"])
def test_emulated_ssm_failed_or_refused_step_leaves_the_device_state(tmp_path, monkeypatch, device, backend):
    """An engine failure (BackendError), a refused input (InputError) and a state-bound violation
    (mode check, ContractViolation): position and device state exactly as before."""
    from tickformer.errors import BackendError, ContractViolation, InputError

    art = make_ssm_artifact(tmp_path / "art")
    _gpu_ssm_setup(art, backend, monkeypatch, device)
    xs = _ssm_inputs(9, steps=5)
    with rt.load(art, backend=backend, contracts="check", cuda_graph=False) as s:
        for t in range(3):
            s.step(xs[t])
        before, pos = s.state().copy(), s.position
        bad = xs[3].copy()
        bad[0, 0, 0] = np.nan
        with pytest.raises(InputError):
            s.step(bad)
        be, broken = s.backend, [True]
        if backend == "tensorrt":  # the engine refuses the enqueue
            owner, attr = be._contexts[pos & 1], "execute_async_v3"
        else:  # the run raises, as ORT does on a CUDA fault
            owner, attr = be._steps[pos & 1], "run_with_iobinding"
        real = getattr(owner, attr)

        def failing(*args, **kwargs):
            if broken[0]:
                if backend == "tensorrt":
                    return False
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return real(*args, **kwargs)

        setattr(owner, attr, failing)
        with pytest.raises(BackendError, match="failed"):
            s.step(xs[3])
        assert s.position == pos
        np.testing.assert_array_equal(s.state(), before)
        broken[0] = False
        s.monitor.state_bound = s.monitor.state_bound * 1e-9  # a bound the next state breaks
        with pytest.raises(ContractViolation, match="state_bound"):
            s.step(xs[3])
        assert s.position == pos
        np.testing.assert_array_equal(s.state(), before)


@pytest.mark.parametrize("backend", ["ort-trt", "tensorrt"])
def test_emulated_ssm_full_pass_longer_than_the_profile_is_refused(tmp_path, monkeypatch, device, backend):
    """The TensorRT engine / the TensorRT EP's profile covers T <= max_len: one line naming the fix."""
    from tickformer.errors import BackendError

    art = make_ssm_artifact(tmp_path / "art")
    _gpu_ssm_setup(art, backend, monkeypatch, device)
    with rt.load(art, backend=backend) as s:
        seq = np.zeros((SSM_K, SSM_CONFIG.max_len + 1, SSM_CONFIG.d_in), np.float32)
        with pytest.raises(BackendError, match="max_len 16, got T = 17") as info:
            s.run(seq)
        assert "\n" not in str(info.value) and "step()" in str(info.value)
        assert s.run(seq[:, : SSM_CONFIG.max_len]).shape == (SSM_K, SSM_CONFIG.max_len, SSM_CONFIG.d_out)


def test_emulated_ssm_fp16_is_refused_at_build_and_load(tmp_path, monkeypatch, device):
    from tickformer.errors import BackendError, ConfigError

    art = make_ssm_artifact(tmp_path / "art")
    _gpu_ssm_setup(art, "tensorrt", monkeypatch, device)  # builds fp32
    with pytest.raises(ConfigError, match="not available for ssm artifacts"):
        _emulated_build(art, precision="fp16", convert=True)
    with pytest.raises(BackendError, match="not available for ssm artifacts"):
        rt.load(art, backend="tensorrt", precision="fp16")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_gpu_ssm_backend_matches_numpy_past_max_len(tmp_path, backend):
    """On real hardware: SSM_STEPS steps and the full pass against numpy, within 10x the
    artifact's tolerance (ort-trt: the TF32-level bound, as the attention test)."""
    _require(backend)
    art = make_ssm_artifact(tmp_path / "art")
    if backend == "tensorrt":
        _built(art, "fp32")
    xs = _ssm_inputs(10)
    ref = rt.load(art, backend="numpy")
    want = np.stack([ref.step(xs[t]).copy() for t in range(SSM_STEPS)])
    tol = rt.open_artifact(art).tolerance
    with rt.load(art, backend=backend, contracts="check") as s:
        got = np.stack([s.step(xs[t]).copy() for t in range(SSM_STEPS)])
        seq = np.ascontiguousarray(xs[:10, :, 0].transpose(1, 0, 2))
        full = s.run(seq)
    if backend == "ort-trt":
        from tickformer.export.fp16 import error_bound

        bound = error_bound(n_layers=SSM_CONFIG.n_layers)
        assert np.abs(got - want).max() / np.abs(want).max() <= bound
    else:
        np.testing.assert_allclose(got, want, atol=tol["atol"] * 10, rtol=tol["rtol"] * 10)
        np.testing.assert_allclose(full, ref.run(seq), atol=tol["atol"] * 10, rtol=tol["rtol"] * 10)


# Planted bugs in the ssm GPU paths; each must fail the check named beside it (as MUTATIONS above).
SSM_MUTATIONS = {
    # The TensorRT step returns without waiting for its stream (the same code as attention's).
    "tensorrt ssm: step without _sync()": (TRT, *TRT_STEP_SYNC, "tensorrt", "ready"),
    # Parity 1's context bound like parity 0's: both read buffer 0 and write buffer 1.
    "tensorrt ssm: second context with the state addresses not swapped": (
        TRT,
        "s.add_context(self.store.addresses(p))",
        "s.add_context({})",
        "tensorrt",
        "match",
    ),
    # Only parity 0's context is warmed: the first enqueue of parity 1 allocates inside the capture.
    "tensorrt ssm: no warm enqueue on the second context": (
        TRT,
        TRT_WARM,
        "            for context in range(1):  # a warm enqueue on each",
        "tensorrt",
        "match",
    ),
    # peek's commit copies nothing: the rows keep their own candidates' states.
    "device ssm: commit_candidate without its copies": (
        DEVICE,
        "        for dst, src in self._cand[pos & 1][i]:\n",
        "        for dst, src in []:\n",
        "tensorrt",
        "peek",
    ),
    # ORT's run not waited for: step returns while y and state_new are still being written.
    "ort_gpu ssm: run without synchronize_outputs()": (ORT_GPU, ORT_RUN_SYNC, "", "ort-cuda", "ready"),
    # peek's copies on the backend's stream never waited for: ORT's next run reads the rows first.
    "device ssm: commit_candidate without synchronising its stream": (
        DEVICE,
        '"cudaMemcpyAsync candidate"\n            )\n        self._sync()\n',
        '"cudaMemcpyAsync candidate"\n            )\n',
        "ort-cuda",
        "peek",
    ),
    # reset's memset never waited for: the next step reads the old state.
    "device ssm: reset without synchronising its stream": (
        DEVICE,
        '"cudaMemsetAsync reset"\n        )\n        self._sync()\n',
        '"cudaMemsetAsync reset"\n        )\n',
        "ort-cuda",
        "match",
    ),
    # Both parities bound to read buffer 0 (the double buffering broken).
    "device ssm: one state buffer read at every parity": (
        DEVICE,
        "fmt.SSM_STATE: self.base[parity],",
        "fmt.SSM_STATE: self.base[0],",
        "ort-cuda",
        "match",
    ),
}


@pytest.mark.parametrize("name", list(SSM_MUTATIONS))
def test_ssm_mutation_is_caught(name, tmp_path, monkeypatch, device):
    from tickformer.errors import BackendError

    module_name, old, new, backend, check = SSM_MUTATIONS[name]
    art = make_ssm_artifact(tmp_path / "art")
    _gpu_ssm_setup(art, backend, monkeypatch, device)
    run_check = {
        "match": lambda: check_ssm_matches_numpy(art, backend, device, cuda_graph=True),
        "peek": lambda: check_ssm_peek_equals_step(art, backend, device),
        "ready": lambda: check_ssm_ready_on_return(art, backend, device),
    }[check]
    run_check()  # the unmutated backend passes the check in this very setting
    _plant(monkeypatch, module_name, old, new)
    with pytest.raises((AssertionError, BackendError)), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a failed capture warns before the check fails
        run_check()


def test_emulated_ort_trt_windowed_full_pass_past_the_profile_is_refused(tmp_path, monkeypatch, device):
    """A windowed artifact's full pass takes any T on ort, but the TensorRT EP's profile covers
    T <= max_len: ort-trt refuses a longer T in one line before the engine sees it (ort-cuda runs it)."""
    from tickformer.errors import BackendError

    art = make_artifact(tmp_path / "art", window=4)
    _install_fake_ort(monkeypatch, device)
    cfg = preset("tiny")
    x = np.zeros((1, cfg.max_len + 1, cfg.d_in), np.float32)
    with rt.load(art, backend="ort-trt") as session:
        with pytest.raises(BackendError, match="covers T <= max_len 16, got T = 17") as info:
            session.run(x)
        assert "\n" not in str(info.value)
    with rt.load(art, backend="ort-cuda") as session:
        assert session.run(x).shape == (1, cfg.max_len + 1, cfg.d_out)
