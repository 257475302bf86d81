"""C backend: the artifact's step as generated C99 (tickformer.codegen), called through ctypes.

    session = tickformer.runtime.load("ART", backend="c")                 # generate + compile once
    session = tickformer.runtime.load("ART", backend="c", library="DIR/libtf_model.so")  # prebuilt

Both block kinds (base.py): the generated `tf_state` holds an attention artifact's KV cache or
an ssm artifact's double-buffered state, and the library's `tf_stage`, `tf_commit` and
`tf_reset` are the step, the commit and the reset of its kind (codegen/caches.py and blocks.py generate
them from one mechanism keyed by the kind).

Loading is reading: this module imports nothing of the generator. It reaches the generated code
through one narrow interface, a `LibraryBuilder` -- a callable that returns the path of a
compiled library for an artifact (`builder(artifact, cc=, cflags=, cache_dir=) -> path`):
`tickformer.codegen` registers its own when it is imported (`register_library_builder`: it
refuses what the generator does not support, e.g. encoder-decoder artifacts, and builds through
its cache, keyed by the artifact's hash, the generator, the compiler and the flags), the
`builder=` option passes one in, and `library=` names a library built already. Whatever built
it, the library is loaded here (`load_library`) only if it reports this artifact's manifest
hash, and used only if its state layout (`tf_layout`) is this artifact's. Options: cc=
(compiler), cflags= (replacing the defaults), cache_dir=, library=, builder=, deferred_commit=.

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

Input check (`checks_input`): the C step's tf_check_input (finite, inside the declared domain
rounded inward to float32, token ids in the vocabulary) is the check of contracts/input_domain.py
for float32 inputs, so the Session skips its own scan of the values (about 0.7 us of the step,
docs/codegen.md "Speed") and checks only type, dtype and shape; a refused input (status 2, 3 or
4) raises InputRefused, which the Session turns into the InputError its own check names.
Because a library is matched to the artifact by hash only, loading probes the library's check at
the domain's edges on a private state (the smallest and largest float32 inside, the nearest
outside, NaN, inf; ids 0, V-1, -1, V) and refuses a library whose check disagrees.

Trust (SECURITY.md): loading a library runs its code, so the bytes hashed are the bytes run --
the library is read once (a regular file, at most MAX_LIBRARY_BYTES), hashed, written to a
private 0700 directory and loaded from there, so a file swapped after the check is never run. A
build record beside the library (`build.json`: the artifact, the library's SHA-256, and the
generator, compiler and flags when they are known) is checked whenever it is there; the build
cache always writes one. Under `trust=` (the artifact's signature verified) a library runs only
if its SHA-256 is vouched for: compiled by this process from the verified artifact
(`register_built_library`, which tickformer.codegen's builder calls: a cached library is rebuilt
once per process, since anyone who can write the cache can rewrite its record), or named by a
build record signed with the trusted key (`build.sig` beside `build.json`: `tickformer sign ART
--key KEY --library LIB`). Anything else is refused in one line.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tickformer import signing
from tickformer.artifact import Artifact
from tickformer.contracts.ring_buffer import next_ring_position
from tickformer.errors import (
    ArtifactError,
    BackendError,
    BackendUnavailable,
    ConfigError,
    InputRefused,
    UntrustedArtifact,
)

from .base import Backend
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
_BUILT_HERE: set[tuple[str, str]] = set()  # (manifest_sha256, library SHA-256) this process compiled
MAX_LIBRARY_BYTES = 1 << 30  # a generated step with its weights is far below; more is not ours
MAX_RECORD_BYTES = 1 << 16
BUILD_RECORD = "build.json"  # beside the library: what it was built from (module docstring, "Trust")
BUILD_SIGNATURE = "build.sig"  # signing.signature_document over build.json's bytes
BUILD_FORMAT = "tickformer-library-build"


def register_library_builder(builder: LibraryBuilder) -> None:
    """Make `builder` the one backend 'c' asks for a library when neither library= nor builder=
    is given (module docstring). `tickformer.codegen` registers its own on import. Not real-time."""
    _BUILDER[:] = [builder]


def refused(status: int, pos: int, what: str) -> BackendError:
    """The error for a nonzero status of the generated step at `pos`; `what` says what is left
    as it was (the C step checks before it writes). An input refusal is an InputRefused."""
    kind = InputRefused if status in INPUT_STATUSES else BackendError
    return kind(f"the C step refused position {pos}: {STATUS_TEXT.get(status, f'status {status}')}; {what}")


def register_built_library(artifact_sha256: str, library_sha256: str) -> None:
    """Record that this process compiled the library with SHA-256 `library_sha256` from the
    artifact with manifest_sha256 `artifact_sha256` (tickformer.codegen's builder calls it with
    the hash of the bytes its compiler wrote into a private directory): under trust= such a
    library may run (module docstring, "Trust"). Not real-time."""
    _BUILT_HERE.add((str(artifact_sha256), str(library_sha256)))


def read_library(path: "str | os.PathLike[str]") -> bytes:
    """The bytes of the library file at `path`: a regular file (a symlink to one is followed) of
    at most MAX_LIBRARY_BYTES. A FIFO, device or directory is refused without being read (opened
    non-blocking, checked with fstat). Raises ArtifactError."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ArtifactError(
            f"{path}: no such library; build it with `make shared` in a `tickformer codegen` output, or omit library="
        ) from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot open the library ({exc.strerror}); check the path") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO, socket or device"
        raise ArtifactError(
            f"{path} is {kind}, not a library file; pass the libtf_model.so `make shared` built"
        )
    with os.fdopen(fd, "rb") as f:
        if info.st_size > MAX_LIBRARY_BYTES:
            raise ArtifactError(
                f"{path} is {info.st_size} bytes, over the {MAX_LIBRARY_BYTES} a generated library can be; "
                "pass the libtf_model.so `make shared` built"
            )
        data = f.read(MAX_LIBRARY_BYTES + 1)
    if len(data) > MAX_LIBRARY_BYTES:
        raise ArtifactError(f"{path} grew while it was read; pass a library nothing is writing")
    return data


def _read_small(path: Path, what: str) -> bytes | None:
    """The bytes of `path` (a regular file of at most MAX_RECORD_BYTES), or None if it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read the library's {what} ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArtifactError(f"{path}: the library's {what} is not a regular file; build the library again")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise ArtifactError(
            f"{path}: the library's {what} is over {MAX_RECORD_BYTES} bytes; build the library again"
        )
    return data


def build_record(artifact_sha256: str, library_sha256: str, **known: Any) -> bytes:
    """The bytes of a build record (BUILD_RECORD): the artifact, the library's name and SHA-256,
    and what else is known of the build (generator, compiler, flags). Written by the build
    cache and by `tickformer sign --library`; checked by `library_vouched_for`."""
    record = {
        "format": BUILD_FORMAT,
        "version": 1,
        "artifact": artifact_sha256,
        "library_sha256": library_sha256,
        **known,
    }
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()


def _check_record(path: Path, data: bytes, artifact: Artifact, digest: str) -> None:
    """`data` (the build record beside the library at `path`) names this artifact and `digest`."""
    where = path.parent / BUILD_RECORD
    try:
        record = json.loads(data)
    except ValueError:
        raise ArtifactError(f"{where} is not JSON; build the library again") from None
    if not isinstance(record, dict) or record.get("format") != BUILD_FORMAT:
        raise ArtifactError(
            f"{where} is not a {BUILD_FORMAT} record (an older tickformer's, or not ours); build the library again"
        )
    want = str(artifact.manifest.get("manifest_sha256"))
    if record.get("artifact") != want:
        raise ArtifactError(
            f"{path} was generated for artifact {str(record.get('artifact'))[:12]}..., not this one "
            f"({want[:12]}...: its {BUILD_RECORD}); regenerate it with `tickformer codegen`"
        )
    if record.get("library_sha256") != digest:
        raise ArtifactError(
            f"{path} changed after it was built (SHA-256 {digest[:12]}..., its {BUILD_RECORD} says "
            f"{str(record.get('library_sha256'))[:12]}...); build it again, it is not run"
        )


def library_vouched_for(path: "str | os.PathLike[str]", data: bytes, artifact: Artifact) -> str:
    """Check the library bytes `data` read from `path` against its build record, if there is
    one, and, when the artifact was opened with trust=, that its SHA-256 is vouched for (compiled
    by this process from this artifact, or named by a build record signed with the trusted key).
    Returns the SHA-256. Raises ArtifactError (UntrustedArtifact for trust). Not real-time."""
    path = Path(path)
    digest = hashlib.sha256(data).hexdigest()
    record = _read_small(path.parent / BUILD_RECORD, "build record")
    if record is not None:
        _check_record(path, record, artifact, digest)
    if artifact.signed_by is None:  # no trust key: a check against mix-ups, not tampering
        return digest
    want = str(artifact.manifest.get("manifest_sha256"))
    if (want, digest) in _BUILT_HERE:
        return digest
    signature = _read_small(path.parent / BUILD_SIGNATURE, "build signature")
    if record is None or signature is None or artifact.trust_key is None:
        raise UntrustedArtifact(
            f"{path}: under --trust a library runs only if this process built it from the verified artifact "
            f"(omit library=) or its build record is signed (`tickformer sign ART --key KEY --library {path}`)"
        )
    signing.verify_document(record, signature, artifact.trust_key, where=str(path.parent / BUILD_RECORD))
    return digest


def load_library(
    path: "str | os.PathLike[str]", artifact: Artifact, data: bytes | None = None
) -> ctypes.PyDLL:
    """ctypes handle of a library generated for `artifact` (its tf_artifact_sha256 is the
    manifest's manifest_sha256), loaded from a private copy of `data` (default: the file's bytes,
    read and vouched for here: `library_vouched_for`). PyDLL: calls keep the GIL -- a step this
    short gains nothing from releasing it, and a release/reacquire is a chance for another thread
    to run in the middle of a tick. Not real-time."""
    path = Path(path)
    if data is None:
        data = read_library(path)
        library_vouched_for(path, data, artifact)
    try:
        lib = _dlopen_private(path.name, data)
        sha_fn, layout_fn = lib.tf_artifact_sha256, lib.tf_layout
    except (OSError, AttributeError) as exc:
        raise BackendError(f"{path} is not a library generated by tickformer codegen ({exc})") from None
    sha_fn.restype, sha_fn.argtypes = ctypes.c_char_p, []
    layout_fn.restype, layout_fn.argtypes = ctypes.c_int32, [ctypes.c_int32]
    built_for = (sha_fn() or b"").decode(errors="replace")
    want = str(artifact.manifest.get("manifest_sha256"))
    if built_for != want:
        raise ArtifactError(
            f"{path} was generated for artifact {built_for[:12]}..., not this one "
            f"({want[:12]}...); regenerate it with `tickformer codegen`"
        )
    return lib


def _dlopen_private(name: str, data: bytes) -> ctypes.PyDLL:
    """dlopen a copy of `data` no other process can write: an anonymous memory file (memfd,
    Linux; not subject to a noexec /tmp), else a file in a fresh 0700 directory that goes once
    it is loaded. The memfd stays open as long as the library stays mapped (for good: ctypes
    cannot unload), because dlopen matches names first and a closed descriptor's number, hence
    its /proc/self/fd path, would be reused by the next load and answered with this library."""
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create(f"tickformer-{name}", os.MFD_CLOEXEC)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                with os.fdopen(os.dup(fd), "wb") as f:
                    f.write(data)
                return ctypes.PyDLL(f"/proc/self/fd/{fd}")
            except OSError:
                os.close(fd)
                raise
    with tempfile.TemporaryDirectory(prefix="tickformer-lib-") as private:
        copy = Path(private) / name
        copy.write_bytes(data)
        return ctypes.PyDLL(str(copy))


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
    ) -> None:
        super().__init__(artifact)
        self.supports_peek = self.block == "ssm"  # commit_candidate: the state's row copies
        self._states: HostState | None = None  # ssm: the C state's two buffers
        self._unchanged = (
            f"the {'state' if self.block == 'ssm' else 'cache'} is unchanged"  # a refusal's message
        )
        path, data = self._library(library, builder, cc=cc, cflags=cflags, cache_dir=cache_dir)
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

    def _library(self, library: Any, builder: LibraryBuilder | None, **build: Any) -> tuple[Path, bytes]:
        """The path and the vouched-for bytes (`library_vouched_for`) of library= as given, else of
        the library the builder returns (builder=, else the registered one). Under trust= a
        library the builder did not compile in this process (a cache hit) is asked for again with
        rebuild=True (module docstring, "Trust")."""
        if library is not None:
            if build["cc"] is not None or build["cflags"] is not None or builder is not None:
                raise ConfigError(
                    "library= loads a prebuilt library; cc=, cflags= and builder= only apply when the backend "
                    "builds it"
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
        status = self._run(sref, xref, pos, yref)
        if status:
            raise refused(status, pos, self._unchanged)
        return self._y

    def commit(self, pos: int) -> None:
        """Real-time safe, 0 bytes: tf_commit (attention: copies the staged rows into cache row
        pos; ssm: nothing to copy). Deferred (deferred_commit=True): one int32 store,
        `tf_state.pending = pos`; the next tf_stage_pending (or `cache()`) applies it before
        anything reads the cache."""
        if self.deferred_commit:
            self._pending.value = pos
        else:
            self._commit_fn(self._refs[0], pos)

    def commit_candidate(self, pos: int, i: int) -> None:
        """ssm: candidate i's staged state over the other rows of the C state's staged buffer
        (HostState: two broadcasting copies between views made at load, 0 bytes)."""
        if self._states is None:
            super().commit_candidate(pos, i)
        else:
            self._states.commit_candidate(pos, i)

    def reset(self) -> None:
        """ssm: tf_reset, buffer 0 zeroed (the state's size, constant in the stream length), 0
        bytes. Attention: nothing (stale rows are selected out by position)."""
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
