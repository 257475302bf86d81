"""Symbolic binary32 values that run numpy code: `F32` wraps a z3 FPRef (FPSort Float32) and
implements +, -, *, / as z3 fpAdd/fpSub/fpMul/fpDiv with round to nearest even, the comparisons
as fpLT/fpEQ/... (`Cond`), numpy's ufuncs np.exp / np.maximum / np.isnan / np.isfinite through
`__array_ufunc__`, np.where / np.zeros_like / np.ones_like through `__array_function__` (np.where
becomes a z3 If, zeros_like +0, ones_like 1), and `x[..., None]` as the value itself (a row with
one value column). Every Python `if` on a symbolic condition forks the current `Run` (its
decisions and path condition): ieee754.check enumerates the paths.

exp is not a z3 primitive: each application is a fresh binary32 per argument term, constrained by
`exp_axioms` (E1-E5 of ieee754's docstring: stated properties of the libm expf, instantiated at
every application and every pair of applications).

Not real-time code.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np
import z3

SORT = z3.Float32()
RNE = z3.RNE()
EXP_NORMAL_FROM = -87.33  # ln(2^-126) = -87.336...: e^x is a normal binary32 above it


def val(x: float) -> z3.FPRef:
    """x rounded to binary32, as a z3 constant."""
    return z3.FPVal(float(np.float32(x)), SORT)


class Run:
    """One execution of a function on symbolic values: the branch decisions taken (and whether
    the other side was feasible), the path condition, and every exp application."""

    def __init__(self, prefix: list[tuple[bool, bool]], pre: z3.BoolRef) -> None:
        self.prefix = list(prefix)  # (decision, other side still to explore)
        self.pre = pre
        self.taken: list[bool] = []
        self.open: list[bool] = []  # the other outcome is feasible: a path to explore later
        self.path: list[z3.BoolRef] = []
        self.exps: dict[int, tuple[z3.FPRef, z3.FPRef]] = {}
        self.fresh = 0

    def _feasible(self, cond: z3.BoolRef) -> bool:
        solver = z3.Solver()
        solver.set("timeout", 500)
        solver.add(self.pre, *self.path, cond)
        return solver.check() != z3.unsat  # unknown: explore it (sound: one more path)

    def implied(self, cond: z3.BoolRef) -> bool:
        """The precondition and the path so far imply cond (unknown: False, sound)."""
        solver = z3.Solver()
        solver.set("timeout", 500)
        solver.add(self.pre, *self.path, z3.Not(cond))
        return solver.check() == z3.unsat

    def decide(self, cond: z3.BoolRef) -> bool:
        i = len(self.taken)
        cond = z3.simplify(cond)
        if i < len(self.prefix):
            d, other = self.prefix[i]
        elif z3.is_true(cond) or z3.is_false(cond):
            d, other = z3.is_true(cond), False
        else:
            yes, no = self._feasible(cond), self._feasible(z3.Not(cond))
            d, other = (True, no) if yes else (False, False)  # the taken branch first
        self.taken.append(d)
        self.open.append(other)
        self.path.append(cond if d else z3.Not(cond))
        return d

    def name(self, what: str) -> str:
        self.fresh += 1
        return f"{what}_{self.fresh}"


_RUN: list[Run] = []


@contextlib.contextmanager
def executing(run: Run) -> Iterator[Run]:
    """Symbolic values decide their branches in `run` while the block executes."""
    _RUN.append(run)
    try:
        yield run
    finally:
        _RUN.pop()


def _run() -> Run:
    if not _RUN:
        raise RuntimeError("symbolic binary32 values are only usable inside binary32.executing(run)")
    return _RUN[-1]


def lift(x: Any) -> z3.FPRef:
    """The z3 term of an F32, a z3 FPRef or a Python / numpy number (a bool is refused)."""
    if isinstance(x, F32):
        return x.t
    if isinstance(x, z3.FPRef):
        return x
    if isinstance(x, (bool, np.bool_)):
        raise TypeError("a boolean used as a float")
    if isinstance(x, (int, float, np.floating, np.integer)):
        return val(float(x))
    raise TypeError(f"cannot use {type(x).__name__} as a binary32 value")


class Cond:
    """A symbolic boolean: `bool(c)` forks the run (both outcomes are explored)."""

    def __init__(self, b: z3.BoolRef) -> None:
        self.b = b

    def __bool__(self) -> bool:
        return _run().decide(self.b)

    def __and__(self, other: Any) -> Cond:
        return Cond(z3.And(self.b, other.b if isinstance(other, Cond) else z3.BoolVal(bool(other))))

    def __or__(self, other: Any) -> Cond:
        return Cond(z3.Or(self.b, other.b if isinstance(other, Cond) else z3.BoolVal(bool(other))))

    def __invert__(self) -> Cond:
        return Cond(z3.Not(self.b))

    def __getitem__(self, key: Any) -> Cond:
        _row_index(key)
        return self

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _array_function(func, args, kwargs)


def _row_index(key: Any) -> None:
    """The one indexing the operator applies to a row's scalars: x[..., None] (a [1] column)."""
    if key != (Ellipsis, None):
        raise TypeError(f"symbolic binary32 row: index {key!r} is not [..., None]")


def _array_function(func: Any, args: Any, kwargs: Any) -> Any:
    """np.where (a z3 If on the selected operands), np.zeros_like (+0), np.ones_like (1)."""
    if kwargs:
        return NotImplemented
    if func is np.where and len(args) == 3:
        cond, a, b = args
        c = cond.b if isinstance(cond, Cond) else z3.BoolVal(bool(cond))
        return F32(z3.simplify(z3.If(c, lift(a), lift(b))))
    if func is np.zeros_like and len(args) == 1:
        return F32(z3.fpPlusZero(SORT))
    if func is np.ones_like and len(args) == 1:
        return F32(val(1.0))
    return NotImplemented


def _ordered(a: z3.FPRef, b: z3.FPRef) -> tuple[z3.FPRef, z3.FPRef]:
    """The operands of a commutative operation in a canonical order (z3's hash-consed term ids).
    Sound: IEEE 754 (and SMT-LIB's FP theory) define a + b and a * b as the rounding of the exact
    result, which is commutative -- signed zeros and NaN included. It lets z3 see that two
    computations are the same term instead of proving multiplier circuits equal by SAT."""
    return (a, b) if a.get_id() <= b.get_id() else (b, a)


def _add(a: z3.FPRef, b: z3.FPRef) -> z3.FPRef:
    return z3.simplify(z3.fpAdd(RNE, *_ordered(a, b)))


def _mul(a: z3.FPRef, b: z3.FPRef) -> z3.FPRef:
    return z3.simplify(z3.fpMul(RNE, *_ordered(a, b)))


def _sub(a: z3.FPRef, b: z3.FPRef) -> z3.FPRef:
    return z3.simplify(z3.fpSub(RNE, a, b))


def _div(a: z3.FPRef, b: z3.FPRef) -> z3.FPRef:
    return z3.simplify(z3.fpDiv(RNE, a, b))


def _operators(
    op: Callable[[z3.FPRef, z3.FPRef], z3.FPRef],
) -> tuple[Callable[[F32, Any], F32], Callable[[F32, Any], F32]]:
    """The forward and reflected methods of F32 for the binary operation `op` (x op o, o op x),
    the other operand lifted to binary32 (as fractions.Fraction builds its operators)."""

    def forward(self: F32, o: Any) -> F32:
        return F32(op(self.t, lift(o)))

    def reflected(self: F32, o: Any) -> F32:
        return F32(op(lift(o), self.t))

    return forward, reflected


class F32:
    """A symbolic binary32 value (z3 FPRef); IEEE operations with round to nearest even."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, t: z3.FPRef) -> None:
        self.t = t

    __add__, __radd__ = _operators(_add)
    __sub__, __rsub__ = _operators(_sub)
    __mul__, __rmul__ = _operators(_mul)
    __truediv__, __rtruediv__ = _operators(_div)

    def __neg__(self) -> F32:
        return F32(z3.fpNeg(self.t))

    def __abs__(self) -> F32:
        return F32(z3.fpAbs(self.t))

    def __lt__(self, o: Any) -> Cond:
        return Cond(z3.fpLT(self.t, lift(o)))

    def __le__(self, o: Any) -> Cond:
        return Cond(z3.fpLEQ(self.t, lift(o)))

    def __gt__(self, o: Any) -> Cond:
        return Cond(z3.fpGT(self.t, lift(o)))

    def __ge__(self, o: Any) -> Cond:
        return Cond(z3.fpGEQ(self.t, lift(o)))

    def __eq__(self, o: Any) -> Cond:  # type: ignore[override]
        return Cond(z3.fpEQ(self.t, lift(o)))

    def __ne__(self, o: Any) -> Cond:  # type: ignore[override]
        return Cond(z3.Not(z3.fpEQ(self.t, lift(o))))

    def __getitem__(self, key: Any) -> F32:
        _row_index(key)
        return self

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _array_function(func, args, kwargs)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            return NotImplemented
        args = [lift(x) for x in inputs]
        if ufunc is np.exp:
            return F32(_exp(args[0]))
        if ufunc is np.maximum:
            return F32(_maximum(*args))
        if ufunc is np.isnan:
            return Cond(z3.fpIsNaN(args[0]))
        if ufunc is np.isfinite:
            return Cond(z3.Not(z3.Or(z3.fpIsNaN(args[0]), z3.fpIsInf(args[0]))))
        return NotImplemented


def _maximum(a: z3.FPRef, b: z3.FPRef) -> z3.FPRef:
    """np.maximum: NaN propagates; otherwise the larger; on a tie of identical values either (the
    same value: the canonical term is returned); on +0 vs -0 the platform's choice (x86 maxps
    returns the second operand, other targets differ), modelled as either: both are explored."""
    run = _run()
    if run.decide(z3.fpIsNaN(a)):
        return a
    if run.decide(z3.fpIsNaN(b)):
        return b
    if run.decide(z3.fpGT(a, b)):
        return a
    if run.decide(z3.fpLT(a, b)):
        return b
    if run.decide(a == b):  # identical bits
        return _ordered(a, b)[0]
    return a if run.decide(z3.Bool(run.name("max_zero_tie_takes_first"))) else b


def _exp(x: z3.FPRef) -> z3.FPRef:
    """expf(x): a fresh binary32 per argument term, constrained by E1-E5; a constant argument
    +-0 or -inf gives its exact value (E2) directly."""
    x = z3.simplify(x)
    if z3.is_fp_value(x):
        if x.isZero():
            return val(1.0)
        if x.isInf() and x.isNegative():
            return z3.fpPlusZero(SORT)
    run = _run()
    if run.implied(z3.fpIsZero(x)):  # E2 where the path fixes the argument to +-0 (a tie of maxima)
        return val(1.0)
    if x.get_id() not in run.exps:  # one value per argument term (E1's 'equal inputs')
        run.exps[x.get_id()] = (x, z3.FP(run.name("expf"), SORT))
    return run.exps[x.get_id()][1]


def exp_axioms(exps: list[tuple[z3.FPRef, z3.FPRef]]) -> list[z3.BoolRef]:
    """E1-E5 (module docstring) at every application and every pair of applications."""
    zero, one = val(0.0), val(1.0)
    rtn = z3.RTN()
    shrink = val(1.0 - 2.0**-21)  # exact in binary32
    ninf = z3.fpMinusInfinity(SORT)
    out: list[z3.BoolRef] = []
    for x, e in exps:
        nan = z3.fpIsNaN(x)
        out += [
            z3.Implies(nan, z3.fpIsNaN(e)),
            z3.Implies(z3.fpEQ(x, zero), e == one),
            z3.Implies(x == ninf, e == z3.fpPlusZero(SORT)),
            z3.Implies(
                z3.fpLEQ(x, zero),
                z3.And(z3.Not(z3.fpIsNaN(e)), z3.Not(z3.fpIsNegative(e)), z3.fpLEQ(e, one)),
            ),
            z3.Implies(z3.fpGT(x, zero), z3.fpGEQ(e, one)),
            z3.Implies(z3.fpGEQ(x, val(89.0)), e == z3.fpPlusInfinity(SORT)),
            z3.Implies(z3.And(z3.fpGEQ(x, val(EXP_NORMAL_FROM)), z3.fpLEQ(x, zero)), z3.fpGT(e, zero)),
            z3.Implies(
                z3.And(z3.fpGEQ(x, val(-1.0)), z3.fpLEQ(x, zero)),
                z3.fpGEQ(e, z3.fpMul(rtn, z3.fpAdd(rtn, one, x), shrink)),
            ),
        ]
    for i, (x, e) in enumerate(exps):
        for y, f in exps[i + 1 :]:
            out += [
                z3.Implies(z3.fpLEQ(x, y), z3.fpLEQ(e, f)),
                z3.Implies(z3.fpLEQ(y, x), z3.fpLEQ(f, e)),
                z3.Implies(z3.fpEQ(x, y), e == f),  # +0 and -0 alike (E2); identical terms by congruence
            ]
    return out
