"""Backends for the "ssm" artifact kind (docs/ssm.md): numpy and ONNX Runtime (CPU) over one
fixed-size recurrent state, no KV cache.

State layout: two buffers [2, B, L, D, N] (double buffering). The step at session position p
reads buffer p & 1 and writes the new state into buffer 1 - (p & 1); it never writes the state
it reads, so a failed or refused step leaves the session's state as it was, and the commit is
the session's position store alone (runtime/ssm_session.py), with nothing to copy. `reset()`
zeroes buffer 0 in place: constant time (the state's size, never the stream's length).

    numpy  the model's own functions (model/ssm.py `ssm_step`, model/layers.py): temporaries
           only, freed before the step returns (like the attention numpy backend).
    ort    step.onnx through IOBinding: two bindings made at load, one per parity (x, the
           state read, y, the state written), so a step copies x in and calls the bound C++
           session: nothing traced by tracemalloc, not even transiently
           (tests/runtime/test_ssm_runtime.py); the full graph (Scan) through `run`.

Other backends (ort-cuda, ort-trt, tensorrt, c) do not run this kind and say so at load
(`runtime.load`). Not real-time: construction, `full`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from tickformer import validation
from tickformer.artifact import format as fmt
from tickformer.artifact.reader import Artifact
from tickformer.errors import BackendError
from tickformer.model import names
from tickformer.model.layers import feed_forward, layer_norm, linear
from tickformer.model.ssm import ssm_step
from tickformer.model.transformer import forward

from .base import Backend


class SsmBackend(Backend):
    """What both ssm backends share: the double-buffered state, reset, the output buffer."""

    def __init__(self, artifact: Artifact, **options: Any) -> None:
        super().__init__(artifact, **options)
        self.state_shape = tuple(fmt.ssm_state_shape(self.config, artifact.batch))  # [B, L, D, N]
        self._states = np.zeros((2, *self.state_shape), dtype=np.float32)  # [2, B, L, D, N]
        self._y = np.zeros(self.step_output_shape, dtype=np.float32)  # [B, 1, d_out | V]

    def state(self, pos: int) -> np.ndarray:
        """The state read by the step at position pos (committed state), a view [B, L, D, N]."""
        return self._states[pos & 1]

    def staged_state(self, pos: int) -> np.ndarray:
        """The state the step at position pos wrote (committed only when the position advances)."""
        return self._states[1 - (pos & 1)]

    def reset(self) -> None:
        """Zero the state read at position 0, in place. Constant time, 0 bytes."""
        self._states[0].fill(0.0)

    def commit(self, pos: int) -> None:
        """Nothing to copy: the position store selects the buffer (module docstring)."""

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        raise BackendError("an ssm artifact has no KV cache; its state is backend.state(position)")


class NumpySsmBackend(SsmBackend):
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
        read, write = self._states[pos & 1], self._states[1 - (pos & 1)]  # [B, L, D, N]
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


class OrtSsmBackend(SsmBackend):
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


SSM_BACKENDS: dict[str, type[SsmBackend]] = {"numpy": NumpySsmBackend, "ort": OrtSsmBackend}
import tickformer.runtime.backends.c_ssm  # noqa: E402,F401  registers backend "c" (the generated C step)
