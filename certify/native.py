"""The deployed step, timed where it runs: `tickformer certify ART --backend c --native`.

The generated C step is built with the deployment flags (codegen/toolchain.py
`deployment_flags`, what backend "c" builds its library with) into the timing program of
codegen/timing.py, which runs as its own process -- pinned, SCHED_FIFO and mlockall where
granted, flush-to-zero, warmed up, inputs drawn uniformly from the declared domain -- and times
every tf_step in C with CLOCK_MONOTONIC_RAW. Its samples go through the same statistics, EVT fit
and verdict as a campaign in this process (campaign.assemble).

Beside the measured figures, a static bound from the code (`static_bound`): the exact count of
floating-point operations and the distinct bytes one step touches (codegen/native.py
`count_work`), against the machine model measured by the same program (peak float throughput,
read bandwidth over the step's working set): a LOWER bound on the step's time on this machine.
docs/certify.md, "Native campaign and static bound".

Not real-time code (the timed loop is C, in another process).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tickformer.artifact import open_artifact
from tickformer.codegen import native
from tickformer.codegen.plan import plan_for
from tickformer.errors import BackendError, BackendUnavailable

from .campaign import assemble, campaign_record
from .decision import EvtConfig, check_sample_count
from .measurement import conditions, load_average

BACKEND = "c-native"  # conditions.backend of a native campaign


def certify_native(
    artifact: str | os.PathLike[str],
    *,
    budget_ns: float,
    campaign: Any,
    evt_config: EvtConfig | None = None,
    trust: Any = None,
    cc: str | None = None,
    cflags: Sequence[str] | None = None,
    static: bool = True,
    workdir: str | os.PathLike[str] | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Build, run and analyze the native timing program for `artifact` (signed by `trust` if
    given). Returns (report, durations_ns). static=False skips the static bound (its counters
    need a C++ compiler and ThreadSanitizer's instrumentation)."""
    if evt_config is None:
        evt_config = EvtConfig()
    check_sample_count(campaign.samples, evt_config)
    opened = open_artifact(artifact, trust=trust)
    plan = plan_for(opened)  # refuses what the generator does not support, by name
    artifact_id = str(opened.manifest["manifest_sha256"])
    manifest_file = hashlib.sha256(opened.manifest_bytes).hexdigest() if opened.manifest_bytes else None
    with tempfile.TemporaryDirectory(prefix="tickformer-native-", dir=workdir) as tmp:
        build = native.build_timing(plan, Path(tmp) / "timing", cc=cc, cflags=cflags)
        cond = conditions(
            backend=BACKEND,
            artifact=str(artifact),
            cpu=campaign.cpu,
            artifact_id=artifact_id,
            manifest_file_sha256=manifest_file,
        )
        t0 = time.perf_counter_ns()
        durations, positions, record = native.run_timing(
            build,
            samples=campaign.samples,
            warmup=campaign.warmup,
            cpu=campaign.cpu,
            realtime_priority=campaign.rt_priority if campaign.realtime else None,
            seed=campaign.seed,
            n_inputs=campaign.n_inputs,
            duty_cycle=campaign.duty_cycle,
        )
        wall_ns = time.perf_counter_ns() - t0
        cond["load_average_after"] = load_average()
        if record["artifact_id"] != artifact_id:  # the program must carry the id the manifest verified
            raise BackendError(
                f"the timing program reports artifact {record['artifact_id']}, the manifest {artifact_id}"
            )
        if record["refused_steps"]:
            raise BackendError(
                f"the C step refused {record['refused_steps']} in-domain inputs while being timed"
            )
        work = peaks = None
        static_error = None
        if static:
            try:
                work = native.count_work(plan, Path(tmp) / "count", cc=cc)
                peaks = native.measure_peaks(build, work["bytes_touched"])
            except (BackendError, BackendUnavailable) as exc:
                static_error = str(exc)
        cond["isolation"] = record["isolation"]
        cond["clock"] = {**record["clock"], "where": "in C, around tf_step only, in the timing process"}
        cond["input_distribution"] = _distribution(plan, record)
        cond["native"] = {
            "program": "tf_timing (codegen/timing.py), its own process",
            "compiler": build.compiler.path,
            "compiler_version": build.compiler.version,
            "compiler_reports": record["compiler"],
            "step_flags": list(build.flags),
            "harness_flags": list(build.harness_flags),
            "build_commands": list(build.commands),
            "run_command": " ".join(
                "FILE" if a == str(build.directory / "samples.bin") else a for a in record["argv"]
            ),
            "target": record["target"],
            "same_flags_as": "backend 'c' (codegen/toolchain.py deployment_flags; its library adds -fPIC -shared)",
        }
    report = assemble(
        durations,
        positions,
        budget_ns=budget_ns,
        evt_config=evt_config,
        conditions=cond,
        campaign=campaign_record(
            campaign,
            n_inputs=campaign.n_inputs,
            wall_ns=wall_ns,
            duty_cycle=record["duty_cycle"],
            where="native: the C step in its own process (tf_timing)",
        ),
        max_len=plan.config.max_len,
        static_cache=True,  # every cache kind of the generator does the same work at every position
        window=plan.window,
    )
    report["static_bound"] = (
        static_bound(work, peaks, report["stats"])
        if work is not None and peaks is not None
        else {"computed": False, "reason": static_error or "not requested"}
    )
    return report, durations


def _distribution(plan: Any, record: dict[str, Any]) -> dict[str, Any]:
    lo, hi = plan.domain
    tokens = plan.tokens
    columns = (
        None if tokens or plan.columns is None else [[float(a), float(b)] for a, b in zip(*plan.columns)]
    )
    return {
        "kind": "uniform integers" if tokens else ("uniform per input column" if columns else "uniform"),
        "domain": [0, plan.d_out - 1] if tokens else (columns or [float(lo), float(hi)]),
        "domain_means": "the artifact's declared input domain (per input column when declared so), rounded "
        "inward to float32 (TF_INPUT_LO/HI)"
        if not tokens
        else "token ids 0..V-1",
        "distinct": record["inputs"]["distinct"],
        "shape": [plan.batch, plan.d_in],
        "dtype": "int64" if tokens else "float32",
        "generator": f"splitmix64 seeded {record['inputs']['seed']} (in C)",
        "order": record["inputs"]["order"],
    }


def static_bound(work: dict[str, Any], peaks: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """The static lower bound of one step from its counted work and the measured machine model,
    what it rests on, and the measured figures beside it. Pure."""
    if not work["constant_work"]:
        return {
            "computed": False,
            "reason": "the step's operation count differs between steps: no constant-work bound",
        }
    flops, touched = work["flops"], work["bytes_touched"]
    p_flops = peaks["peak_flops_per_s"]
    bw = peaks["read_bw_working_set_bytes_per_s"]
    compute_ns, memory_ns = 1e9 * flops / p_flops, 1e9 * touched / bw
    lower = max(compute_ns, memory_ns)
    consistent = stats["min"] >= lower
    return {
        "computed": True,
        "kind": "lower bound",
        "value_ns": lower,
        "bound_by": "memory bandwidth" if memory_ns >= compute_ns else "float throughput",
        "compute_ns": compute_ns,
        "memory_ns": memory_ns,
        "cold_memory_ns": 1e9 * touched / peaks["read_bw_64mib_bytes_per_s"],
        "flops": flops,
        "bytes_touched": touched,
        "work": work,
        "machine": peaks,
        "observed_min_ns": stats["min"],
        "consistent_with_measurement": consistent,
        "measured_over_bound": {k: stats[k] / lower for k in ("min", "p50", "p99.9", "max")},
        "rests_on": [
            f"the step's work is constant: {flops:,} floating-point operations (add/sub, mul, div, sqrt counted "
            "from the code; every step over all positions does the same count) and "
            f"{touched:,} distinct bytes of weights, tables and state touched (counted as compiled)",
            f"the machine cannot run float operations faster than the measured peak {p_flops:.3g}/s (independent "
            "multiply-add chains at the deployment flags, best of 15 passes) nor read faster than "
            f"{bw:.3g} B/s (the best pass over a buffer of the working set's size, caches warm as between "
            "the steps of a loop); div and sqrt count as one operation each though they cost more",
        ],
        "meaning": "a LOWER bound: no run of this step on this machine can be faster than max(flops / peak, bytes / "
        "bandwidth), or it would beat the measured peaks. It is not a WCET: nothing static here bounds the time "
        "from above (cache misses to DRAM, interrupts, the hypervisor, frequency changes); the upper estimate "
        "is the measured pWCET, which rests on the campaign's admissibility tests. cold_memory_ns, the working "
        "set streamed from DRAM at the 64 MiB bandwidth, is information, not a bound either way.",
    }
