"""tickformer.runtime: load an exported artifact and run it one position per control tick.

    session = tickformer.runtime.load("ART", backend="ort", contracts="off")
    y = session.step(x)          # x [B, d_in] float32 -> y [B, d_out] (same buffer every call)
    session.reset()              # constant time
    ys = session.run(seq)        # full pass [B, T, d_in] -> [B, T, d_out]

Backends: numpy, numpy-growing (not constant time), ort (CPU); ort-cuda, ort-trt, tensorrt when
their modules and a GPU are present (runtime/backends/__init__.py). Formats and interfaces:
docs/artifact_format.md; usage, measurements and limits: docs/export_runtime.md.
"""

from __future__ import annotations

import os
from typing import Any

from tickformer import signing
from tickformer.artifact.reader import Artifact, open_artifact
from tickformer.errors import ConfigError

from .backends import REGISTRY as BACKENDS
from .backends import backend_class
from .control_loop import ControlLoop, LoopConfig, LoopStats, VirtualClock
from .session import CONTRACT_MODES, Session


def load(
    path: str | os.PathLike[str],
    backend: str = "numpy",
    contracts: str = "off",
    *,
    trust: str | os.PathLike[str] | None = None,
    min_release: int | None = None,
    budget_ns: int | None = None,
    on_full: str | None = None,
    **options: Any,
) -> Session:
    """Verify the artifact (manifest, signature with `trust`, every SHA-256, the format's rules:
    every file read once, without following links: tickformer.artifact.reader) before loading
    anything, then open it on `backend` (options go to the backend, e.g. ort: threads=1,
    binding="run"|"iobinding"; c: library=, builder=). Loading is reading: nothing is rebuilt or
    re-derived here -- that the graphs carry weights.npz's weights was checked when the artifact
    was written (export/consistency.py), and the hashes and the signature say it is what was
    written. trust: a public key file (NAME.pub of `tickformer keygen`); the artifact must then
    be signed by it (UntrustedArtifact otherwise). min_release (with trust): the lowest release
    number this device accepts; an older, genuinely signed artifact is refused (anti-rollback).
    Both block kinds (attention, ssm) get a `Session` with the same methods (runtime/session.py).
    contracts: "off" | "check" (raise ContractViolation) | "monitor" (count); budget_ns: latency
    budget per step for the monitor. on_full: past max_len, "raise" ContextFull (static-cache
    artifacts: the only policy) or "slide" the window (windowed artifacts: the default; Session).
    Not real-time (file I/O, graph loading)."""
    if contracts not in CONTRACT_MODES:
        raise ConfigError(f"contracts={contracts!r} is not one of {CONTRACT_MODES}")
    if min_release is not None:
        if trust is None:
            raise ConfigError(
                "min_release needs trust= (the key the artifact must be signed with): without a signature a "
                "re-sealed manifest can claim any release"
            )
        trust = signing.Trust(trust, min_release)
    artifact = open_artifact(path, trust=trust)
    cls = backend_class(
        backend, artifact.config
    )  # BackendUnavailable: what to install; or why not this artifact
    return Session(
        artifact, cls(artifact, **options), contracts=contracts, budget_ns=budget_ns, on_full=on_full
    )


__all__ = [
    "Artifact",
    "BACKENDS",
    "ControlLoop",
    "LoopConfig",
    "LoopStats",
    "Session",
    "VirtualClock",
    "load",
    "open_artifact",
]
