"""Comparator: an ONNX step graph with a *growing* KV cache (past_key_values in, present out).

This is the layout that Hugging Face Optimum's "decoder with past" ONNX exports use and that a
user would get by exporting a torch model with a cache: the step takes the past keys/values of
P positions and returns them concatenated with the new position's, [.., P+1, ..], so each step
costs O(P * d) and copies the whole cache (Concat), and every step allocates new output arrays.
tickformer's step.onnx instead reads a static cache of max_len rows and returns only the new
rows (constant work, no growth; see docs/artifact_format.md).

Built op by op with `onnx.helper` from the same numpy parameter dict (benchmark-side only, not
part of the package); plain opset-17 operators. Decoder-only, continuous inputs.

Graph I/O (B = 1, L layers, H heads, dh = D / H, P symbolic):
    x        float32 [1, 1, d_in]        input at position P
    past_k   float32 [L, 1, H, P, dh]    keys of positions 0..P-1
    past_v   float32 [L, 1, H, P, dh]
    y        float32 [1, 1, d_out]
    present_k, present_v  float32 [L, 1, H, P+1, dh]
Source: Vaswani et al. 2017 (sections 3.1-3.5), the post-LN decoder layer of
tickformer.model.transformer.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tickformer.model import Config
from tickformer.model.layers import positional_encoding

OPSET = 17


class _G:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def const(self, value: np.ndarray, name: str | None = None) -> str:
        self.n += 1
        name = name or f"c{self.n}"
        self.inits.append(
            numpy_helper.from_array(np.require(value, requirements="C"), name=name)
        )  # 0-d stays 0-d
        return name

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        self.n += 1
        out = f"{op_type.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out


def build_growing_step(params: dict[str, np.ndarray], config: Config) -> onnx.ModelProto:
    """The past/present step graph for a decoder-only continuous `config`, checked by onnx.checker."""
    if config.arch != "decoder" or config.inputs != "continuous":
        raise ValueError("the growing-cache comparator covers decoder-only continuous models")
    g = _G()
    d, h, dh, n_layers = config.d_model, config.n_heads, config.d_head, config.n_layers
    w = {name: g.const(value, name) for name, value in params.items()}
    pe = g.const(positional_encoding(config.max_len, d), "pe")  # [N, D]
    heads_shape = g.const(np.array([1, 1, h, dh], dtype=np.int64))
    model_shape = g.const(np.array([1, 1, d], dtype=np.int64))
    scale = g.const(np.array(1.0 / np.sqrt(dh), dtype=np.float32))
    pos = g.op(
        "Slice", g.op("Shape", "past_k"), g.const(np.array([3], np.int64)), g.const(np.array([4], np.int64))
    )  # [1] = P

    def linear(x: str, prefix: str, wname: str, bname: str) -> str:
        return g.op("Add", g.op("MatMul", x, w[f"{prefix}.{wname}"]), w[f"{prefix}.{bname}"])

    def heads(x: str) -> str:
        return g.op("Transpose", g.op("Reshape", x, heads_shape), perm=[0, 2, 1, 3])  # [1,1,D] -> [1,H,1,dh]

    def norm(x: str, prefix: str) -> str:
        return g.op(
            "LayerNormalization", x, w[f"{prefix}.g"], w[f"{prefix}.b"], axis=-1, epsilon=config.ln_eps
        )

    x = linear("x", "in_proj", "w", "b")  # [1, 1, D]
    x = g.op("Add", x, g.op("Gather", pe, pos, axis=0))  # + PE[P] ([1, D] broadcasts)
    present_k, present_v = [], []
    for i in range(n_layers):
        a = f"dec.{i}.self_attn"
        q = g.op("Mul", heads(linear(x, a, "w_q", "b_q")), scale)  # [1, H, 1, dh]
        k = heads(linear(x, a, "w_k", "b_k"))  # [1, H, 1, dh]
        v = heads(linear(x, a, "w_v", "b_v"))
        layer = g.const(np.array(i, dtype=np.int64))
        keys = g.op("Concat", g.op("Gather", "past_k", layer, axis=0), k, axis=2)  # [1, H, P+1, dh]
        values = g.op("Concat", g.op("Gather", "past_v", layer, axis=0), v, axis=2)
        scores = g.op("MatMul", q, g.op("Transpose", keys, perm=[0, 1, 3, 2]))  # [1, H, 1, P+1]
        att = g.op("MatMul", g.op("Softmax", scores, axis=-1), values)  # [1, H, 1, dh]
        att = g.op("Reshape", g.op("Transpose", att, perm=[0, 2, 1, 3]), model_shape)  # [1, 1, D]
        x = norm(g.op("Add", x, linear(att, a, "w_o", "b_o")), f"dec.{i}.ln1")
        f = f"dec.{i}.ffn"
        ff = linear(g.op("Relu", linear(x, f, "w1", "b1")), f, "w2", "b2")
        x = norm(g.op("Add", x, ff), f"dec.{i}.ln2")
        axis0 = g.const(np.array([0], dtype=np.int64))
        present_k.append(g.op("Unsqueeze", keys, axis0))  # [1, 1, H, P+1, dh]
        present_v.append(g.op("Unsqueeze", values, axis0))
    g.nodes.append(helper.make_node("Add", [g.op("MatMul", x, w["out_proj.w"]), w["out_proj.b"]], ["y"]))
    g.nodes.append(helper.make_node("Concat", present_k, ["present_k"], axis=0))
    g.nodes.append(helper.make_node("Concat", present_v, ["present_v"], axis=0))
    cache = [n_layers, 1, h, "P", dh]
    grown = [n_layers, 1, h, "P1", dh]
    graph = helper.make_graph(
        g.nodes,
        "growing_step",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, config.d_in]),
            helper.make_tensor_value_info("past_k", TensorProto.FLOAT, cache),
            helper.make_tensor_value_info("past_v", TensorProto.FLOAT, cache),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, config.d_out]),
            helper.make_tensor_value_info("present_k", TensorProto.FLOAT, grown),
            helper.make_tensor_value_info("present_v", TensorProto.FLOAT, grown),
        ],
        initializer=g.inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="tickformer-benchmarks",
        ir_version=8,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


class GrowingSession:
    """Runs the growing-cache graph the way an Optimum-style user loop does: feed the previous
    step's `present` outputs back as `past`. Not real-time safe: ORT allocates new present
    arrays every step and the work grows with the position."""

    def __init__(self, model: onnx.ModelProto, config: Config, options) -> None:
        import onnxruntime as ort

        self.sess = ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.config = config
        self.names = ["y", "present_k", "present_v"]
        self.reset()

    def reset(self) -> None:
        c = self.config
        empty = np.zeros((c.n_layers, 1, c.n_heads, 0, c.d_head), dtype=np.float32)  # [L, 1, H, 0, dh]
        self.feeds = {"x": None, "past_k": empty, "past_v": empty}
        self.position = 0

    def step(self, x: np.ndarray) -> np.ndarray:
        if self.position >= self.config.max_len:
            raise ValueError(f"position {self.position} is past max_len {self.config.max_len}; reset() first")
        self.feeds["x"] = x
        y, self.feeds["past_k"], self.feeds["past_v"] = self.sess.run(self.names, self.feeds)
        self.position += 1
        return y
