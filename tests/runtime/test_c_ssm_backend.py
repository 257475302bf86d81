"""The `c` backend on ssm artifacts (runtime/backends/c.py): the generated state-space step
behind the Session. Against the numpy recurrence over a long stream with a reset (the artifact's
tolerance per element, 64 u normwise); the full pass; a refused step (the C step's own output
and state checks) leaves position and state unchanged; the monitor's state check sees the state
the C step wrote; zero Python allocations per step; commit_candidate; a prebuilt library.
"""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc

import numpy as np
import pytest

from tickformer import runtime
from tickformer.codegen import plan_for
from tickformer.codegen.golden import NORMWISE_U, UNIT_ROUNDOFF
from tickformer.codegen.toolchain import build_library
from tickformer.errors import BackendError, ContractViolation
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
from tickformer.runtime import open_artifact


@pytest.fixture(scope="module")
def ssm_arts(tmp_path_factory):
    """tiny ssm (d_state 4), and tokens with batch 2 (d_state 3)."""
    tiny = preset("tiny")
    out = {}
    for name, cfg, seed, batch in (
        ("ssm", tiny.replace(block="ssm", d_state=4), 31, 1),
        (
            "ssmtokens",
            tiny.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11, block="ssm", d_state=3),
            32,
            2,
        ),
    ):
        out[name] = tmp_path_factory.mktemp(name) / "art"
        export_params(cfg, init_params(cfg, seed), out[name], batch=batch, lengths=[1, 2])
    return out


def stream(session, steps, seed=0):
    rng = np.random.default_rng(seed)
    b, cfg = session.batch, session.config
    if session.tokens:
        return [rng.integers(0, cfg.vocab_size, size=(b, 1), dtype=np.int64) for _ in range(steps)]
    lo, hi = session.domain
    return [rng.uniform(lo, hi, size=(b, 1, cfg.d_in)).astype(np.float32) for _ in range(steps)]


@pytest.mark.parametrize("name", ["ssm", "ssmtokens"])
def test_equals_the_numpy_recurrence_over_a_long_stream(ssm_arts, name, compiler):
    ref, c = runtime.load(ssm_arts[name], backend="numpy"), runtime.load(ssm_arts[name], backend="c")
    xs = stream(c, 6 * c.max_len, seed=1)
    ys, rs = [], []
    for t, x in enumerate(xs):
        if t == 4 * c.max_len:  # a reset mid-stream
            ref.reset()
            c.reset()
        ys.append(c.step(x).copy())
        rs.append(ref.step(x).copy())
    y, r = np.array(ys, np.float64), np.array(rs, np.float64)
    tol = ref.artifact.tolerance
    assert (np.abs(y - r) <= tol["atol"] + tol["rtol"] * np.abs(r)).all()
    assert np.abs(y - r).max() <= NORMWISE_U * UNIT_ROUNDOFF * np.abs(r).max()
    np.testing.assert_allclose(c.state(), ref.state(), atol=tol["atol"], rtol=tol["rtol"])
    assert c.position == ref.position == 2 * c.max_len


def test_full_pass_equals_the_reference(ssm_arts, compiler):
    c, ref = runtime.load(ssm_arts["ssm"], backend="c"), runtime.load(ssm_arts["ssm"], backend="numpy")
    seq = np.concatenate(stream(c, 3 * c.max_len, seed=2), axis=1)  # [1, T, d_in], T > max_len
    c.step(seq[:, :1].copy())  # the session's own state must not matter to run()
    tol = ref.artifact.tolerance
    np.testing.assert_allclose(c.run(seq), ref.run(seq), atol=tol["atol"], rtol=tol["rtol"])
    assert c.position == 1


def _tight(path, tmp_path, **changes):
    plan = dataclasses.replace(plan_for(open_artifact(path)), **changes)
    return runtime.load(path, backend="c", library=build_library(plan, cache_dir=tmp_path))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"output_bound": 1e-6}, "beyond the artifact's output bound; the state is unchanged"),
        ({"state_bound": (1e-6, 1e-6)}, "beyond the manifest's state_bound; the state is unchanged"),
    ],
)
def test_refused_step_leaves_position_and_state_unchanged(ssm_arts, tmp_path, compiler, changes, message):
    """The C step's own checks (output bound, state bound: TF_E_OUTPUT, TF_E_STATE) refuse after
    computing: the session raises and neither the position nor the committed state moved."""
    ok, tight = runtime.load(ssm_arts["ssm"], backend="c"), _tight(ssm_arts["ssm"], tmp_path, **changes)
    xs = stream(ok, 5, seed=3)
    for x in xs[:3]:
        ok.step(x)
    tight.state()[...] = ok.state()  # the same committed state, at an even position: buffer 0
    assert tight.position == 0 and ok.position % 2 == 1
    tight.backend.state(1)[...] = ok.state()  # both parities hold it
    before = (tight.backend._states.states.copy(),)
    with pytest.raises(BackendError, match=message):
        tight.step(xs[3])
    assert tight.position == 0
    assert tight.state().tobytes() == before[0][0].tobytes()


def test_the_monitor_checks_the_state_the_c_step_wrote(ssm_arts, compiler):
    session = runtime.load(ssm_arts["ssm"], backend="c", contracts="check")
    xs = stream(session, 4, seed=4)
    session.step(xs[0])
    committed = session.state().copy()
    session.monitor.state_bound = np.full(session.config.n_layers, 1e-9)  # every written state breaks it
    with pytest.raises(ContractViolation):
        session.step(xs[1])
    assert session.position == 1 and session.state().tobytes() == committed.tobytes()


def test_reset_zeroes_the_state_and_restarts(ssm_arts, compiler):
    a, b = runtime.load(ssm_arts["ssm"], backend="c"), runtime.load(ssm_arts["ssm"], backend="c")
    for x in stream(a, 7, seed=5):
        a.step(x)
    a.reset()
    assert a.position == 0 and not a.state().any()
    xs = stream(a, 9, seed=6)
    assert (
        np.stack([a.step(x).copy() for x in xs]).tobytes()
        == np.stack([b.step(x).copy() for x in xs]).tobytes()
    )


def test_commit_candidate_copies_one_row_over_the_batch(ssm_arts, compiler):
    session = runtime.load(ssm_arts["ssmtokens"], backend="c")
    backend = session.backend
    backend.step(np.array([[1], [7]], np.int64), 0)  # two candidates over one history
    staged = backend.staged_state(0)
    assert not np.array_equal(staged[0], staged[1])
    row1 = staged[1].copy()
    backend.commit_candidate(0, 1)
    assert staged[0].tobytes() == row1.tobytes() == staged[1].tobytes()


def test_zero_python_allocations_per_step(ssm_arts, compiler):
    session = runtime.load(ssm_arts["ssm"], backend="c")
    xs = stream(session, 16, seed=7)
    step, get, reset_peak = session.step, tracemalloc.get_traced_memory, tracemalloc.reset_peak

    warm, plan = [xs[i % 16] for i in range(200)], [xs[i % 16] for i in range(5_000)]  # made before tracing

    def loop(items):
        it = iter(items)
        base = get()[0]
        base = get()[0]
        reset_peak()
        for x in it:
            step(x)
        return get()[1] - base

    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        loop(warm)
        rise = loop(plan)
    finally:
        tracemalloc.stop()
        gc.enable()
    assert rise == 0


def test_a_prebuilt_library_for_another_artifact_is_refused(ssm_arts, tmp_path, compiler):
    from tickformer.errors import ArtifactError

    lib = build_library(plan_for(open_artifact(ssm_arts["ssmtokens"])), cache_dir=tmp_path)
    with pytest.raises(ArtifactError, match="was generated for artifact"):
        runtime.load(ssm_arts["ssm"], backend="c", library=lib)
