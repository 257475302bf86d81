"""C backend: the artifact's step as generated C99 (tickformer.codegen), called through ctypes.

    session = tickformer.runtime.load("ART", backend="c")                 # generate + compile once
    session = tickformer.runtime.load("ART", backend="c", library="DIR/libtf_model.so")  # prebuilt

Both block kinds (base.py): the generated `tf_state` holds an attention artifact's KV cache or
an ssm artifact's double-buffered state, and the library's `tf_stage`, `tf_commit` and
`tf_reset` are the step, the commit and the reset of its kind (codegen/caches.py and blocks.py generate
them from one mechanism keyed by the kind).

Loading is reading: this module imports nothing of the generator. It reaches the generated code
through one narrow interface, a `LibraryBuilder` -- a callable that returns the path of a
compiled library for an artifact (`builder(artifact, cc=, cflags=, cache_dir=[, weights=]) -> path`):
`tickformer.codegen` registers its own when it is imported (`register_library_builder`: it
refuses what the generator does not support, e.g. encoder-decoder artifacts, and builds through
its cache, keyed by the plan -- the artifact and the weight format --, the generator, the
compiler and the flags), the `builder=` option passes one in, and `library=` names a library
built already. Whatever built it, the library is loaded here (`load_library`) only if it
reports this artifact's manifest hash, and used only if its state layout (`tf_layout`) is this
artifact's. Options: cc=
(compiler), cflags= (replacing the defaults), cache_dir=, library=, builder=, deferred_commit=,
weights= (the layer matrices' storage the builder generates: fp32 by default, fp16|bf16|int8 --
codegen/weights.py; passed to the builder only when given).

State: one `tf_state` of the library's own size (tf_layout(0)) in a numpy buffer allocated
here, 64-byte aligned. Attention: `cache()` returns the logical [L, B, H, N, dh] pair as views
of its K (stored transposed, [L, B, H, dh, N], as HostCache does: the score loop runs along
positions) and V (stored [L, B, N, H, dh]: row p is position p's value projection, all heads side
by side, so one pass over the rows accumulates every head), so tests can plant values in the C
cache; windowed artifacts run on the generated ring cache (`pos` is the Session's ring position
in [0, 3W), commit writes slot ring_slot(pos, W)). ssm: the state's two buffers
`state[2][B][L][D][N]` are a layout.HostState over the C memory, so `state(pos)` /
`staged_state(pos)` are views made at load (the monitor's state check reads the staged one) and
peek's `commit_candidate` is two np.copyto calls; tf_commit has nothing to copy (the session's
position store is the commit) and `reset()` calls tf_reset (buffer 0 zeroed: the state's size).

Real-time (tests/runtime/test_c_backend.py, test_c_ssm_backend.py, with tracemalloc): `step`
copies x into the input buffer (np.copyto, 0 B) and calls `tf_stage(state, x, pos, y)`; `commit`
calls `tf_commit`. deferred_commit=True makes a tick one C call instead of two: `commit` only
stores pos in `tf_state.pending` (a ctypes int32 over the state buffer, made at load) and the
next step's `tf_stage_pending` applies it before it reads the cache -- the same committed state,
but the `cache()` views (which apply a pending commit when called) lag one commit behind between
calls; it saves about a fifth of a microsecond (docs/codegen.md "Speed"), so it is not the default.
No Python object is allocated, not even transiently: the pointer arguments are
`ctypes.byref` objects made once (ctypes passes them as they are), `pos` is a plain int
(ctypes converts it to a C int directly), argtypes are deliberately left unset (with them,
ctypes builds a converted argument object per call), and the returned status is a small int
(0 is cached). The library is a ctypes.PyDLL: the call keeps the GIL. The C step itself
refuses bad input and non-finite or out-of-bound output (ssm: and state) with a status; this
backend turns any status but 0 into a BackendError, and the committed state is then unchanged
(tf_stage never writes it).

Peek (base.py, "Peek"; codegen/peek.py): an attention artifact exported with batch K > 1 holds K
candidate rows of one stream. While its rows are known to hold one history (`_shared`: after
load and reset, and while every commit is a `commit_candidate`), `step` -- which Session.peek
and Session.step both call -- runs the library's tf_peek: the K rows over batch row 0's cache,
read once for all K, bit for bit what tf_stage computes for such a state; `commit_candidate`
is one call of tf_commit_candidate (candidate i's rows into every batch row). A plain `commit`
may make the rows' histories differ, so it clears `_shared` and later steps run the per-row
tf_stage (numpy's semantics) until a reset. tests/runtime/test_peek.py, test_c_peek.py.

Input check (`checks_input`): the C step's tf_check_input (finite, inside the declared domain
rounded inward to float32, token ids in the vocabulary) is the check of contracts/input_domain.py
for float32 inputs, so the Session skips its own scan of the values (about 0.7 us of the step,
docs/codegen.md "Speed") and checks only type, dtype and shape; a refused input (status 2, 3 or
4) raises InputRefused, which the Session turns into the InputError its own check names.
Because a library is matched to the artifact by hash only, loading probes the library's check at
the domain's edges on a private state (the smallest and largest float32 inside, the nearest
outside, NaN, inf; ids 0, V-1, -1, V) and refuses a library whose check disagrees.

Trust (SECURITY.md): loading a library runs its code; how the bytes hashed are the bytes run, the build
record and `trust=` are c_library.py's (its names are importable from here too).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tickformer.artifact import Artifact
from tickformer.contracts.ring_buffer import next_ring_position
from tickformer.errors import BackendError, BackendUnavailable, ConfigError, InputRefused

from .base import Backend
from .c_library import (  # noqa: F401  (the loading's names, importable from here as before)
    _BUILT_HERE,
    BUILD_FORMAT,
    BUILD_RECORD,
    BUILD_SIGNATURE,
    MAX_LIBRARY_BYTES,
    MAX_RECORD_BYTES,
    build_record,
    library_vouched_for,
    load_library,
    read_library,
    register_built_library,
)
from .layout import HostState

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
# tf_layout(i) of the generated library, per block kind: 0 is sizeof(tf_state), then byte offsets
# of these members (codegen/caches.py emits the same tuples: it imports them from here).
LAYOUTS: dict[str, tuple[str, ...]] = {
    "attention": ("size", "k", "v", "k_new", "v_new", "pos", "pending"),
    "ssm": ("size", "state", "pos", "pending"),
}

LibraryBuilder = Callable[
    ..., "str | os.PathLike[str]"
]  # (artifact, *, cc, cflags, cache_dir) -> library path
_BUILDER: list[LibraryBuilder] = []  # the registered one (tickformer.codegen's, once it is imported)


def register_library_builder(builder: LibraryBuilder) -> None:
    """Make `builder` the one backend 'c' asks for a library when neither library= nor builder=
    is given (module docstring). `tickformer.codegen` registers its own on import. Not real-time."""
    _BUILDER[:] = [builder]


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


def _inside(value: float, toward: float) -> np.float32:
    """The float32 nearest `value` on the side of `toward` (the declared domain rounded inward)."""
    v = np.float32(value)
    outside = float(v) < value if toward > value else float(v) > value
    return np.nextafter(v, np.float32(toward)) if outside else v


class CBackend(Backend):
    """The generated C step, both block kinds (see the module docstring)."""

    name = "c"
    static_cache = True
    ring_cache = True  # windowed artifacts: the generated ring cache (codegen/caches.py RingCache)
    checks_input = True  # tf_check_input (module docstring, "Input check"), probed at load

    def __init__(
        self,
        artifact: Artifact,
        *,
        cc: str | None = None,
        cflags: Sequence[str] | None = None,
        cache_dir: "str | os.PathLike[str] | None" = None,
        library: "str | os.PathLike[str] | None" = None,
        builder: LibraryBuilder | None = None,
        deferred_commit: bool = False,
        weights: str | None = None,
    ) -> None:
        super().__init__(artifact)
        self.supports_peek = self.block == "ssm"  # attention: set below, where the library has tf_peek
        self._states: HostState | None = None  # ssm: the C state's two buffers
        self._unchanged = (
            f"the {'state' if self.block == 'ssm' else 'cache'} is unchanged"  # a refusal's message
        )
        build: dict[str, Any] = {"cc": cc, "cflags": cflags, "cache_dir": cache_dir}
        if weights is not None:
            build["weights"] = weights
        path, data = self._library(library, builder, **build)
        self.library_path = str(path)
        self._lib = load_library(path, artifact, data)
        layout = self._layout(path)
        self._state = _aligned(layout["size"])
        cfg, batch = self.config, artifact.batch
        if self.block == "ssm":  # the two buffers are the C state's (HostState: views, peek's copies)
            states = np.ndarray(
                (2, *self.state_shape), np.float32, buffer=self._state, offset=layout["state"]
            )
            self._states = HostState(self.state_shape, states)
        else:
            layers, b, heads, n, dh = self.cache_shape
            self._k_t = np.ndarray(
                (layers, b, heads, dh, n), np.float32, buffer=self._state, offset=layout["k"]
            )  # [L, B, H, dh, N]
            v_rows = np.ndarray(
                (layers, b, n, heads, dh), np.float32, buffer=self._state, offset=layout["v"]
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
        )  # kept alive with them
        self._stage_fn = self._lib.tf_stage
        self._stage_fn.restype = ctypes.c_int
        self._stage_pending_fn = self._lib.tf_stage_pending
        self._stage_pending_fn.restype = ctypes.c_int
        self._commit_fn = self._lib.tf_commit
        self._commit_fn.restype = None
        self._reset_fn = self._lib.tf_reset
        self._reset_fn.restype = None
        self._reset_fn(self._refs[0])  # pos 0, no pending commit (ssm: buffer 0 zeroed)
        self._pending = ctypes.c_int32.from_buffer(
            self._state, layout["pending"]
        )  # tf_state.pending, in place
        self.deferred_commit = bool(deferred_commit)
        self._run = self._stage_pending_fn if self.deferred_commit else self._stage_fn
        self._probe_input_check(path)
        # Candidates (module docstring, "Peek"): tf_peek over batch row 0's cache while the rows are
        # known to hold one history (`_shared`), tf_commit_candidate into every row.
        self._peek_fn = getattr(self._lib, "tf_peek", None) if self.block == "attention" else None
        self._commit_candidate_fn = getattr(self._lib, "tf_commit_candidate", None)
        if self._peek_fn is not None and self._commit_candidate_fn is not None:
            self._peek_fn.restype = ctypes.c_int
            self._commit_candidate_fn.restype = ctypes.c_int
            self.supports_peek = True
        self._batched = self.supports_peek and self.block == "attention" and batch > 1
        self._shared = self._batched

    def _library(self, library: Any, builder: LibraryBuilder | None, **build: Any) -> tuple[Path, bytes]:
        """The path and the vouched-for bytes (`library_vouched_for`) of library= as given, else of
        the library the builder returns (builder=, else the registered one). Under trust= a
        library the builder did not compile in this process (a cache hit) is asked for again with
        rebuild=True (module docstring, "Trust")."""
        if library is not None:
            if (
                build["cc"] is not None
                or build["cflags"] is not None
                or builder is not None
                or "weights" in build
            ):
                raise ConfigError(
                    "library= loads a prebuilt library; cc=, cflags=, weights= and builder= only apply when the "
                    "backend builds it"
                )
            data = read_library(library)
            library_vouched_for(library, data, self.artifact)
            return Path(library), data
        if builder is None and not _BUILDER:
            raise BackendUnavailable(
                "backend 'c' builds its library with tickformer.codegen, which is not loaded: import "
                "tickformer.codegen before runtime.load (the tickformer CLI does), pass builder=, or pass "
                "library=PATH (`tickformer codegen ART --out DIR`, then `make -C DIR shared`)"
            )
        build_with = builder or _BUILDER[0]
        path = Path(build_with(self.artifact, **build))
        data = read_library(path)
        if self.artifact.signed_by is not None:
            built = (str(self.artifact.manifest.get("manifest_sha256")), hashlib.sha256(data).hexdigest())
            if built not in _BUILT_HERE:  # a cache hit: its record could have been rewritten with it
                path = Path(build_with(self.artifact, **build, rebuild=True))
                data = read_library(path)
        library_vouched_for(path, data, self.artifact)
        return path, data

    def _layout(self, path: Any) -> dict[str, int]:
        """The library's tf_layout fields of this block kind (LAYOUTS), checked against this
        artifact's state: BackendError (regenerate it) when they do not hold it."""
        names = LAYOUTS[self.block]
        layout = {name: int(self._lib.tf_layout(i)) for i, name in enumerate(names)}
        size = layout["size"]
        if self.block == "ssm":
            nbytes = 2 * int(np.prod(self.state_shape)) * 4  # [2, B, L, D, N] float32
            ok = 0 <= layout["state"] and layout["state"] + nbytes <= size
            held = f"state {[2, *self.state_shape]}"
        else:
            nbytes = int(np.prod(self.cache_shape)) * 4
            ok = layout["v"] - layout["k"] == nbytes and layout["k_new"] - layout["v"] == nbytes
            held = f"cache {self.cache_shape}"
        if size <= 0 or not ok or not 0 <= layout["pending"] <= size - 4 or layout["pos"] < 0:
            raise BackendError(
                f"{path}: its state layout {list(layout.values())} does not hold this artifact's {held}; "
                "regenerate it"
            )
        return layout

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
            lo, hi = self.artifact.input_domain
            f32 = np.float32
            inside_lo, inside_hi = _inside(lo, hi), _inside(hi, lo)  # the domain rounded inward
            cases = [(inside_lo, True), (inside_hi, True), (f32(np.nan), False), (f32(np.inf), False)]
            if np.isfinite(inside_lo):
                cases.append((np.nextafter(inside_lo, f32(-np.inf)), False))
            if np.isfinite(inside_hi):
                cases.append((np.nextafter(inside_hi, f32(np.inf)), False))
        columns = self.artifact.input_domain_columns
        # with per-column domains the envelope's edges are not inside every column: keep its refusals
        probes = [(None, value, accepted) for value, accepted in cases if columns is None or not accepted]
        if columns is not None:  # each column's own edges, the others inside their domains
            base = np.array([_inside(lo, hi) for lo, hi in zip(*columns)], np.float32)  # [d_in]
            for j, (lo, hi) in enumerate(zip(*columns)):
                inside_lo, inside_hi = _inside(lo, hi), _inside(hi, lo)
                edges = [(inside_lo, True), (inside_hi, True)]
                edges += [(np.nextafter(inside_lo, np.float32(-np.inf)), False)]
                edges += [(np.nextafter(inside_hi, np.float32(np.inf)), False)]
                probes += [(j, value, accepted) for value, accepted in edges]
        for column, value, accepted in probes:
            self._reset_fn(refs[0])
            if column is None:
                xin.fill(value)
            else:
                xin[...] = base
                xin[..., column] = value
            status = self._stage_fn(refs[0], refs[1], 0, refs[2])
            if (status not in INPUT_STATUSES) != accepted:
                where = "" if column is None else f" in input column {column}"
                raise BackendError(
                    f"{path}: its input check {'refuses' if accepted else 'accepts'} the input value {value!r}"
                    f"{where} (status {status}), which the artifact's declared domain "
                    f"{'accepts' if accepted else 'refuses'}; regenerate it"
                )

    # --- real-time path ------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time safe: one copy into the input buffer and one C call (tf_stage; deferred:
        tf_stage_pending, the previous step's commit then the stage); 0 bytes allocated."""
        np.copyto(self._x, x)
        sref, xref, yref = self._refs
        status = (self._peek_fn if self._shared else self._run)(sref, xref, pos, yref)
        if status:
            raise refused(status, pos, self._unchanged)
        return self._y

    def commit(self, pos: int) -> None:
        """Real-time safe, 0 bytes: tf_commit (attention: copies the staged rows into cache row
        pos; ssm: nothing to copy). Deferred (deferred_commit=True): one int32 store,
        `tf_state.pending = pos`; the next tf_stage_pending (or `cache()`) applies it before
        anything reads the cache."""
        self._shared = False  # each batch row committed its own rows: the histories may differ
        if self.deferred_commit:
            self._pending.value = pos
        else:
            self._commit_fn(self._refs[0], pos)

    def commit_candidate(self, pos: int, i: int) -> None:
        """Attention: tf_commit_candidate, candidate i's staged rows into cache row pos of every
        batch row (one C call, 0 bytes); the rows then hold one history again at pos (`_shared`
        stays what it was: rows written before by plain steps may still differ). ssm: candidate
        i's staged state over the other rows of the C state's staged buffer (HostState: two
        broadcasting copies between views made at load, 0 bytes)."""
        if self._states is not None:
            self._states.commit_candidate(pos, i)
        elif self._commit_candidate_fn is None:
            super().commit_candidate(pos, i)
        else:
            status = self._commit_candidate_fn(self._refs[0], pos, i)
            if status:
                raise refused(status, pos, "nothing was committed")

    def reset(self) -> None:
        """ssm: tf_reset, buffer 0 zeroed (the state's size, constant in the stream length), 0
        bytes. Attention: nothing to clear (stale rows are selected out by position); the batch
        rows hold one (empty) history again, so a batched step runs tf_peek."""
        self._shared = self._batched
        if self._states is not None:
            self._reset_fn(self._refs[0])

    def state(self, pos: int) -> np.ndarray:
        """ssm: the committed buffer, a view of the C state made at load."""
        return super().state(pos) if self._states is None else self._states.state(pos)

    def staged_state(self, pos: int) -> np.ndarray:
        """ssm: the buffer the step at pos wrote, a view of the C state made at load."""
        return super().staged_state(pos) if self._states is None else self._states.staged_state(pos)

    def _flush(self) -> None:
        """Apply a deferred commit (not real-time: cache() and close())."""
        pending = self._pending.value
        if pending >= 0:
            self._commit_fn(self._refs[0], pending)
            self._pending.value = -1

    # --- not real-time ---------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        """The full pass as steps on a private state (this session's is untouched): positions
        0..T-1 (T <= max_len; ssm: any T), or for a windowed artifact the ring positions of
        0..T-1 (any T), walked with contracts.ring_buffer.next_ring_position as the Session
        walks them."""
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
        """Attention: the committed K and V caches as views of the C state (a deferred commit
        applied first)."""
        if self._states is not None:
            return super().cache()  # BackendError: an ssm artifact has no KV cache
        self._flush()
        return self._k_t.swapaxes(-1, -2), self._v

    def close(self) -> None:
        """The library stays mapped (ctypes cannot unload it safely); the state is released."""
        self._refs = ()


BACKENDS = {"c": CBackend}
