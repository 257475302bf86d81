"""Building and running the programs of codegen/timing.py from Python: the step timed in its own
process (`build_timing`, `run_timing`), the machine model of its static bound (`measure_peaks`)
and its work per step counted from the code (`count_work`). What `tickformer certify ART
--backend c --native` runs (certify/native.py); docs/codegen.md, "Timing the step where it runs".

The step's object is compiled with the deployment flags (`toolchain.deployment_flags`: what the
`c` backend's library is built with, less -fPIC -shared); the harness around it with the same
flags in GNU C mode (it calls sched_setaffinity and reads the FPU control register), so the peak
kernels of `--peak` are vectorised as the step is.

Not real-time code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tickformer.errors import BackendError, BackendUnavailable

from . import timing
from .plan import Plan
from .source import model_sources
from .toolchain import COMPILE_TIMEOUT_S, Compiler, deployment_flags, find_compiler

CXX_CANDIDATES = ("c++", "g++", "clang++")
# tf_memcount's build of the step: the source's own accesses (-O0: every lvalue the code reads or
# writes is a memory access; -Dconst=: GCC does not instrument loads from read-only data)
MEMCOUNT_FLAGS = ("-std=c99", "-O0", "-ffp-contract=off", "-Dconst=", "-fsanitize=thread")


@dataclass(frozen=True)
class TimingBuild:
    """A built timing program: where, with which compiler, and the exact commands."""

    directory: Path
    program: Path
    compiler: Compiler
    flags: tuple[str, ...]  # the step's object: the deployment build
    harness_flags: tuple[str, ...]
    commands: tuple[str, ...]


def _run(
    cmd: list[str], cwd: Path, what: str, timeout: float = COMPILE_TIMEOUT_S
) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BackendError(f"{what} did not finish within {timeout:.0f} s ({' '.join(cmd)})") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise BackendError(f"{what} failed ({' '.join(cmd)}): {lines[-1] if lines else 'no output'}")
    return done


def harness_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """The step's flags for the harness: GNU C99 in place of ISO C99 (POSIX scheduling calls)."""
    return tuple("-std=gnu99" if f.startswith("-std=") else f for f in flags)


def build_timing(
    plan: Plan, directory: Path, *, cc: str | None = None, cflags: Sequence[str] | None = None
) -> TimingBuild:
    """tf_model.o with the deployment flags, tf_timing.c around it, linked: `directory`/tf_timing."""
    compiler = find_compiler(cc)
    flags = deployment_flags(compiler, cflags)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in model_sources(plan).items():
        (directory / name).write_bytes(data)
    (directory / "tf_timing.c").write_text(timing.timing_c())
    hflags = harness_flags(flags)
    commands = (
        [compiler.path, *flags, "-c", "tf_model.c", "-o", "tf_model.o"],
        [compiler.path, *hflags, "tf_timing.c", "tf_model.o", "-lm", "-o", "tf_timing"],
    )
    for cmd in commands:
        _run(list(cmd), directory, f"{compiler.path} building the timing program")
    return TimingBuild(
        directory=directory,
        program=directory / "tf_timing",
        compiler=compiler,
        flags=flags,
        harness_flags=hflags,
        commands=tuple(" ".join(c) for c in commands),
    )


def run_timing(
    build: TimingBuild,
    *,
    samples: int,
    warmup: int,
    cpu: int | None,
    realtime_priority: int | None,
    seed: int,
    n_inputs: int,
    duty_cycle: float = 0.9,
    timeout_s: float = 3600.0,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Run the timing program: (durations_ns int64 [samples], positions int64 [samples], its
    record). The process is its own: nothing of this interpreter runs in it."""
    out = build.directory / "samples.bin"
    cmd = [str(build.program), "--samples", str(samples), "--warmup", str(warmup), "--seed", str(seed)]
    cmd += ["--inputs", str(n_inputs), "--duty", str(duty_cycle), "--out", str(out)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    if realtime_priority is not None:
        cmd += ["--realtime", str(realtime_priority)]
    done = _run(cmd, build.directory, "the timing program", timeout=timeout_s)
    record = json.loads(done.stdout)
    record["argv"] = cmd
    data = np.fromfile(out, dtype=np.int64)  # [2 * samples]
    if data.size != 2 * samples:
        raise BackendError(f"the timing program wrote {data.size} values, expected {2 * samples}")
    return data[:samples].copy(), data[samples:].copy(), record


def measure_peaks(build: TimingBuild, working_set_bytes: int) -> dict[str, Any]:
    """The machine model of the static bound, measured by the timing program (`--peak`): peak
    float throughput and read bandwidth over `working_set_bytes` and over 64 MiB."""
    cmd = [str(build.program), "--peak", "--working-set", str(int(working_set_bytes))]
    done = _run(cmd, build.directory, "the timing program's peak measurement", timeout=600)
    record = json.loads(done.stdout)
    record["argv"] = cmd
    return record


def find_cxx(cxx: str | None = None) -> str:
    """The C++ compiler that builds tf_count: `cxx`, else $CXX, else c++, g++, clang++."""
    names = [cxx] if cxx else ([os.environ["CXX"]] if os.environ.get("CXX") else list(CXX_CANDIDATES))
    for name in names:
        path = shutil.which(name)
        if path is not None:
            return path
    raise BackendUnavailable(
        f"counting the step's floating-point operations needs a C++ compiler and found none (tried "
        f"{', '.join(names)}): apt-get install g++, or name one with $CXX"
    )


def count_work(
    plan: Plan,
    directory: Path,
    *,
    cc: str | None = None,
    cxx: str | None = None,
) -> dict[str, Any]:
    """The work of one tf_step counted from the code (codegen/timing.py): floating-point
    operations by kind (tf_count: the step compiled as C++ with a counting float; every step of
    3 max_len + 2 checked to do the same work) and memory accesses by region with the distinct
    bytes touched (tf_memcount: the source's own loads and stores, MEMCOUNT_FLAGS, counted by our
    stubs of ThreadSanitizer's instrumentation). Both are properties of the source, not of the
    flags. Raises BackendUnavailable when a compiler is missing."""
    compiler = find_compiler(cc)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in model_sources(plan).items():
        (directory / name).write_bytes(data)
    (directory / "tf_count.cpp").write_text(timing.count_cpp())
    (directory / "tf_memcount.c").write_text(timing.memcount_c())
    cxx_path = find_cxx(cxx)
    builds = (
        [cxx_path, "-std=gnu++17", "-O1", "-w", "tf_count.cpp", "-o", "tf_count"],
        [compiler.path, *MEMCOUNT_FLAGS, "-c", "tf_model.c", "-o", "tf_model_tsan.o"],
        [compiler.path, "-std=c99", "-O1", "tf_memcount.c", "tf_model_tsan.o", "-lm", "-o", "tf_memcount"],
    )
    for cmd in builds:
        _run(list(cmd), directory, f"{cmd[0]} building the work counters")
    ops = json.loads(_run([str(directory / "tf_count")], directory, "tf_count").stdout)
    mem = json.loads(_run([str(directory / "tf_memcount")], directory, "tf_memcount").stdout)
    flops = ops["add_sub"] + ops["mul"] + ops["div"] + ops["sqrt"]
    regions = mem["regions"]
    traffic = regions["weights_and_tables"]["distinct_bytes"] + regions["state"]["distinct_bytes"]
    return {
        "flops": flops,
        "operations": ops,
        "memory": mem,
        "bytes_touched": traffic,
        "constant_work": ops["steps_whose_count_differs"] == 0,
        "method": {
            "operations": "tf_model.c compiled as C++ (tf_count.cpp) with float replaced by a type whose +, -, *, /, "
            "sqrtf and comparisons count; flops = add/sub + mul + div + sqrt; every one of "
            f"{ops['steps']} steps over all positions does the same count (constant work)",
            "memory": "tf_model.c built at -O0 with -fsanitize=thread (and const removed: GCC skips read-only "
            "data): every load and store the source performs calls __tsan_readN/writeN, counted by region by "
            "tf_memcount.c (no TSan runtime); distinct bytes of weights, tables and state = the step's "
            "compulsory traffic (an optimising build may fold a few constant loads into instructions)",
            "commands": [" ".join(c) for c in builds],
        },
    }
