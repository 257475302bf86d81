"""The measured loop of a campaign and the conditions it ran under.

Each step is timed alone with `time.perf_counter_ns()` (CLOCK_MONOTONIC on Linux, ns
resolution); everything is allocated and warmed before the loop (cyclictest practice). Position:
a static-KV-cache step does the same work at every position (docs/artifact_format.md), so the
campaign cycles through all positions and every sample is a worst-case sample; a growing cache
costs most at the last positions, so only steps at positions >= `start_position` are timed, the
earlier ones run untimed to fill the cache. `conditions` records what a reader needs to judge
and reproduce the campaign (CPU, governor, load, versions, the clock, the hash of what was
loaded).

Nothing here is real-time code except `measure`'s inner loop (which only times and stores).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import tickformer
from tickformer.errors import ConfigError
from tickformer.runtime.steppable import Steppable
from tickformer.safe_files import MAX_MANIFEST_BYTES, Directory, read_path

from .environment import environment


def make_inputs(
    shape: tuple[int, ...], dtype: Any, domain: tuple[float, float], n: int, seed: int
) -> np.ndarray:
    """n distinct inputs drawn uniformly from the declared domain: [n, *shape]; `domain` is (lo, hi),
    or (lows, highs) arrays over the last axis (per input column). Not real-time."""
    rng = np.random.default_rng(seed)
    lo, hi = domain
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(int(lo), int(hi) + 1, size=(n, *shape)).astype(dtype)  # [n, *shape]
    x = rng.uniform(lo, hi, size=(n, *shape)).astype(dtype)  # [n, *shape]
    inward_lo = np.where(
        np.asarray(lo, dtype) < np.asarray(lo),
        np.nextafter(np.asarray(lo, dtype), np.inf),
        np.asarray(lo, dtype),
    )
    inward_hi = np.where(
        np.asarray(hi, dtype) > np.asarray(hi),
        np.nextafter(np.asarray(hi, dtype), -np.inf),
        np.asarray(hi, dtype),
    )
    return np.clip(x, inward_lo, inward_hi)  # a rounding to `dtype` may leave the domain


def input_distribution(
    shape: tuple[int, ...], dtype: Any, domain: tuple[float, float], n: int, seed: int
) -> dict[str, Any]:
    """What `make_inputs` draws, as the certificate records it."""
    lo, hi = domain
    integer = np.issubdtype(np.dtype(dtype), np.integer)
    per_column = np.ndim(lo) > 0
    return {
        "kind": "uniform integers" if integer else ("uniform per input column" if per_column else "uniform"),
        "domain": [int(lo), int(hi)]
        if integer
        else ([[float(a), float(b)] for a, b in zip(lo, hi)] if per_column else [float(lo), float(hi)]),
        "domain_means": "the artifact's declared input domain (token ids: the vocabulary)",
        "distinct": int(n),
        "shape": [int(d) for d in shape],
        "dtype": str(np.dtype(dtype)),
        "generator": f"numpy.random.default_rng({seed})",
        "order": "drawn once, cycled",
    }


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


# ----------------------------------------------------------------------------- conditions


def artifact_hash(path: str | os.PathLike[str]) -> str:
    """sha256 of the artifact: of manifest.json for an artifact directory (it holds the sha256 of
    every other file, verified by runtime.load), else of the file itself. A second read by path:
    a campaign hashes the bytes its loader verified instead (`loaded_sha256`); this is for a
    path nothing has loaded."""
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


def loaded_artifact_id(session: Any) -> str | None:
    """The artifact's id: the manifest's `manifest_sha256`, its self-hash, which the loader
    verified against the manifest it parsed (core/sealed.py) -- the id the generated C header
    (`tf_artifact_sha256()`) and the codegen README carry too. None when the session has no
    verified manifest (a hand-made Artifact, a fake)."""
    artifact = getattr(session, "artifact", None)
    if not isinstance(getattr(artifact, "manifest_bytes", None), bytes):
        return None
    value = getattr(artifact, "manifest", {}).get("manifest_sha256")
    return value if isinstance(value, str) else None


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
    out = {"python": platform.python_version(), "numpy": np.__version__, "tickformer": tickformer.__version__}
    for mod in ("onnxruntime", "scipy", "onnx"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = "not installed"
    return out


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the platform has none."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def conditions(
    *,
    backend: str,
    artifact: str | None,
    cpu: int | None,
    artifact_id: str | None = None,
    manifest_file_sha256: str | None = None,
) -> dict[str, Any]:
    """The measurement conditions a reader needs to judge (and reproduce) the campaign: the
    machine (`environment.environment`), load, versions, the clock, the artifact's id (its
    manifest_sha256; of a bare ONNX model, the sha256 of the model's bytes) and the sha256 of the
    manifest bytes that were loaded (nothing is re-read by path)."""
    cpus = (
        sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else list(range(os.cpu_count() or 1))
    )
    watch = [cpu] if cpu is not None else cpus
    env = environment(cpus=watch)
    info = time.get_clock_info("perf_counter")
    return {
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "process_argv": list(sys.argv),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "allowed_cpus": cpus,
        "governor": {k: v["value"] for k, v in ((str(c), env["cpu"][str(c)]["governor"]) for c in watch)},
        "isolated_cpus": _read("/sys/devices/system/cpu/isolated") or "unreadable or none",
        "load_average": load_average(),
        "kernel": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "environment": env,
        "versions": _versions(),
        "backend": backend,
        "artifact": str(artifact) if artifact is not None else None,
        "artifact_id": artifact_id,
        "manifest_file_sha256": manifest_file_sha256,
        "clock": {
            "name": "time.perf_counter_ns",
            "implementation": info.implementation,
            "resolution_s": info.resolution,
            "overhead_ns": timer_overhead_ns(),
        },
    }
