"""Stale cache rows holding inf or NaN cannot leak on the GPU backends (`tensorrt`, `ort-cuda`,
`ort-trt`), static and ring caches, on the strict CUDA emulation of tests/runtime/_gpu_fakes.py.

The step graphs select V rows as well as scores (export/blocks.attend_step; `tickformer prove ART`
proves on the graph that no output depends on a stale row whatever it holds). Here the device
caches themselves are poisoned -- every byte of the K and V allocations, layer padding included,
and the host mirror where the backend keeps one -- before the first step and again after a
reset, and every output must be bit for bit the output of a clean session of the same backend.
The emulation runs the engine's ONNX graph with onnxruntime on CPU over the fake device arena:
this checks what the backends bind, copy and commit, not a GPU's numerics (no GPU here).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tickformer.runtime as rt
from tickformer.export.blocks import cache_rows_live  # the real one: the mutant below wraps it
from tickformer.export.writer import export_artifact
from tickformer.model.checkpoint import Checkpoint
from tickformer.model.config import preset
from tickformer.model.transformer import init_params

sys.path.insert(0, str(Path(__file__).parent))  # for `import _gpu_fakes` (importlib import mode)
import _gpu_fakes as fakes  # noqa: E402

POISONS = (np.inf, -np.inf, np.nan)


def _artifact(root: Path, window: int | None) -> Path:
    cfg = preset("tiny") if window is None else preset("tiny").replace(window=window)
    export_artifact(Checkpoint(config=cfg, params=init_params(cfg, seed=0), meta={}), root)
    return root


def _poison_device(device: fakes.FakeCuda, ptr: int, value: float) -> None:
    """Every float32 of the device allocation `ptr` lies in, padding included, set to `value`."""
    device.cudaDeviceSynchronize()  # nothing queued may overwrite the poison later
    where = device._device_at(ptr, 1)
    assert where is not None, f"{ptr:#x} is not device memory"
    alloc, _ = where
    words = alloc.data[: alloc.size - alloc.size % 4].view(np.float32)
    words[...] = np.float32(value)


def _poison(backend, device: fakes.FakeCuda, value: float) -> None:
    if backend.name == "tensorrt":
        ptrs = [backend._dev["k_cache"], backend._dev["v_cache"]]
    else:  # ort-cuda, ort-trt: the cache OrtValues (and the host mirror, when commits go through it)
        ptrs = [backend._vals["k_cache"].data_ptr(), backend._vals["v_cache"].data_ptr()]
        for mirror in getattr(backend.store, "_mirror", ()):
            mirror[...] = np.float32(value)
    for ptr in ptrs:
        _poison_device(device, ptr, value)
    k, v = backend.cache()  # read back through the backend: every logical row holds the poison
    assert not np.isfinite(k).any() and not np.isfinite(v).any()


def _run(session, xs, device=None, poison=None, reset_at=None):
    """Outputs of stepping xs (poisoning the caches first, and again right after a reset at step
    `reset_at`, when `poison` is given)."""
    if poison is not None:
        _poison(session.backend, device, poison)
    out = []
    for t, x in enumerate(xs):
        if t == reset_at:
            session.reset()
            if poison is not None:
                _poison(session.backend, device, poison)
        out.append(session.step(x).copy())
    return out


def _inputs(n, seed=4):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=(1, 1, 3)).astype(np.float32) for _ in range(n)]


def _stats() -> dict:
    return {"builds": [], "deserialized": 0, "runs": 0, "addresses": [], "enqueue_errors": []}


@pytest.fixture
def device():
    return fakes.FakeCuda()


def _load(art, backend, monkeypatch, device, device_commit):
    if backend == "tensorrt":
        monkeypatch.setitem(sys.modules, "tensorrt", fakes.make_fake_trt(_stats(), device))
        fakes.install_cuda(monkeypatch, sys.modules, device)
        from tickformer.export.engines import BuildOptions, build_engines

        if not (art / "engines").exists():
            build_engines(art, BuildOptions(precision="fp32"))
    else:
        monkeypatch.setitem(sys.modules, "onnxruntime", fakes.make_fake_ort([], device))
        if device_commit:
            fakes.install_cuda(monkeypatch, sys.modules, device)
    return rt.load(art, backend=backend)


CASES = [
    ("tensorrt", True),
    ("ort-cuda", True),
    ("ort-cuda", False),  # commits through the host mirror
    ("ort-trt", True),
]


@pytest.mark.parametrize(("backend", "device_commit"), CASES)
@pytest.mark.parametrize("window", [None, 4])
@pytest.mark.parametrize("poison", POISONS)
def test_poisoned_stale_rows_do_not_leak_on_the_gpu_backends(
    tmp_path, monkeypatch, device, backend, device_commit, window, poison
):
    """Poisoned K/V caches at load and again after a reset: every output bit for bit a clean
    session's (static cache of 16 rows, or a ring of 4 slots stepped through 3 wraps)."""
    art = _artifact(tmp_path / "art", window)
    steps = 14 if window is None else 13  # a reset at step 6, then 8 (ring: 7 > W) more steps
    xs = _inputs(steps)
    clean = _run(_load(art, backend, monkeypatch, device, device_commit), xs, reset_at=6)
    dirty_session = _load(art, backend, monkeypatch, device, device_commit)
    with np.errstate(invalid="ignore", over="ignore"):
        dirty = _run(dirty_session, xs, device, poison, reset_at=6)
    for t, (a, b) in enumerate(zip(clean, dirty)):
        assert np.isfinite(b).all() and a.tobytes() == b.tobytes(), (backend, window, poison, t)


def test_poisoning_reaches_the_output_when_the_v_selection_is_dropped(tmp_path, monkeypatch, device):
    """The check can fail: with the step graph's V-row selection made to select every row (its
    index never names the zero row) and the engine rebuilt from it, a NaN in a stale V row reaches
    the output."""
    import onnx

    from tickformer.artifact import reader
    from tickformer.export import blocks

    monkeypatch.setattr(blocks, "cache_rows_live", _ones_rows)
    cfg = preset("tiny")
    export_artifact(Checkpoint(config=cfg, params=init_params(cfg, seed=0), meta={}), tmp_path / "art")
    step = onnx.load_from_string(reader.verified_graph_bytes(rt.open_artifact(tmp_path / "art"), "step"))
    assert sum(n.op_type == "Gather" for n in step.graph.node) >= 1
    xs = _inputs(4)
    session = _load(tmp_path / "art", "ort-cuda", monkeypatch, device, True)
    with np.errstate(invalid="ignore", over="ignore"):
        dirty = _run(session, xs, device, np.nan)
    assert any(not np.isfinite(y).all() for y in dirty)


def _ones_rows(g, live, n_rows, v_cache_shape):
    """A V-row 'selection' that selects every row (the mutant): the real one's zero row, but an
    index that never names it, so stale V rows reach the product."""
    _, zero_row = cache_rows_live(g, live, n_rows, v_cache_shape)
    return g.const(np.arange(n_rows, dtype=np.int64), "all_rows_live"), zero_row
