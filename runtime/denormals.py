"""Flush-to-zero for the calling thread: subnormal floats treated and produced as zero.

Why: on x86 an arithmetic operation with a subnormal operand or result takes a microcode assist
(an order of magnitude slower: `python experiments/diagnose.py exp` measures it). exp(-inf) and
every exp argument below -87.3 pass through one, so without flush-to-zero the step's softmax
costs more at early positions (more masked cache rows) and when attention is sharp -- work that
depends on the data, which a latency bound must not. Real-time audio and control code runs its
loop thread with FTZ/DAZ for this reason; so do tickformer's `ControlLoop` and `certify`, each
for its own thread, restored after.

Scope: per thread (the MXCSR / FPCR register), set through C99 `fegetenv`/`fesetenv` on glibc's
`fenv_t` (x86-64: the `__mxcsr` word at byte 28, bits FTZ 0x8000 and DAZ 0x0040; AArch64, e.g.
Jetson: `__fpcr` at byte 0, bit FZ 1 << 24). Threads started afterwards inherit it. It is never
set process-wide behind the caller's back: ONNX Runtime's own `session.set_denormal_as_zero`
applies once per process to whichever session comes first, and Hypothesis (among others) refuses
to run under it. Every change is confirmed by `denormals_flushed()` and undone if it did not take.
Order matters: creating the process's FIRST onnxruntime session applies that option (default
off) to the creating thread, clearing flush-to-zero there; so turn it on after loading, as
ControlLoop.run and certify do (tests/runtime/test_denormals.py shows both orders).

Effect on numbers: values below 1.18e-38 (float32) / 2.2e-308 (float64) become 0; every bound
in contracts/ holds with far larger margins. Limit: only the calling thread (and threads it
starts later) is switched; onnxruntime's intra-op pool threads, which exist once a session with
threads > 1 is loaded, are not -- the runtime's default is one thread, which runs on the caller.
Not real-time code (call around the loop).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import platform
from typing import Iterator

import numpy as np

_FENV_BYTES = 64  # larger than fenv_t on every glibc target (x86-64: 32, AArch64: 8)
# (byte offset of the control word in fenv_t, bits that enable flush-to-zero)
_LAYOUT = {"x86_64": (28, 0x8040), "amd64": (28, 0x8040), "aarch64": (0, 1 << 24), "arm64": (0, 1 << 24)}


def _probes() -> tuple[bool, bool]:
    """(DAZ, FTZ) of the calling thread, each probed without the other's help: DAZ by a
    subnormal operand with a normal product (FTZ cannot touch a normal result), FTZ by normal
    operands with a subnormal product, read through its bits (a float comparison would itself
    read a subnormal as zero under DAZ)."""
    tiny = np.array([0x00010000], dtype=np.uint32).view(
        np.float32
    )  # 9.2e-41, subnormal, made from bits (no FP op that FTZ could flush)
    daz = bool((tiny * np.float32(2.0**100))[0] == 0.0)  # 1.2e-10 unless the operand reads as 0
    small = np.array([1e-30], dtype=np.float32)
    ftz = bool((small * np.float32(1e-10)).view(np.uint32)[0] == 0)  # 1e-40, subnormal, unless flushed
    return daz, ftz


def denormals_flushed() -> bool:
    """True when the calling thread both reads subnormal float32 operands as zero (DAZ) and
    flushes subnormal results to zero (FTZ). Either alone leaves a slow path."""
    return _in_state(True)


def _in_state(enable: bool) -> bool:
    """Both bits on (enable) or both off (not enable): turning off must clear a half-set state."""
    daz, ftz = _probes()
    return (daz and ftz) if enable else not (daz or ftz)


@functools.lru_cache(maxsize=1)
def _libm() -> ctypes.CDLL | None:
    """libm, loaded once (find_library runs ldconfig: not something to repeat per call)."""
    name = ctypes.util.find_library("m")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def _read_env() -> bytes | None:
    """The calling thread's raw fenv_t (glibc), or None where unavailable."""
    libm = _libm()
    if libm is None:
        return None
    env = (ctypes.c_uint8 * _FENV_BYTES)()
    return bytes(env) if libm.fegetenv(env) == 0 else None


def _write_env(env: bytes) -> bool:
    libm = _libm()
    return libm is not None and libm.fesetenv((ctypes.c_uint8 * _FENV_BYTES)(*env)) == 0


def set_flush_to_zero(enable: bool) -> bool:
    """Turn flush-to-zero and denormals-are-zero on or off (both bits) for the calling thread.
    Returns True if the thread is now in the requested state (confirmed by probes), False where
    the platform has no known layout or refuses (the state is then left as it was)."""
    if _in_state(enable):
        return True
    layout = _LAYOUT.get(platform.machine().lower())
    saved = _read_env()
    if layout is None or saved is None:
        return False
    offset, bits = layout
    word = int.from_bytes(saved[offset : offset + 4], "little")
    word = word | bits if enable else word & ~bits
    changed = saved[:offset] + word.to_bytes(4, "little") + saved[offset + 4 :]
    if not _write_env(changed) or not _in_state(enable):
        _write_env(saved)
        return False
    return True


@contextlib.contextmanager
def flushed_denormals(enable: bool = True) -> Iterator[bool]:
    """`with flushed_denormals() as on:` -- flush-to-zero in this thread for the block (`on` says
    whether it took); the thread's exact previous floating-point environment is restored after."""
    saved = _read_env()
    on = set_flush_to_zero(enable)
    try:
        yield on
    finally:
        if saved is not None:
            _write_env(saved)
