"""TensorRT engines recorded in an artifact's manifest, as the `tensorrt` backend loads them.

`tickformer build` (export/engines.py) builds the engines and records each in the manifest with
its sha256, TensorRT version, GPU, compute capability and precision. Loading is reading: the
backend takes an engine from the manifest only (`engine_entry`), and `engine_bytes` refuses one
built for another TensorRT version or GPU (`compatibility_problem`, from the manifest alone) and
re-checks the hash of the bytes it returns -- both before anything is deserialized.

Sources (facts only): NVIDIA TensorRT "Engine Compatibility" guide (version and hardware
compatibility). Not real-time code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tickformer.artifact.format import MANIFEST
from tickformer.errors import ArtifactError, BackendUnavailable, ConfigError, FileRefused
from tickformer.safe_files import Directory

from .cuda import DeviceInfo


def parse_version(text: str) -> tuple[int, ...]:
    """'10.3.0.30' -> (10, 3, 0, 30); raises ConfigError on anything else."""
    if not isinstance(text, str) or not re.fullmatch(r"\d+(\.\d+)*", text.strip()):
        raise ConfigError(f"cannot parse TensorRT version {text!r}")
    return tuple(int(p) for p in text.strip().split("."))


def compatibility_problem(entry: dict[str, Any], here: DeviceInfo) -> str | None:
    """Why an engine recorded in the manifest must not be deserialized here (None: it may).

    Rules (TensorRT "Engine Compatibility"): a plain engine runs only on the TensorRT version
    that built it; a version-compatible one on the same major, same or newer version. A plain
    engine runs only on the GPU model it was built on; `ampere+` on any compute capability >= 8.0.
    """
    built_v, here_v = parse_version(str(entry["tensorrt"])), parse_version(here.tensorrt)
    if entry.get("version_compatible"):
        if here_v[0] != built_v[0] or here_v < built_v:
            return (
                f"engine built with TensorRT {entry['tensorrt']} (version-compatible) cannot run on "
                f"TensorRT {here.tensorrt}: needs the same major version, same or newer"
            )
    elif here_v[:3] != built_v[:3]:
        return (
            f"engine built with TensorRT {entry['tensorrt']} cannot run on TensorRT {here.tensorrt}; "
            f"rebuild it here (`tickformer build ART --backend tensorrt`) or build with --version-compatible"
        )
    cc_built = tuple(int(c) for c in str(entry["compute_capability"]).split("."))
    if entry.get("hardware_compat", "same") == "ampere+":
        if here.compute_capability < (8, 0):
            return (
                "engine built --hardware-compat ampere+ needs compute capability >= 8.0, "
                f"this GPU has {here.compute_capability}"
            )
    elif entry.get("gpu") != here.gpu or cc_built != here.compute_capability:
        return (
            f"engine built for {entry.get('gpu')} (compute capability {entry['compute_capability']}) cannot run on "
            f"{here.gpu} ({'.'.join(map(str, here.compute_capability))}); rebuild it on this GPU"
        )
    return None


def engine_entry(manifest: dict[str, Any], graph: str, precision: str | None) -> tuple[str, dict[str, Any]]:
    """(precision, entry) of the engine for `graph`; precision None picks the only one built
    (fp32 if both). Raises ArtifactError saying how to build one."""
    engines = manifest.get("engines", {})
    if precision is None:
        built = sorted(p for p in engines if graph in engines[p])
        if not built:
            raise ArtifactError(
                f"the artifact has no TensorRT engine for {graph!r}; run `tickformer build ART --backend tensorrt`"
            )
        precision = "fp32" if "fp32" in built else built[0]
    entry = engines.get(precision, {}).get(graph)
    if entry is None:
        raise ArtifactError(
            f"the artifact has no {precision} TensorRT engine for {graph!r}; run "
            f"`tickformer build ART --backend tensorrt --precision {precision}`"
        )
    return precision, entry


def engine_bytes(root: Path, manifest: dict[str, Any], entry: dict[str, Any], here: DeviceInfo) -> bytes:
    """The engine's bytes, only if (1) it was built for this TensorRT version and GPU and (2) its
    bytes hash to the manifest's sha256 -- both checked before anything is deserialized."""
    problem = compatibility_problem(entry, here)
    if problem is not None:
        raise BackendUnavailable(problem)
    listed = manifest["files"].get(entry["file"])
    if listed is None or listed["sha256"] != entry["sha256"]:
        raise ArtifactError(
            f"engine {entry['file']} is not listed with its hash in manifest.json; rebuild it"
        )
    try:  # one read without following links, size first, then its SHA-256 (tickformer.safe_files)
        with Directory(root) as directory:
            return directory.read_listed(entry["file"], listed, listed_in=MANIFEST)
    except FileRefused as exc:
        raise ArtifactError(f"engine {exc}; rebuild it") from None
