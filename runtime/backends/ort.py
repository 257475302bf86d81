"""ONNX Runtime (CPU) backend: step.onnx over host-resident state, both block kinds.

Session options are the package's one choice for latency and determinism
(`tickformer.runtime.ort_session.session_options`: one intra-op thread, sequential execution,
full graph optimisation, memory patterns on). Binding strategy, chosen by measurement (docs/export_runtime.md):
`binding="iobinding"` (default) binds every input and output to the preallocated host buffers
once, so a step copies nothing and allocates nothing on the Python side; `binding="run"` feeds
the buffers to `InferenceSession.run` and copies its fresh outputs into the staging buffers.
Step I/O (format 2, artifact/format.py `step_signature`): x and y are views of the session's
[B, 1, .] buffers in the graph's 2-D shape; the state the step reads and writes is the host
store of the artifact's block kind (layout.py), read and written in place -- attention: layer i's
caches are the contiguous slices i of the stacked host caches (HostCache: K transposed
[L, B, H, dh, N], V [L, B, H, N, dh]), one binding; ssm: the double-buffered state (HostState),
one binding per parity (the step at position p reads buffer p & 1 and writes the other).

Loading (not real-time): each graph's bytes are read once, hash-checked against the manifest and
refused if any tensor keeps external data (`tickformer.artifact.reader.verified_graph_bytes`), and those
bytes -- never the path -- go to `ort.InferenceSession`, so a file swapped after `open_artifact`
is never run. The session's inputs and outputs (names, element types, shapes) must then equal
the manifest's graph spec, which `open_artifact` checked against the config: a graph with
another signature raises ArtifactError before anything is bound.

Real-time: "iobinding": a step allocates nothing traced by tracemalloc, not even transiently
(`_iobinding_runner`; commit through the store's views made at load). "run": the output arrays
are freed before `step` returns, but ORT's binding keeps a bounded few hundred small blocks over
the first ~30,000 calls (tests/runtime/test_allocation.py).
Source: ONNX Runtime Python API (onnxruntime.ai/docs/api/python/api_summary.html),
performance tuning (onnxruntime.ai/docs/performance/tune-performance/threading.html).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np
import onnxruntime as ort

from tickformer import validation
from tickformer.artifact import format as fmt
from tickformer.artifact.format import io_names, step_signature
from tickformer.artifact.reader import Artifact, verified_graph_bytes
from tickformer.errors import ArtifactError, BackendError

from ..ort_session import session_options
from .layout import HostBackend

BINDINGS = ("run", "iobinding")
ORT_TYPES = {"float32": "tensor(float)", "float64": "tensor(double)"}  # else "tensor(<numpy name>)"


def check_signature(session: Any, spec: dict[str, Any], where: str) -> None:
    """Raise ArtifactError unless session.get_inputs()/get_outputs() have exactly the names,
    element types and shapes of the manifest graph spec {"inputs": [...], "outputs": [...]}."""
    for key, args in (("inputs", session.get_inputs()), ("outputs", session.get_outputs())):
        have = {a.name: (a.type, list(a.shape)) for a in args}
        want = {
            v["name"]: (ORT_TYPES.get(v["dtype"], f"tensor({v['dtype']})"), list(v["shape"]))
            for v in spec[key]
        }
        if have != want:
            bad = sorted(n for n in set(have) | set(want) if have.get(n) != want.get(n))
            raise ArtifactError(
                f"{where}: graph {key} {bad} do not match manifest.json (graph has "
                f"{[(n, *have[n]) for n in bad if n in have][:2]}, "
                f"manifest says {[(n, *want[n]) for n in bad if n in want][:2]}); the graph is not this "
                "artifact's, re-export it"
            )


def _view(buffer: np.ndarray, shape: list[int], name: str) -> np.ndarray:
    """buffer in the graph's shape, as a view: IOBinding reads and writes through the pointer, so
    a silent copy (reshape of a non-contiguous array) would bind memory nobody owns."""
    view = buffer.reshape(shape)
    if not (view.flags.c_contiguous and np.shares_memory(view, buffer)):
        raise BackendError(f"step buffer {name!r} is not a contiguous view of its host buffer")
    return view


class OrtBackend(HostBackend):
    """ONNX Runtime with the CPU execution provider."""

    name = "ort"
    static_cache = True
    ring_cache = True  # step.onnx holds the ring arithmetic; HostCache commits row ring_slot(pos, W)
    providers: Sequence[Any] = ("CPUExecutionProvider",)

    def __init__(
        self, artifact: Artifact, *, threads: int = 1, binding: str = "iobinding", optimization: str = "all"
    ) -> None:
        super().__init__(artifact)
        self.binding = validation.one_of(binding, "binding", BINDINGS)
        self._opts = session_options(threads, optimization=optimization)
        cfg, batch = self.config, artifact.batch
        self._step = self._session("step")
        self._full = self._session("model") if cfg.arch == "decoder" else None
        self._encoder = self._session("encoder") if cfg.arch == "encoder-decoder" else None
        in_name, out_name = io_names(cfg)
        x_shape, x_dtype = (
            ((batch, 1), np.int64) if cfg.inputs == "tokens" else ((batch, 1, cfg.d_in), np.float32)
        )
        self._x = np.zeros(x_shape, dtype=x_dtype)  # the session's layout; the graph's is [B, d_in] / [B]
        self._pos = np.zeros(1, dtype=np.int64)  # attention's position input (the ssm step has none)
        self._y = np.zeros(self.step_output_shape, dtype=np.float32)  # [B, 1, d_out | V]
        self.store = self._host_store()
        cross = cfg.arch == "encoder-decoder"
        # cross_k, cross_v [L, B, H, N, dh] and src_valid [B, N], written once per source by set_source.
        self._cross = (
            (
                np.zeros(self.cache_shape, np.float32),
                np.zeros(self.cache_shape, np.float32),
                np.zeros((batch, cfg.max_len), np.bool_),
            )
            if cross
            else None
        )
        shared = {in_name: self._x, "pos": self._pos, out_name: self._y}
        if self._cross is not None:
            for i in range(cfg.n_layers):
                shared.update({fmt.cross_k(i): self._cross[0][i], fmt.cross_v(i): self._cross[1][i]})
            shared["src_valid"] = self._cross[2]
        # Every step input and output as a view of a buffer above, in the graph's own shape (no copies),
        # per parity of the position (the store's: one set for a KV cache, two for the ssm state).
        sig = step_signature(cfg, batch)
        self._in_views: list[dict[str, np.ndarray]] = []
        self._out_views: list[dict[str, np.ndarray]] = []
        for parity in range(self.store.parities):
            views = {**shared, **self.store.views(parity)}
            self._in_views.append({n: _view(views[n], shape, n) for n, (_, shape) in sig["inputs"].items()})
            self._out_views.append({n: _view(views[n], shape, n) for n, (_, shape) in sig["outputs"].items()})
        self._out_names = list(self._out_views[0])
        self._out_lists = [list(views.values()) for views in self._out_views]
        self._parity = self.store.parities - 1  # pos & this: 0 always (KV cache), or pos's parity (ssm)
        self._run_options = ort.RunOptions()  # made once: a run without one builds a default per call
        self._ios = [self._bind(p) for p in range(self.store.parities)] if binding == "iobinding" else []
        self._runs = [self._iobinding_runner(io) for io in self._ios]

    def _session(self, graph: str) -> ort.InferenceSession:
        """A session over the verified bytes of `graph`, its signature checked (module docstring)."""
        path = self.artifact.graph_path(graph)
        data = verified_graph_bytes(self.artifact, graph)  # read once, hashed, no external data
        try:
            session = ort.InferenceSession(data, sess_options=self._opts, providers=list(self.providers))
        except Exception as exc:  # ORT raises its own pybind exception types
            raise BackendError(
                f"onnxruntime cannot load {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            ) from exc
        check_signature(session, self.artifact.graph_spec(graph), str(path))
        return session

    def _bind(self, parity: int) -> ort.IOBinding:
        """Bind every step input and output of this parity to its preallocated host view, once."""
        io = self._step.io_binding()
        try:
            for name, arr in self._in_views[parity].items():
                io.bind_input(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
            for name, arr in self._out_views[parity].items():
                io.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
        except Exception as exc:  # signatures were checked in _session: an engine-side failure
            raise BackendError(f"onnxruntime cannot bind the step buffers: {exc}") from exc
        return io

    def _iobinding_runner(self, io: ort.IOBinding) -> Callable[[], None]:
        """What `step` calls to run the bound graph. onnxruntime's public
        `InferenceSession.run_with_iobinding` first does WebGPU graph-capture bookkeeping in Python
        (~120 B allocated per call) and then calls the session's C++ binding `_sess`; we call that
        binding directly, through a functools.partial holding a RunOptions made once (without one
        it builds a default: ~200 B more). Nothing is left that tracemalloc sees, not even within
        a call (tests/runtime/test_allocation.py). Falls back to the public method if the
        binding's internals ever move."""
        run = getattr(getattr(self._step, "_sess", None), "run_with_iobinding", None)
        native_io = getattr(io, "_iobinding", None)
        if run is None or native_io is None:
            return functools.partial(self._step.run_with_iobinding, io, self._run_options)
        return functools.partial(run, native_io, self._run_options)

    # --- real-time path ------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time safe after warm-up (see module docstring). Never writes the committed state."""
        np.copyto(self._x, x)
        self._pos[0] = pos
        parity = pos & self._parity
        try:
            if self._runs:
                self._runs[parity]()
            else:
                results = self._step.run(self._out_names, self._in_views[parity])
                for dst, src in zip(self._out_lists[parity], results):
                    np.copyto(dst, src)
        except Exception as exc:
            raise BackendError(f"onnxruntime step failed at position {pos}: {exc}") from exc
        return self._y

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
        if self._encoder is None or self._cross is None:
            raise NotImplementedError("decoder-only artifacts have no source")
        try:
            cross_k, cross_v = self._encoder.run(["cross_k", "cross_v"], {"src": src, "src_valid": src_valid})
        except Exception as exc:
            raise BackendError(f"onnxruntime encoder failed: {exc}") from exc
        for buf, new in zip(self._cross, (cross_k, cross_v, src_valid)):
            np.copyto(buf, new)  # in place: IOBinding keeps pointing at these buffers

    def close(self) -> None:
        self._ios, self._runs = [], []
        self._step = self._full = self._encoder = None  # type: ignore[assignment]


BACKENDS = {"ort": OrtBackend}
