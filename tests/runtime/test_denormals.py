"""runtime/denormals.py: flush-to-zero for the calling thread, confirmed by probe and restored.

The probe is the specification: a float32 subnormal times 1.0 is 0 exactly when the thread
flushes. Every test leaves the thread as it found it (other tests run Hypothesis, which refuses
to generate floats under flush-to-zero)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tickformer.runtime.denormals import denormals_flushed, flushed_denormals, set_flush_to_zero

SUBNORMAL = np.float32(1e-40)


@pytest.fixture(autouse=True)
def _restore():
    before = denormals_flushed()
    yield
    set_flush_to_zero(before)
    assert denormals_flushed() == before


def test_off_by_default_in_a_test_thread():
    assert not denormals_flushed()
    assert np.float32(SUBNORMAL * np.float32(1.0)) != 0  # gradual underflow, IEEE default


def test_set_and_clear_are_confirmed_and_change_arithmetic():
    if not set_flush_to_zero(True):
        pytest.skip("no known flush-to-zero bit on this platform (runtime/denormals.py _LAYOUT)")
    assert denormals_flushed()
    assert (np.array([SUBNORMAL]) * np.float32(1.0))[0] == 0.0  # DAZ: the operand reads as 0
    assert np.exp(np.float32(-100.0)) == 0.0  # FTZ: a subnormal result is flushed
    assert set_flush_to_zero(True)  # idempotent
    assert set_flush_to_zero(False) and not denormals_flushed()
    assert np.exp(np.float32(-100.0)) > 0.0


def test_context_manager_restores_the_previous_state_even_on_error():
    with pytest.raises(RuntimeError):
        with flushed_denormals() as on:
            assert on == denormals_flushed()
            raise RuntimeError("boom")
    assert not denormals_flushed()


def test_other_threads_keep_their_own_state():
    """Per thread: a thread that is already running is not switched by another thread."""
    ready, go, seen = threading.Event(), threading.Event(), []

    def worker():
        ready.set()
        go.wait(5)
        seen.append(denormals_flushed())

    t = threading.Thread(target=worker)
    t.start()
    ready.wait(5)
    with flushed_denormals() as on:
        go.set()
        t.join(5)
    if not on:
        pytest.skip("no flush-to-zero on this platform")
    assert seen == [False]


def test_control_loop_runs_flushed_and_restores():
    from tickformer.runtime.control_loop import ControlLoop, LoopConfig

    inside = []

    class Probe:
        def step(self, x):
            inside.append(denormals_flushed())
            return np.zeros(2, np.float32)

        def reset(self):
            pass

    clock = [0]

    def now():
        clock[0] += 10
        return clock[0]

    loop = ControlLoop(
        Probe(),
        LoopConfig(period_ns=1000),
        output_shape=(2,),
        clock=now,
        sleep=lambda d: clock.__setitem__(0, clock[0] + d),
    )
    stats = loop.run(3, observe=lambda k: np.zeros(3, np.float32), actuate=lambda u: None)
    assert inside == [stats.denormals_flushed] * 3
    assert not denormals_flushed()
    off = ControlLoop(
        Probe(),
        LoopConfig(period_ns=1000, flush_denormals=False),
        output_shape=(2,),
        clock=now,
        sleep=lambda d: None,
    )
    inside.clear()
    assert (
        off.run(2, observe=lambda k: np.zeros(3, np.float32), actuate=lambda u: None).denormals_flushed
        is False
    )
    assert inside == [False, False]


def test_the_first_onnxruntime_session_of_a_process_clears_it():
    """Why ControlLoop/certify set flush-to-zero after loading: onnxruntime applies its own
    denormal setting (default off) when a process creates its first session. A fresh process
    shows it; later sessions leave the thread alone."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import onnxruntime as ort
        from onnx import TensorProto, helper
        from tickformer.runtime.denormals import denormals_flushed, set_flush_to_zero

        def session():
            g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])

        if not set_flush_to_zero(True):
            print("unsupported")
        else:
            session()
            first = denormals_flushed()
            set_flush_to_zero(True)
            session()
            print(first, denormals_flushed())
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    if out == ["unsupported"]:
        pytest.skip("no flush-to-zero on this platform")
    assert out == ["False", "True"]


def _set_bits(bits: int) -> bool:
    """Set exactly these MXCSR bits (x86-64 glibc only) -- to build half-set states."""
    import platform

    from tickformer.runtime import denormals as d

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    env = d._read_env()
    if env is None:
        return False
    word = int.from_bytes(env[28:32], "little") & ~0x8040 | bits
    return d._write_env(env[:28] + word.to_bytes(4, "little") + env[32:])


@pytest.mark.parametrize(("bits", "name"), [(0x0040, "DAZ only"), (0x8000, "FTZ only")])
def test_half_set_state_is_not_reported_as_flushed_and_is_completed(bits, name):
    if not _set_bits(bits):
        pytest.skip("x86-64 glibc only")
    assert not denormals_flushed(), name  # one bit alone still leaves a slow path
    assert set_flush_to_zero(True) and denormals_flushed()
    assert np.exp(np.float32(-100.0)) == 0.0 and (np.array([SUBNORMAL]) * np.float32(1.0))[0] == 0.0
    _set_bits(bits)
    with flushed_denormals() as on:
        assert on
    assert not denormals_flushed() and _set_bits(0)  # the exact half-set state came back, then cleared
    assert set_flush_to_zero(False)


def test_control_loop_without_flush_leaves_the_callers_state_alone():
    from tickformer.runtime.control_loop import ControlLoop, LoopConfig

    class Probe:
        def step(self, x):
            return np.zeros(2, np.float32)

        def reset(self):
            pass

    if not set_flush_to_zero(True):
        pytest.skip("no flush-to-zero on this platform")
    loop = ControlLoop(
        Probe(),
        LoopConfig(period_ns=1000, flush_denormals=False),
        output_shape=(2,),
        clock=iter(range(0, 10**9, 10)).__next__,
        sleep=lambda d: None,
    )
    assert (
        loop.run(2, observe=lambda k: np.zeros(3, np.float32), actuate=lambda u: None).denormals_flushed
        is True
    )
    assert denormals_flushed()
