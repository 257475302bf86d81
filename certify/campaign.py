"""Worst-case latency certification: measurement campaign, statistics, pWCET, verdict.

The campaign follows cyclictest (rt-tests) practice: everything allocated and warmed before the
measured loop, the garbage collector frozen and disabled while measuring, optional CPU pinning
(`os.sched_setaffinity`), SCHED_FIFO (`os.sched_setscheduler`) and `mlockall(2)` (ctypes) when
the OS permits them — and a record of what was and was not granted. Each step is timed alone
with `time.perf_counter_ns()` (CLOCK_MONOTONIC on Linux, ns resolution).

Position: a static-KV-cache step does the same work at every position (docs/artifact_format.md),
so the campaign cycles through all positions and every sample is a worst-case sample; the
per-position profile is recorded as evidence. A growing cache costs most at the last positions:
only steps at positions >= `start_position` (default: the last eighth of the cache) are timed,
the earlier ones are run untimed to fill the cache.

Statistics: min, mean, p50 ... p99.99, max, std; percentiles use numpy's "higher" method (always
an observed sample, never interpolated downwards). pWCET: certify/evt.py (POT or block maxima).

Verdict, failing closed (MBPTA practice, Cucu-Grosjean et al. ECRTS 2012):
    FAIL          observed max > budget, or an admissible pWCET at `exceedance` > budget
    PASS          observed max <= budget, admissible fit, pWCET and its bootstrap upper bound <= budget
    INCONCLUSIVE  otherwise (too few extremes, failed i.i.d./fit tests, upper bound over budget;
                  a sliding stream whose timed steps missed a slot of the ring or never wrapped),
                  with the reasons and the conditions that would make the campaign conclusive.

The pWCET is a result only when the tail fit passed every admissibility test: otherwise the
certificate's `pwcet` says "not estimated (reason)" (`pwcet_result`), the EVT table and the
cross-check carry no extrapolated latency, and the summary and plots say the same.

Nothing here is real-time code except `measure`'s inner loop (which only times and stores).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as _dt
import gc
import hashlib
import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tickformer import validation
from tickformer.contracts.ring_buffer import ring_slot
from tickformer.errors import ConfigError, InputError
from tickformer.runtime.steppable import Steppable

from .evt import DEFAULT_EXCEEDANCES, METHODS, assess, estimate_pwcet, fit_tail

__all__ = [
    "CampaignConfig",
    "EvtConfig",
    "Isolation",
    "measure",
    "latency_stats",
    "histogram",
    "worst_indices",
    "decide",
    "pwcet_result",
    "conditions",
    "artifact_hash",
    "analyze",
    "certify_session",
    "certify_artifact",
    "certify_onnx",
    "estimate_pwcet",
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "EXIT_CODES",
]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
EXIT_CODES = {PASS: 0, FAIL: 1, INCONCLUSIVE: 2}
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9), ("p99.99", 99.99))


# ----------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class CampaignConfig:
    """How to measure. cpu: pin to this CPU index (None = leave affinity); realtime: try
    SCHED_FIFO at `rt_priority` and mlockall; start_position: first timed position (None =
    0 for a static cache, max_len - max_len//8 for a growing one); duty_cycle: busy fraction
    between chunks of 1000 samples when SCHED_FIFO was granted (see `measure`)."""

    samples: int = 100_000
    warmup: int = 2_000
    cpu: int | None = None
    realtime: bool = False
    rt_priority: int = 50
    start_position: int | None = None
    n_inputs: int = 64
    seed: int = 0
    duty_cycle: float = 0.9  # under SCHED_FIFO only: stay below the kernel's RT throttling limit

    def __post_init__(self) -> None:
        validation.integer(
            self.samples,
            "samples",
            min_value=1000,
            hint="a campaign needs at least 1000 timed steps (EVT needs >= 10000)",
        )
        validation.nonneg_int(self.warmup, "warmup", hint="untimed steps before measuring")
        if self.cpu is not None:
            validation.nonneg_int(self.cpu, "cpu", hint="a CPU index (see `nproc`)")
        validation.integer(self.rt_priority, "rt_priority", min_value=1, max_value=99)
        if self.start_position is not None:
            validation.nonneg_int(self.start_position, "start_position")
        validation.real(self.duty_cycle, "duty_cycle", min_value=0.0, max_value=1.0, exclude_min=True)
        validation.positive_int(self.n_inputs, "n_inputs")


@dataclass(frozen=True)
class EvtConfig:
    """How to estimate the tail and judge it (see certify/evt.py)."""

    method: str = "pot"
    exceedance: float = 1e-9
    tail_fraction: float = 0.01
    run_length: int = 3
    block_size: int = 100
    min_extremes: int = 50
    alpha: float = 0.05
    n_boot: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        validation.one_of(self.method, "EVT method", METHODS)
        validation.real(
            self.exceedance,
            "exceedance",
            min_value=0.0,
            max_value=1e-2,
            exclude_min=True,
            exclude_max=True,
            hint="a per-step probability, e.g. 1e-9",
        )
        validation.real(self.alpha, "alpha", min_value=0.0, max_value=0.5, exclude_min=True, exclude_max=True)
        for name in ("run_length", "block_size", "min_extremes", "n_boot"):
            validation.positive_int(getattr(self, name), name)
        if 1.0 / (self.n_boot + 1) >= self.alpha:  # the bootstrap p-value could never fall below alpha
            raise ConfigError(
                f"--n-boot {self.n_boot} is too few to reject a fit at alpha = {self.alpha}; "
                f"use at least {math.ceil(1 / self.alpha)} (default 200)"
            )

    def fit_kwargs(self) -> dict[str, Any]:
        if self.method == "pot":
            return {"tail_fraction": self.tail_fraction, "run_length": self.run_length}
        return {
            "block_size": self.block_size,
            "run_length": self.run_length,
            "tail_fraction": self.tail_fraction,
        }


# ----------------------------------------------------------------------------- isolation


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
        from tickformer.runtime.denormals import flushed_denormals

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


# ----------------------------------------------------------------------------- the campaign


def make_inputs(
    shape: tuple[int, ...], dtype: Any, domain: tuple[float, float], n: int, seed: int
) -> np.ndarray:
    """n distinct inputs drawn uniformly from the declared domain: [n, *shape]. Not real-time."""
    rng = np.random.default_rng(seed)
    lo, hi = domain
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(int(lo), int(hi) + 1, size=(n, *shape)).astype(dtype)  # [n, *shape]
    return rng.uniform(lo, hi, size=(n, *shape)).astype(dtype)  # [n, *shape]


def timer_overhead_ns(n: int = 2000) -> int:
    """Smallest back-to-back perf_counter_ns() difference: the floor every sample carries."""
    clock = time.perf_counter_ns
    best = 1 << 62
    for _ in range(n):
        a = clock()
        b = clock()
        if b - a < best:
            best = b - a
    return int(best)


def measure(
    session: Steppable,
    inputs: np.ndarray,
    *,
    samples: int,
    warmup: int,
    max_len: int,
    start_position: int = 0,
    progress: Callable[[int], None] | None = None,
    chunk: int = 1000,
    duty_cycle: float | None = None,
    window: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Time `samples` single steps; returns (durations_ns int64 [samples], positions int64 [samples]).

    window=W (a sliding session over a ring cache): the stream is never reset, the positions run
    on past max_len and the ring wraps every W steps (`ring_coverage` says how often and whether
    every slot was timed).

    Steps at positions < start_position, resets, warmup steps and progress callbacks are run
    outside the timed region. The inner loop only reads the clock twice and stores two ints into
    preallocated arrays. `progress(done)` is called every `chunk` samples (outside timing).
    duty_cycle (e.g. 0.9): after each chunk, sleep so the thread is busy at most that fraction of
    the time. Needed under SCHED_FIFO: Linux RT throttling (kernel.sched_rt_runtime_us = 950000
    per 1 s period by default) stalls a real-time thread that stays runnable for 95% of a second
    for the rest of that second (tens of milliseconds of stall otherwise).
    """
    if duty_cycle is not None and not 0.0 < duty_cycle <= 1.0:
        raise ConfigError(f"duty_cycle={duty_cycle!r} must be in (0, 1]")
    if not 0 <= start_position < max_len:
        raise ConfigError(f"start_position={start_position} must be in [0, max_len={max_len})")
    durations = np.zeros(samples, dtype=np.int64)  # [samples]
    positions = np.zeros(samples, dtype=np.int64)  # [samples]
    limit = max_len if window is None else 2**62  # a sliding stream is never full
    n_in = inputs.shape[0]
    clock = time.perf_counter_ns
    step = session.step
    session.reset()
    for i in range(warmup):  # warm caches, allocators, the backend's first-call paths
        if session.position >= limit:
            session.reset()
        step(inputs[i % n_in])
    session.reset()
    i = 0
    k = 0
    chunk_start = clock()
    while i < samples:
        pos = session.position
        if pos >= limit:
            session.reset()
            continue
        x = inputs[k % n_in]
        k += 1
        if pos < start_position:
            step(x)
            continue
        t0 = clock()
        step(x)
        t1 = clock()
        durations[i] = t1 - t0
        positions[i] = pos
        i += 1
        if i % chunk == 0:
            if progress is not None:
                progress(i)
            if duty_cycle is not None and duty_cycle < 1.0:
                busy = clock() - chunk_start
                time.sleep(busy * (1.0 - duty_cycle) / duty_cycle / 1e9)
            chunk_start = clock()
    return durations, positions


# ----------------------------------------------------------------------------- statistics


def latency_stats(samples_ns: Any) -> dict[str, float | int]:
    """min, mean, p50..p99.99 ("higher": observed samples), max, std (ddof=1), n. Not real-time."""
    x = np.asarray(samples_ns, dtype=np.float64).ravel()  # [n]
    if x.size < 2:
        raise InputError(f"{x.size} samples: statistics need at least 2")
    out: dict[str, float | int] = {"n": int(x.size), "min": float(x.min()), "mean": float(x.mean())}
    for name, q in PERCENTILES:
        out[name] = float(np.percentile(x, q, method="higher"))
    out["max"] = float(x.max())
    out["std"] = float(x.std(ddof=1))
    return out


def histogram(samples_ns: Any, *, bins: int = 100, hi_ns: float | None = None) -> dict[str, Any]:
    """Fixed-width histogram from floor(min) to hi_ns with an explicit overflow bucket (> hi_ns).

    hi_ns defaults to 2 x p99.99. Counts sum (with overflow) to n.
    """
    x = np.asarray(samples_ns, dtype=np.float64).ravel()  # [n]
    lo = math.floor(float(x.min()))
    if hi_ns is None:
        hi_ns = 2.0 * float(np.percentile(x, 99.99, method="higher"))
    hi = max(float(hi_ns), lo + bins)  # at least 1 ns per bin
    edges = np.linspace(lo, hi, bins + 1)  # [bins + 1]
    inside = x[x <= hi]  # [m]
    counts, _ = np.histogram(inside, bins=edges)  # [bins]
    return {
        "lo_ns": lo,
        "hi_ns": hi,
        "bin_ns": (hi - lo) / bins,
        "edges_ns": edges.tolist(),
        "counts": counts.astype(int).tolist(),
        "overflow": int(np.count_nonzero(x > hi)),
        "overflow_means": f"samples > {hi:.0f} ns",
    }


def worst_indices(samples_ns: Any, k: int = 10) -> list[dict[str, int]]:
    """The k largest samples with their index in time order (largest first)."""
    x = np.asarray(samples_ns).ravel()  # [n]
    k = min(k, x.size)
    idx = np.argpartition(x, x.size - k)[x.size - k :]  # [k]
    idx = idx[np.argsort(x[idx])[::-1]]
    return [{"index": int(i), "ns": int(x[i])} for i in idx]


def position_profile(
    durations: np.ndarray, positions: np.ndarray, max_len: int, groups: int = 8
) -> dict[str, Any]:
    """Median and max latency per position group: the evidence for (or against) constant cost."""
    edges = np.linspace(0, max_len, groups + 1).astype(int)  # [groups + 1]
    rows: list[dict[str, Any]] = []
    med: list[float] = []
    for a, b in zip(edges[:-1], edges[1:]):
        sel = durations[(positions >= a) & (positions < b)]
        if sel.size:
            med.append(float(np.median(sel)))
            rows.append(
                {
                    "positions": [int(a), int(b) - 1],
                    "n": int(sel.size),
                    "p50_ns": med[-1],
                    "max_ns": float(sel.max()),
                }
            )
    ratio = (med[-1] / med[0]) if len(med) >= 2 and med[0] > 0 else None
    return {"groups": rows, "last_over_first_p50": ratio}


def ring_coverage(durations: np.ndarray, positions: np.ndarray, window: int) -> dict[str, Any]:
    """Where the timed steps of a sliding stream fell on the ring of W slots: every slot timed?
    how many wraps? and the latency per slot group (contracts.ring_buffer.ring_slot). Evidence that
    the wrap-around costs what every other step costs."""
    slots = ring_slot(positions, window)  # [samples] in [0, W)
    counts = np.bincount(slots, minlength=window)  # [W]
    first, last = (int(positions.min()), int(positions.max())) if positions.size else (0, 0)
    timed = int(np.count_nonzero(counts))
    wraps = (last // window) - (first // window)
    every = timed == window
    claim = "one unbounded stream, never reset: " + (
        f"the ring cache wraps ({wraps} times) and every slot is timed"
        if every and wraps > 0
        else f"every slot is timed but the ring never wraps (positions {first}..{last})"
        if every
        else f"only {timed} of the {window} slots of the ring are timed (positions {first}..{last}): the "
        "campaign does not cover every slot"
    )
    return {
        "window": window,
        "claim": claim,
        "every_slot_timed": every,
        "covered": every and wraps > 0,
        "slots_timed": timed,
        "timed_per_slot": [int(counts.min()), int(counts.max())],
        "positions": [first, last],
        "wraps": wraps,
        "slot_profile": position_profile(durations, slots, window, groups=min(8, window)),
    }


# ----------------------------------------------------------------------------- verdict


def decide(
    *,
    observed_max_ns: float,
    budget_ns: float,
    evt: dict[str, Any] | None,
    exceedance: float,
    fit_error: str | None = None,
) -> tuple[str, list[str]]:
    """The verdict and its reasons, failing closed (module docstring). Pure."""
    key = f"{exceedance:.0e}"
    status = pwcet_result(evt, fit_error, exceedance)
    failed = [] if evt is None else [t for t in evt["tests"] if not t["passed"]]
    withheld = [f"pWCET {status['text']}"] if not status["estimated"] else []
    details = [f"admissibility test failed: {t['name']} ({_test_brief(t)})" for t in failed]
    if observed_max_ns > budget_ns:
        return FAIL, [
            f"observed max {observed_max_ns:.0f} ns exceeds the budget {budget_ns:.0f} ns",
            *withheld,
        ]
    if evt is None or failed:
        return INCONCLUSIVE, [*withheld, *details]
    pwcet = evt["pwcet_ns"].get(key)
    if pwcet is None or not math.isfinite(pwcet) or pwcet > budget_ns:
        shown = "unbounded" if pwcet is None or not math.isfinite(pwcet) else f"{pwcet:.0f} ns"
        return FAIL, [f"admissible pWCET at exceedance {key}/step is {shown} > budget {budget_ns:.0f} ns"]
    upper = (evt.get("bootstrap") or {}).get("pwcet_upper_ns", {}).get(key)
    if upper is None or not math.isfinite(upper) or upper > budget_ns:
        level = (evt.get("bootstrap") or {}).get("level", 0.95)
        shown = "unbounded" if upper is None or not math.isfinite(upper) else f"{upper:.0f} ns"
        return INCONCLUSIVE, [
            f"pWCET {pwcet:.0f} ns is within budget but its {level:.0%} bootstrap upper bound {shown} is not"
        ]
    return PASS, [
        f"observed max {observed_max_ns:.0f} ns and pWCET {pwcet:.0f} ns (upper bound {upper:.0f} ns) at "
        f"{key}/step are within the budget {budget_ns:.0f} ns; all admissibility tests passed"
    ]


def pwcet_result(evt: dict[str, Any] | None, fit_error: str | None, exceedance: float) -> dict[str, Any]:
    """The certificate's `pwcet` at `exceedance`: {"estimated": True, "value_ns", "upper_ns",
    "level"} from an admissible fit, else {"estimated": False, "reason", "text": "not estimated
    (reason)"}; never an extrapolation from an inadmissible fit. Pure."""
    key = f"{exceedance:.0e}"
    out: dict[str, Any] = {"exceedance": exceedance}
    if evt is None:
        reason = f"no EVT fit: {fit_error or 'tail fit failed'}"
    elif not all(t["passed"] for t in evt["tests"]) or evt.get("pwcet_ns") is None:
        failed = [t["name"] for t in evt["tests"] if not t["passed"]]
        reason = evt.get("pwcet_withheld") or "admissibility failed: " + ", ".join(failed)
    else:
        boot = evt.get("bootstrap") or {}
        value, upper = evt["pwcet_ns"].get(key), (boot.get("pwcet_upper_ns") or {}).get(key)
        return {**out, "estimated": True, "value_ns": value, "upper_ns": upper, "level": boot.get("level")}
    return {**out, "estimated": False, "reason": reason, "text": f"not estimated ({reason})"}


def _test_brief(t: dict[str, Any]) -> str:
    p = t.get("p_value")
    return f"p = {p:.3g}; {t['detail']}" if p is not None else t["detail"]


ADVICE = (
    "to make the campaign conclusive: run on an otherwise idle machine; pin to an isolated core "
    "(--cpu K with isolcpus/nohz_full, performance governor); grant --realtime (CAP_SYS_NICE for "
    "SCHED_FIFO, CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK for mlockall); collect more samples "
    "(--samples); if independence fails, decluster with a longer --run-length or use --method bm"
)


# ----------------------------------------------------------------------------- conditions


def artifact_hash(path: str | os.PathLike[str]) -> str:
    """sha256 of the artifact: of manifest.json for an artifact directory (it holds the sha256 of
    every other file, verified by runtime.load), else of the file itself. A second read by path:
    a campaign hashes the bytes its loader verified instead (`loaded_sha256`); this is for a
    path nothing has loaded."""
    from tickformer.safe_files import MAX_MANIFEST_BYTES, Directory, read_path

    p = Path(path)
    if p.is_dir():  # read like the loader reads it: no links followed, a regular file, size first
        with Directory(p) as directory:
            return hashlib.sha256(directory.read("manifest.json", max_bytes=MAX_MANIFEST_BYTES)).hexdigest()
    return hashlib.sha256(read_path(p)).hexdigest()


def loaded_sha256(session: Any) -> str | None:
    """sha256 of the manifest.json bytes the session's loader parsed and verified (the Artifact
    keeps them): what was measured, even if the file on disk has changed since. None when the
    session has no such bytes (a hand-made Artifact, a fake)."""
    data = getattr(getattr(session, "artifact", None), "manifest_bytes", None)
    return hashlib.sha256(data).hexdigest() if isinstance(data, bytes) else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _versions() -> dict[str, str]:
    import tickformer

    out = {"python": platform.python_version(), "numpy": np.__version__, "tickformer": tickformer.__version__}
    for mod in ("onnxruntime", "scipy", "onnx"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = "not installed"
    return out


def conditions(
    *, backend: str, artifact: str | None, cpu: int | None, artifact_sha256: str | None = None
) -> dict[str, Any]:
    """The measurement conditions a reader needs to judge (and reproduce) the campaign.
    artifact_sha256: the hash of the bytes that were loaded (nothing is re-read by path); None
    leaves the field empty."""
    cpus = (
        sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else list(range(os.cpu_count() or 1))
    )
    watch = [cpu] if cpu is not None else cpus
    governors = {str(c): _read(f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor") for c in watch}
    info = time.get_clock_info("perf_counter")
    return {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "allowed_cpus": cpus,
        "governor": {k: (v if v is not None else "unreadable") for k, v in governors.items()},
        "isolated_cpus": _read("/sys/devices/system/cpu/isolated") or "unreadable or none",
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "kernel": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "versions": _versions(),
        "backend": backend,
        "artifact": str(artifact) if artifact is not None else None,
        "artifact_sha256": artifact_sha256,
        "clock": {
            "name": "time.perf_counter_ns",
            "implementation": info.implementation,
            "resolution_s": info.resolution,
            "overhead_ns": timer_overhead_ns(),
        },
    }


# ----------------------------------------------------------------------------- analysis


def analyze(
    durations_ns: np.ndarray, *, budget_ns: float, evt_config: EvtConfig = EvtConfig(), hist_bins: int = 100
) -> dict[str, Any]:
    """Statistics, EVT fit + admissibility, verdict for a vector of step latencies. Not real-time."""
    if not (isinstance(budget_ns, (int, float)) and budget_ns > 0 and math.isfinite(budget_ns)):
        raise ConfigError(f"budget {budget_ns!r} ns must be a positive finite number")
    x = np.asarray(durations_ns, dtype=np.float64).ravel()  # [n]
    st = latency_stats(x)
    exceedances = tuple(sorted(set(DEFAULT_EXCEEDANCES) | {evt_config.exceedance}, reverse=True))
    evt: dict[str, Any] | None = None
    fit_error = None
    try:
        fit = fit_tail(x, method=evt_config.method, **evt_config.fit_kwargs())
        evt = assess(
            fit,
            min_extremes=evt_config.min_extremes,
            alpha=evt_config.alpha,
            n_boot=evt_config.n_boot,
            exceedances=exceedances,
            seed=evt_config.seed,
        )
    except (InputError, ConfigError, ValueError, RuntimeError, FloatingPointError) as exc:
        fit_error = str(exc)
    cross = _cross_check(x, evt_config, exceedances, primary=evt)
    verdict, reasons = decide(
        observed_max_ns=st["max"],
        budget_ns=float(budget_ns),
        evt=evt,
        exceedance=evt_config.exceedance,
        fit_error=fit_error,
    )
    return {
        "verdict": verdict,
        "exit_code": EXIT_CODES[verdict],
        "reasons": reasons,
        "advice": ADVICE if verdict == INCONCLUSIVE else None,
        "budget_ns": float(budget_ns),
        "exceedance": evt_config.exceedance,
        "stats": st,
        "over_budget": int(np.count_nonzero(x > budget_ns)),
        "histogram": histogram(
            x, bins=hist_bins, hi_ns=max(2.0 * st["p99.99"], min(float(budget_ns), 10.0 * st["p99.99"]))
        ),
        "worst": worst_indices(x),
        "pwcet": pwcet_result(evt, fit_error, evt_config.exceedance),
        "evt": evt,
        "evt_error": fit_error,
        "evt_cross_check": cross,
        "extrapolation_orders": math.log10(1.0 / (x.size * evt_config.exceedance)),
        "evt_config": {k: getattr(evt_config, k) for k in evt_config.__dataclass_fields__},
    }


def _cross_check(
    x: np.ndarray, evt_config: EvtConfig, exceedances: tuple[float, ...], primary: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The other EVT method's estimates, for information only (not part of the verdict): a large
    disagreement between POT and block maxima says the tail model is uncertain. Its pWCETs are
    given only when the primary fit is admissible (they are not tested themselves)."""
    other = "bm" if evt_config.method == "pot" else "pot"
    if primary is None or primary.get("pwcet_ns") is None:
        return {
            "method": other,
            "pwcet_ns": None,
            "withheld": "not estimated (the primary tail fit is not admissible)",
            "used_for_verdict": False,
        }
    kwargs = EvtConfig(
        method=other,
        run_length=evt_config.run_length,
        block_size=evt_config.block_size,
        tail_fraction=evt_config.tail_fraction,
    ).fit_kwargs()
    try:
        fit = fit_tail(x, method=other, **kwargs)
    except (InputError, ConfigError, ValueError, RuntimeError, FloatingPointError) as exc:
        return {"method": other, "error": str(exc)}
    pw = {}
    for p in exceedances:
        try:
            pw[f"{p:.0e}"] = fit.quantile(p)
        except ConfigError:
            pw[f"{p:.0e}"] = None
    return {"method": other, "xi": fit.xi, "tail": fit.tail_kind, "pwcet_ns": pw, "used_for_verdict": False}


def certify_session(
    session: Steppable,
    *,
    budget_ns: float,
    inputs: np.ndarray,
    max_len: int,
    static_cache: bool,
    backend: str,
    artifact: str | None = None,
    campaign: CampaignConfig = CampaignConfig(),
    evt_config: EvtConfig = EvtConfig(),
    progress: Callable[[int], None] | None = None,
    window: int | None = None,
    artifact_sha256: str | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Run the campaign on `session` and analyze it. Returns (certificate dict, durations_ns).
    window=W: a sliding session (windowed artifact): one stream timed across wrap-around, the
    certificate's campaign.ring says so (`ring_coverage`); if a slot of the ring was never timed,
    the claim says so and a PASS becomes INCONCLUSIVE. artifact_sha256: the hash recorded in the
    conditions (default: of the manifest bytes the session's loader verified, `loaded_sha256`;
    nothing is re-read by path)."""
    start = campaign.start_position
    if start is None:
        start = 0 if static_cache else max(0, max_len - max(1, max_len // 8))
    if artifact_sha256 is None:
        artifact_sha256 = loaded_sha256(session)
    cond = conditions(backend=backend, artifact=artifact, cpu=campaign.cpu, artifact_sha256=artifact_sha256)
    with Isolation(cpu=campaign.cpu, realtime=campaign.realtime, rt_priority=campaign.rt_priority) as iso:
        duty = campaign.duty_cycle if iso.granted["sched_fifo"]["granted"] else None
        sweep = None
        if start > 0:  # growing cache: a short sweep over every position shows where the worst case is
            sd, sp = measure(
                session,
                inputs,
                samples=max(8 * max_len, 1000),
                warmup=0,
                max_len=max_len,
                start_position=0,
                duty_cycle=duty,
            )
            sweep = position_profile(sd, sp, max_len)
        t0 = time.perf_counter_ns()
        durations, positions = measure(
            session,
            inputs,
            samples=campaign.samples,
            warmup=campaign.warmup,
            max_len=max_len,
            start_position=start,
            progress=progress,
            duty_cycle=duty,
            window=window,
        )
        wall_ns = time.perf_counter_ns() - t0
    cond["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    cond["isolation"] = iso.granted
    report = analyze(durations, budget_ns=budget_ns, evt_config=evt_config)
    report_full = {
        "format": "tickformer-latency-certificate",
        "version": 1,
        **report,
        "conditions": cond,
        "campaign": {
            "samples": campaign.samples,
            "warmup": campaign.warmup,
            "static_cache": static_cache,
            "timed_positions": [start, max_len - 1],
            "max_len": max_len,
            "n_inputs": int(inputs.shape[0]),
            "wall_s": wall_ns / 1e9,
            "duty_cycle": duty,
            "position_profile": position_profile(durations, positions, max_len),
            "position_check": position_check(static_cache, durations, positions, max_len, sweep, start),
        },
    }
    if window is not None:
        ring = ring_coverage(durations, positions, window)
        campaign_record = report_full["campaign"]
        campaign_record["ring"] = ring
        campaign_record["timed_positions"] = ring["positions"]
        campaign_record["position_profile"] = ring["slot_profile"]  # by slot: positions run past max_len
        campaign_record["position_check"] = position_check(
            static_cache, durations, ring_slot(positions, window), window, sweep, start
        )
        if not ring["covered"] and report_full["verdict"] == PASS:  # failing closed, like decide()
            report_full.update(verdict=INCONCLUSIVE, exit_code=EXIT_CODES[INCONCLUSIVE], advice=ADVICE)
            report_full["reasons"] = [
                f"the campaign does not cover the ring: {ring['claim']}; collect more --samples (more than "
                f"the window of {window})",
                *report_full["reasons"],
            ]
    return report_full, durations


def position_check(
    static_cache: bool,
    durations: np.ndarray,
    positions: np.ndarray,
    max_len: int,
    sweep: dict[str, Any] | None,
    start: int,
    tolerance: float = 1.2,
) -> dict[str, Any]:
    """Evidence that the timed positions include the worst case (informational, in the certificate).

    Static cache: the median of the last eighth of positions should be within `tolerance` x the
    first eighth's (constant cost). Growing cache: in the sweep, the group with the highest median
    should lie in the timed range [start, max_len)."""
    if static_cache:
        ratio = position_profile(durations, positions, max_len)["last_over_first_p50"]
        ok = ratio is None or ratio <= tolerance
        return {
            "claim": "constant cost at every position",
            "last_over_first_p50": ratio,
            "tolerance": tolerance,
            "consistent": bool(ok),
        }
    groups = (sweep or {}).get("groups", [])
    worst = max(groups, key=lambda g: g["p50_ns"]) if groups else None
    ok = worst is not None and worst["positions"][1] >= start
    return {
        "claim": "cost grows with position; only the last positions are timed",
        "sweep": sweep,
        "worst_group": None if worst is None else worst["positions"],
        "timed_from": start,
        "consistent": bool(ok),
    }


# ----------------------------------------------------------------------------- artifacts


def open_session(artifact: str, backend: str, threads: int = 1, trust: Any = None) -> Any:
    """Load the artifact (hash-verified; signed by `trust` if given) with contracts off: the
    campaign times the bare step."""
    from tickformer.runtime import load  # at call time: the runtime's backends import lazily

    options: dict[str, Any] = (
        {"threads": threads} if backend == "ort" else {}
    )  # GPU backends take other options
    return load(artifact, backend=backend, contracts="off", trust=trust, **options)


def prepare(session: Any, *, n_inputs: int, seed: int) -> np.ndarray:
    """Inputs drawn from the declared domain; encoder-decoder artifacts get a random source."""
    if session.config.arch == "encoder-decoder":
        rng = np.random.default_rng(seed + 1)
        src = rng.integers(
            0, session.config.vocab_size, size=(session.batch, session.max_len), dtype=np.int64
        )
        session.set_source(src)
    domain = (0, session.config.vocab_size - 1) if session.tokens else session.domain
    return make_inputs(session.input_shape, session.input_dtype, domain, n_inputs, seed)


def certify_artifact(
    artifact: str,
    *,
    backend: str,
    budget_ns: float,
    campaign: Any,
    evt_config: Any,
    threads: int = 1,
    progress: Any = None,
    trust: Any = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Open (`trust`: the key the artifact must be signed with), measure, analyze. Returns
    (report, durations_ns). What `tickformer certify` and the demo run."""
    session = open_session(artifact, backend, threads, trust)
    try:
        inputs = prepare(session, n_inputs=campaign.n_inputs, seed=campaign.seed)
        report, durations = certify_session(
            session,
            budget_ns=budget_ns,
            inputs=inputs,
            max_len=session.max_len,
            static_cache=bool(getattr(session.backend, "static_cache", False)),
            backend=backend,
            artifact=artifact,
            campaign=campaign,
            evt_config=evt_config,
            progress=progress,
            window=session.window if getattr(session, "sliding", False) else None,
        )
    finally:
        session.close()
    report["conditions"]["threads"] = threads
    return report, durations


# ----------------------------------------------------------------------------- bare ONNX models


ONNX_MODES = ("auto", "full", "step")


def certify_onnx(
    model: str | os.PathLike[str],
    *,
    backend: str,
    budget_ns: float,
    campaign: Any,
    evt_config: Any,
    step: str | os.PathLike[str] | None = None,
    spec: str | os.PathLike[str] | None = None,
    flags: Any = None,
    mode: str = "auto",
    max_len: int | None = None,
    threads: int = 1,
    progress: Any = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """The campaign on a bare ONNX model (tickformer.runtime.foreign.ForeignSession): mode "step"
    times the step graph of a KV-cache pair with its cache fed back (positions 0..max_len-1, the
    cache growing: only the last eighth is timed, after a sweep of every position); mode "full"
    times the full graph at one fixed shape (batch at the low end of its range, the time axis at
    max_len). "auto": step when a step graph is given (--step or the spec's cache.step). The
    statistics, pWCET and verdict are those of `certify_session`. Returns (report, durations_ns)."""
    from tickformer.artifact.foreign.inference import open_signature
    from tickformer.artifact.foreign.spec import Flags
    from tickformer.runtime.foreign import ForeignSession, Graph, provider_of

    validation.one_of(mode, "--mode", ONNX_MODES)
    flags = flags if flags is not None else Flags()
    if step is not None:
        flags.step = Path(step)
    sig, data, step_data = open_signature(model, spec=spec, flags=flags)
    if mode == "auto":
        mode = "step" if step_data is not None else "full"
    if mode == "step" and step_data is None:
        raise ConfigError("--mode step times the step graph of a KV-cache pair: pass --step STEP.onnx")
    provider = provider_of(backend)
    full = Graph(data, name=str(model), provider=provider, threads=threads)
    step_graph = (
        Graph(step_data, name=str(sig.cache.step), provider=provider, threads=threads)
        if step_data is not None and sig.cache is not None
        else None
    )
    time_groups = sig.time_groups
    t_group = sig.causal_group or (time_groups[0] if time_groups else None)
    t_range = sig.ranges.get(t_group) if t_group is not None else None
    if max_len is None:
        max_len = t_range[1] if t_range is not None else 1
    validation.positive_int(
        max_len, "--max-len", hint="positions per sequence (step) or the sequence length (full)"
    )
    if t_range is not None and not t_range[0] <= max_len <= t_range[1] and t_group in sig.dynamic:
        raise ConfigError(
            f"--max-len {max_len} is outside the sizes {list(t_range)} declared for {t_group!r}; "
            f"pass one inside, or widen [axes] {t_group} in the spec"
        )
    sizes = {g: r[0] for g, r in sig.ranges.items()}
    if t_group is not None and t_group in sizes:
        sizes[t_group] = max_len
    session = ForeignSession(
        sig, full, step_graph, mode=mode, sizes=sizes, max_len=max_len, seed=campaign.seed
    )
    inputs = session.make_inputs(campaign.n_inputs, campaign.seed)
    report, durations = certify_session(
        session,
        budget_ns=budget_ns,
        inputs=inputs,
        max_len=session.max_len,
        static_cache=session.static_cache,
        backend=backend,
        artifact=str(model),
        campaign=campaign,
        evt_config=evt_config,
        progress=progress,
        artifact_sha256=hashlib.sha256(data).hexdigest(),  # the bytes that were loaded, not a re-read
    )
    report["conditions"]["threads"] = threads
    report["conditions"]["model"] = {
        "kind": "onnx",
        "mode": mode,
        "full": str(model),
        "full_sha256": hashlib.sha256(data).hexdigest(),
        "step": str(sig.cache.step) if step_data is not None and sig.cache is not None else None,
        "step_sha256": hashlib.sha256(step_data).hexdigest() if step_data is not None else None,
        "sizes": sizes,
        "timed_input": {"name": session.primary.name, "shape": list(session.input_shape())},
        "fixed_inputs": "the other inputs drawn once from their domain; masks all valid; positions counted",
    }
    return report, durations
