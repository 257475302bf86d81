"""C backend: the artifact's step as generated C99 (tickformer.codegen), called through ctypes.

    session = tickformer.runtime.load("ART", backend="c")                 # generate + compile once
    session = tickformer.runtime.load("ART", backend="c", library="DIR/libtf_model.so")  # prebuilt

Loading (not real-time): codegen.plan_for refuses what the generator does not support
(encoder-decoder artifacts, unknown config fields); windowed artifacts run on the generated
ring cache (`ring_cache = True`: `pos` is the Session's ring position in [0, 3W), commit writes
slot ring_slot(pos, W)); the library comes from the build cache
(codegen/toolchain.py: keyed by the artifact's hash, the generator, the compiler and the
flags; built with the system C compiler on a miss, atomically) or from `library=`, and must
report this artifact's manifest hash. Options: cc= (compiler), cflags= (replacing the
defaults), cache_dir=, library=.

State: one `tf_state` of the library's own size (tf_layout(0)) in a numpy buffer allocated
here, 64-byte aligned; `cache()` returns the logical [L, B, H, N, dh] pair as views of its K
(stored transposed, [L, B, H, dh, N], as HostCache does: the score loop runs along positions)
and V (stored [L, B, N, H, dh]: row p is position p's value projection, all heads side by side,
so one pass over the rows accumulates every head), so tests can plant values in the C cache.

Real-time (tests/runtime/test_c_backend.py, with tracemalloc): `step` copies x into the input
buffer (np.copyto, 0 B) and calls `tf_stage(state, x, pos, y)`; `commit` calls `tf_commit`.
deferred_commit=True makes a tick one C call instead of two: `commit` only stores pos in
`tf_state.pending` (a ctypes int32 over the state buffer, made at load) and the next step's
`tf_stage_pending` applies it before it reads the cache -- the same committed state, but the
`cache()` views (which apply a pending commit when called) lag one commit behind between
calls; it saves about a fifth of a microsecond (docs/codegen.md "Speed"), so it is not the default.
No Python object is allocated, not even transiently: the pointer arguments are
`ctypes.byref` objects made once (ctypes passes them as they are), `pos` is a plain int
(ctypes converts it to a C int directly), argtypes are deliberately left unset (with them,
ctypes builds a converted argument object per call), and the returned status is a small int
(0 is cached). The library is a ctypes.PyDLL: the call keeps the GIL. The C step itself
refuses bad input and non-finite or out-of-bound output with a status; this backend turns any
status but 0 into a BackendError, and the cache is then unchanged (tf_stage never writes it).

Input check (`checks_input`): the C step's tf_check_input (finite, inside the declared domain
rounded inward to float32, token ids in the vocabulary) is the check of contracts/input_domain.py
for float32 inputs, so the Session skips its own scan of the values (about 0.7 us of the step,
docs/codegen.md "Speed") and checks only type, dtype and shape; a refused input (status 2, 3 or
4) raises InputRefused, which the Session turns into the InputError its own check names.
Because a `library=` is matched to the artifact by hash only, loading probes the library's
check at the domain's edges on a private state (the smallest and largest float32 inside, the
nearest outside, NaN, inf; ids 0, V-1, -1, V) and refuses a library whose check disagrees.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Sequence

import numpy as np

from tickformer.artifact import Artifact
from tickformer.errors import BackendError, ConfigError, InputRefused

from .base import Backend

STATUS_TEXT = {
    1: "position outside the step's range (static cache: 0..max_len-1; ring cache: ring positions 0..3W-1)",
    2: "an input value is NaN or infinite",
    3: "an input value is outside the declared domain",
    4: "a token id is outside the vocabulary",
    5: "an output is NaN, infinite or beyond the artifact's output bound",
    7: "the state written is NaN, infinite or beyond the manifest's state_bound",
}
ALIGN = 64
INPUT_STATUSES = (2, 3, 4)  # TF_E_NONFINITE, TF_E_DOMAIN, TF_E_TOKEN: tf_check_input's refusals


def refused(status: int, pos: int, what: str) -> BackendError:
    """The error for a nonzero status of the generated step at `pos`; `what` says what is left
    as it was (the C step checks before it writes). An input refusal is an InputRefused."""
    kind = InputRefused if status in INPUT_STATUSES else BackendError
    return kind(f"the C step refused position {pos}: {STATUS_TEXT.get(status, f'status {status}')}; {what}")


def _aligned(nbytes: int) -> np.ndarray:
    """A zeroed uint8 buffer of nbytes starting on an ALIGN-byte boundary."""
    raw = np.zeros(nbytes + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + nbytes]


def _ref(array: np.ndarray) -> Any:
    """A ctypes pointer argument to array's data, made once (ctypes.byref: passed as is)."""
    return ctypes.byref((ctypes.c_char * array.nbytes).from_buffer(array.data))


class CBackend(Backend):
    """The generated C step (see the module docstring)."""

    name = "c"
    static_cache = True
    ring_cache = True  # windowed artifacts: the generated ring cache (codegen/blocks.py RingCache)
    checks_input = True  # tf_check_input (module docstring, "Input check"), probed at load

    def __init__(
        self,
        artifact: Artifact,
        *,
        cc: str | None = None,
        cflags: Sequence[str] | None = None,
        cache_dir: "str | os.PathLike[str] | None" = None,
        library: "str | os.PathLike[str] | None" = None,
        deferred_commit: bool = False,
    ) -> None:
        super().__init__(artifact)
        from tickformer.codegen import toolchain
        from tickformer.codegen.plan import plan_for

        if library is not None and (cc is not None or cflags is not None):
            raise ConfigError(
                "library= loads a prebuilt library; cc= and cflags= only apply when the backend builds it"
            )
        self._plan = plan_for(artifact)  # ArtifactError for what codegen does not support
        path = (
            toolchain.build_library(self._plan, cc=cc, cflags=cflags, cache_dir=cache_dir)
            if library is None
            else library
        )
        self.library_path = str(path)
        self._lib = toolchain.load_library(path, self._plan)
        cfg, batch = self.config, artifact.batch
        layout = [int(self._lib.tf_layout(i)) for i in range(7)]  # size, k, v, k_new, v_new, pos, pending
        cache_bytes = int(np.prod(self.cache_shape)) * 4
        if (
            layout[0] <= 0
            or layout[2] - layout[1] != cache_bytes
            or layout[3] - layout[2] != cache_bytes
            or not 0 <= layout[6] <= layout[0] - 4
        ):
            raise BackendError(
                f"{path}: its state layout {layout} does not match this artifact's cache "
                f"{self.cache_shape}; regenerate it"
            )
        self._state = _aligned(layout[0])
        layers, b, heads, n, dh = self.cache_shape
        self._k_t = np.ndarray(
            (layers, b, heads, dh, n), np.float32, buffer=self._state, offset=layout[1]
        )  # [L, B, H, dh, N]
        v_rows = np.ndarray(
            (layers, b, n, heads, dh), np.float32, buffer=self._state, offset=layout[2]
        )  # [L, B, N, H, dh]
        self._v = v_rows.transpose(0, 1, 3, 2, 4)  # [L, B, H, N, dh] view
        if cfg.inputs == "tokens":
            self._x = np.zeros((batch, 1), np.int64)  # [B, 1]
        else:
            self._x = np.zeros((batch, 1, cfg.d_in), np.float32)  # [B, 1, d_in]
        self._y = np.zeros(self.step_output_shape, np.float32)  # [B, 1, d_out | V]
        self._refs: tuple[Any, ...] = (
            _ref(self._state),
            _ref(self._x),
            _ref(self._y),
        )  # kept alive with the buffers
        self._stage_fn = self._lib.tf_stage
        self._stage_fn.restype = ctypes.c_int
        self._stage_pending_fn = self._lib.tf_stage_pending
        self._stage_pending_fn.restype = ctypes.c_int
        self._commit_fn = self._lib.tf_commit
        self._commit_fn.restype = None
        self._reset_fn = self._lib.tf_reset
        self._reset_fn.restype = None
        self._reset_fn(self._refs[0])  # pos 0, no pending commit
        self._pending = ctypes.c_int32.from_buffer(self._state, layout[6])  # tf_state.pending, in place
        self.deferred_commit = bool(deferred_commit)
        self._run = self._stage_pending_fn if self.deferred_commit else self._stage_fn
        self._probe_input_check(path)

    def _probe_input_check(self, path: Any) -> None:
        """The library's input check refuses exactly what contracts/input_domain.py refuses, at
        the edges where they could differ (module docstring); BackendError otherwise. On a
        private state: the session's is untouched. Not real-time."""
        state, y = _aligned(self._state.nbytes), np.zeros_like(self._y)
        xin = np.zeros_like(self._x)
        refs = (_ref(state), _ref(xin), _ref(y))
        if self.config.inputs == "tokens":
            v = self.config.vocab_size
            cases = [(0, True), (v - 1, True), (-1, False), (v, False)]
        else:
            from tickformer.codegen.c_text import down, up

            lo, hi = self.artifact.input_domain
            f32 = np.float32
            inside_lo, inside_hi = up(lo), down(hi)  # the generator's own rounding of TF_DOMAIN_LO/HI
            cases = [(inside_lo, True), (inside_hi, True), (f32(np.nan), False), (f32(np.inf), False)]
            if np.isfinite(inside_lo):
                cases.append((np.nextafter(inside_lo, f32(-np.inf)), False))
            if np.isfinite(inside_hi):
                cases.append((np.nextafter(inside_hi, f32(np.inf)), False))
        for value, accepted in cases:
            self._reset_fn(refs[0])
            xin.fill(value)
            status = self._stage_fn(refs[0], refs[1], 0, refs[2])
            if (status not in INPUT_STATUSES) != accepted:
                raise BackendError(
                    f"{path}: its input check {'refuses' if accepted else 'accepts'} the input value {value!r} "
                    f"(status {status}), which the artifact's declared domain "
                    f"{'accepts' if accepted else 'refuses'}; regenerate it"
                )

    # --- real-time path ------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time safe: one copy into the input buffer and one C call (tf_stage; deferred:
        tf_stage_pending, the previous step's commit then the stage); 0 bytes allocated."""
        np.copyto(self._x, x)
        sref, xref, yref = self._refs
        status = self._run(sref, xref, pos, yref)
        if status:
            raise refused(status, pos, "the cache is unchanged")
        return self._y

    def commit(self, pos: int) -> None:
        """Real-time safe, 0 bytes: tf_commit copies the staged rows into cache row pos. Deferred
        (deferred_commit=True): one int32 store, `tf_state.pending = pos`; the next
        tf_stage_pending (or `cache()`) applies it before anything reads the cache."""
        if self.deferred_commit:
            self._pending.value = pos
        else:
            self._commit_fn(self._refs[0], pos)

    def _flush(self) -> None:
        """Apply a deferred commit (not real-time: cache() and close())."""
        pending = self._pending.value
        if pending >= 0:
            self._commit_fn(self._refs[0], pending)
            self._pending.value = -1

    # --- not real-time ---------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        """The full pass as steps on a private state (this session's is untouched): positions
        0..T-1 (T <= max_len), or for a windowed artifact the ring positions of 0..T-1 (any T),
        walked with contracts.ring_buffer.next_ring_position as the Session walks them."""
        from tickformer.contracts.ring_buffer import next_ring_position

        t, window = x.shape[1], self.config.window
        state = _aligned(self._state.nbytes)
        xin = np.zeros_like(self._x)
        out = np.zeros((x.shape[0], t, self._y.shape[-1]), np.float32)  # [B, T, d_out | V]
        y = np.zeros_like(self._y)
        refs = (_ref(state), _ref(xin), _ref(y))
        self._reset_fn(refs[0])
        key = 0  # the position, or the ring position standing in for it
        for pos in range(t):
            np.copyto(xin, x[:, pos : pos + 1])
            status = self._stage_fn(refs[0], refs[1], key, refs[2])
            if status:
                raise refused(status, pos, "the full pass stopped there")
            self._commit_fn(refs[0], key)
            out[:, pos] = y[:, 0]
            key = key + 1 if window is None else next_ring_position(key, window)
        return out

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        """The committed K and V caches as views of the C state (a deferred commit applied first)."""
        self._flush()
        return self._k_t.swapaxes(-1, -2), self._v

    def close(self) -> None:
        """The library stays mapped (ctypes cannot unload it safely); the state is released."""
        self._refs = ()


BACKENDS = {"c": CBackend}
