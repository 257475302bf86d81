"""ssm artifacts through the one `Session` and the backends of both kinds (runtime/session.py,
runtime/backends/base.py, layout.HostState):
step == full pass within the stated tolerance on numpy and ORT, far past max_len (no
ContextFull), reset in constant time to the zero state, the state unchanged by a refused or
failed step, the BIBO state bound monitored, zero allocation per step on ORT, the position
counter's wrap, and clear refusals where a backend does not run this kind (the GPU backends on
ssm artifacts: tests/runtime/test_gpu_backends.py)."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from tickformer import runtime
from tickformer.errors import BackendError, BackendUnavailable, ContractViolation, InputError
from tickformer.export.ssm_graphs import ssm_tolerance
from tickformer.export.writer import export_params
from tickformer.model import forward, init_params, preset
from tickformer.runtime import session as session_module

SSM = preset("tiny").replace(block="ssm", d_state=3)
SSM_TOKENS = SSM.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11)
BACKENDS = ["numpy", "ort"]


@pytest.fixture(scope="module")
def ssm_art(tmp_path_factory):
    params = init_params(SSM, seed=5)
    path = tmp_path_factory.mktemp("ssm") / "art"
    manifest = export_params(SSM, params, path, domain=(-10.0, 10.0))
    return path, params, manifest


@pytest.fixture(scope="module")
def ssm_tokens_art(tmp_path_factory):
    params = init_params(SSM_TOKENS, seed=6)
    path = tmp_path_factory.mktemp("ssm_tok") / "art"
    return path, params, export_params(SSM_TOKENS, params, path)


def inputs(config, length, seed=0):
    rng = np.random.default_rng(seed)
    if config.inputs == "tokens":
        return rng.integers(0, config.vocab_size, size=(1, length), dtype=np.int64)
    return rng.uniform(-10.0, 10.0, size=(1, length, config.d_in)).astype(np.float32)


def stepped(session, seq):
    return np.concatenate(
        [session.step(np.ascontiguousarray(seq[:, t : t + 1])).copy() for t in range(seq.shape[1])], axis=1
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("art", ["ssm_art", "ssm_tokens_art"])
def test_step_equals_full_far_past_max_len(request, art, backend):
    path, params, manifest = request.getfixturevalue(art)
    session = runtime.load(path, backend=backend, contracts="check")
    n = 10 * session.max_len  # no ContextFull: the state does not grow
    seq = inputs(session.config, n)
    ys = stepped(session, seq)
    assert session.position == n
    tol = ssm_tolerance(session.config.replace(max_len=n))["atol"]  # the stated tolerance at length n
    np.testing.assert_allclose(ys, session.run(seq), atol=tol, rtol=tol)
    np.testing.assert_allclose(ys, forward(params, session.config, seq), atol=tol, rtol=tol)
    assert session.monitor.summary()["contracts"]["state_bound"]["violations"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_zeroes_the_state_and_replays(ssm_art, backend):
    path, _, _ = ssm_art
    session = runtime.load(path, backend=backend)
    seq = inputs(session.config, 7)
    first = stepped(session, seq)
    assert np.abs(session.state()).max() > 0
    session.reset()
    assert session.position == 0 and not session.state().any()
    np.testing.assert_array_equal(stepped(session, seq), first)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_or_failed_step_leaves_the_state(ssm_art, backend, monkeypatch):
    path, _, _ = ssm_art
    session = runtime.load(path, backend=backend, contracts="check")
    stepped(session, inputs(session.config, 5))
    before, pos = session.state().copy(), session.position
    bad = np.full((1, 1, SSM.d_in), np.nan, np.float32)
    with pytest.raises(InputError):
        session.step(bad)
    be = session.backend
    real = be.step

    def failing(x, p):
        real(x, p)  # writes the staged state, then the engine "fails"
        raise RuntimeError("engine fault")

    monkeypatch.setattr(be, "step", failing)
    with pytest.raises(BackendError, match="state is unchanged"):
        session.step(inputs(session.config, 1))
    monkeypatch.setattr(be, "step", real)
    session.monitor.state_bound = session.monitor.state_bound * 1e-9  # a bound the next state breaks
    with pytest.raises(ContractViolation, match="state_bound: layer"):
        session.step(inputs(session.config, 1))
    assert session.position == pos
    np.testing.assert_array_equal(session.state(), before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_refuses_an_empty_or_misshapen_sequence(ssm_art, backend):
    """run() has no max_len for an ssm but still needs T >= 1 and the [B, T, d_in] float32 shape."""
    session = runtime.load(ssm_art[0], backend=backend)
    for bad in (
        np.zeros((1, 0, SSM.d_in), np.float32),
        np.zeros((1, 3, SSM.d_in + 1), np.float32),
        np.zeros((1, 3, SSM.d_in), np.float64),
    ):
        with pytest.raises(InputError, match=r"T >= 1, got"):
            session.run(bad)
    assert session.run(inputs(session.config, 1)).shape[1] == 1


def test_the_monitor_counts_state_bound_violations(ssm_art):
    """The mutant of the state contract: a bound below the real state is seen (monitor mode)."""
    path, _, manifest = ssm_art
    session = runtime.load(path, backend="numpy", contracts="monitor")
    np.testing.assert_array_equal(session.monitor.state_bound, manifest["state_bound"]["layers"])
    stepped(session, inputs(session.config, 20))
    assert session.monitor.summary()["contracts"]["state_bound"]["violations"] == 0
    session.monitor.state_bound = session.monitor.state_bound * 1e-9
    stepped(session, inputs(session.config, 3))
    assert session.monitor.summary()["contracts"]["state_bound"]["violations"] == 3


def test_the_position_wraps_without_losing_the_state(ssm_art, monkeypatch):
    path, _, _ = ssm_art
    monkeypatch.setattr(session_module, "WRAP", 4)
    session = runtime.load(path, backend="ort")
    assert len(session._next_position) == 4
    seq = inputs(session.config, 11)
    ys = stepped(session, seq)
    assert session.position == 11 and session._wraps == 2
    monkeypatch.setattr(session_module, "WRAP", 1 << 16)
    fresh = runtime.load(path, backend="numpy")
    tol = 1e-5
    np.testing.assert_allclose(ys, stepped(fresh, seq), atol=tol, rtol=tol)


def test_numpy_growing_refuses_an_ssm_artifact_with_the_reason(ssm_art):
    with pytest.raises(BackendUnavailable) as info:
        runtime.load(ssm_art[0], backend="numpy-growing")
    msg = str(info.value)
    assert "does not run ssm artifacts" in msg and "use backend 'numpy'" in msg and "\n" not in msg


def test_a_backend_that_does_not_run_a_kind_is_refused_with_its_reason(ssm_art, monkeypatch):
    """A backend says which block kinds it does not run (`Backend.refuses`, kind -> why); load
    refuses those in one line before anything is built, and runs every other."""
    from tickformer.runtime.backends.ort import OrtBackend

    monkeypatch.setattr(OrtBackend, "refuses", {"ssm": "(a planted reason) use backend 'numpy'"})
    with pytest.raises(BackendUnavailable) as info:
        runtime.load(ssm_art[0], backend="ort")
    msg = str(info.value)
    assert "does not run ssm artifacts: (a planted reason)" in msg and "'numpy'" in msg and "\n" not in msg
    monkeypatch.setattr(OrtBackend, "refuses", {})
    runtime.load(ssm_art[0], backend="ort").close()


@pytest.mark.parametrize("backend", ["ort-cuda", "ort-trt", "tensorrt"])
def test_gpu_backends_without_a_gpu_refuse_an_ssm_artifact_in_one_line(ssm_art, backend):
    """The ssm variants exist (tests/runtime/test_gpu_backends.py runs them on the CUDA emulation);
    on a machine without the GPU stack they refuse like the attention ones, naming what is missing."""
    import onnxruntime as ort

    if backend != "tensorrt" and "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("a GPU onnxruntime is installed here")
    with pytest.raises(BackendUnavailable) as info:
        runtime.load(ssm_art[0], backend=backend)
    msg = str(info.value)
    assert "tickformer[" in msg and "\n" not in msg


def _peak_rise(step, xs, steps):
    plan = [xs[i % len(xs)] for i in range(steps)]
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for x in plan[:64]:
            step(x)
        get = tracemalloc.get_traced_memory
        it = iter(plan)
        base = get()[0]
        base = get()[0]
        tracemalloc.reset_peak()
        for x in it:
            step(x)
        return get()[1] - base
    finally:
        tracemalloc.stop()
        gc.enable()


def test_ort_ssm_step_allocates_zero_bytes_even_transiently(ssm_art):
    """2,000 steps (125 x max_len) over the ORT backend with IOBinding: the peak of traced
    memory does not rise by one byte (the positions past 256 come from the list made at load)."""
    path, _, _ = ssm_art
    session = runtime.load(path, backend="ort")
    seq = inputs(session.config, 32)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(32)]
    assert _peak_rise(session.step, xs, 2000) == 0
    assert session.position > 256


def test_the_allocation_probe_sees_a_position_increment(ssm_art):
    """The probe can fail: stepping with `position + 1` arithmetic above 256 allocates."""
    path, _, _ = ssm_art
    session = runtime.load(path, backend="ort")
    seq = inputs(session.config, 32)
    xs = [np.ascontiguousarray(seq[:, t : t + 1]) for t in range(32)]
    step = session.step

    def old_step(x):
        y = step(x)
        session._position = session._position - 1 + 1  # a new int above 256
        return y

    assert _peak_rise(old_step, xs, 600) > 0


def test_cli_run_steps_an_ssm_artifact_past_max_len(ssm_art, tmp_path, capsys):
    from tickformer.cli import main

    path, params, _ = ssm_art
    seq = inputs(SSM, 3 * SSM.max_len)
    np.save(tmp_path / "in.npy", seq)
    assert main(["run", str(path), "--backend", "ort", "--input", str(tmp_path / "in.npy"),
                 "--output", str(tmp_path / "out.npy"), "--contracts", "check"]) == 0  # fmt: skip
    out = np.load(tmp_path / "out.npy")
    tol = ssm_tolerance(SSM.replace(max_len=seq.shape[1]))["atol"]
    np.testing.assert_allclose(out, forward(params, SSM, seq), atol=tol, rtol=tol)
    assert "state_bound" in capsys.readouterr().out


def test_the_ssm_session_advances_by_the_proven_step_position(ssm_art, monkeypatch):
    """Call site: the position table is made by contracts.position.step_position (as Session's);
    a twin that never advances, swapped in where the session imported it, stops the position."""
    from tickformer.contracts import position

    session = runtime.load(ssm_art[0], backend="numpy")
    assert session._next_position[:300] == [
        position.step_position(p, 1, session_module.WRAP, True) for p in range(300)
    ]
    monkeypatch.setattr("tickformer.runtime.session.step_position", lambda p, n, m, ok: p)
    frozen = runtime.load(ssm_art[0], backend="numpy")
    frozen.step(inputs(frozen.config, 1))
    assert frozen.position == 0
