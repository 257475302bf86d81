"""IEEE-754 proofs of the online-softmax merge, finalize and safe max on binary32, round to
nearest even, with z3's floating-point theory (`tickformer prove --ieee754`; no reals anywhere).

What is proven is the code the numpy backend runs: `model.attention.merge`, `finalize` and
`_safe_max` themselves, imported and *executed* on symbolic binary32 values (`F32`), one query row
with one value column. Nothing is copied: +, -, *, / become z3 fpAdd/fpSub/fpMul/fpDiv with RNE,
the comparisons fpLT/fpEQ/..., numpy's ufuncs (np.exp, np.maximum) dispatch to this module through
`__array_ufunc__`, np.where / np.zeros_like / np.ones_like through `__array_function__` (np.where
becomes a z3 If, zeros_like +0, ones_like 1), `x[..., None]` is the value itself (a row with one
value column: broadcasting a scalar against a [1] vector is the identity), and every Python `if`
on a symbolic condition forks the run (all paths are enumerated; a claim is proven when z3 finds
no input on any path that breaks it: unsat).

From the row to the arrays (the step that is evident, not proven by the solver): merge and
finalize are elementwise numpy over rows -- m, l [..., Tq] and acc [..., Tq, dv], each output
element computed by the same IEEE operations from the same row's m, l and its own acc column --
so a claim proven for every binary32 row and every value column holds for every element of the
float32 arrays the numpy backend passes (tests/verify/test_ieee754.py also runs the operator on
float32 arrays at the solver's counterexamples and at the edges, bit for bit against the
symbolic run evaluated concretely). Which backends this covers: the numpy operator
(numpy backend, training forward); ONNX Runtime and TensorRT run the exported graph's one
Softmax node (their claims are the graph proofs of `tickformer prove ART`, graph-level only);
the generated C has its own merge (codegen/kernels.py), not covered here.

exp is not a z3 primitive. It is an uninterpreted function constrained by stated properties of
the libm exp (binary32 `expf`, numpy's loops), instantiated at every pair of applications on a
path (ground instances of the axioms: sound, since the real expf satisfies every instance):
    E1  monotone: x <= y  ->  exp(x) <= exp(y)     (and equal inputs give equal results);
    E2  exp(+-0) = 1 exactly;  exp(-inf) = +0;  exp(NaN) is NaN;
    E3  x <= 0  ->  +0 <= exp(x) <= 1 (never NaN, never -0);  x > 0 -> exp(x) >= 1 (maybe +inf),
        x >= 89 -> exp(x) = +inf (e^89 > 4e38 > FLT_MAX: overflow);
    E4  error bound (EXP_ULP = 4 ULP, contracts.softmax_stability): for x in [-87.33, 0],
        e^x >= FLT_MIN = 2^-126 (a normal number), and a result within 4 ULP of it is > 0;
    E5  convexity with the same error bound: for x in [-1, 0], exp(x) >= (1 + x)(1 - 2^-21),
        computed rounding down (e^x >= 1 + x for every real x; 4 ULP of a value in [1/e, 1] is
        at most a relative 2^-21), so a counterexample cannot pick exp(-1e-6) = 1e-34.
Nothing else about exp is assumed (not its value anywhere but 0 and -inf).

Claims (each with a wrong twin the solver must refute, its counterexample in the report):
    max exact       merge's m is bit for bit one of ma, mb, and >= both;
    safe max        for m finite or -inf, safe_max(m) is finite, and is m or (m = -inf) +0;
    no NaN          for states that are finite or empty (m = -inf, l = 0, acc = 0), with
                    1 <= l <= 2^20 (at most 2^20 keys) and |acc| <= 2^84 (|v| <= 2^64): the merged
                    m, l, acc and finalize(acc, l) are never NaN;
    normalizer >= 1 under the same preconditions: l >= 1 iff a key is selected (la > 0 or lb > 0),
                    and l = +0 exactly otherwise;
    empty row is 0  two empty states merge to the empty state (m = -inf, l = acc = +0 bit for bit)
                    and finalize of l = 0 is +0 whatever acc holds (not NaN, not -0);
    commutative     merge(a, b) and merge(b, a): l and acc bit for bit, m as numbers (fp equality;
                    bitwise except ma, mb zeros of opposite sign: np.maximum's tie rule is the
                    platform's, so it is modelled as either input), finalize bit for bit.
The symbolic binary32 values that run the code: binary32.py; the float-drift twin of
deadline.release_time, refuted on binary64: drift.py.
Not real-time code. Solver time per claim in the report (a few seconds in all on CI).
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import z3

from . import wrong_twins as twins
from .binary32 import F32, SORT, Run, executing, exp_axioms, lift, val

# the module (the name tickformer.model.attention is also the package's `attention` function)
A = importlib.import_module("tickformer.model.attention")

MAX_L = 2.0**20  # at most 2^20 keys: l = sum of at most 2^20 factors in [0, 1]
MAX_ACC = 2.0**84  # |acc| <= l |v|max with |v| <= 2^64


# --- claims -----------------------------------------------------------------------------------


def _var(name: str) -> F32:
    return F32(z3.FP(name, SORT))


def _t(x: Any) -> z3.FPRef:
    return lift(x)


def _is(x: Any, v: float) -> z3.BoolRef:
    """x is bit for bit the binary32 v (SMT equality: +0 and -0 differ, NaN is one value)."""
    return _t(x) == val(v)


def _not_nan(*xs: Any) -> z3.BoolRef:
    return z3.And(*[z3.Not(z3.fpIsNaN(_t(x))) for x in xs])


def finite_or_ninf(m: F32) -> z3.BoolRef:
    return z3.Or(z3.fpIsNormal(m.t), z3.fpIsSubnormal(m.t), z3.fpIsZero(m.t), m.t == z3.fpMinusInfinity(SORT))


def valid_state(m: F32, l: F32, acc: F32, *, max_l: float = MAX_L, max_acc: float = MAX_ACC) -> z3.BoolRef:
    """A reachable state: empty (m = -inf, l = +0, acc = +0), or finite m with 1 <= l <= 2^20 and
    |acc| <= 2^84 (contracts S6; at most 2^20 keys of |v| <= 2^64)."""
    empty = z3.And(m.t == z3.fpMinusInfinity(SORT), _is(l, 0.0), _is(acc, 0.0))
    finite_m = z3.Not(z3.Or(z3.fpIsNaN(m.t), z3.fpIsInf(m.t)))
    full = z3.And(
        finite_m,
        z3.fpGEQ(l.t, val(1.0)),
        z3.fpLEQ(l.t, val(max_l)),
        z3.fpLEQ(z3.fpAbs(acc.t), val(max_acc)),
    )
    return z3.Or(empty, full)


@dataclass(frozen=True)
class Claim:
    """pre(vars) -> post(vars, outputs of fn(*vars)) for every binary32 input; `twin` replaces the
    runtime's function (a callable with the same signature) and must be refuted."""

    name: str
    statement: str
    function: str  # the runtime's function the claim is about
    variables: tuple[str, ...]
    pre: Callable[..., z3.BoolRef]
    body: Callable[..., Any]  # (impl, *vars) -> outputs; impl is the function or its twin
    post: Callable[..., z3.BoolRef]  # (*vars, outputs) -> condition
    impl: Callable[..., Any]
    twin: Callable[..., Any]


def _state(m: Any, l: Any, acc: Any) -> A.SoftmaxState:
    return A.SoftmaxState(m, l, acc)


def _merge_once(impl, ma, la, aa, mb, lb, ab):
    """impl is model.attention.merge (or its twin): (SoftmaxState, SoftmaxState) -> SoftmaxState."""
    return tuple(impl(_state(ma, la, aa), _state(mb, lb, ab)))


def _pre_states(ma, la, aa, mb, lb, ab):
    return z3.And(valid_state(ma, la, aa), valid_state(mb, lb, ab))


def _post_max(ma, la, aa, mb, lb, ab, out):
    m = _t(out[0])
    return z3.And(z3.Or(m == ma.t, m == mb.t), z3.fpGEQ(m, ma.t), z3.fpGEQ(m, mb.t))


def _post_no_nan(ma, la, aa, mb, lb, ab, out):
    """Merged m, l, acc not NaN, and the merged state again a valid one (bounds doubled: 2^21
    keys), so that finalize (next claim) and further merges apply to it."""
    m, l, acc = (F32(_t(x)) for x in out)
    return z3.And(_not_nan(m, l, acc), valid_state(m, l, acc, max_l=2 * MAX_L, max_acc=2 * MAX_ACC))


def _pre_final(acc, l):
    return z3.Or(
        z3.And(_is(l, 0.0), _is(acc, 0.0)),
        z3.And(
            z3.fpGEQ(l.t, val(1.0)),
            z3.fpLEQ(l.t, val(2 * MAX_L)),
            z3.fpLEQ(z3.fpAbs(acc.t), val(2 * MAX_ACC)),
        ),
    )


def _body_final(impl, acc, l):
    """impl is model.attention.finalize (or its twin); finalize reads only l and acc."""
    return (impl(_state(None, l, acc)),)


def _post_final(acc, l, out):
    return _not_nan(out[0])


def _post_normalizer(ma, la, aa, mb, lb, ab, out):
    l = _t(out[1])
    selected = z3.Or(z3.fpGT(la.t, val(0.0)), z3.fpGT(lb.t, val(0.0)))
    return z3.And(z3.Implies(selected, z3.fpGEQ(l, val(1.0))), z3.Implies(z3.Not(selected), _is(l, 0.0)))


def _pre_empty(ma, la, aa, mb, lb, ab, acc):
    ninf = z3.fpMinusInfinity(SORT)
    return z3.And(
        ma.t == ninf, mb.t == ninf, _is(la, 0.0), _is(lb, 0.0), _is(aa, 0.0), _is(ab, 0.0), _not_nan(acc)
    )


def _body_empty(impl_final, ma, la, aa, mb, lb, ab, acc):
    m, l, a = A.merge(_state(ma, la, aa), _state(mb, lb, ab))
    return m, l, a, impl_final(_state(m, l, a)), impl_final(_state(None, _val_f32(0.0), acc))


def _val_f32(v: float) -> F32:
    return F32(val(v))


def _post_empty(ma, la, aa, mb, lb, ab, acc, out):
    m, l, a, y, y_any = out
    return z3.And(_t(m) == z3.fpMinusInfinity(SORT), _is(l, 0.0), _is(a, 0.0), _is(y, 0.0), _is(y_any, 0.0))


def _body_commute(impl, ma, la, aa, mb, lb, ab):
    m1, l1, a1 = impl(_state(ma, la, aa), _state(mb, lb, ab))
    m2, l2, a2 = impl(_state(mb, lb, ab), _state(ma, la, aa))
    f1 = A.finalize(_state(m1, l1, a1))
    f2 = A.finalize(_state(m2, l2, a2))
    return m1, l1, a1, f1, m2, l2, a2, f2


def _post_commute(ma, la, aa, mb, lb, ab, out):
    m1, l1, a1, y1, m2, l2, a2, y2 = (_t(x) for x in out)
    return [z3.fpEQ(m1, m2), l1 == l2, a1 == a2, y1 == y2]


def _post_commute_m_bits(ma, la, aa, mb, lb, ab, out):
    return _t(out[0]) == _t(out[4])


def _pre_safe(m):
    return finite_or_ninf(m)


def _body_safe(impl, m):
    return (impl(m),)


def _post_safe(m, out):
    r = _t(out[0])
    finite = z3.Not(z3.Or(z3.fpIsNaN(r), z3.fpIsInf(r)))
    return z3.And(finite, z3.Or(r == m.t, z3.And(m.t == z3.fpMinusInfinity(SORT), _is(r, 0.0))))


_STATE = ("ma", "la", "aa", "mb", "lb", "ab")

MERGE, FINALIZE, SAFE_MAX = "model.attention.merge", "model.attention.finalize", "model.attention._safe_max"

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "max exact",
        "merge's m is bit for bit ma or mb, and >= both",
        MERGE,
        _STATE,
        _pre_states,
        _merge_once,
        _post_max,
        A.merge,
        twins.merge_arith_max,
    ),
    Claim(
        "safe max",
        "_safe_max(m) for m finite or -inf: finite; m itself, or +0 for m = -inf",
        SAFE_MAX,
        ("m",),
        _pre_safe,
        _body_safe,
        _post_safe,
        A._safe_max,
        twins.safe_max_identity,
    ),
    Claim(
        "no NaN (merge)",
        "valid states (finite or empty): merged m, l, acc never NaN, and the result a valid state",
        MERGE,
        _STATE,
        _pre_states,
        _merge_once,
        _post_no_nan,
        A.merge,
        twins.merge_unguarded,
    ),
    Claim(
        "no NaN (finalize)",
        "finalize of a valid merged state (l = acc = +0, or 1 <= l <= 2^21, |acc| <= 2^85) never NaN",
        FINALIZE,
        ("acc", "l"),
        _pre_final,
        _body_final,
        _post_final,
        A.finalize,
        twins.finalize_nonstrict,
    ),
    Claim(
        "normalizer >= 1",
        "valid states: merged l >= 1 iff a key is selected, else exactly +0",
        MERGE,
        _STATE,
        _pre_states,
        _merge_once,
        _post_normalizer,
        A.merge,
        twins.merge_margin,
    ),
    Claim(
        "empty row is 0",
        "two empty states merge to the empty state; finalize of l = 0 is +0 for any non-NaN acc",
        f"{FINALIZE} (+ merge)",
        _STATE + ("acc",),
        _pre_empty,
        _body_empty,
        _post_empty,
        A.finalize,
        twins.finalize_unguarded,
    ),
    Claim(
        "commutative",
        "merge(a, b) vs merge(b, a): l, acc and finalize bit for bit, m as numbers",
        f"{MERGE} + finalize",
        _STATE,
        _pre_states,
        _body_commute,
        _post_commute,
        A.merge,
        twins.merge_rescale_b_only,
    ),
)

# A fact the solver must *refute*: m is not bitwise commutative when both maxima are zeros of
# opposite sign (np.maximum's tie rule); harmless, since `commutative` proves l, acc and the
# finalized output bit for bit. Reported with its counterexample.
M_BITS = Claim(
    "m bitwise commutative",
    "merge(a, b).m and merge(b, a).m bit for bit (expected to fail only at m = +-0)",
    MERGE,
    _STATE,
    _pre_states,
    _body_commute,
    _post_commute_m_bits,
    A.merge,
    A.merge,
)


@dataclass
class Verdict:
    status: str  # "proven" | "counterexample" | "unknown"
    paths: int
    seconds: float
    counterexample: str = ""


@dataclass
class ClaimResult:
    claim: Claim
    spec: Verdict
    twin: Verdict
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.spec.status == "proven" and self.twin.status == "counterexample"


def _fmt(model: z3.ModelRef, term: z3.FPRef) -> str:
    """A binary32 value of the model, as Python prints it (-0.0, inf, nan, 1.5e-45)."""
    v = model.eval(term, model_completion=True)
    if z3.is_fp_value(v) and v.isNaN():
        return "nan"
    bits = model.eval(z3.fpToIEEEBV(term), model_completion=True)
    if not z3.is_bv_value(bits):
        return str(v)
    x = float(np.array(bits.as_long(), dtype=np.uint32).view(np.float32))
    return repr(x)


def check(
    claim: Claim,
    impl: Callable[..., Any],
    *,
    timeout_ms: int = 60_000,
    max_paths: int = 256,
    refute: bool = False,
) -> Verdict:
    """Explore every path of claim.body(impl, *vars) and ask z3 for an input with pre, the path
    condition and not post. Proven: unsat on every path. refute (a twin): a path z3 cannot
    decide is passed over, the search goes on for a counterexample on another path."""
    start = time.monotonic()
    variables = [_var(n) for n in claim.variables]
    prefix: list[tuple[bool, bool]] = []
    paths = 0
    status = "proven"
    example = ""
    pre = claim.pre(*variables)
    while True:
        run = Run(prefix, pre)
        with executing(run):
            out = claim.body(impl, *variables)
            post = claim.post(*variables, out)
        paths += 1
        exps = list(run.exps.values())
        parts = post if isinstance(post, list) else [post]
        res = z3.unsat
        for part in parts:  # one query per conjunct: smaller circuits (a division only where used)
            solver = z3.Solver()
            solver.set("timeout", timeout_ms)
            solver.add(pre, *run.path, *exp_axioms(exps), z3.Not(part))
            res = solver.check()
            if res != z3.unsat:
                break
        if res == z3.sat:
            model = solver.model()
            shown = [f"{n}={_fmt(model, v.t)}" for n, v in zip(claim.variables, variables)]
            outs = out if isinstance(out, tuple) else (out,)
            got = [_fmt(model, _t(o)) for o in outs]
            seen = [f"exp({_fmt(model, x)})={_fmt(model, e)}" for x, e in exps]
            example = f"{', '.join(shown)} -> ({', '.join(got)})" + (f"; {', '.join(seen)}" if seen else "")
            status = "counterexample"
            break
        if res != z3.unsat:
            status, example = "unknown", f"z3: {solver.reason_unknown()}"
            if not refute:
                break
        # the next path: flip the last decision whose other side is feasible and unexplored
        taken, open_ = run.taken, run.open
        while taken and not open_[-1]:
            taken.pop()
            open_.pop()
        if not taken:
            if refute and status != "unknown":
                status, example = "unknown", "no counterexample on any path"
            break
        if paths >= max_paths:
            status, example = "unknown", f"more than {max_paths} paths"
            break
        prefix = list(zip(taken[:-1], open_[:-1])) + [(not taken[-1], False)]
    return Verdict(status, paths, round(time.monotonic() - start, 3), example)


def replay(body: Callable[..., Any], impl: Callable[..., Any], values: list[float]) -> list[np.float32]:
    """Run body(impl, *values) through the symbolic machinery on concrete binary32 inputs, with exp
    given by numpy's float32 exp at each argument, and return the outputs as np.float32: the F32
    model (operations, np.where, np.maximum's forks, [..., None]) evaluated, for tests that hold it
    against the operator on float32 arrays. A fork on a condition the values leave open (only
    np.maximum's +-0 tie) takes its first side."""

    def bits_of(term: z3.FPRef) -> np.float32:
        v = z3.simplify(term)
        if z3.is_fp_value(v) and v.isNaN():
            return np.float32(np.nan)
        b = z3.simplify(z3.fpToIEEEBV(v))
        if not z3.is_bv_value(b):
            raise ValueError(f"not a constant: {v}")
        return np.array(b.as_long(), dtype=np.uint32).view(np.float32)[()]

    run = Run([], z3.BoolVal(True))
    with executing(run):
        out = body(impl, *[F32(val(v)) for v in values])
    subs = [(e, val(float(np.exp(bits_of(x))))) for x, e in run.exps.values()]
    outs = out if isinstance(out, tuple) else (out,)
    return [bits_of(z3.substitute(_t(o), *subs) if subs else _t(o)) for o in outs]


def run_all(claims: tuple[Claim, ...] = CLAIMS, *, timeout_ms: int = 60_000) -> list[ClaimResult]:
    results = []
    for c in claims:
        spec = check(c, c.impl, timeout_ms=timeout_ms)
        twin = check(c, c.twin, timeout_ms=max(1000, timeout_ms // 3), refute=True)
        results.append(ClaimResult(c, spec, twin))
    return results


def m_bits_fact(*, timeout_ms: int = 60_000) -> Verdict:
    return check(M_BITS, M_BITS.impl, timeout_ms=timeout_ms)


def to_json(results: list[ClaimResult], m_bits: Verdict | None, wall_s: float) -> dict[str, Any]:
    return {
        "tool": f"z3 {z3.get_version_string()} (FPSort Float32, RNE)",
        "wall_s": round(wall_s, 2),
        "ok": all(r.ok for r in results),
        "claims": [
            {
                "claim": r.claim.name,
                "statement": r.claim.statement,
                "function": r.claim.function,
                "status": r.spec.status,
                "paths": r.spec.paths,
                "solver_s": r.spec.seconds,
                "detail": r.spec.counterexample,
                "twin": f"{r.claim.twin.__module__}.{r.claim.twin.__qualname__}",
                "twin_status": "refuted" if r.twin.status == "counterexample" else "SURVIVED",
                "twin_counterexample": r.twin.counterexample,
                "twin_solver_s": r.twin.seconds,
            }
            for r in results
        ],
        "m_bitwise_commutative": None
        if m_bits is None
        else {"status": m_bits.status, "counterexample": m_bits.counterexample, "solver_s": m_bits.seconds},
    }


def report_text(data: dict[str, Any]) -> str:
    """One line per claim (status, paths, solver seconds) and its twin's counterexample."""
    lines = [
        f"binary32 proofs ({data['tool']}) of model.attention's own merge / finalize / _safe_max (one row, "
        "one value column); exp modelled by E1-E5 (verify/proofs/ieee754.py)"
    ]
    for c in data["claims"]:
        lines.append(
            f"  {c['status']:<14} {c['claim']}: {c['statement']} [{c['function']}; {c['paths']} paths, "
            f"{c['solver_s']:.1f} s]" + (f" -- {c['detail']}" if c["detail"] else "")
        )
        lines.append(
            f"      twin {c['twin'].rsplit('.', 1)[-1]}: {c['twin_status']} ({c['twin_solver_s']:.1f} s)"
            + (f": {c['twin_counterexample']}" if c["twin_counterexample"] else "")
        )
    mb = data.get("m_bitwise_commutative")
    if mb:
        lines.append(
            f"  m bitwise commutative: {mb['status']} ({mb['solver_s']:.1f} s; np.maximum's tie rule on +-0, "
            f"harmless: l, acc, finalize are bit-exact) {mb['counterexample']}"
        )
    n = len(data["claims"])
    proven = sum(c["status"] == "proven" for c in data["claims"])
    refuted = sum(c["twin_status"] == "refuted" for c in data["claims"])
    lines.append(
        f"{'OK' if data['ok'] else 'FAILED'}: {proven}/{n} claims proven, {refuted}/{n} wrong twins refuted, "
        f"{data['wall_s']:.1f} s wall"
    )
    return "\n".join(lines)
