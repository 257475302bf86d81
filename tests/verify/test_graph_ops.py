"""The operator rules of the graph prover (verify/proofs/graphs/ops/), one rule per module, each
with its edge cases as named cases (after onnx's reference evaluator): a fully masked row, an
exact -inf masked out, a zero weight meeting an unknown factor. The whole prover runs on exported
graphs in test_prove_graphs.py; these pin each rule on a tiny abstract value."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.verify.proofs.graphs import ops
from tickformer.verify.proofs.graphs.ops import op_arith, op_matmul, op_softmax, op_where
from tickformer.verify.proofs.graphs.ops.base import Call
from tickformer.verify.proofs.graphs.values import Sym, Unsupported, lift

W = 1  # one 64-bit word of atoms


def atoms(shape: tuple[int, ...], bits: list[int]) -> Sym:
    """An abstract tensor whose element i depends on atom bits[i] (row-major), no known value."""
    hard = np.array([np.uint64(1) << np.uint64(b) for b in bits], dtype=np.uint64).reshape(shape + (W,))
    return Sym(
        shape, hard, np.zeros((1,) * len(shape) + (W,), np.uint64), np.full(shape, np.nan), np.dtype("f4")
    )


def bits_of(a: Sym) -> np.ndarray:
    return np.broadcast_to(a.hard, a.shape + (W,))[..., 0]


# The operators the prover analyses (before the split: one if-chain in graphs.py). A rule removed
# or an op_type renamed shows here before an exported graph stops being provable.
SUPPORTED = {
    "Abs", "Add", "And", "Cast", "Clip", "Concat", "ConstantOfShape", "Cos", "Div", "Equal", "Erf", "Exp",
    "Expand", "Flatten", "Gather", "Gelu", "Gemm", "Greater", "GreaterOrEqual", "Identity", "IsInf", "IsNaN",
    "LayerNormalization", "Less", "LessOrEqual", "Log", "MatMul", "Max", "Mean", "Min", "Mod", "Mul", "Neg",
    "Not", "Or", "PRelu", "Pow", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "Relu",
    "Reshape", "Sigmoid", "Sin", "Slice", "Softmax", "Softplus", "Split", "Sqrt", "Squeeze", "Sub", "Sum",
    "Tanh", "Transpose", "Unsqueeze", "Where", "Xor",
}  # fmt: skip


def test_the_registry_maps_every_supported_operator_to_its_rule():
    assert set(ops.HANDLERS) == SUPPORTED
    for module in ops.RULES:
        assert module.__name__.rsplit(".", 1)[1].startswith("op_")
        assert all(ops.HANDLERS[op] is module.apply for op in module.OPS)


def test_two_rules_for_one_operator_are_refused():
    with pytest.raises(ValueError, match="Softmax has two rules"):
        ops._registry((op_softmax, op_softmax))


def test_softmax_fully_masked_row_is_nan_not_zero():
    """A row that is -inf throughout (every key masked) has no known 0: 0/0 is NaN."""
    scores = lift(np.array([[-np.inf, -np.inf], [-np.inf, 0.5]], np.float32), W)
    out = op_softmax.softmax(scores, -1)
    const = np.broadcast_to(out.const, out.shape)
    assert np.isnan(const[0]).all()  # fully masked
    assert const[1, 0] == 0.0 and np.isnan(const[1, 1])  # the masked entry exactly 0


def test_where_selects_atoms_and_an_exact_minus_inf():
    s = atoms((1, 3), [0, 1, 2])
    ninf = lift(np.array(-np.inf, np.float32), W)
    out = op_where.where(np.array([[True, False, True]]), s, ninf)
    assert list(bits_of(out)[0]) == [1, 0, 4]  # row 1 selected out: no atom reaches it
    assert np.broadcast_to(out.const, out.shape)[0, 1] == -np.inf


def test_where_with_a_data_dependent_condition_keeps_both_sides():
    s, t = atoms((2,), [0, 1]), atoms((2,), [2, 3])
    cond = Sym(
        (2,), np.zeros((1, W), np.uint64), np.zeros((1, W), np.uint64), np.full(2, np.nan), np.dtype(bool)
    )
    assert list(bits_of(op_where.where(cond, s, t))) == [1 | 4, 2 | 8]


def test_mul_by_an_exact_zero_passes_the_other_factor_softly():
    """0 * x is 0 only for finite x: x reaches the result through its finiteness (soft)."""
    x = atoms((2,), [0, 1])
    out = op_arith.arith("Mul", x, lift(np.array([0.0, 2.0], np.float32), W))
    assert list(bits_of(out)) == [0, 2]  # element 0: no longer by value
    assert int(np.broadcast_to(out.soft, (2, W))[0, 0]) == 1  # ... but softly
    assert np.broadcast_to(out.const, (2,))[0] == 0.0


def test_zero_times_inf_is_an_exact_nan_not_zero():
    out = op_arith.arith("Mul", lift(np.array(0.0, np.float32), W), lift(np.array(np.inf, np.float32), W))
    assert np.isnan(out.const).all()


def test_inf_plus_unknown_stays_inf():
    out = op_arith.arith("Add", atoms((1,), [0]), lift(np.array(-np.inf, np.float32), W))
    assert np.broadcast_to(out.const, (1,))[0] == -np.inf


def test_matmul_records_the_zero_weight_site():
    p = lift(np.array([[1.0, 0.0]], np.float32), W)  # weights [1, T]: the second key masked to 0
    v = atoms((2, 1), [0, 1])  # V rows
    sites: dict[str, np.ndarray] = {}
    out = op_matmul.matmul(p, v, sites, "MatMul_1 (MatMul)")
    assert int(bits_of(out)[0, 0]) == 1  # row 0 by value
    assert int(np.broadcast_to(out.soft, (1, 1, W))[0, 0, 0]) == 2  # row 1 through the zero weight
    assert int(sites["MatMul_1 (MatMul)"][0]) == 2


def test_a_data_dependent_shape_is_unsupported():
    call = Call("Reshape", {}, "r (Reshape)", 1, W, {})
    with pytest.raises(Unsupported, match="target shape is computed from data"):
        ops.HANDLERS["Reshape"](call, [atoms((2,), [0, 1]), atoms((1,), [2])])
