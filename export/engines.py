"""TensorRT engines for an exported artifact: build them and record them in the manifest.

`build_engines(ART, BuildOptions(...))` builds every graph of the artifact (step, and model or
encoder) into a serialized engine with static shapes: the step and encoder graphs are static
already; a symbolic dim of the full-pass graph (`T`) is pinned by an optimization profile with
min = opt = max = max_len (causality makes a zero-padded full pass exact on the first T rows).
It uses a persistent timing cache, a workspace limit, optional version compatibility and
hardware compatibility, and writes each engine into the artifact atomically (temp file,
fsync, os.replace), under a content-addressed name, then rewrites manifest.json atomically with
the engine's sha256, TensorRT version, GPU name, compute capability, precision and build
options. Engines become part of the manifest's `files`, so `open_artifact` verifies them like
every other file, and the `tensorrt` backend takes them from the manifest only
(runtime/backends/tensorrt_engine.py: `engine_bytes` re-checks the hash of the bytes it returns
and refuses an engine built for another TensorRT version or GPU *before* anything is
deserialized). A build re-seals the manifest, so it is a writer: before it does, it checks that
the graphs carry weights.npz's weights (export/consistency.py), as the export did.

Precision (TensorRT 10.x and 11.x): `precision_plan` decides, per graph,
- fp32: strongly typed network from the fp32 graph; TF32 cleared so fp32 means fp32.
- fp16, graph already mixed-precision (exported with --precision fp16): strongly typed build;
  the precision is in the graph (export/fp16.py) -- the only fp16 route on TensorRT 11, where
  BuilderFlag.FP16 was removed.
- fp16, fp32 graph: TensorRT 10.x weak typing with BuilderFlag.FP16 (the builder picks fp16
  kernels where it likes), or `convert=True` (default on 11.x, opt-in on 10.x): convert with
  `to_fp16` first and build strongly typed.

Sources (facts only): NVIDIA TensorRT Python API (Builder.create_network, IBuilderConfig
set_memory_pool_limit / set_flag / hardware_compatibility_level / create_timing_cache /
set_timing_cache / get_timing_cache, OnnxParser.parse, Runtime.deserialize_cuda_engine,
engine_host_code_allowed for version-compatible plans); "Engine Compatibility" and
"Migrating from TensorRT 10.x to 11.x" guides; cuda-python `cuda.bindings.runtime`
(cudaGetDevice, cudaGetDeviceProperties).

The `build` command calls `build_engines`; the device helpers are the runtime's
(runtime/backends/cuda.py). Nothing here is real-time code: builds take seconds to minutes
and allocate freely.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from tickformer import sealed, validation
from tickformer.artifact.format import MANIFEST, SIGNATURE, TIMING_CACHE
from tickformer.artifact.reader import open_artifact, read_manifest, verified_graph_bytes
from tickformer.durable import atomic_write
from tickformer.errors import ConfigError, ExportError, FileRefused
from tickformer.runtime.backends.cuda import (
    DeviceInfo,
    device_info,
    dims_tuple,
    require_cudart,
    require_tensorrt,
)
from tickformer.runtime.backends.tensorrt_engine import parse_version
from tickformer.safe_files import read_path

from .consistency import check_graph_weights

Precision = Literal["fp32", "fp16"]
PRECISIONS: tuple[str, ...] = ("fp32", "fp16")
# --hardware-compat value -> tensorrt.HardwareCompatibilityLevel member name.
HARDWARE_COMPAT: dict[str, str] = {"same": "NONE", "ampere+": "AMPERE_PLUS"}
ENGINE_SUFFIX = ".engine"


# --- options and pure decisions (testable without TensorRT) -------------------------------------
@dataclass(frozen=True)
class BuildOptions:
    """What `tickformer build` was asked for; validated on construction."""

    precision: str = "fp32"
    workspace_mib: int = 1024
    timing_cache: Path | None = None  # None: ART/trt-timing.cache
    version_compatible: bool = False
    hardware_compat: str = "same"
    convert: bool | None = None  # fp16 from an fp32 graph: convert with to_fp16 (None: only on TRT 11)
    graphs: tuple[str, ...] | None = None  # None: every graph of the artifact

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"--precision {self.precision!r} is not one of {PRECISIONS}")
        validation.integer(
            self.workspace_mib,
            "--workspace",
            min_value=16,
            max_value=1 << 20,
            hint="the workspace limit in MiB",
        )
        if self.hardware_compat not in HARDWARE_COMPAT:
            raise ConfigError(
                f"--hardware-compat {self.hardware_compat!r} is not one of {sorted(HARDWARE_COMPAT)}"
            )


@dataclass(frozen=True)
class PrecisionPlan:
    """How to get the requested precision out of a given TensorRT major and graph."""

    strongly_typed: bool
    fp16_flag: bool
    convert_graph: bool
    clear_tf32: bool


# The plans precision_plan chooses from (its decision table, module docstring).
TYPED = PrecisionPlan(strongly_typed=True, fp16_flag=False, convert_graph=False, clear_tf32=True)
CONVERTED = PrecisionPlan(strongly_typed=True, fp16_flag=False, convert_graph=True, clear_tf32=True)
WEAK_FP16 = PrecisionPlan(strongly_typed=False, fp16_flag=True, convert_graph=False, clear_tf32=False)


def precision_plan(
    trt_major: int, graph_has_fp16: bool, precision: str, convert: bool | None = None
) -> PrecisionPlan:
    """Pure decision table (see module docstring). Raises ConfigError for impossible requests."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r} is not one of {PRECISIONS}")
    if precision == "fp32" and graph_has_fp16:
        raise ConfigError(
            "this graph is fp16-typed (exported with --precision fp16): an fp32 engine needs "
            "an fp32 export; re-export without --precision fp16"
        )
    if precision == "fp32" or graph_has_fp16:
        return TYPED
    if trt_major >= 11 and convert is False:
        raise ConfigError(
            "TensorRT 11 has no fp16 builder flag (weak typing was removed): fp16 needs an "
            "fp16-typed graph; drop --no-convert or export with --precision fp16"
        )
    return CONVERTED if trt_major >= 11 or convert else WEAK_FP16


def static_profile(io: list[dict[str, Any]], max_len: int) -> dict[str, tuple[int, ...]]:
    """Input name -> the one shape of a min = opt = max profile. The only symbolic dim our graphs
    have is "T" (1..max_len), pinned to max_len; anything else is an error."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in io:
        dims: list[int] = []
        for d in spec["shape"]:
            if isinstance(d, int) and d > 0:
                dims.append(d)
            elif d == "T":
                dims.append(max_len)
            else:
                raise ExportError(
                    f"input {spec['name']!r} has dimension {d!r}; only 'T' can be pinned (to max_len)"
                )
        shapes[spec["name"]] = tuple(dims)
    return shapes


def engine_file_name(graph: str, precision: str, digest: str) -> str:
    """Content-addressed: a crash mid-build never leaves a listed name with unlisted bytes."""
    return f"{graph}.{precision}.{digest[:16]}{ENGINE_SUFFIX}"


def update_manifest(root: Path, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Re-read manifest.json (verified), apply `mutate`, write it back sealed and atomically.
    The manifest is written last, so a crash before this point leaves the previous, still valid
    manifest. Returns the new manifest."""
    manifest = read_manifest(root)
    mutate(manifest)
    manifest = sealed.seal(manifest)
    atomic_write(root / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=False) + "\n").encode("utf-8"))
    try:  # a signature of the previous manifest can only fail now: the artifact reads as unsigned
        os.unlink(Path(root) / SIGNATURE)
    except FileNotFoundError:
        pass
    return manifest


def graph_has_fp16(onnx_bytes: bytes) -> bool:
    import onnx

    model = onnx.load_from_string(onnx_bytes)
    return (
        any(init.data_type == onnx.TensorProto.FLOAT16 for init in model.graph.initializer)
        or any(
            vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16 for vi in list(model.graph.value_info)
        )
        or any(
            node.op_type == "Cast"
            and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16 for a in node.attribute)
            for node in model.graph.node
        )
    )


def build_serialized(
    onnx_bytes: bytes,
    *,
    plan: PrecisionPlan,
    options: BuildOptions,
    profile: dict[str, tuple[int, ...]],
    timing_cache: bytes,
) -> tuple[bytes, bytes]:
    """Parse and build one engine. Returns (engine bytes, updated timing cache bytes).
    Call require_tensorrt() first; this function is type-checked against tensorrt-stubs."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    strongly = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if plan.strongly_typed and strongly is not None:
        flags |= 1 << int(strongly)  # required on 10.x for a typed build; accepted (default) on 11.x
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_bytes):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ExportError(
            f"the TensorRT ONNX parser rejected the graph: {errors or 'no detail'} "
            "(run `tickformer check ART --target trt-...` for the offline lint)"
        )
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mib << 20)
    if plan.fp16_flag:
        config.set_flag(trt.BuilderFlag.FP16)
    tf32 = getattr(trt.BuilderFlag, "TF32", None)
    if plan.clear_tf32 and tf32 is not None:
        config.clear_flag(tf32)  # TF32 is on by default and rounds fp32 matmul inputs to 10 bits
    if options.version_compatible:
        config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
    config.hardware_compatibility_level = getattr(
        trt.HardwareCompatibilityLevel, HARDWARE_COMPAT[options.hardware_compat]
    )
    cache = config.create_timing_cache(timing_cache)
    if not config.set_timing_cache(cache, False):  # a cache from another device/version: start empty
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, False)
    if any(
        d < 0 for i in range(network.num_inputs) for d in dims_tuple(network.get_input(i).shape)
    ):  # symbolic
        prof = builder.create_optimization_profile()
        for name, shape in profile.items():
            dims = trt.Dims(list(shape))
            prof.set_shape(name, dims, dims, dims)  # min = opt = max
        config.add_optimization_profile(prof)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ExportError("TensorRT failed to build the engine (see the TensorRT log above)")
    return bytes(serialized), bytes(config.get_timing_cache().serialize())


@dataclass(frozen=True)
class EngineRecord:
    graph: str
    file: str
    sha256: str
    bytes: int


def build_engines(
    root: str | os.PathLike[str], options: BuildOptions, *, trust: str | os.PathLike[str] | None = None
) -> list[EngineRecord]:
    """Build every graph of the artifact at `root` into an engine and record it (module docstring).
    trust: a public key the artifact must be signed with. The build rewrites the manifest, so a
    signature is removed (sign the artifact again afterwards).

    Raises BackendUnavailable (one line, names what is missing) without TensorRT, cuda-python
    or a GPU; ArtifactError for a bad artifact; ExportError when TensorRT rejects a graph."""
    art = open_artifact(root, trust=trust)  # verifies every hash before anything is read
    if art.config.block == "ssm" and options.precision != "fp32":
        raise ConfigError(
            f"--precision {options.precision} is not available for ssm artifacts (the fp16 policy covers "
            "attention graphs, docs/ssm.md); build with --precision fp32"
        )
    check_graph_weights(art)
    trt, cudart = require_tensorrt(), require_cudart()
    here = device_info(trt, cudart)
    major = parse_version(here.tensorrt)[0]
    cache_path = Path(options.timing_cache) if options.timing_cache is not None else art.root / TIMING_CACHE
    try:  # an unhashed cache, never trusted: anything but a regular file starts an empty one
        timing = read_path(cache_path, follow_symlinks=False)
    except FileRefused:
        timing = b""
    names = list(options.graphs) if options.graphs is not None else sorted(art.manifest["graphs"])
    records: list[EngineRecord] = []
    entries: dict[str, dict[str, Any]] = {}
    timing_box = [timing]
    try:
        _build_all(art, names, options, major, here, records, entries, timing_box)
    except BaseException:
        listed = set(art.manifest["files"])
        for record in records:  # engine files of this failed build that no manifest lists: remove
            if record.file not in listed:
                try:
                    (art.root / record.file).unlink()
                except OSError:
                    pass
        raise
    atomic_write(cache_path, timing_box[0])
    record_engines(art.root, options.precision, entries)
    return records


def _build_all(
    art: Any,
    names: list[str],
    options: BuildOptions,
    major: int,
    here: DeviceInfo,
    records: list[EngineRecord],
    entries: dict[str, dict[str, Any]],
    timing_box: list[bytes],
) -> None:
    for graph in names:
        spec = art.graph_spec(graph)
        onnx_bytes = verified_graph_bytes(art, graph)  # the bytes verified at open, never re-read by path
        onnx_sha = hashlib.sha256(onnx_bytes).hexdigest()
        plan = precision_plan(major, graph_has_fp16(onnx_bytes), options.precision, options.convert)
        if plan.convert_graph:
            import onnx

            from .fp16 import to_fp16

            onnx_bytes = to_fp16(onnx.load_from_string(onnx_bytes)).SerializeToString()
        profile = static_profile(spec["inputs"], art.max_len)
        engine, timing_box[0] = build_serialized(
            onnx_bytes, plan=plan, options=options, profile=profile, timing_cache=timing_box[0]
        )
        digest = hashlib.sha256(engine).hexdigest()
        name = engine_file_name(graph, options.precision, digest)
        atomic_write(art.root / name, engine)
        records.append(EngineRecord(graph=graph, file=name, sha256=digest, bytes=len(engine)))
        entries[graph] = {
            "file": name,
            "sha256": digest,
            "bytes": len(engine),
            "onnx_file": spec["file"],
            "onnx_sha256": onnx_sha,
            "precision": options.precision,
            "tensorrt": here.tensorrt,
            "gpu": here.gpu,
            "compute_capability": ".".join(map(str, here.compute_capability)),
            "strongly_typed": plan.strongly_typed,
            "builder_fp16_flag": plan.fp16_flag,
            "converted_to_fp16": plan.convert_graph,
            "version_compatible": options.version_compatible,
            "hardware_compat": options.hardware_compat,
            "workspace_mib": options.workspace_mib,
            "profile": {k: list(v) for k, v in profile.items()},
        }


def record_engines(root: Path, precision: str, entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Put engine entries into manifest["engines"][precision] and manifest["files"] (atomic),
    then delete engine files no longer listed. Not real-time."""
    old_files: set[str] = set()

    def mutate(manifest: dict[str, Any]) -> None:
        engines = manifest.setdefault("engines", {}).setdefault(precision, {})
        for graph, entry in entries.items():
            previous = engines.get(graph)
            if previous is not None:
                old_files.add(previous["file"])
                manifest["files"].pop(previous["file"], None)
            engines[graph] = entry
            manifest["files"][entry["file"]] = {"sha256": entry["sha256"], "bytes": entry["bytes"]}

    manifest = update_manifest(root, mutate)
    listed = set(manifest["files"])
    for name in old_files - listed:
        try:
            (root / name).unlink()
        except OSError:
            pass
    return manifest
