"""Worst-case latency certification of a step: the campaign (`certify_session`) and what
`tickformer certify` runs on an artifact (`certify_artifact`) or a bare ONNX model
(`certify_onnx`).

A campaign isolates the measuring thread (isolation.py), times every step alone (measurement.py),
summarises the samples (statistics.py), fits the tail and decides PASS / FAIL / INCONCLUSIVE
against the budget, failing closed (decision.py, evt.py); the certificate records the conditions
and the evidence about positions (a sliding stream: whether every slot of the ring was timed).

Not real-time code (the measured loop is measurement.measure's).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tickformer import validation
from tickformer.artifact.foreign.inference import open_signature
from tickformer.artifact.foreign.spec import Flags
from tickformer.contracts.ring_buffer import ring_slot
from tickformer.errors import ConfigError, TickformerError
from tickformer.runtime import load
from tickformer.runtime.foreign import ForeignSession, Graph, provider_of
from tickformer.runtime.steppable import Steppable
from tickformer.safe_files import read_path

from .decision import ADVICE, EXIT_CODES, INCONCLUSIVE, PASS, EvtConfig, analyze, check_sample_count
from .evt import min_samples
from .isolation import Isolation
from .measurement import (
    conditions,
    input_distribution,
    load_average,
    loaded_artifact_id,
    loaded_sha256,
    make_inputs,
    measure,
)
from .statistics import position_check, position_profile, ring_coverage


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
            min_value=min_samples(),
            hint=f"a tail fit needs at least {min_samples()} timed steps (evt.min_samples; block maxima more)",
        )
        validation.nonneg_int(self.warmup, "warmup", hint="untimed steps before measuring")
        if self.cpu is not None:
            validation.nonneg_int(self.cpu, "cpu", hint="a CPU index (see `nproc`)")
        validation.integer(self.rt_priority, "rt_priority", min_value=1, max_value=99)
        if self.start_position is not None:
            validation.nonneg_int(self.start_position, "start_position")
        validation.real(self.duty_cycle, "duty_cycle", min_value=0.0, max_value=1.0, exclude_min=True)
        validation.positive_int(self.n_inputs, "n_inputs")


# ----------------------------------------------------------------------------- the campaign


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
    evt_config: EvtConfig | None = None,
    progress: Callable[[int], None] | None = None,
    window: int | None = None,
    artifact_id: str | None = None,
    manifest_file_sha256: str | None = None,
    input_distribution: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Run the campaign on `session` and analyze it. Returns (certificate dict, durations_ns).
    window=W: a sliding session (windowed artifact): one stream timed across wrap-around, the
    certificate's campaign.ring says so (`ring_coverage`); if a slot of the ring was never timed,
    the claim says so and a PASS becomes INCONCLUSIVE. artifact_id: the id recorded in the
    conditions (default: the manifest_sha256 the session's loader verified, `loaded_artifact_id`,
    the id of the C header too); manifest_file_sha256 (default: of the manifest bytes loaded,
    `loaded_sha256`; nothing is re-read by path); input_distribution: how `inputs` were drawn."""
    if evt_config is None:
        evt_config = EvtConfig()
    check_sample_count(campaign.samples, evt_config)  # the fit's own rule, before any step is timed
    start = campaign.start_position
    if start is None:
        start = 0 if static_cache else max(0, max_len - max(1, max_len // 8))
    if artifact_id is None:
        artifact_id = loaded_artifact_id(session)
    if manifest_file_sha256 is None:
        manifest_file_sha256 = loaded_sha256(session)
    cond = conditions(
        backend=backend,
        artifact=artifact,
        cpu=campaign.cpu,
        artifact_id=artifact_id,
        manifest_file_sha256=manifest_file_sha256,
    )
    cond["input_distribution"] = input_distribution or {
        "kind": "given",
        "distinct": int(inputs.shape[0]),
        "shape": list(inputs.shape[1:]),
        "dtype": str(inputs.dtype),
        "order": "cycled in the order given",
    }
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
    cond["load_average_after"] = load_average()
    cond["isolation"] = iso.granted
    report = assemble(
        durations,
        positions,
        budget_ns=budget_ns,
        evt_config=evt_config,
        conditions=cond,
        campaign=campaign_record(campaign, n_inputs=int(inputs.shape[0]), wall_ns=wall_ns, duty_cycle=duty),
        max_len=max_len,
        static_cache=static_cache,
        start=start,
        window=window,
        sweep=sweep,
    )
    return report, durations


def campaign_record(
    campaign: CampaignConfig, *, n_inputs: int, wall_ns: int, duty_cycle: float | None, **more: Any
) -> dict[str, Any]:
    """What every campaign states of itself in the certificate (samples, warmup, inputs, wall
    time, the duty cycle used), plus `more`; `assemble` adds the position evidence."""
    return {
        "samples": campaign.samples,
        "warmup": campaign.warmup,
        "n_inputs": n_inputs,
        "wall_s": wall_ns / 1e9,
        "duty_cycle": duty_cycle,
        **more,
    }


def assemble(
    durations: np.ndarray,
    positions: np.ndarray,
    *,
    budget_ns: float,
    evt_config: EvtConfig,
    conditions: dict[str, Any],
    campaign: dict[str, Any],
    max_len: int,
    static_cache: bool,
    start: int = 0,
    window: int | None = None,
    sweep: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The certificate of timed steps (durations_ns, positions), wherever they were timed -- in
    this process (`certify_session`) or in the native timing program (certify/native.py): the
    statistics, the verdict, the position evidence and, for a sliding stream, the ring's
    coverage (a PASS that missed a slot becomes INCONCLUSIVE). Not real-time code."""
    report = analyze(durations, budget_ns=budget_ns, evt_config=evt_config)
    report_full = {
        "format": "tickformer-latency-certificate",
        "version": 1,
        **report,
        "conditions": conditions,
        "campaign": {
            **campaign,
            "static_cache": static_cache,
            "timed_positions": [start, max_len - 1],
            "max_len": max_len,
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
    return report_full


# ----------------------------------------------------------------------------- artifacts


def open_session(artifact: str, backend: str, threads: int = 1, trust: Any = None) -> Any:
    """Load the artifact (hash-verified; signed by `trust` if given) with contracts off: the
    campaign times the bare step."""
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
    return make_inputs(session.input_shape, session.input_dtype, _domain(session), n_inputs, seed)


def _domain(session: Any) -> Any:
    """(lo, hi) of the inputs, or (lows, highs) per input column when the artifact declares them."""
    if session.tokens:
        return (0, session.config.vocab_size - 1)
    columns = getattr(session, "domain_columns", None)
    return session.domain if columns is None else (np.array(columns[0]), np.array(columns[1]))


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
            input_distribution=input_distribution(
                session.input_shape, session.input_dtype, _domain(session), campaign.n_inputs, campaign.seed
            ),
        )
        library = getattr(session.backend, "library_path", None)
    finally:
        session.close()
    report["conditions"]["threads"] = threads
    if library is not None:  # backend c: the library that was timed, and how it was built
        report["conditions"]["c_library"] = {"path": library, "build": _build_record(Path(library))}
    return report, durations


def _build_record(library: Path) -> Any:
    """The compiler and flags of a c backend library: its build.json (codegen/toolchain.py), or why
    there is none (a prebuilt library= carries no record)."""
    try:
        return json.loads(read_path(library.parent / "build.json", max_bytes=1 << 20))
    except (OSError, ValueError, TickformerError) as exc:
        return {"value": "unknown", "reason": f"no readable build.json beside {library} ({exc})"}


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
        artifact_id=hashlib.sha256(data).hexdigest(),  # the bytes that were loaded, not a re-read
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
