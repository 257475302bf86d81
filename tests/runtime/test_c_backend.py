"""The `c` backend (runtime/backends/c.py): the generated C step behind the Session interface.

Equivalence with the numpy reference at every position (the artifact's tolerance per
element, and 64 u normwise); stale cache rows planted with inf/NaN change nothing; zero
Python allocations per step, even transiently; Session semantics (a refused step leaves the
position and the cache exactly as they were); the build cache; prebuilt libraries; the
errors for a missing compiler and for an artifact kind codegen does not support.
"""

from __future__ import annotations

import gc
import os
import tracemalloc

import numpy as np
import pytest

from tickformer import runtime
from tickformer.codegen import plan_for, write
from tickformer.codegen.golden import NORMWISE_U, UNIT_ROUNDOFF
from tickformer.codegen.toolchain import BUILD_RECORD, LIBRARY, build_library, cache_root
from tickformer.errors import (
    ArtifactError,
    BackendError,
    BackendUnavailable,
    ConfigError,
    ContextFull,
    ContractViolation,
    InputError,
)
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
from tickformer.runtime import open_artifact


@pytest.fixture(scope="module")
def control_art(tmp_path_factory):
    """The benchmark's model: preset `control` (d_model 64, 4 heads, 2 layers, max_len 256)."""
    out = tmp_path_factory.mktemp("control") / "art"
    export_params(preset("control"), init_params(preset("control"), 0), out, lengths=[1, 2])
    return out


@pytest.fixture(scope="module")
def batch2_art(tmp_path_factory):
    out = tmp_path_factory.mktemp("batch2") / "art"
    export_params(preset("tiny"), init_params(preset("tiny"), 7), out, batch=2)
    return out


def inputs(session, seed=0):
    rng = np.random.default_rng(seed)
    b, n, cfg = session.batch, session.max_len, session.config
    if session.tokens:
        seq = rng.integers(0, cfg.vocab_size, size=(n, b, 1), dtype=np.int64)
    else:
        lo, hi = session.domain
        seq = (
            rng.uniform(lo, hi, size=(n, b, 1, cfg.d_in))
            .astype(np.float32)
            .clip(
                np.float32(lo) if np.float32(lo) >= lo else np.nextafter(np.float32(lo), np.float32(1)),
                np.float32(hi) if np.float32(hi) <= hi else np.nextafter(np.float32(hi), np.float32(-1)),
            )
        )
    return [np.ascontiguousarray(x) for x in seq]


def run_steps(session, xs):
    return np.stack([session.step(x).copy() for x in xs])


@pytest.mark.parametrize("art", ["tiny_art", "tokens_art", "batch2_art", "control_art"])
def test_equals_the_numpy_reference_at_every_position(request, art, compiler):
    path = request.getfixturevalue(art)
    if isinstance(path, tuple):
        path = path[0]
    ref, c = runtime.load(path, backend="numpy"), runtime.load(path, backend="c")
    xs = inputs(ref)
    r, y = run_steps(ref, xs).astype(np.float64), run_steps(c, xs).astype(np.float64)
    tol = ref.artifact.tolerance
    assert (np.abs(y - r) <= tol["atol"] + tol["rtol"] * np.abs(r)).all()
    assert np.abs(y - r).max() <= NORMWISE_U * UNIT_ROUNDOFF * np.abs(r).max()


def test_full_pass_equals_the_reference(tiny_art, compiler):
    path, _ = tiny_art
    seq = np.random.default_rng(1).uniform(-10, 10, size=(1, 16, 3)).astype(np.float32)
    c, ref = runtime.load(path, backend="c"), runtime.load(path, backend="numpy")
    c.step(seq[:, :1].copy())  # the session's own state must not matter to run()
    np.testing.assert_allclose(
        c.run(seq), ref.run(seq), atol=ref.artifact.tolerance["atol"], rtol=ref.artifact.tolerance["rtol"]
    )
    assert c.position == 1


def test_stale_rows_planted_with_inf_and_nan_change_nothing(tiny_art, compiler):
    path, _ = tiny_art
    clean, planted = runtime.load(path, backend="c"), runtime.load(path, backend="c")
    xs = inputs(clean, seed=2)
    k, v = planted.backend.cache()
    k[...] = np.inf
    v[...] = np.nan  # every row is stale at position 0
    for pos, x in enumerate(xs):
        k, v = planted.backend.cache()
        k[:, :, :, pos:] = np.where(np.arange(k.shape[3] - pos)[:, None] % 2, np.inf, -np.inf)
        v[:, :, :, pos:] = np.nan
        assert planted.step(x).tobytes() == clean.step(x).tobytes(), pos


def test_reset_reuses_the_cache_without_clearing_it(tiny_art, compiler):
    path, _ = tiny_art
    a, b = runtime.load(path, backend="c"), runtime.load(path, backend="c")
    xs = inputs(a, seed=3)
    run_steps(a, inputs(a, seed=4))
    a.reset()
    assert run_steps(a, xs).tobytes() == run_steps(b, xs).tobytes()


def test_sessions_do_not_share_state(tokens_art, compiler):
    path, _ = tokens_art
    a, b, ref_a, ref_b = (runtime.load(path, backend="c") for _ in range(4))
    xa, xb = inputs(a, seed=5), inputs(a, seed=6)
    ya, yb = run_steps(ref_a, xa), run_steps(ref_b, xb)
    for t in range(len(xa)):  # interleaved in one process, one library
        assert a.step(xa[t]).tobytes() == ya[t].tobytes()
        assert b.step(xb[t]).tobytes() == yb[t].tobytes()


def test_refused_output_leaves_position_and_cache_unchanged(tiny_art, tmp_path, compiler):
    """An output beyond the bound: the C step says so, the session raises, nothing moved."""
    import dataclasses

    path, _ = tiny_art
    plan = dataclasses.replace(plan_for(open_artifact(path)), output_bound=1e-6)
    session = runtime.load(path, backend="c", library=build_library(plan, cache_dir=tmp_path))
    k, v = session.backend.cache()
    before = (k.copy(), v.copy())
    with pytest.raises(BackendError, match="beyond the artifact's output bound; the cache is unchanged"):
        session.step(np.zeros((1, 1, 3), np.float32))
    assert session.position == 0
    assert k.tobytes() == before[0].tobytes() and v.tobytes() == before[1].tobytes()


def _peak_rise(session, xs, steps, reset_every="max_len"):
    """(peak rise, net blocks) of traced memory over `steps` Session.step calls (a reset every
    max_len steps, or only before the first with reset_every=None: a sliding stream)."""
    n = len(xs)
    every = session.max_len if reset_every == "max_len" else 1 << 62
    plan = [(xs[i % n], i % every == 0) for i in range(steps)]
    step, reset = session.step, session.reset
    get, reset_peak = tracemalloc.get_traced_memory, tracemalloc.reset_peak

    def loop(items):
        it = iter(items)
        base = get()[0]
        base = get()[0]
        reset_peak()
        for x, first in it:
            if first:
                reset()
            step(x)
        return get()[1] - base

    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        loop(plan[: 2 * n])  # warm-up: first calls, interpreter free lists
        rise = loop(plan)  # any allocation inside any step raises the peak, even one freed again
        before = tracemalloc.take_snapshot()
        loop(plan)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        gc.enable()
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    net = sum(
        d.count_diff
        for d in after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "traceback")
    )
    return rise, net


@pytest.mark.parametrize("art", ["tiny_art", "tokens_art"])
def test_zero_python_allocations_per_step(request, art, compiler):
    """Session.step over the c backend allocates nothing traced, not even within a step."""
    path, _ = request.getfixturevalue(art)
    session = runtime.load(path, backend="c")
    rise, net = _peak_rise(session, inputs(session), 5_000)
    assert rise == 0 and net == 0


def test_allocation_probe_sees_argtypes(tiny_art, compiler):
    """The control: with argtypes set, ctypes converts every argument into a new object per
    call -- the probe sees it (which is why the backend leaves argtypes unset)."""
    import ctypes

    path, _ = tiny_art
    session = runtime.load(path, backend="c")
    fn = session.backend._run  # the function step calls
    try:
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p]
        session.backend._refs = tuple(
            ctypes.c_void_p(ctypes.addressof(r._obj)) for r in session.backend._refs
        )
        rise, _ = _peak_rise(session, inputs(session), 300)
    finally:
        fn.argtypes = None
    assert rise > 0


def test_cache_hit_does_not_compile(tiny_art, compiler, monkeypatch):
    path, _ = tiny_art
    first = runtime.load(path, backend="c").backend.library_path
    import subprocess

    def refuse(cmd, *a, **k):
        if "tf_model.c" in cmd:
            raise AssertionError("compiled on a cache hit")
        return subprocess_run(cmd, *a, **k)

    subprocess_run = subprocess.run
    monkeypatch.setattr("tickformer.codegen.toolchain.subprocess.run", refuse)
    assert runtime.load(path, backend="c").backend.library_path == first


def test_cache_key_follows_the_flags(tiny_art, tmp_path, compiler):
    path, _ = tiny_art
    a = runtime.load(path, backend="c", cache_dir=tmp_path).backend.library_path
    b = runtime.load(
        path, backend="c", cache_dir=tmp_path, cflags=["-std=c99", "-O1", "-ffp-contract=off"]
    ).backend.library_path
    assert a != b and sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(
        {os.path.basename(os.path.dirname(a)), os.path.basename(os.path.dirname(b))}
    )


def test_cache_key_follows_the_weight_format(tiny_art, tmp_path, compiler):
    """Two weight formats of one artifact are two libraries (a cache keyed on the artifact alone
    handed verify --weights fp16 the int8 library built before it)."""
    art = open_artifact(tiny_art[0])
    libs = {fmt: build_library(plan_for(art, fmt), cache_dir=tmp_path) for fmt in ("fp32", "fp16", "int8")}
    assert len(set(libs.values())) == 3
    assert build_library(plan_for(art, "fp16"), cache_dir=tmp_path) == libs["fp16"]  # a hit is the same one


def test_cache_key_follows_every_field_of_the_plan(tiny_art, compiler):
    """A plan differing in any one field (plan.py: everything the emitted C depends on) is another
    cache entry. CHANGES names a change per field of Plan; a field added to Plan fails here until
    it is named (a key of hand-picked fields missed config, params, the kinds and the signals)."""
    import dataclasses

    from tickformer.codegen.toolchain import cache_key

    plan = plan_for(open_artifact(tiny_art[0]))
    first = sorted(plan.params)[0]
    changes = {
        "config": plan.config.replace(d_ff=plan.config.d_ff + 1),
        "batch": plan.batch + 1,
        "domain": (plan.domain[0], plan.domain[1] * 0.5),
        "output_bound": 1e-6,
        "artifact_sha256": "0" * 64,
        "params": {**plan.params, first: plan.params[first] + np.float32(1.0)},
        "cache_kind": "ring",
        "block_kind": "ssm",
        "state_bound": (1.0,),
        "columns": ((0.0,), (1.0,)),
        "signals": {},
        "weight_format": "fp16",
    }
    assert sorted(changes) == sorted(f.name for f in dataclasses.fields(plan))
    key = cache_key(plan, "g", compiler, ["-O2"])
    assert cache_key(dataclasses.replace(plan), "g", compiler, ["-O2"]) == key  # the same plan: one entry
    for name, value in changes.items():
        assert cache_key(dataclasses.replace(plan, **{name: value}), "g", compiler, ["-O2"]) != key, name


def test_load_builds_the_weight_format_asked_for(tiny_art, tmp_path, compiler):
    """runtime.load(backend="c", weights=F) runs the step of format F (a library of its own),
    within F's stated bound of the fp32 step; with library= the format is the library's, so
    weights= is refused there."""
    from tickformer.codegen import weights as W

    path, _ = tiny_art
    x = np.random.default_rng(0).uniform(-1, 1, (6, 1, 1, 3)).astype(np.float32)
    with (
        runtime.load(path, backend="c", cache_dir=tmp_path) as s32,
        runtime.load(path, backend="c", cache_dir=tmp_path, weights="int8") as s8,
    ):
        assert s8.backend.library_path != s32.backend.library_path
        y32 = np.stack([s32.step(xt).copy() for xt in x])
        y8 = np.stack([s8.step(xt).copy() for xt in x])
    err, scale = float(np.abs(y8 - y32).max()), float(np.abs(y32).max())
    assert 0 < err <= W.fp32_bound("int8") * scale
    with pytest.raises(ConfigError, match="weights="):
        runtime.load(path, backend="c", library=s32.backend.library_path, weights="int8")


def test_an_incomplete_cache_entry_is_rebuilt(tiny_art, tmp_path, compiler):
    """A directory without build.json (what a crash could leave if writes were not atomic)
    is never loaded: the build replaces it. (The damage is done to a library no process has
    loaded: truncating a mapped library in place would crash its users -- which is why the
    cache is only ever written through replace_dir, new files renamed into place.)"""
    path, _ = tiny_art
    lib = str(build_library(plan_for(open_artifact(path)), cache_dir=tmp_path))  # built, never loaded
    entry = os.path.dirname(lib)
    os.unlink(os.path.join(entry, BUILD_RECORD))
    with open(lib, "wb") as handle:
        handle.write(b"half a library")
    session = runtime.load(path, backend="c", cache_dir=tmp_path)
    assert session.step(np.zeros((1, 1, 3), np.float32)).shape == (1, 1, 2)
    assert os.path.isfile(os.path.join(entry, BUILD_RECORD))


def test_fast_math_is_refused(tiny_art, compiler):
    path, _ = tiny_art
    with pytest.raises(ConfigError, match="fast math"):
        runtime.load(path, backend="c", cflags=["-O2", "-ffast-math"])


def test_prebuilt_library_from_make_shared(tiny_art, tokens_art, tmp_path, compiler):
    import subprocess

    path, _ = tiny_art
    out = write(path, tmp_path / "c")
    subprocess.run(["make", "-s", "-C", str(out), "shared", f"CC={compiler.path}"], check=True)
    pre, built = runtime.load(path, backend="c", library=out / LIBRARY), runtime.load(path, backend="c")
    xs = inputs(pre, seed=8)
    assert (
        run_steps(pre, xs).tobytes() == run_steps(built, xs).tobytes()
    )  # portable -O2 build == -march=native build
    with pytest.raises(ArtifactError, match="was generated for artifact"):
        runtime.load(tokens_art[0], backend="c", library=out / LIBRARY)


def test_missing_compiler_is_one_line_naming_the_package(tiny_art, monkeypatch, tmp_path):
    path, _ = tiny_art
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(BackendUnavailable) as info:
        runtime.load(path, backend="c", cache_dir=tmp_path)
    message = str(info.value)
    assert "\n" not in message and "apt-get install gcc" in message


def test_encoder_decoder_is_refused(seq2seq_art):
    path, _ = seq2seq_art
    with pytest.raises(ArtifactError, match="codegen does not support arch 'encoder-decoder'"):
        runtime.load(path, backend="c")


def test_default_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("TICKFORMER_CODEGEN_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "tickformer" / "codegen"


# --- windowed artifacts: the ring cache ------------------------------------------------------------
@pytest.fixture(scope="module")
def ring_arts(tmp_path_factory):
    """Windowed tiny artifacts: W = 1, W = 4, W = max_len = 16, and tokens with W = 3; the
    relative-position biases perturbed (the ALiBi init has a zero distance-0 column)."""
    out = {}
    tiny = preset("tiny")
    tokens = tiny.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)
    for name, cfg, seed in (
        ("w1", tiny.replace(window=1), 21),
        ("w4", tiny.replace(window=4), 22),
        ("wfull", tiny.replace(window=tiny.max_len), 23),
        ("wtokens", tokens.replace(window=3), 24),
    ):
        params = init_params(cfg, seed)
        rng = np.random.default_rng(seed)
        for key in params:
            if key.endswith(".rel_bias"):
                params[key] = (params[key] + rng.normal(0.0, 0.5, params[key].shape)).astype(np.float32)
        out[name] = tmp_path_factory.mktemp(name) / "art"
        export_params(cfg, params, out[name], lengths=[1, 2])
    return out


def stream(session, steps, seed=0):
    """`steps` seeded step inputs inside the session's domain (any length: windowed sessions slide)."""
    rng = np.random.default_rng(seed)
    b, cfg = session.batch, session.config
    if session.tokens:
        return [rng.integers(0, cfg.vocab_size, size=(b, 1), dtype=np.int64) for _ in range(steps)]
    lo, hi = session.domain
    return [rng.uniform(lo, hi, size=(b, 1, cfg.d_in)).astype(np.float32) for _ in range(steps)]


@pytest.mark.parametrize("name", ["w1", "w4", "wfull", "wtokens"])
def test_windowed_stream_equals_the_numpy_reference(ring_arts, name, compiler):
    """A sliding stream of max(20 W, 3 max_len) + 1 steps (issue 13: >= 20x W), every wrap of the
    ring included: per element within the artifact's tolerance, normwise within 64 u."""
    ref, c = runtime.load(ring_arts[name], backend="numpy"), runtime.load(ring_arts[name], backend="c")
    w = c.config.window
    xs = stream(c, max(20 * w, 3 * c.max_len) + 1, seed=1)
    r, y = run_steps(ref, xs).astype(np.float64), run_steps(c, xs).astype(np.float64)
    assert c.position == len(xs) and c.ring_position == ref.ring_position
    tol = ref.artifact.tolerance
    assert (np.abs(y - r) <= tol["atol"] + tol["rtol"] * np.abs(r)).all()
    assert np.abs(y - r).max() <= NORMWISE_U * UNIT_ROUNDOFF * np.abs(r).max()


@pytest.mark.parametrize("name", ["w4", "wtokens"])
def test_windowed_full_pass_longer_than_max_len(ring_arts, name, compiler):
    """run() over T = 3 max_len + 5 (windowed: any T) walks the ring positions as a session does."""
    c, ref = runtime.load(ring_arts[name], backend="c"), runtime.load(ring_arts[name], backend="numpy")
    seq = np.concatenate(stream(c, 3 * c.max_len + 5, seed=2), axis=1)  # [B, T(, d_in)]
    tol = ref.artifact.tolerance
    np.testing.assert_allclose(c.run(seq), ref.run(seq), atol=tol["atol"], rtol=tol["rtol"])


@pytest.mark.parametrize("name", ["w1", "w4", "wfull"])
def test_unread_slots_planted_with_inf_and_nan_change_nothing(ring_arts, name, compiler):
    """Before every step of a stream across several wraps, every slot the step does not read
    (contracts.ring_buffer.slot_read at the session's ring position) gets inf, -inf or NaN:
    the outputs are bitwise those of a clean session."""
    from tickformer.contracts.ring_buffer import slot_read

    clean, planted = runtime.load(ring_arts[name], backend="c"), runtime.load(ring_arts[name], backend="c")
    w = clean.config.window
    for t, x in enumerate(stream(clean, 7 * w + 3, seed=3)):
        r = planted.ring_position
        k, v = planted.backend.cache()  # [L, B, H, W, dh] views of the C state
        for j in range(w):
            if not slot_read(r, j, w):
                k[:, :, :, j] = (np.inf, -np.inf, np.nan)[t % 3]
                v[:, :, :, j] = (np.nan, np.inf, -np.inf)[t % 3]
        assert planted.step(x).tobytes() == clean.step(x).tobytes(), (t, r)


def test_windowed_refusal_leaves_ring_and_cache_unchanged(ring_arts, tmp_path, compiler):
    """A step the C code refuses mid-stream (past a wrap) moves neither the ring position nor a byte
    of the cache."""
    import dataclasses

    path = ring_arts["w4"]
    plan = plan_for(open_artifact(path))
    ok = runtime.load(path, backend="c")
    tight = runtime.load(
        path,
        backend="c",
        library=build_library(dataclasses.replace(plan, output_bound=1e-6), cache_dir=tmp_path),
    )
    xs = stream(ok, 15, seed=4)
    for x in xs:
        ok.step(x)
    k, v = tight.backend.cache()
    k[...], v[...] = ok.backend.cache()
    tight._ring = ok.ring_position  # the same point of the stream
    before = (tight.ring_position, k.copy(), v.copy())
    with pytest.raises(BackendError, match="beyond the artifact's output bound; the cache is unchanged"):
        tight.step(xs[0])
    assert tight.ring_position == before[0]
    assert k.tobytes() == before[1].tobytes() and v.tobytes() == before[2].tobytes()


@pytest.mark.parametrize("name", ["w4", "wtokens"])
def test_windowed_zero_python_allocations_per_step(ring_arts, name, compiler):
    """A sliding Session.step over the c backend, across many wraps (no reset), allocates nothing."""
    session = runtime.load(ring_arts[name], backend="c")
    xs = stream(session, session.max_len, seed=5)
    rise, net = _peak_rise(session, xs, 5_000, reset_every=None)
    assert rise == 0 and net == 0


def test_deferred_commit_equals_an_immediate_one(tiny_art, ring_arts, compiler):
    """deferred_commit=True (commit = a store of pos, applied by the next tf_stage_pending) against
    the default (tf_commit at once): bitwise the same outputs and caches, static and ring, across a
    reset."""
    for path in (tiny_art[0], ring_arts["w4"]):
        a, b = runtime.load(path, backend="c", deferred_commit=True), runtime.load(path, backend="c")
        assert a.backend.deferred_commit and not b.backend.deferred_commit
        xs = stream(a, a.max_len, seed=8)
        for t, x in enumerate(xs):
            if t == 9:
                a.reset()
                b.reset()
            assert a.step(x).tobytes() == b.step(x).tobytes(), t
            if t % 5 == 0:
                for u, v in zip(a.backend.cache(), b.backend.cache()):
                    assert u.tobytes() == v.tobytes(), t


def test_a_monitor_veto_commits_nothing(tiny_art, compiler):
    """contracts='check': the step whose output the monitor refuses is not committed, deferred or
    not -- the cache, after the pending commit of the previous step, is what it was."""
    path, _ = tiny_art
    session = runtime.load(path, backend="c", contracts="check", deferred_commit=True)
    xs = stream(session, 4, seed=9)
    session.step(xs[0])
    k, v = (a.copy() for a in session.backend.cache())
    session.monitor.output_bound = 1e-9  # every output breaks it now
    with pytest.raises(ContractViolation):
        session.step(xs[1])
    assert session.position == 1
    k2, v2 = session.backend.cache()
    assert k2.tobytes() == k.tobytes() and v2.tobytes() == v.tobytes()


# --- the input checked once, in C (runtime/backends/c.py "Input check") ----------------------


def _edge_values(lo: float, hi: float) -> list[np.float32]:
    """float32 values where a float32 check and the float64 domain could part: each bound's
    nearest float32 on both sides, +-0, the extremes, NaN and the infinities."""
    f32 = np.float32
    out = [f32(0.0), f32(-0.0), f32(np.nan), f32(np.inf), f32(-np.inf)]
    for bound in (lo, hi):
        b = f32(bound)
        out += [b, np.nextafter(b, f32(np.inf)), np.nextafter(b, f32(-np.inf))]
    return out + [f32(np.finfo(np.float32).max), f32(-np.finfo(np.float32).max)]


def _outcome(session, x):
    try:
        session.step(x)
    except InputError as exc:
        return str(exc)
    return "ok"


@pytest.mark.parametrize("art", ["tiny_art", "tokens_art"])
def test_the_c_check_refuses_exactly_what_the_session_check_refuses(request, art, compiler):
    """The Session skips its scan of the values on backend c (checks_input): every edge value, in
    every input slot, gets the outcome and the message the numpy backend's Session gives, and a
    refused step moves nothing."""
    path, _ = request.getfixturevalue(art)
    c, ref = runtime.load(path, backend="c"), runtime.load(path, backend="numpy")
    assert c._values_checked_by_backend and not ref._values_checked_by_backend
    if c.tokens:
        v = c.config.vocab_size
        values = [np.int64(i) for i in (0, v - 1, -1, v, -(2**63), 2**63 - 1)]
    else:
        values = _edge_values(*c.domain)
    base = np.zeros(c.input_shape, c.input_dtype)
    outcomes = set()
    for value in values:
        for slot in range(base.size):
            x = base.copy()
            x.flat[slot] = value
            k, vv = (a.copy() for a in c.backend.cache())
            got, want = _outcome(c, x), _outcome(ref, x)
            assert got == want, (value, slot)
            outcomes.add(got == "ok")
            if got != "ok":
                assert c.position == ref.position
                assert all(a.tobytes() == b.tobytes() for a, b in zip(c.backend.cache(), (k, vv)))
            if c.position == c.max_len:
                c.reset(), ref.reset()
    assert outcomes == {True, False}


def test_a_bad_value_at_a_full_context_is_named_first(tiny_art, compiler):
    """Precedence as on every backend: the InputError for the value before ContextFull."""
    path, _ = tiny_art
    for name in ("c", "numpy"):
        session = runtime.load(path, backend=name)
        good = np.zeros(session.input_shape, np.float32)
        for _ in range(session.max_len):
            session.step(good)
        with pytest.raises(InputError, match="non-finite value nan"):
            session.step(np.full(session.input_shape, np.nan, np.float32))
        with pytest.raises(ContextFull):
            session.step(good)


def test_a_library_whose_input_check_disagrees_is_refused_at_load(tiny_art, tmp_path, compiler):
    """The mutant the load probe exists for: a library built for a narrower (or wider) domain
    than the artifact declares. With the Session's scan gone, it would refuse good inputs (or
    accept bad ones) silently; loading refuses it, naming the value."""
    import dataclasses

    path, _ = tiny_art
    plan = plan_for(open_artifact(path))
    lo, hi = plan.domain
    for domain, word in (
        ((lo, hi * 0.5), "refuses"),
        ((lo, float(np.nextafter(np.float32(hi), np.float32(np.inf)))), "accepts"),
    ):
        lib = build_library(dataclasses.replace(plan, domain=domain), cache_dir=tmp_path / word)
        with pytest.raises(BackendError, match=f"its input check {word} the input value"):
            runtime.load(path, backend="c", library=lib)


def test_an_input_refusal_the_session_check_does_not_share_is_an_error(tiny_art, compiler, monkeypatch):
    """Should the C check ever refuse what the Session's check accepts, the step fails loudly
    (BackendError naming the disagreement), and nothing moves."""
    from tickformer.errors import InputRefused

    path, _ = tiny_art
    session = runtime.load(path, backend="c")

    def refuse(x, pos):
        raise InputRefused("the C step refused position 0: an input value is outside the declared domain")

    monkeypatch.setattr(session.backend, "step", refuse)
    with pytest.raises(BackendError, match="the library's input check does not match the artifact"):
        session.step(np.zeros(session.input_shape, np.float32))
    assert session.position == 0
