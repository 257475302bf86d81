"""The onnxruntime form: Triton keeps each stream's state itself (implicit state management).

Triton's sequence batcher with `state` entries gives the model, for every request of a batch,
that sequence's state tensors (zeros at START: `initial_state` zero_data) stacked along a batch
dimension, and keeps what the model returns as the next state. Rows of one batch belong to
different streams at different positions, while the artifact's step.onnx takes ONE position for
all its rows. So the served graph is built here from the artifact's batch-1 step graph (the
verified bytes; nothing re-derived from weights): an ONNX Scan over the rows of the dynamic batch
whose body is that step graph, each row at its own position --

    model.onnx   x [B, d_in] (tokens [B]), INPUT_STATE_<name> [B, ...]
                 -> y [B, d_out] (logits [B, V]), full [B, 1] bool, OUTPUT_STATE_<name> [B, ...]
    states       attention: k_cache.i [H, dh, N], v_cache.i [H, N, dh] (the step graph's cache
                 layouts) and pos [1] int64 -- the graph position: p (static), the ring
                 position in [0, 3W) advanced by contracts.ring_buffer.next_ring_position's rule
                 (windowed); ssm: state [L, D, N]
    body         the step graph on the row's x, pos and caches; the new K/V rows written into row
                 pos (static) or pos mod W (ring) by selection (Where over a one-hot row mask);
                 a static stream at max_len is `full`: its state stays, the client restarts it.

The batch dimension Triton needs is the Scan's: the state tensors of the config carry no batch
dimension (max_batch_size > 0 adds it), and the graph's leading dimension is symbolic. One stream
per request (x [1, d_in]); the tick-batched group is the python form's.

`run_like_triton` feeds the graph the way the sequence batcher does (per-stream state, zeros at
START, several streams batched at their own positions) with onnxruntime in-process: the tests
check it against runtime Sessions. Not real-time (graph building).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tickformer.artifact import format as fmt
from tickformer.artifact.reader import Artifact, verified_graph_bytes
from tickformer.contracts.ring_buffer import next_ring_position
from tickformer.errors import ConfigError

from .pbtxt import Enum, render

IN, OUT = "INPUT_STATE_", "OUTPUT_STATE_"
S = "step__"  # the prefix of the step graph's own tensor names inside the body
P = "serve__"  # the prefix of every tensor the wrapper adds (none of the step graph's names has it)
FULL = "full"


def state_specs(artifact: Artifact) -> list[tuple[str, str, list[int]]]:
    """[(state name, dtype, dims without the batch)] of the artifact's stream state."""
    cfg = artifact.config
    if cfg.block == "ssm":
        return [(fmt.SSM_STATE, "float32", fmt.ssm_state_shape(cfg, 1)[1:])]
    sig = fmt.step_signature(cfg, 1)["inputs"]
    out = []
    for i in range(cfg.n_layers):
        for name in (fmt.k_cache(i), fmt.v_cache(i)):
            out.append((name, "float32", [int(d) for d in sig[name][1][1:]]))
    return out + [("pos", "int64", [1])]


def _tname(name: str) -> str:
    return name.replace(".", "_")


def _rename_inside(graph: Any) -> None:
    """Prefix every tensor name of the step graph but its weights with S: inside the Scan body its
    names must not repeat the outer graph's (x, y, the states)."""
    weights = {t.name for t in graph.initializer}
    for node in graph.node:
        node.input[:] = [n if n in weights or not n else S + n for n in node.input]
        node.output[:] = [S + n for n in node.output]


def build_model(artifact: Artifact) -> Any:
    """The onnx ModelProto of the module docstring, from the artifact's verified step graph."""
    import onnx
    from onnx import TensorProto, helper

    cfg = artifact.config
    if artifact.batch != 1:
        raise ConfigError(
            f"{artifact.root}: batch {artifact.batch}; the onnxruntime form scans the batch-1 step graph over "
            "Triton's batch: export with --batch 1"
        )
    step = onnx.load_from_string(verified_graph_bytes(artifact, "step"))
    _rename_inside(step.graph)
    in_name, out_name = fmt.io_names(cfg)
    tokens = cfg.inputs == "tokens"
    states = state_specs(artifact)
    nodes: list[Any] = []

    def const(name: str, value: Any, dtype: Any = np.int64) -> str:
        nodes.append(
            helper.make_node(
                "Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(value, dtype))
            )
        )
        return name

    zero = const(P + "axis0", [0])
    body_inputs = [
        helper.make_tensor_value_info(
            P + "row_x", TensorProto.INT64 if tokens else TensorProto.FLOAT, [] if tokens else [cfg.d_in]
        )
    ]
    nodes.append(helper.make_node("Unsqueeze", [P + "row_x", zero], [S + in_name]))
    outputs_body: list[tuple[str, int]] = []
    if cfg.block == "ssm":
        body_inputs.append(helper.make_tensor_value_info(P + "row_state", TensorProto.FLOAT, states[0][2]))
        nodes.append(helper.make_node("Unsqueeze", [P + "row_state", zero], [S + fmt.SSM_STATE]))
        nodes.extend(step.graph.node)
        nodes.append(helper.make_node("Squeeze", [S + out_name, zero], [P + "row_y"]))
        nodes.append(helper.make_node("Squeeze", [S + fmt.SSM_STATE_NEW, zero], [P + "row_state_out"]))
        nodes.append(
            helper.make_node(
                "Constant",
                [],
                [P + "row_full"],
                value=helper.make_tensor("f", TensorProto.BOOL, [1], [False]),
            )
        )
        outputs_body = [
            (P + "row_y", TensorProto.FLOAT),
            (P + "row_full", TensorProto.BOOL),
            (P + "row_state_out", TensorProto.FLOAT),
        ]
    else:
        n_rows = fmt.cache_rows(cfg)
        body_inputs.append(helper.make_tensor_value_info(P + "row_pos", TensorProto.INT64, [1]))
        for name, _, dims in states[:-1]:
            body_inputs.append(
                helper.make_tensor_value_info(P + f"row_{_tname(name)}", TensorProto.FLOAT, dims)
            )
            nodes.append(helper.make_node("Unsqueeze", [P + f"row_{_tname(name)}", zero], [S + name]))
        if cfg.window is None:  # static: full at max_len -- step at max_len - 1, keep the state
            last = const(P + "last_pos", [cfg.max_len - 1])
            nodes.append(
                helper.make_node(
                    "GreaterOrEqual", [P + "row_pos", const(P + "max_len", [cfg.max_len])], [P + "row_full"]
                )
            )
            nodes.append(helper.make_node("Min", [P + "row_pos", last], [S + "pos"]))
            nodes.append(helper.make_node("Add", [P + "row_pos", const(P + "one", [1])], [P + "pos_plus"]))
            nodes.append(
                helper.make_node(
                    "Where", [P + "row_full", P + "row_pos", P + "pos_plus"], [P + "row_pos_out"]
                )
            )
            nodes.append(helper.make_node("Identity", [S + "pos"], [P + "slot"]))
        else:  # ring: r -> r + 1 below 3W, else W (next_ring_position); the row is r mod W
            w = cfg.window
            assert next_ring_position(3 * w - 1, w) == w and next_ring_position(0, w) == 1  # the rule below
            nodes.append(
                helper.make_node(
                    "Constant",
                    [],
                    [P + "row_full"],
                    value=helper.make_tensor("f", TensorProto.BOOL, [1], [False]),
                )
            )
            nodes.append(helper.make_node("Identity", [P + "row_pos"], [S + "pos"]))
            nodes.append(helper.make_node("Add", [P + "row_pos", const(P + "one", [1])], [P + "pos_plus"]))
            nodes.append(
                helper.make_node("Less", [P + "pos_plus", const(P + "three_w", [3 * w])], [P + "in_ring"])
            )
            nodes.append(
                helper.make_node(
                    "Where", [P + "in_ring", P + "pos_plus", const(P + "w", [w])], [P + "row_pos_out"]
                )
            )
            nodes.append(helper.make_node("Mod", [P + "row_pos", const(P + "w_mod", [w])], [P + "slot"]))
        nodes.extend(step.graph.node)
        nodes.append(
            helper.make_node(
                "Range", [const(P + "r0", 0), const(P + "rn", n_rows), const(P + "r1", 1)], [P + "rows"]
            )
        )
        nodes.append(helper.make_node("Equal", [P + "rows", P + "slot"], [P + "is_row"]))  # [N]
        nodes.append(helper.make_node("Not", [P + "row_full"], [P + "writes"]))
        nodes.append(
            helper.make_node("And", [P + "is_row", P + "writes"], [P + "hot"])
        )  # [N]: the row written, none if full
        nodes.append(
            helper.make_node("Reshape", [P + "hot", const(P + "col", [n_rows, 1])], [P + "hot_col"])
        )  # [N, 1]
        nodes.append(helper.make_node("Squeeze", [S + out_name, zero], [P + "row_y"]))
        outputs_body = [(P + "row_y", TensorProto.FLOAT), (P + "row_full", TensorProto.BOOL)]
        for i in range(cfg.n_layers):
            k, v = _tname(fmt.k_cache(i)), _tname(fmt.v_cache(i))
            nodes.append(helper.make_node("Squeeze", [S + fmt.k_new(i), zero], [P + f"kn{i}"]))  # [H, 1, dh]
            nodes.append(
                helper.make_node("Transpose", [P + f"kn{i}"], [P + f"knt{i}"], perm=[0, 2, 1])
            )  # [H, dh, 1]
            nodes.append(
                helper.make_node("Where", [P + "hot", P + f"knt{i}", P + f"row_{k}"], [P + f"out_{k}"])
            )  # [H, dh, N]
            nodes.append(helper.make_node("Squeeze", [S + fmt.v_new(i), zero], [P + f"vn{i}"]))  # [H, 1, dh]
            nodes.append(
                helper.make_node("Where", [P + "hot_col", P + f"vn{i}", P + f"row_{v}"], [P + f"out_{v}"])
            )  # [H, N, dh]
            outputs_body += [(P + f"out_{k}", TensorProto.FLOAT), (P + f"out_{v}", TensorProto.FLOAT)]
        outputs_body.append((P + "row_pos_out", TensorProto.INT64))
    body = helper.make_graph(
        nodes, "row", body_inputs, [helper.make_tensor_value_info(n, t, None) for n, t in outputs_body]
    )
    # the outer graph: a Scan over the batch of x and every state
    dtype = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64}
    x = helper.make_tensor_value_info(
        in_name, TensorProto.INT64 if tokens else TensorProto.FLOAT, ["B"] if tokens else ["B", cfg.d_in]
    )
    ins = [x] + [helper.make_tensor_value_info(IN + _tname(n), dtype[t], ["B", *d]) for n, t, d in states]
    outs = [
        helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["B", fmt.out_width(cfg)]),
        helper.make_tensor_value_info(FULL, TensorProto.BOOL, ["B", 1]),
    ] + [helper.make_tensor_value_info(OUT + _tname(n), dtype[t], ["B", *d]) for n, t, d in states]
    if cfg.block != "ssm":  # body inputs: x, pos, caches; the outer order: x, caches, pos
        scan_in = [in_name, IN + "pos"] + [IN + _tname(n) for n, _, _ in states[:-1]]
        scan_out = [out_name, FULL] + [OUT + _tname(n) for n, _, _ in states[:-1]] + [OUT + "pos"]
    else:
        scan_in = [in_name, IN + _tname(fmt.SSM_STATE)]
        scan_out = [out_name, FULL, OUT + _tname(fmt.SSM_STATE)]
    scan = helper.make_node("Scan", scan_in, scan_out, body=body, num_scan_inputs=len(scan_in))
    graph = helper.make_graph(
        [scan], "tickformer_streams", ins, outs, initializer=list(step.graph.initializer)
    )
    model = helper.make_model(graph, opset_imports=list(step.opset_import), ir_version=step.ir_version)
    onnx.checker.check_model(model)
    return model


def config(artifact: Artifact, serve: Any) -> dict[str, Any]:
    """config.pbtxt of the onnxruntime form, as pbtxt.render takes it."""
    cfg = artifact.config
    in_name, out_name = fmt.io_names(cfg)
    tokens = cfg.inputs == "tokens"
    types = {"float32": "TYPE_FP32", "int64": "TYPE_INT64"}
    states = []
    for name, dtype, dims in state_specs(artifact):
        t = Enum(types[dtype])
        states.append(
            {
                "input_name": IN + _tname(name),
                "output_name": OUT + _tname(name),
                "data_type": t,
                "dims": dims,
                "initial_state": [{"data_type": t, "dims": dims, "zero_data": True, "name": "zeros"}],
            }
        )
    return {
        "name": serve.name,
        "backend": "onnxruntime",
        "max_batch_size": serve.slots,
        "input": [
            {
                "name": in_name,
                "data_type": Enum("TYPE_INT64" if tokens else "TYPE_FP32"),
                "dims": [1] if tokens else [cfg.d_in],
                **({"reshape": {"shape": []}} if tokens else {}),  # the request's [B, 1] is the graph's [B]
            }
        ],
        "output": [
            {"name": out_name, "data_type": Enum("TYPE_FP32"), "dims": [fmt.out_width(cfg)]},
            {"name": FULL, "data_type": Enum("TYPE_BOOL"), "dims": [1]},
        ],
        "sequence_batching": {
            "max_sequence_idle_microseconds": round(serve.idle_s * 1e6),
            "oldest": {
                "max_candidate_sequences": serve.max_candidate_sequences,
                "max_queue_delay_microseconds": serve.max_queue_delay_us,
            },
            "state": states,
        },
    }


def onnxruntime_files(artifact: Artifact, serve: Any) -> dict[str, bytes]:
    """{path relative to REPO/NAME: bytes} of the onnxruntime form."""
    model = build_model(artifact)
    return {
        "config.pbtxt": (render(config(artifact, serve)) + "\n").encode(),
        "1/model.onnx": model.SerializeToString(),
    }


class TritonLike:
    """Feeds model.onnx the way Triton's sequence batcher with implicit state does, in-process
    (onnxruntime): per-stream state, zeros at START, the streams of one call batched each at
    its own position. `step({stream id: x row}, start=ids) -> {id: (y row, full)}`."""

    def __init__(self, model: Any, artifact: Artifact) -> None:
        import onnxruntime as ort

        self.session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        self.specs = state_specs(artifact)
        self.in_name, self.out_name = fmt.io_names(artifact.config)
        self.states: dict[int, dict[str, np.ndarray]] = {}

    def step(
        self, rows: dict[int, np.ndarray], start: set[int] = frozenset()
    ) -> dict[int, tuple[np.ndarray, bool]]:
        ids = list(rows)
        for sid in ids:
            if sid in start or sid not in self.states:
                self.states[sid] = {n: np.zeros(d, np.dtype(t)) for n, t, d in self.specs}
        feeds = {self.in_name: np.stack([rows[s] for s in ids])}
        for name, _, _ in self.specs:
            feeds[IN + _tname(name)] = np.stack([self.states[s][name] for s in ids])
        names = [self.out_name, FULL] + [OUT + _tname(n) for n, _, _ in self.specs]
        y, full, *new = self.session.run(names, feeds)
        for j, sid in enumerate(ids):
            self.states[sid] = {n: s[j] for (n, _, _), s in zip(self.specs, new)}
        return {sid: (y[j], bool(full[j, 0])) for j, sid in enumerate(ids)}
