"""Backends for the "ssm" artifact kind (docs/ssm.md): one fixed-size recurrent state, no KV
cache, behind the same `Session` API (runtime/ssm_session.py).

State layout: two buffers [2, B, L, D, N] (double buffering). The step at session position p
reads buffer p & 1 and writes the new state into buffer 1 - (p & 1); it never writes the state
it reads, so a failed or refused step leaves the session's state as it was, and the commit is
the session's position store alone (runtime/ssm_session.py), with nothing to copy: `commit(pos)`
is a no-op hook. `reset()` zeroes buffer 0 in place: constant time (the state's size, never the
stream's length).

Peek (`Session.peek` / `commit(i)`: the batch rows are K candidates over ONE stream, every row's
state identical): the step writes K candidate states into the staged buffer; `commit_candidate(pos,
i)` copies row i over the other rows of that same staged buffer (rows before i, rows after i: two
broadcasting copies between views made at load, no overlap, 0 bytes), so the state committed by
the position store is candidate i's in every row -- bit for bit what a step whose every row is
xs[i] writes. The committed buffer is not touched before the position store.

    numpy  the model's own functions (model/ssm.py `ssm_step`, model/layers.py): temporaries
           only, freed before the step returns (like the attention numpy backend).
    ort    step.onnx through IOBinding: two bindings made at load, one per parity (x, the
           state read, y, the state written), so a step copies x in and calls the bound C++
           session: nothing traced by tracemalloc, not even transiently
           (tests/runtime/test_ssm_runtime.py); the full graph (Scan) through `run`.

The GPU variants (ort-cuda, ort-trt: runtime/backends/ort_gpu.py; tensorrt:
runtime/backends/tensorrt.py) keep the same two buffers on the device. `SSM_BACKENDS` names every
backend that runs this kind, lazily (module, class), like `runtime.backends.REGISTRY`; the others
(numpy-growing) refuse at load with the reason (`ssm_backend_class`). Not real-time:
construction, `full`.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

import numpy as np

from tickformer import validation
from tickformer.artifact import format as fmt
from tickformer.artifact.reader import Artifact
from tickformer.errors import BackendError, BackendUnavailable
from tickformer.model import names
from tickformer.model.layers import feed_forward, layer_norm, linear
from tickformer.model.ssm import ssm_step
from tickformer.model.transformer import forward

from .base import Backend


class SsmBackend(Backend):
    """What SsmSession calls on every ssm backend: step (reads state(pos), writes staged_state(pos)
    and the output buffer), the state views, reset, the commit hooks, full. Host or device."""

    supports_peek = False  # True only where commit_candidate is implemented (host and GPU backends)

    def __init__(self, artifact: Artifact, **options: Any) -> None:
        super().__init__(artifact, **options)
        self.state_shape = tuple(fmt.ssm_state_shape(self.config, artifact.batch))  # [B, L, D, N]
        self._y = np.zeros(self.step_output_shape, dtype=np.float32)  # [B, 1, d_out | V]

    def state(self, pos: int) -> np.ndarray:
        """The state read by the step at position pos (the committed state), [B, L, D, N]."""
        raise NotImplementedError

    def staged_state(self, pos: int) -> np.ndarray:
        """The state the step at position pos wrote (committed only when the position advances)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Zero the state read at position 0. Constant time."""
        raise NotImplementedError

    def commit(self, pos: int) -> None:
        """Nothing to copy: the position store selects the buffer (module docstring)."""

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        raise BackendError("an ssm artifact has no KV cache; its state is session.state()")


class DeviceSsmBackend(SsmBackend):
    """The double-buffered state on a GPU (ort_gpu.py, tensorrt.py): the state views are copies
    into host buffers made at load (`self._read`, one per view), by the backend's `_read_state`."""

    _read: tuple[np.ndarray, np.ndarray]

    def _read_state(self, buffer: int, out: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def state(self, pos: int) -> np.ndarray:
        """The committed state, copied from the device into a host buffer made at load."""
        return self._read_state(pos & 1, self._read[0])

    def staged_state(self, pos: int) -> np.ndarray:
        """The state the step at pos wrote, copied into its own host buffer (the monitor's read)."""
        return self._read_state(1 - (pos & 1), self._read[1])


class HostSsmBackend(SsmBackend):
    """The double-buffered state in host memory (numpy, ort), and its peek commit."""

    supports_peek = True

    def __init__(self, artifact: Artifact, **options: Any) -> None:
        super().__init__(artifact, **options)
        self._bind_states(np.zeros((2, *self.state_shape), dtype=np.float32))  # [2, B, L, D, N]

    def _bind_states(self, states: np.ndarray) -> None:
        """Use `states` [2, B, L, D, N] (host memory: numpy's own, or the C backend's tf_state) as
        the two buffers, with every view the real-time path needs made now."""
        self._states = states
        self._buffers = (states[0], states[1])  # views made once: indexing makes a new one
        # [parity of pos][i]: (rows before i, rows after i, row i) of the buffer the step at pos
        # writes; made once so commit_candidate is two np.copyto calls (module docstring, "Peek").
        self._cand: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = []
        for parity in (0, 1):
            staged = states[1 - parity]  # [B, L, D, N]
            self._cand.append(
                [(staged[:i], staged[i + 1 :], staged[i : i + 1]) for i in range(states.shape[1])]
            )

    def state(self, pos: int) -> np.ndarray:
        """The committed state, a view [B, L, D, N] made at load (0 bytes)."""
        return self._buffers[pos & 1]

    def staged_state(self, pos: int) -> np.ndarray:
        """The state the step at pos wrote, a view [B, L, D, N] made at load (0 bytes)."""
        return self._buffers[1 - (pos & 1)]

    def reset(self) -> None:
        """Zero the state read at position 0, in place. Constant time, 0 bytes."""
        self._buffers[0].fill(0.0)

    def commit_candidate(self, pos: int, i: int) -> None:
        """Candidate i's staged state into every batch row of the staged buffer (module docstring,
        "Peek"). Real-time safe: two broadcasting copies between views made at load, 0 bytes."""
        before, after, row = self._cand[pos & 1][i]
        np.copyto(before, row)
        np.copyto(after, row)


class NumpySsmBackend(HostSsmBackend):
    name = "numpy"
    runs_graphs = False

    def __init__(self, artifact: Artifact, **options: Any) -> None:
        super().__init__(artifact, **options)
        p = self.params = artifact.params()
        self._layers = [tuple(group.take(p) for group in groups) for groups in names.ssm_layers(self.config)]

    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """One position: reads state(pos), writes staged_state(pos) and the output. Real-time:
        temporaries only, the same work at every position."""
        cfg, p, eps = self.config, self.params, self.config.ln_eps
        if cfg.inputs == "tokens":
            h = p[names.TOK_EMBED][x[:, 0]] * np.float32(np.sqrt(cfg.d_model))  # [B] -> [B, D]
        else:
            h = linear(x[:, 0], **names.IN_PROJ.take(p))  # [B, d_in] -> [B, D]
        read, write = self._buffers[pos & 1], self._buffers[1 - (pos & 1)]  # [B, L, D, N]
        for i, (mixer, mixer_norm, ffn, ffn_norm) in enumerate(self._layers):
            out, write[:, i] = ssm_step(h, read[:, i], **mixer)  # [B, D], [B, D, N]
            h = layer_norm(h + out, **mixer_norm, eps=eps)
            h = layer_norm(h + feed_forward(h, **ffn), **ffn_norm, eps=eps)  # [B, D]
        if cfg.inputs == "tokens":
            y = h @ p[names.TOK_EMBED].T  # [B, V]
        else:
            y = linear(h, **names.OUT_PROJ.take(p))  # [B, d_out]
        np.copyto(self._y[:, 0], y)
        return self._y

    def full(self, x: np.ndarray) -> np.ndarray:
        return forward(self.params, self.config, x)  # the parallel (scan) form


class OrtSsmBackend(HostSsmBackend):
    name = "ort"

    def __init__(
        self, artifact: Artifact, *, threads: int = 1, binding: str = "iobinding", **kw: Any
    ) -> None:
        from tickformer.export.ort_session import session_options

        from .ort import BINDINGS

        super().__init__(artifact)
        self.binding = validation.one_of(binding, "binding", BINDINGS)
        self._opts = session_options(threads, **kw)
        self._step_session = self._session("step")
        self._full_session = self._session("model")
        cfg, batch = self.config, artifact.batch
        in_name, out_name = fmt.io_names(cfg)
        x_shape, x_dtype = (
            ((batch, 1), np.int64) if cfg.inputs == "tokens" else ((batch, 1, cfg.d_in), np.float32)
        )
        self._x = np.zeros(x_shape, dtype=x_dtype)
        sig = fmt.ssm_step_signature(cfg, batch)
        self._x_view = self._x.reshape(sig["inputs"][in_name][1])  # [B, d_in] / [B], a view
        self._y_view = self._y.reshape(sig["outputs"][out_name][1])  # [B, d_out | V], a view
        self._names = (in_name, out_name)
        self._runs: list[Callable[[], Any]] = []
        self._ios = []
        if self.binding == "iobinding":
            for parity in (0, 1):
                io = self._step_session.io_binding()
                views = (
                    (in_name, self._x_view, True),
                    (fmt.SSM_STATE, self._states[parity], True),
                    (out_name, self._y_view, False),
                    (fmt.SSM_STATE_NEW, self._states[1 - parity], False),
                )
                try:
                    for name, arr, is_input in views:
                        bind = io.bind_input if is_input else io.bind_output
                        bind(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)
                except Exception as exc:
                    raise BackendError(f"onnxruntime cannot bind the ssm step buffers: {exc}") from exc
                self._ios.append(io)
                self._runs.append(self._runner(io))

    def _session(self, graph: str) -> Any:
        """A session over the verified bytes of `graph`, its signature checked (as runtime/backends/ort.py)."""
        import onnxruntime as ort

        from tickformer.artifact.reader import verified_graph_bytes

        from .ort import check_signature

        path = self.artifact.graph_path(graph)
        try:
            session = ort.InferenceSession(
                verified_graph_bytes(self.artifact, graph),
                sess_options=self._opts,
                providers=["CPUExecutionProvider"],
            )
        except Exception as exc:
            raise BackendError(
                f"onnxruntime cannot load {path}: {str(exc).splitlines()[0] if str(exc) else exc!r}"
            ) from exc
        check_signature(session, self.artifact.graph_spec(graph), str(path))
        return session

    def _runner(self, io: Any) -> Callable[[], Any]:
        """The bound C++ session's run with a RunOptions made once (runtime/backends/ort.py
        `_iobinding_runner`: the public wrapper allocates per call)."""
        import onnxruntime as ort

        options = ort.RunOptions()
        run = getattr(getattr(self._step_session, "_sess", None), "run_with_iobinding", None)
        native = getattr(io, "_iobinding", None)
        if run is None or native is None:
            return functools.partial(self._step_session.run_with_iobinding, io, options)
        return functools.partial(run, native, options)

    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time safe: copy x in, run the binding of this parity. Never writes state(pos)."""
        np.copyto(self._x, x)
        try:
            if self._runs:
                self._runs[pos & 1]()
            else:
                in_name, out_name = self._names
                y, new = self._step_session.run(
                    None, {in_name: self._x_view, fmt.SSM_STATE: self._states[pos & 1]}
                )
                np.copyto(self._y_view, y)
                np.copyto(self._states[1 - (pos & 1)], new)
        except Exception as exc:
            raise BackendError(f"onnxruntime ssm step failed: {exc}") from exc
        return self._y

    def full(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._full_session.run(None, {self._names[0]: x})[0]
        except Exception as exc:
            raise BackendError(f"onnxruntime full pass failed: {exc}") from exc

    def close(self) -> None:
        self._runs, self._ios = [], []
        self._step_session = self._full_session = None  # type: ignore[assignment]


# name -> (module, class): imported only when asked for (like runtime.backends.REGISTRY). A backend
# added for this kind adds one line here.
SSM_BACKENDS: dict[str, tuple[str, str]] = {
    "numpy": ("tickformer.runtime.backends.ssm", "NumpySsmBackend"),
    "ort": ("tickformer.runtime.backends.ssm", "OrtSsmBackend"),
    "ort-cuda": ("tickformer.runtime.backends.ort_gpu", "OrtCudaSsmBackend"),
    "ort-trt": ("tickformer.runtime.backends.ort_gpu", "OrtTensorRTSsmBackend"),
    "tensorrt": ("tickformer.runtime.backends.tensorrt", "TensorRTSsmBackend"),
    "c": ("tickformer.runtime.backends.c_ssm", "CSsmBackend"),  # the generated C step (codegen)
}

# Backends that exist for attention artifacts but have no ssm variant, and why.
SSM_REFUSED: dict[str, str] = {
    "numpy-growing": (
        "it is attention's growing-KV-cache variant (its cost grows with the position, kept for comparison); an "
        "ssm step costs the same at every position already, so there is nothing for it to do: use backend 'numpy'"
    ),
}


def ssm_backend_class(name: str) -> type[SsmBackend]:
    """The ssm variant of backend `name`, imported now. BackendUnavailable (one line) when the
    backend does not run this kind (with the reason and the backends that do), or its module
    cannot be imported. Not real-time."""
    entry = SSM_BACKENDS.get(name)
    if entry is None:
        why = SSM_REFUSED.get(name, "it has no ssm variant")
        raise BackendUnavailable(
            f"backend {name!r} does not run ssm artifacts (a fixed-state recurrent model, docs/ssm.md): {why}; "
            f"use one of {sorted(SSM_BACKENDS)}"
        )
    module_name, class_name = entry
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailable(f"backend {name!r} (ssm) cannot be imported ({exc})") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, SsmBackend)):
        raise BackendUnavailable(f"backend {name!r}: {module_name} has no ssm backend class {class_name!r}")
    return cls
