"""Foreign ONNX models built in the tests with onnx.helper (checked by onnx.checker): the shapes
users bring (several inputs, int64 token ids, a padding mask, dynamic batch and time axes, a
KV-cache pair with past/present tensors), each correct one beside a planted bug:

    signal_model(kind)   x [B, T, F] float -> y [B, T, G]
        causal      y = tanh(cumsum_t(x) W)                         correct
        leaky       y = (x - mean_t(x)) W                           sees the future
        nan         y = log(x) W                                    NaN for x < 0, -inf at 0
        pole        y = x / (x - 1/3) W                             inf at x = float32(1/3) only
        baked       Reshape to the constant [1, 8, F] first         dynamic T broken but at 8
    masked_model(leak)   x [B, T, F], attention_mask [B, T] int64 -> y
        leak=False  y = tanh(cumsum_t(x * mask) W)                  padding ignored
        leak=True   y = tanh(cumsum_t(x) W)                         padded inputs leak
    lm_pair(bug)         a one-layer attention LM: full graph (input_ids, attention_mask ->
                         logits, present.0.key/value) and step graph (input_ids [B, 1],
                         attention_mask [B, P+1], past_key_values.0.key/value [B, 1, P, D] ->
                         logits, present.0.key/value), the HF/optimum convention
        bug=None          correct
        "off_by_one"      the step reads the positional table at P + 1 instead of P
        "leak_future"     the full graph has no causal mask
        "step_nan"        the step's logits are NaN at positions P > 3 (sqrt(3 - P) * 0); the
                          full graph is right
    planted_defect(path, kind, place, width, route)   x [B, T, 3] on [-1, 1] -> y, within the
                         bound DEFECT_BOUND everywhere but on the interval |d - place| < width,
                         d = x (route "direct", every feature) or d = x @ [0.6, 0.3, 0.1]
                         (route "mixed": a slab across the features, no constant names the place)
        "pole"            y = B w / (d - place)             (inf at the place itself)
        "cusp"            y = B sqrt(w) / sqrt(|d - place|) (inf at the place itself)
        "threshold"       y = 2 B where |d - place| < w, else 0 (finite everywhere)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, G = 3, 2
V, D, ROWS = 11, 8, 40


def _save(path: Path, nodes, inputs, outputs, inits) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return Path(path)


def _w() -> onnx.TensorProto:
    return numpy_helper.from_array(np.linspace(-1, 1, F * G, dtype=np.float32).reshape(F, G), "w")


def _const(name: str, value, dtype=np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def signal_model(path: Path, kind: str = "causal") -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", F])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", G])
    inits = [_w()]
    if kind == "causal":
        inits.append(_const("axis", 1))
        nodes = [
            helper.make_node("CumSum", ["x", "axis"], ["c"]),
            helper.make_node("MatMul", ["c", "w"], ["h"]),
            helper.make_node("Tanh", ["h"], ["y"]),
        ]
    elif kind == "leaky":
        nodes = [
            helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
            helper.make_node("Sub", ["x", "m"], ["c"]),
            helper.make_node("MatMul", ["c", "w"], ["y"]),
        ]
    elif kind == "nan":
        nodes = [helper.make_node("Log", ["x"], ["l"]), helper.make_node("MatMul", ["l", "w"], ["y"])]
    elif kind == "pole":
        inits.append(numpy_helper.from_array(np.array(1 / 3, np.float32), "third"))
        nodes = [
            helper.make_node("Sub", ["x", "third"], ["d"]),
            helper.make_node("Div", ["x", "d"], ["q"]),
            helper.make_node("MatMul", ["q", "w"], ["y"]),
        ]
    elif kind == "baked":  # what a trace with T = 8 bakes in: the length as a constant shape
        inits += [_const("shape8", [1, 8, F]), _const("axis", 1)]
        nodes = [
            helper.make_node("Reshape", ["x", "shape8"], ["r"]),
            helper.make_node("CumSum", ["r", "axis"], ["c"]),
            helper.make_node("MatMul", ["c", "w"], ["h"]),
            helper.make_node("Tanh", ["h"], ["y"]),
        ]
    else:
        raise ValueError(kind)
    return _save(path, nodes, [x], [y], inits)


def masked_model(path: Path, *, leak: bool = False) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", F])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", G])
    inits = [_w(), _const("axis", 1), _const("last", [2])]
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "last"], ["m3"]),
        helper.make_node("Mul", ["x", "m3"], ["xm"]),
        helper.make_node("CumSum", ["x" if leak else "xm", "axis"], ["c"]),
        helper.make_node("MatMul", ["c", "w"], ["h"]),
        helper.make_node("Tanh", ["h"], ["y"]),
    ]
    return _save(path, nodes, [x, mask], [y], inits)


def _lm_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = {
        "E": rng.normal(0, 1, (V, D)),
        "P": rng.normal(0, 1, (ROWS, D)),
        "Wq": rng.normal(0, D**-0.5, (D, D)),
        "Wk": rng.normal(0, D**-0.5, (D, D)),
        "Wv": rng.normal(0, D**-0.5, (D, D)),
        "Wo": rng.normal(0, D**-0.5, (D, D)),
        "Wout": rng.normal(0, D**-0.5, (D, V)),
    }
    out = {k: v.astype(np.float32) for k, v in w.items()}
    out["scale"] = np.array(D**-0.5, np.float32)
    out["neg"] = np.array(-1e9, np.float32)
    return out


def _inits(w: dict[str, np.ndarray]) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(v, k) for k, v in w.items()] + [
        _const("one", 1),
        _const("zero", 0),
        _const("ax0", [0]),
        _const("ax1", [1]),
        _const("perm_dummy", [0]),
    ]


def _attention_tail(prefix: str, kt_in: str, v_in: str, allowed: str) -> list[onnx.NodeProto]:
    """q [B, Tq, D], K^T [B, D, Tk], V [B, Tk, D], allowed [B|1, Tq, Tk] -> logits [B, Tq, V]."""
    return [
        helper.make_node("MatMul", ["q", kt_in], ["s"]),
        helper.make_node("Mul", ["s", "scale"], ["ss"]),
        helper.make_node("Where", [allowed, "ss", "neg"], ["sm"]),
        helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", v_in], ["a"]),
        helper.make_node("MatMul", ["a", "Wo"], ["o"]),
        helper.make_node("Add", ["h", "o"], ["h2"]),
        helper.make_node("MatMul", ["h2", "Wout"], ["logits"]),
    ]


def lm_pair(folder: Path, bug: str | None = None, seed: int = 0) -> tuple[Path, Path]:
    """(full.onnx, step.onnx) of the module docstring's LM."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    w = _lm_weights(seed)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", V])
    pk = helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, ["batch", 1, "seq", D])
    pv = helper.make_tensor_value_info("present.0.value", TensorProto.FLOAT, ["batch", 1, "seq", D])
    full_nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["emb"]),
        helper.make_node("Shape", ["input_ids"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["T"]),
        helper.make_node("Range", ["zero", "T", "one"], ["rng"]),
        helper.make_node("Gather", ["P", "rng"], ["pe"]),
        helper.make_node("Add", ["emb", "pe"], ["h"]),
        helper.make_node("MatMul", ["h", "Wq"], ["q"]),
        helper.make_node("MatMul", ["h", "Wk"], ["k"]),
        helper.make_node("MatMul", ["h", "Wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("Unsqueeze", ["T", "ax0"], ["T1"]),
        helper.make_node("Concat", ["T1", "T1"], ["TT"], axis=0),
        helper.make_node(
            "ConstantOfShape", ["TT"], ["ones"], value=numpy_helper.from_array(np.array([1], np.int64))
        ),
        helper.make_node("Trilu", ["ones"], ["tril"], upper=0),
        helper.make_node("Cast", ["tril"], ["causal"], to=TensorProto.BOOL),
        helper.make_node("Cast", ["attention_mask"], ["mb"], to=TensorProto.BOOL),
        helper.make_node("Unsqueeze", ["mb", "ax1"], ["pad"]),
        helper.make_node("And", ["causal", "pad"], ["allowed"]),
        *_attention_tail("f", "kt", "v", "pad" if bug == "leak_future" else "allowed"),
        helper.make_node("Unsqueeze", ["k", "ax1"], ["present.0.key"]),
        helper.make_node("Unsqueeze", ["v", "ax1"], ["present.0.value"]),
    ]
    full = _save(folder / "model.onnx", full_nodes, [ids, mask], [logits, pk, pv], _inits(w))

    s_ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", 1])
    s_mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"])
    past_k = helper.make_tensor_value_info(
        "past_key_values.0.key", TensorProto.FLOAT, ["batch", 1, "past", D]
    )
    past_v = helper.make_tensor_value_info(
        "past_key_values.0.value", TensorProto.FLOAT, ["batch", 1, "past", D]
    )
    s_logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1, V])
    s_pk = helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, ["batch", 1, "total", D])
    s_pv = helper.make_tensor_value_info("present.0.value", TensorProto.FLOAT, ["batch", 1, "total", D])
    step_inits = _inits(w) + [_const("two", 2)]
    step_nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["emb"]),
        helper.make_node("Shape", ["past_key_values.0.key"], ["pshape"]),
        helper.make_node("Gather", ["pshape", "two"], ["plen"]),
        *(
            [helper.make_node("Add", ["plen", "one"], ["pos"])]
            if bug == "off_by_one"
            else [helper.make_node("Identity", ["plen"], ["pos"])]
        ),
        helper.make_node("Unsqueeze", ["pos", "ax0"], ["pos1"]),
        helper.make_node("Gather", ["P", "pos1"], ["pe"]),
        helper.make_node("Add", ["emb", "pe"], ["h"]),
        helper.make_node("MatMul", ["h", "Wq"], ["q"]),
        helper.make_node("MatMul", ["h", "Wk"], ["k"]),
        helper.make_node("MatMul", ["h", "Wv"], ["v"]),
        helper.make_node("Squeeze", ["past_key_values.0.key", "ax1"], ["pk"]),
        helper.make_node("Squeeze", ["past_key_values.0.value", "ax1"], ["pv"]),
        helper.make_node("Concat", ["pk", "k"], ["K"], axis=1),
        helper.make_node("Concat", ["pv", "v"], ["Vv"], axis=1),
        helper.make_node("Transpose", ["K"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("Cast", ["attention_mask"], ["mb"], to=TensorProto.BOOL),
        helper.make_node("Unsqueeze", ["mb", "ax1"], ["pad"]),
        *_attention_tail("s", "kt", "Vv", "pad"),
        helper.make_node("Unsqueeze", ["K", "ax1"], ["present.0.key"]),
        helper.make_node("Unsqueeze", ["Vv", "ax1"], ["present.0.value"]),
    ]
    if bug == "step_nan":
        step_nodes[-3].output[0] = "logits_raw"  # the tail's last MatMul
        step_inits += [
            numpy_helper.from_array(np.array(3.0, np.float32), "three_f"),
            numpy_helper.from_array(np.array(0.0, np.float32), "zero_f"),
        ]
        step_nodes[-2:-2] = [
            helper.make_node("Cast", ["pos"], ["pos_f"], to=TensorProto.FLOAT),
            helper.make_node("Sub", ["three_f", "pos_f"], ["room"]),
            helper.make_node("Sqrt", ["room"], ["root"]),  # NaN once P > 3
            helper.make_node("Mul", ["root", "zero_f"], ["nan_late"]),
            helper.make_node("Add", ["logits_raw", "nan_late"], ["logits"]),
        ]
    step = _save(
        folder / "step.onnx", step_nodes, [s_ids, s_mask, past_k, past_v], [s_logits, s_pk, s_pv], step_inits
    )
    return full, step


DEFECT_BOUND = 10.0
DEFECT_KINDS = ("pole", "cusp", "threshold")
DEFECT_ROUTES = ("direct", "mixed")
# The family's grid (tests/verify/test_planted_defects.py, claims/verify_defects.py): where the
# defect sits, how narrow it is, and the properties neither run needs.
DEFECT_PLACES = (0.5, float(np.float32(1 / 3)), 0.123456, -0.7071, 0.9)
DEFECT_WIDTHS = (1e-2, 1e-3, 1e-4, 1e-6)
DEFECT_SKIP = (
    "dynamic_axes",
    "runs_in_domain",
    "finite_outputs",
    "causality",
    "optimizations_agree",
    "onnx_reference",
)


def planted_defect(path: Path, kind: str, place: float, width: float, route: str = "direct") -> Path:
    """The planted defect of the module docstring: |y| > DEFECT_BOUND exactly where |d - place| < width."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", F])
    out_dims = ["B", "T", F] if route == "direct" else ["B", "T", 1]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)
    b = DEFECT_BOUND
    inits = [numpy_helper.from_array(np.array(place, np.float32), "place")]
    nodes = []
    if route == "mixed":
        inits.append(numpy_helper.from_array(np.array([[0.6], [0.3], [0.1]], np.float32), "mix"))
        nodes.append(helper.make_node("MatMul", ["x", "mix"], ["d_in"]))
    else:
        nodes.append(helper.make_node("Identity", ["x"], ["d_in"]))
    nodes.append(helper.make_node("Sub", ["d_in", "place"], ["d"]))
    if kind == "pole":
        inits.append(numpy_helper.from_array(np.array(b * width, np.float32), "k"))
        nodes.append(helper.make_node("Div", ["k", "d"], ["y"]))
    elif kind == "cusp":
        inits.append(numpy_helper.from_array(np.array(b * np.sqrt(width), np.float32), "k"))
        nodes += [
            helper.make_node("Abs", ["d"], ["a"]),
            helper.make_node("Sqrt", ["a"], ["r"]),
            helper.make_node("Div", ["k", "r"], ["y"]),
        ]
    elif kind == "threshold":
        inits += [
            numpy_helper.from_array(np.array(width, np.float32), "w"),
            numpy_helper.from_array(np.array(2 * b, np.float32), "high"),
            numpy_helper.from_array(np.array(0.0, np.float32), "low"),
        ]
        nodes += [
            helper.make_node("Abs", ["d"], ["a"]),
            helper.make_node("Less", ["a", "w"], ["inside"]),
            helper.make_node("Where", ["inside", "high", "low"], ["y"]),
        ]
    else:
        raise ValueError(kind)
    return _save(path, nodes, [x], [y], inits)
