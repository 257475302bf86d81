"""Backend registry: lazy imports, and a clear BackendUnavailable naming what to install."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tickformer import runtime
from tickformer.errors import BackendUnavailable, ConfigError
from tickformer.runtime import backends


def test_unknown_backend_lists_the_choices(tiny_art):
    with pytest.raises(BackendUnavailable, match="choose one of"):
        runtime.load(tiny_art[0], backend="cuda-magic")


def test_missing_backend_module_is_reported(monkeypatch):
    monkeypatch.setitem(
        backends.REGISTRY, "ghost", ("tickformer.runtime.backends._ghost", "pip install ghost")
    )
    with pytest.raises(BackendUnavailable, match="not part of this build"):
        backends.backend_class("ghost")


def test_backend_whose_engine_is_not_installed_names_the_extra(monkeypatch, tmp_path):
    (tmp_path / "needs_engine.py").write_text("import tickformer_no_such_engine_xyz\nBACKENDS = {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(backends.REGISTRY, "needs-engine", ("needs_engine", "pip install 'tickformer[gpu]'"))
    with pytest.raises(BackendUnavailable, match=r"tickformer_no_such_engine_xyz.*tickformer\[gpu\]"):
        backends.backend_class("needs-engine")


@pytest.mark.parametrize("name", ["tensorrt", "ort-cuda", "ort-trt"])
def test_gpu_backends_unavailable_without_gpu(tiny_art, name):
    """On CPU-only machines the GPU backends must refuse clearly (never silently run on CPU)."""
    if _has_real_tensorrt() or _has_cuda_provider():
        pytest.skip("a GPU runtime is installed here; the GPU backends are tested in the GPU suite")
    with pytest.raises(BackendUnavailable):
        runtime.load(tiny_art[0], backend=name)


def _has_real_tensorrt() -> bool:
    """tensorrt-stubs installs a namespace package named tensorrt; the real one has Builder."""
    if importlib.util.find_spec("tensorrt") is None:
        return False
    import tensorrt

    return hasattr(tensorrt, "Builder")


def _has_cuda_provider() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


def test_backend_options_are_validated(tiny_art):
    with pytest.raises(ConfigError, match="binding"):
        runtime.load(tiny_art[0], backend="ort", binding="zero-copy")
    with pytest.raises(ConfigError, match="threads"):
        runtime.load(tiny_art[0], backend="ort", threads=0)
    with pytest.raises(TypeError, match="no options"):
        runtime.load(tiny_art[0], backend="numpy", threads=2)
    with pytest.raises(ConfigError, match="contracts"):
        runtime.load(tiny_art[0], backend="numpy", contracts="strict")


def test_registry_imports_lazily():
    assert "tickformer.runtime.backends._ghost" not in sys.modules
    assert set(runtime.BACKENDS) >= {"numpy", "numpy-growing", "ort", "ort-cuda", "ort-trt", "tensorrt"}


def test_ort_runner_falls_back_to_the_public_binding_when_the_internals_move(tiny_art, seq_for):
    """ort.py calls onnxruntime's bound C++ `_sess.run_with_iobinding` (allocation-free); if a
    future onnxruntime drops `_sess`, the public `run_with_iobinding` must run the same graph."""
    import numpy as np

    path, _ = tiny_art
    fast = runtime.load(path, backend="ort")
    slow = runtime.load(path, backend="ort")
    be = slow.backend

    class PublicOnly:  # what a session without the private binding looks like to the runner
        def __init__(self, real):
            self.run_with_iobinding = real.run_with_iobinding

    real = be._step
    be._step = PublicOnly(real)
    be._runs = [be._iobinding_runner(io) for io in be._ios]
    be._step = real
    assert be._runs[0].func == real.run_with_iobinding  # the public method, not the C++ binding
    seq = seq_for(fast.config, 1, fast.max_len, seed=0)
    for t in range(fast.max_len):
        x = np.ascontiguousarray(seq[:, t : t + 1])
        assert np.array_equal(fast.step(x), slow.step(x)), t
