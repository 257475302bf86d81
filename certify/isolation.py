"""Isolation of a measurement campaign, after cyclictest (rt-tests) practice: flush-to-zero in the
measuring thread, the garbage collector frozen and disabled while measuring, optional CPU pinning
(`os.sched_setaffinity`), SCHED_FIFO (`os.sched_setscheduler`) and `mlockall(2)` (ctypes) when
the OS permits them -- and a record of what was and was not granted, never an error.

Not real-time code (it runs around the measured loop).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from typing import Any, Callable

from tickformer.runtime.denormals import flushed_denormals


class Isolation:
    """Context manager: flush-to-zero, gc frozen+disabled, optional CPU pinning, SCHED_FIFO and mlockall.

    Every request is recorded in `granted` as {"requested", "granted", "detail"}; a refusal
    (no CAP_SYS_NICE, RLIMIT_MEMLOCK, CPU not in the allowed set) is recorded, never raised.
    Everything is restored on exit. Not real-time code (called around the loop).
    """

    def __init__(self, *, cpu: int | None = None, realtime: bool = False, rt_priority: int = 50) -> None:
        self.cpu, self.realtime, self.rt_priority = cpu, realtime, rt_priority
        self.granted: dict[str, dict[str, Any]] = {}
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> "Isolation":
        self._ftz()
        self._gc()
        self._affinity()
        self._fifo()
        self._mlock()
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            try:
                self._undo.pop()()
            except OSError:  # pragma: no cover - best-effort restore
                pass

    def _record(self, key: str, requested: bool, granted: bool, detail: str) -> None:
        self.granted[key] = {"requested": requested, "granted": granted, "detail": detail}

    def _ftz(self) -> None:
        scope = flushed_denormals()
        on = scope.__enter__()
        self._undo.append(lambda: scope.__exit__(None, None, None))  # the exact previous state
        if on:
            self._record(
                "flush_to_zero",
                True,
                True,
                "FTZ/DAZ in the measuring thread: subnormal floats cost no microcode assists (runtime/denormals.py)",
            )
        else:
            self._record(
                "flush_to_zero",
                True,
                False,
                "this platform's floating-point environment has no known flush-to-zero bit (runtime/denormals.py)",
            )

    def _gc(self) -> None:
        was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()  # move every live object to the permanent generation
        gc.disable()

        def undo() -> None:
            gc.unfreeze()
            if was_enabled:
                gc.enable()

        self._undo.append(undo)
        self._record(
            "gc_disabled", True, True, "gc.collect(); gc.freeze(); gc.disable() for the measured loop"
        )

    def _affinity(self) -> None:
        if self.cpu is None:
            allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
            self._record("cpu_affinity", False, False, f"not requested; allowed CPUs {allowed}")
            return
        if not hasattr(os, "sched_setaffinity"):
            self._record("cpu_affinity", True, False, "os.sched_setaffinity is not available on this OS")
            return
        before = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {self.cpu})
        except OSError as exc:
            self._record(
                "cpu_affinity",
                True,
                False,
                f"pin to CPU {self.cpu} refused: {exc} (allowed {sorted(before)})",
            )
            return
        self._undo.append(lambda: os.sched_setaffinity(0, before))
        self._record("cpu_affinity", True, True, f"pinned to CPU {self.cpu} (was {sorted(before)})")

    def _fifo(self) -> None:
        if not self.realtime:
            self._record("sched_fifo", False, False, "not requested (--realtime)")
            return
        if not hasattr(os, "sched_setscheduler"):
            self._record("sched_fifo", True, False, "os.sched_setscheduler is not available on this OS")
            return
        policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.rt_priority))
        except OSError as exc:
            self._record(
                "sched_fifo",
                True,
                False,
                f"SCHED_FIFO priority {self.rt_priority} refused: {exc} (needs CAP_SYS_NICE or RLIMIT_RTPRIO)",
            )
            return
        self._undo.append(lambda: os.sched_setscheduler(0, policy, param))
        self._record("sched_fifo", True, True, f"SCHED_FIFO priority {self.rt_priority} (calling thread)")

    def _mlock(self) -> None:
        if not self.realtime:
            self._record("mlockall", False, False, "not requested (--realtime)")
            return
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name, use_errno=True)
        except OSError as exc:  # pragma: no cover - no libc
            self._record("mlockall", True, False, f"libc not loadable: {exc}")
            return
        mcl_current, mcl_future = 1, 2  # <sys/mman.h> on Linux
        if libc.mlockall(mcl_current | mcl_future) != 0:
            err = ctypes.get_errno()
            self._record(
                "mlockall",
                True,
                False,
                f"mlockall refused: {os.strerror(err)} (errno {err}; raise RLIMIT_MEMLOCK or run with CAP_IPC_LOCK)",
            )
            return
        self._undo.append(lambda: libc.munlockall())
        self._record("mlockall", True, True, "mlockall(MCL_CURRENT | MCL_FUTURE)")
