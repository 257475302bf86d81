"""The artifact format: the one definition of what an exported artifact contains (docs/artifact_format.md).

Both the writer (`tickformer.export.writer`) and the reader (`tickformer.artifact.reader`) use
this module; so do the graph builders (`tickformer.export.graphs` declares the I/O given here)
and every runtime backend (they bind exactly these names and shapes). Nothing else defines a
graph input name, a cache shape or a file name.

    FORMAT, VERSION          "tickformer-artifact", 3 (2: per-layer step caches, 2-D step x/y;
                             3: windowed artifacts, ring caches of W rows); READS: versions read
    artifact_version         the version an artifact of this config is written with (2 unless windowed)
    cache_kind, cache_rows   "static" (N = max_len rows, row = pos) or "ring" (N = W rows, row = pos mod W)
    MANIFEST, WEIGHTS        manifest.json (sealed, written last), weights.npz
    SIGNATURE                manifest.sig: an Ed25519 signature of the manifest (optional; signing.py)
    GRAPH_FILES              model.onnx (decoder full pass), step.onnx, encoder.onnx
    REQUIRED_GRAPHS          which graphs each architecture has
    UNHASHED_CACHES          files TensorRT builds write inside the artifact, never trusted
    CONTROL_FLOW             which control-flow operators each artifact kind's graphs may hold
    io_names, out_width      graph input / output names and output width
    cache_shape              the logical KV cache [L, B, H, N, dh]
    step_signature           step.onnx's inputs and outputs (names, dtypes, static shapes)
    expected_io              every graph's I/O, as the manifest records it
    step_feeds, step_outputs the host layout <-> step.onnx conversion (tests, export checks)
    SSM_STATE, SSM_STATE_NEW, ssm_state_shape, ssm_step_signature
                             the "ssm" kind (Config.block "ssm", docs/ssm.md): one fixed-size
                             state tensor [B, L, D, N] in and out of step.onnx, no KV cache

Pure functions of the model config (numpy only); no file I/O.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tickformer.model.config import Config

FORMAT = "tickformer-artifact"
VERSION = 3  # 3: windowed artifacts (ring caches of W rows); 2: per-layer step caches, 2-D step x/y
READS = (2, 3)  # versions this reader reads (docs/artifact_format.md, "Versions")
MANIFEST = "manifest.json"
WEIGHTS = "weights.npz"
GRAPH_FILES = {"model": "model.onnx", "step": "step.onnx", "encoder": "encoder.onnx"}
REQUIRED_GRAPHS = {"decoder": ("model", "step"), "encoder-decoder": ("encoder", "step")}
TIMING_CACHE = "trt-timing.cache"  # TensorRT builder timing cache, default location
ORT_TRT_CACHE = "ort-trt-cache"  # ONNX Runtime TensorRT EP engine cache directory
# Written inside the artifact by TensorRT builds, never trusted, never hashed.
UNHASHED_CACHES = frozenset({TIMING_CACHE, ORT_TRT_CACHE})
SIGNATURE = "manifest.sig"  # beside the manifest, not listed in it (it signs the manifest)

# Bounded work per step (artifact/graph_rules.py): the ONNX control-flow operators each artifact
# kind (`artifact_kind`) may use, per graph; everything else is refused at load. Today no graph
# of any kind has any. A kind with a recurrent full-sequence graph adds one line, e.g.
#     "recurrent": {"model": frozenset({"Scan"})},
# and its trip count must then be static (graph_rules.check_graph).
CONTROL_FLOW: dict[str, dict[str, frozenset[str]]] = {
    "decoder": {},
    "encoder-decoder": {},
    # The state-space kind's full-sequence graph is one Scan over the time axis of its input
    # x [B, T, d_in] whose body is the step (export/ssm_graphs.py): the recurrence runs T times,
    # and T is the length of the graph input (a scan input that is a graph input, so
    # graph_rules accepts its trip count); an unrolled recurrence would fix T at export. The
    # step graph stays straight-line.
    "ssm": {"model": frozenset({"Scan"})},
    "windowed": {},
}

IO = dict[str, tuple[str, list[int | str]]]


def _per_layer(stem: str) -> Callable[[int], str]:
    """The name function of one per-layer step graph I/O: layer i's name is "{stem}.{i}"."""

    def name(i: int) -> str:
        return f"{stem}.{i}"

    name.__name__ = name.__qualname__ = stem
    return name


# Step graph I/O names of layer i (the one spelling: graphs, backends, feeds use these).
k_cache = _per_layer("k_cache")
v_cache = _per_layer("v_cache")
k_new = _per_layer("k_new")
v_new = _per_layer("v_new")
cross_k = _per_layer("cross_k")
cross_v = _per_layer("cross_v")


def artifact_version(config: Config) -> int:
    """3 for windowed artifacts (a version-2 reader refuses them at the version, never runs one
    with a full cache), 2 otherwise (unchanged: version-2 readers keep reading them)."""
    return 3 if config.window is not None else 2


def cache_kind(config: Config) -> str:
    """ "static": N = max_len rows, position p in row p, the stream ends at max_len;
    "ring": N = W rows (config.window), position p in row contracts.ring_buffer.ring_slot(p, W),
    the stream is unbounded."""
    return "static" if config.window is None else "ring"


def cache_rows(config: Config) -> int:
    """Rows N of each layer's step cache: max_len (static) or the window W (ring)."""
    return config.max_len if config.window is None else config.window


def artifact_kind(config: Config) -> str:
    """The artifact kind the manifest declares: its config's architecture, "windowed" for a
    decoder with a sliding window (ring caches), or "ssm" for a state-space stack; keys
    CONTROL_FLOW and verify's plans."""
    if config.block == "ssm":
        return "ssm"
    return "windowed" if config.window is not None else config.arch


SSM_STATE = "state"  # step.onnx input of the ssm kind: every layer's state, [B, L, D, N]
SSM_STATE_NEW = "state_new"  # step.onnx output: the state after this position, same shape


def ssm_state_shape(config: Config, batch: int) -> list[int]:
    """[B, L, D, N]: the whole recurrent state of one batch, fixed whatever the stream length."""
    return [batch, config.n_layers, config.d_model, config.d_state]


def ssm_step_signature(config: Config, batch: int) -> dict[str, IO]:
    """step.onnx of the ssm kind: x [B, d_in] (tokens [B]), state [B, L, D, N] -> y [B, d_out]
    (logits [B, V]), state_new [B, L, D, N]. No position input: the step is position-free."""
    in_name, out_name = io_names(config)
    state: list[int | str] = list(ssm_state_shape(config, batch))
    return {
        "inputs": {
            in_name: ("int64", [batch]) if config.inputs == "tokens" else ("float32", [batch, config.d_in]),
            SSM_STATE: ("float32", state),
        },
        "outputs": {
            out_name: ("float32", [batch, out_width(config)]),
            SSM_STATE_NEW: ("float32", list(state)),
        },
    }


def allowed_control_flow(kind: str, graph: str) -> frozenset[str]:
    """Control-flow operators `graph` of an artifact of `kind` may hold (none unless CONTROL_FLOW says)."""
    return CONTROL_FLOW.get(kind, {}).get(graph, frozenset())


def io_names(config: Config) -> tuple[str, str]:
    """(input name, output name) of model.onnx / step.onnx for this config."""
    return ("tokens", "logits") if config.inputs == "tokens" else ("x", "y")


def out_width(config: Config) -> int:
    return config.vocab_size if config.inputs == "tokens" else config.d_out


def cache_shape(config: Config, batch: int, rows: int | None = None) -> list[int]:
    """[L, B, H, N, dh] (rows=None; N = cache_rows: max_len, or W for a ring cache) or
    [L, B, H, rows, dh]."""
    n = cache_rows(config) if rows is None else rows
    return [config.n_layers, batch, config.n_heads, n, config.d_head]


def step_signature(config: Config, batch: int) -> dict[str, IO]:
    """{"inputs"|"outputs": {name: (dtype, shape)}} of step.onnx, in graph order:

    x [B, d_in] (tokens [B]), pos [1], k_cache.i [B, H, dh, N] (K stored transposed),
    v_cache.i [B, H, N, dh] -> y [B, d_out] (logits [B, V]), k_new.i, v_new.i [B, H, 1, dh]
    (+ cross_k.i, cross_v.i [B, H, N, dh], src_valid [B, N] for encoder-decoder). N = cache_rows:
    max_len, or W for a ring cache, where pos is any p >= 0 (the graph reads slots by
    contracts.ring_buffer.slot_read(p, s, W), which depends on p only through p mod W and p >= W:
    the session feeds ring_position(p) < 3W) and the new rows belong in row p mod W.
    The ssm kind's step is `ssm_step_signature`."""
    if config.block == "ssm":
        return ssm_step_signature(config, batch)
    in_name, out_name = io_names(config)
    layer = cache_shape(config, batch)[1:]  # [B, H, N, dh]
    row = cache_shape(config, batch, rows=1)[1:]  # [B, H, 1, dh]
    inputs: IO = {
        in_name: ("int64", [batch]) if config.inputs == "tokens" else ("float32", [batch, config.d_in]),
        "pos": ("int64", [1]),
    }
    outputs: IO = {out_name: ("float32", [batch, out_width(config)])}
    k_layer: list[int | str] = [
        *layer[:2],
        config.d_head,
        cache_rows(config),
    ]  # [B, H, dh, N]: K stored transposed
    for i in range(config.n_layers):
        inputs[k_cache(i)], inputs[v_cache(i)] = ("float32", k_layer), ("float32", list(layer))
        outputs[k_new(i)] = outputs[v_new(i)] = ("float32", list(row))
    if config.arch == "encoder-decoder":
        for i in range(config.n_layers):
            inputs[cross_k(i)] = inputs[cross_v(i)] = ("float32", list(layer))
        inputs["src_valid"] = ("bool", [batch, config.max_len])
    return {"inputs": inputs, "outputs": outputs}


def expected_io(config: Config, batch: int) -> dict[str, dict[str, IO]]:
    """{graph: {"inputs"|"outputs": {name: (dtype, shape)}}} the export writes for this config and
    batch ("T" is the symbolic length of the full-pass graph)."""
    in_name, out_name = io_names(config)
    n, b = config.max_len, batch
    tokens = config.inputs == "tokens"
    cache: list[int | str] = list(cache_shape(config, b, rows=n))  # the encoder's cross K/V: max_len
    out: dict[str, dict[str, IO]] = {}
    if config.arch == "decoder":
        out["model"] = {
            "inputs": {in_name: ("int64", [b, "T"]) if tokens else ("float32", [b, "T", config.d_in])},
            "outputs": {out_name: ("float32", [b, "T", out_width(config)])},
        }
    else:
        out["encoder"] = {
            "inputs": {"src": ("int64", [b, n]), "src_valid": ("bool", [b, n])},
            "outputs": {"cross_k": ("float32", cache), "cross_v": ("float32", cache)},
        }
    out["step"] = step_signature(config, b)
    return out


def step_feeds(
    config: Config,
    x: np.ndarray,
    pos: int,
    k_stack: np.ndarray,
    v_stack: np.ndarray,
    cross: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Feeds for step.onnx from the host layout: x [B, 1, d_in] (tokens [B, 1]), stacked caches
    k_stack, v_stack [L, B, H, N, dh] (layer slices; K transposed to [B, H, dh, N], a copy unless k_stack is
    already a transposed view such as runtime HostCache.k), cross = (cross_k, cross_v,
    src_valid) or None. Not real-time (test and export helper)."""
    in_name = io_names(config)[0]
    feeds = {in_name: x.reshape(x.shape[0], *x.shape[2:]), "pos": np.array([pos], dtype=np.int64)}
    for i in range(config.n_layers):
        feeds[k_cache(i)] = np.ascontiguousarray(k_stack[i].swapaxes(-1, -2))  # [B, H, dh, N]
        feeds[v_cache(i)] = v_stack[i]
        if cross is not None:
            feeds[cross_k(i)], feeds[cross_v(i)] = cross[0][i], cross[1][i]
    if cross is not None:
        feeds["src_valid"] = cross[2]
    return feeds


def step_outputs(config: Config, outs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """step.onnx's outputs (graph order) in the host layout: y [B, 1, out], and the new rows
    stacked k_new, v_new [L, B, H, 1, dh]."""
    y, rows = outs[0], outs[1:]
    return y[:, None], np.stack(rows[0::2]), np.stack(rows[1::2])
