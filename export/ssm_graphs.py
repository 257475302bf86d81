"""The graphs of the "ssm" artifact kind (Config.block "ssm"): a position-free `step` over one
fixed-size state tensor, and the full-sequence `model` as one ONNX `Scan` whose body is that step.

I/O (`tickformer.artifact.format`: ssm_step_signature, expected_io; B batch, L layers, D d_model,
N d_state):

    step     x [B, d_in] (tokens [B]), state [B, L, D, N] -> y [B, d_out] (logits [B, V]),
             state_new [B, L, D, N]
    model    x [B, T, d_in] (tokens [B, T]) -> y [B, T, d_out]; T symbolic, any length

The step computes what model/ssm.py's `ssm_step` computes inside the post-LN stack of
model/transformer.py (no positional encoding): per layer, the coefficients from the three
projections (Gemm), Delta = Softplus(z), lam = Exp(-Delta a) with a = exp(a_log) folded at
export, 1 - lam as 2 tanh(s/2) / (1 + tanh(s/2)) (no Expm1 in ONNX; the same identity as the
numpy model), h = lam h_prev + (1 - lam) x B, y = sum_n C h + d_skip x, then W_o, the residual,
LayerNorm, the FFN and its LayerNorm. Same work at every position; no position input, no cache,
no max_len: the state is the only memory.

The full graph is `Scan(state0 = 0, x; body = the step)` over axis 1 of x (num_scan_inputs 1,
scan_input_axes = scan_output_axes = [1]): T iterations for an input of length T, so it runs
sequences of any length without being re-exported. An unrolled recurrence would fix T in the
file, and a parallel (log-depth) scan in ONNX would need a Loop with a data-dependent trip
count and T-sized intermediates per level; Scan is one standard operator, supported by
onnxruntime and TensorRT 10.x (onnx-tensorrt operators.md), and allowed for this kind only, in
this graph only (format.CONTROL_FLOW). The body's weights are initializers of the main graph
(outer scope), so export/consistency.py compares them like every other graph's.

The export-time equivalence of this kind is export/equivalence.py's `check` (its block kind a
parameter): numpy parallel form (`forward`) vs onnxruntime on the full graph at lengths
{1, 2, N/2, N}, and numpy vs onnx.reference vs onnxruntime on N steps of the step graph feeding
its own state back (`ssm_step_through`). onnx.reference's Scan
implements scan axis 0 only (onnx 1.x op_scan.py), and x is scanned along axis 1 so that the
scan input stays the graph input itself (artifact/graph_rules.py); the body is built by the same
function as the step graph, which onnx.reference does check.

Not real-time code: runs once, at export.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from tickformer.artifact import format as fmt
from tickformer.artifact.format import io_names, out_width
from tickformer.model import names
from tickformer.model.config import Config

from . import blocks as b
from .blocks import Params
from .bounds import sum_tolerance
from .builder import GraphBuilder


def _gemm(g: GraphBuilder, params: Params, x: str, w: str, bias: str) -> str:
    return g.op("Gemm", x, b.param(g, params, w), b.param(g, params, bias))  # [B, n_in] -> [B, n_out]


def _mixer(
    g: GraphBuilder, params: Params, config: Config, h: str, h_prev: str, mixer: names.Group
) -> tuple[str, str]:
    """One SSM mixer step: h [B, D], h_prev [B, D, N] -> (out [B, D] before the residual, h_new [B, D, N])."""
    z = _gemm(g, params, h, mixer["w_delta"], mixer["b_delta"])  # [B, D]
    delta = g.op("Softplus", z)  # [B, D] > 0
    a = np.exp(params[mixer["a_log"]].astype(np.float32))  # [D, N] as the numpy model computes it
    s = g.op("Mul", g.op("Unsqueeze", delta, g.ints([2])), g.const(a, mixer.derived("a")))  # [B, D, N]
    lam = g.op("Exp", g.op("Neg", s))  # [B, D, N] in [0, 1]
    t = g.op("Tanh", g.op("Mul", s, g.scalar(0.5)))  # [B, D, N]
    keep = g.op("Div", g.op("Add", t, t), g.op("Add", t, g.scalar(1.0)))  # [B, D, N] 1 - lam
    bt = _gemm(g, params, h, mixer["w_b"], mixer["b_b"])  # [B, N]
    ct = _gemm(g, params, h, mixer["w_c"], mixer["b_c"])  # [B, N]
    u = g.op("Mul", g.op("Unsqueeze", h, g.ints([2])), g.op("Unsqueeze", bt, g.ints([1])))  # [B, D, N]
    h_new = g.op("Add", g.op("Mul", lam, h_prev), g.op("Mul", keep, u))  # [B, D, N]
    read = g.reduce("ReduceSum", g.op("Mul", h_new, g.op("Unsqueeze", ct, g.ints([1]))), [2], keepdims=False)
    y = g.op("Add", read, g.op("Mul", h, b.param(g, params, mixer["d_skip"])))  # [B, D]
    return _gemm(g, params, y, mixer["w_o"], mixer["b_o"]), h_new  # [B, D], [B, D, N]


def _step_body(
    g: GraphBuilder, params: Params, config: Config, batch: int, x: str, state: str
) -> tuple[str, str]:
    """The step's nodes on builder g: x [B, d_in] (tokens [B]), state [B, L, D, N] -> (y, state_new)."""
    if config.inputs == "tokens":
        e = g.op("Gather", b.param(g, params, names.TOK_EMBED), x, axis=0)  # [B] -> [B, D]
        h = g.op("Mul", e, g.scalar(np.sqrt(config.d_model)))
    else:
        h = _gemm(g, params, x, names.IN_PROJ["w"], names.IN_PROJ["b"])  # [B, d_in] -> [B, D]
    layers = names.ssm_layers(config)
    per_layer = g.split(state, [1] * len(layers), axis=1) if len(layers) > 1 else [state]  # [B, 1, D, N] each
    new_states = []
    for (mixer, mixer_norm, ffn, ffn_norm), layer_state in zip(layers, per_layer):
        h_prev = g.op("Squeeze", layer_state, g.ints([1]))  # [B, D, N]
        out, h_new = _mixer(g, params, config, h, h_prev, mixer)
        h = b.layer_norm(g, params, g.op("Add", h, out), mixer_norm, config.ln_eps)  # [B, D]
        hidden = g.op("Relu", _gemm(g, params, h, ffn["w1"], ffn["b1"]))  # [B, F]
        h = b.layer_norm(
            g, params, g.op("Add", h, _gemm(g, params, hidden, ffn["w2"], ffn["b2"])), ffn_norm, config.ln_eps
        )  # [B, D]
        new_states.append(g.op("Unsqueeze", h_new, g.ints([1])))  # [B, 1, D, N]
    if config.inputs == "tokens":
        y = g.op("Gemm", h, b.param(g, params, names.TOK_EMBED), transB=1)  # [B, V] (tied)
    else:
        y = _gemm(g, params, h, names.OUT_PROJ["w"], names.OUT_PROJ["b"])  # [B, d_out]
    state_new = new_states[0] if len(new_states) == 1 else g.op("Concat", *new_states, axis=1)  # [B, L, D, N]
    return y, state_new


def build_ssm_step(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """One position over the fixed state; every shape static."""
    g = GraphBuilder("tickformer_ssm_step", opset)
    sig = fmt.ssm_step_signature(config, batch)
    for name, (dtype, shape) in sig["inputs"].items():
        g.input(name, dtype, shape)
    in_name, out_name = io_names(config)
    y, state_new = _step_body(g, params, config, batch, in_name, fmt.SSM_STATE)
    g.output(y, out_name, *sig["outputs"][out_name])
    g.output(state_new, fmt.SSM_STATE_NEW, *sig["outputs"][fmt.SSM_STATE_NEW])
    return g.model()


class _BodyBuilder(GraphBuilder):
    """Builds the Scan body: its own node names (prefix "scan_"), constants kept for the outer graph."""

    def _fresh(self, stem: str) -> str:
        return "scan_" + super()._fresh(stem)


def build_ssm_model(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """The full sequence: Scan over axis 1 of x with the step as its body, from the zero state."""
    g = GraphBuilder("tickformer_ssm_model", opset)
    in_name, out_name = io_names(config)
    tokens = config.inputs == "tokens"
    x = (
        g.input(in_name, "int64", [batch, "T"])
        if tokens
        else g.input(in_name, "float32", [batch, "T", config.d_in])
    )
    body = _BodyBuilder("tickformer_ssm_body", opset)
    state_shape = fmt.ssm_state_shape(config, batch)
    state_in = body.input("state_in", "float32", state_shape)
    x_t = (
        body.input("x_t", "int64", [batch]) if tokens else body.input("x_t", "float32", [batch, config.d_in])
    )
    y_t, state_new = _step_body(body, params, config, batch, x_t, state_in)
    body.output(state_new, "state_out", "float32", state_shape)
    body.output(y_t, "y_t", "float32", [batch, out_width(config)])
    for name, tensor in body.initializers.items():  # outer scope: one copy, compared at load
        g.initializers.setdefault(name, tensor)
    graph = helper.make_graph(body.nodes, body.name, body.inputs, body.outputs)
    state0 = g.const(np.zeros(state_shape, dtype=np.float32), "ssm_state0")  # [B, L, D, N]
    final, y = f"{out_name}_state_final", f"{out_name}_scan"
    g.nodes.append(
        helper.make_node(
            "Scan",
            [state0, x],
            [final, y],
            name="ssm_scan",
            body=graph,
            num_scan_inputs=1,
            scan_input_axes=[1],
            scan_output_axes=[1],
        )
    )
    g.output(y, out_name, "float32", [batch, "T", out_width(config)])
    return g.model()


def build_ssm_graphs(params: Params, config: Config, batch: int, opset: int) -> dict[str, onnx.ModelProto]:
    """Every graph of an ssm artifact, by name: model (Scan), step."""
    if config.block != "ssm":
        raise ValueError("build_ssm_graphs is for Config.block 'ssm'")
    return {
        "model": build_ssm_model(params, config, batch, opset),
        "step": build_ssm_step(params, config, batch, opset),
    }


# ---------------------------------------------------------------------------------------------
# Export-time checks of this kind
# ---------------------------------------------------------------------------------------------


def ssm_tolerance(config: Config) -> dict[str, object]:
    """The stated agreement tolerance between backends for an ssm artifact (export/bounds.py's
    argument with one more term): per dot product of length n the error is ~ sqrt(n) u, and the
    state h_t = sum_k (prod lam) (1 - lam_k) u_k is a convex-weighted sum over the T <= N steps,
    i.e. one more sum of length N; LayerNorm after each of the S sublayers keeps errors additive.
    tol = max(1e-5, 8 S sqrt(n) u) with n = max(d_model, d_ff, d_state, N)."""
    n = max(config.d_model, config.d_ff, config.d_state, config.max_len)
    sublayers = 2 * config.n_layers + 2
    tol = sum_tolerance(n, sublayers)
    reason = (
        f"float32 (u = 2^-24), the parallel scan (numpy) against the recurrence (ONNX Scan and step), same math in "
        f"different orders: per sum of length n = {n} (dot products, and the state's convex-weighted sum over the "
        f"steps) ~ sqrt(n) u; LayerNorm after each of the S = {sublayers} sublayers keeps errors additive; "
        f"tol = max(1e-5, 8 S sqrt(n) u), checked as |a - b| <= atol + rtol |b| elementwise at every position "
        f"1..{config.max_len}"
    )
    return {"atol": tol, "rtol": tol, "reason": reason}


def ssm_step_through(run: Any, config: Config, x: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
    """Run an ssm step graph over every position of x ([B, T] tokens or [B, T, d_in]), feeding
    state_new back; returns [B, T, out]. `run` maps feeds to outputs (equivalence.runners)."""
    batch = x.shape[0]
    in_name = io_names(config)[0]
    h = np.zeros(fmt.ssm_state_shape(config, batch), np.float32) if state is None else state
    ys = []
    for t in range(x.shape[1]):
        y, h = run({in_name: x[:, t], fmt.SSM_STATE: h})
        ys.append(y)
    return np.stack(ys, axis=1)  # [B, T, out]
