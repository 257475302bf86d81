"""verify/proofs/ieee754.py: the online-softmax merge, finalize and safe max proven on binary32
(z3 FPSort, RNE) by running model.attention.merge / finalize / _safe_max themselves on symbolic
values; every wrong twin refuted with a counterexample; a planted bug in the runtime's function
is caught; the symbolic run is the operator on float32 arrays.

CI time: the whole set once (module fixture), about 45 s on two shared cores."""

from __future__ import annotations

import dataclasses
import importlib
import json

import numpy as np
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from tickformer.cli import main
from tickformer.verify.proofs import binary32, drift, ieee754

A = importlib.import_module("tickformer.model.attention")


@pytest.fixture(scope="module")
def results():
    """Every claim and twin once. z3's timeout is wall-clock: on a loaded machine a query may end
    'unknown' (z3 gave up in time) before it is decided; such a query is asked once more, alone,
    with four times the time, and its second answer is the one the tests judge."""
    out = {}
    for r in ieee754.run_all(timeout_ms=60_000):
        c = r.claim
        if r.spec.status == "unknown" and r.spec.counterexample.startswith("z3:"):
            r = dataclasses.replace(r, spec=ieee754.check(c, c.impl, timeout_ms=240_000))
        if r.twin.status == "unknown" and r.twin.counterexample.startswith("z3:"):
            r = dataclasses.replace(r, twin=ieee754.check(c, c.twin, timeout_ms=80_000, refute=True))
        out[c.name] = r
    return out


@pytest.mark.slow  # the full SMT run (module fixture, ~40 s)
def test_every_claim_proven_and_every_twin_refuted(results):
    assert set(results) == {c.name for c in ieee754.CLAIMS}
    for name, r in results.items():
        assert r.spec.status == "proven", (name, r.spec)
        assert r.twin.status == "counterexample" and "->" in r.twin.counterexample, (name, r.twin)
        assert r.spec.paths >= 1 and r.spec.seconds >= 0
    data = ieee754.to_json(list(results.values()), None, 1.0)
    assert data["ok"] and all(c["twin_status"] == "refuted" for c in data["claims"])


@pytest.mark.slow  # the full SMT run (module fixture)
def test_twins_refuted_for_their_reason(results):
    # the unguarded merge: NaN from two empty states; the unguarded finalize: 0 / 0
    assert "nan" in results["no NaN (merge)"].twin.counterexample
    assert "l=0.0" in results["no NaN (finalize)"].twin.counterexample
    assert "-inf" in results["safe max"].twin.counterexample


def test_arith_max_twin_is_wrong_by_rounding_alone():
    """merge_arith_max is refuted for the reason its docstring gives first, rounding: with both
    states non-empty and |m| <= 2^64 (no overflow, no -inf), the solver still finds a merged max
    that is neither input."""
    base = next(c for c in ieee754.CLAIMS if c.name == "max exact")

    def pre(ma, la, aa, mb, lb, ab):
        small = [z3.fpLEQ(z3.fpAbs(m.t), binary32.val(2.0**64)) for m in (ma, mb)]
        return z3.And(base.pre(ma, la, aa, mb, lb, ab), *small)

    claim = dataclasses.replace(base, pre=pre)
    assert ieee754.check(claim, claim.impl).status == "proven"
    v = ieee754.check(claim, claim.twin, refute=True)
    assert v.status == "counterexample" and "inf" not in v.counterexample.split("->")[0], v


def test_m_is_not_bitwise_commutative_only_for_signed_zeros():
    v = ieee754.m_bits_fact(timeout_ms=60_000)
    assert v.status == "counterexample"
    assert ("ma=0.0" in v.counterexample and "mb=-0.0" in v.counterexample) or (
        "ma=-0.0" in v.counterexample and "mb=0.0" in v.counterexample
    )


def test_a_bug_planted_in_the_runtime_function_is_caught(monkeypatch):
    """The proof runs the runtime's function itself: break _safe_max where model.attention.merge
    calls it and the empty-row claim gets a counterexample."""
    claim = next(c for c in ieee754.CLAIMS if c.name == "empty row is 0")
    assert claim.impl is A.finalize and ieee754.check(claim, claim.impl).status == "proven"
    monkeypatch.setattr(A, "_safe_max", lambda m: m)
    bad = ieee754.check(claim, claim.impl)
    assert bad.status == "counterexample" and "nan" in bad.counterexample


def test_exp_axioms_hold_for_numpy_expf():
    """E1-E5 are properties of the exp the runtime calls: checked on float32 numpy exp at the
    edges and on a grid (monotone, exp(+-0) = 1, exp(-inf) = +0, [0, 1] below 0, > 0 above -87.33,
    >= (1 + x)(1 - 2^-21) on [-1, 0])."""
    x = np.concatenate(
        [np.linspace(-120, 0, 200_001, dtype=np.float32), np.float32([-0.0, 0.0, -np.inf, -87.33, -1e-45])]
    )
    x = np.sort(x)
    e = np.exp(x)
    assert np.all(np.diff(e) >= 0)
    assert np.exp(np.float32(0.0)) == 1 and np.exp(np.float32(-0.0)) == 1
    assert np.exp(np.float32(-np.inf)) == 0 and not np.signbit(np.exp(np.float32(-np.inf)))
    assert np.all((e >= 0) & (e <= 1)) and not np.any(np.signbit(e))
    assert np.all(e[x >= np.float32(binary32.EXP_NORMAL_FROM)] > 0)
    with np.errstate(over="ignore"):
        assert np.all(np.isposinf(np.exp(np.float32([89.0, 100.0, 3e38, np.inf]))))  # E3's overflow
    # E5: convexity within 4 ULP, for x in [-1, 0] (the bound computed in float64, then rounded down)
    near = x[(x >= -1) & (x <= 0)]
    lower = ((1.0 + near.astype(np.float64)) * (1.0 - 2.0**-21)).astype(np.float32)
    assert np.all(np.exp(near) >= np.nextafter(lower, np.float32(-1)))


def test_symbolic_values_only_inside_a_run():
    with pytest.raises(RuntimeError, match="only usable inside binary32.executing"):
        bool(binary32.F32(z3.FP("x", binary32.SORT)) > 0.0)


def test_cli_ieee754_report(monkeypatch, tmp_path, capsys):
    subset = tuple(c for c in ieee754.CLAIMS if c.name in ("safe max", "empty row is 0"))
    real = ieee754.run_all
    monkeypatch.setattr(ieee754, "run_all", lambda timeout_ms: real(subset, timeout_ms=timeout_ms))
    monkeypatch.setattr(
        ieee754, "m_bits_fact", lambda timeout_ms: ieee754.Verdict("counterexample", 1, 0.0, "x")
    )
    out = tmp_path / "ieee.json"
    assert main(["prove", "--ieee754", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [c["claim"] for c in data["claims"]] == ["safe max", "empty row is 0"]
    assert "2/2 claims proven, 2/2 wrong twins refuted" in capsys.readouterr().out
    assert main(["prove", "--ieee754", "--solver-timeout", "0"]) == 2


def test_release_time_float_refuted_by_drift_under_realistic_preconditions():
    import re

    from tickformer.contracts import deadline
    from tickformer.verify.proofs import wrong_twins

    v = drift.release_drift(timeout_ms=60_000)
    assert v.status == "counterexample", v
    vals = {k: int(x) for k, x in re.findall(r"(start_ns|period_ns|tick)=(\d+)", v.counterexample)}
    for name, (lo, hi) in drift.DRIFT_PRE.items():
        assert lo <= vals[name] <= hi
    assert vals["tick"] * vals["period_ns"] <= drift.DRIFT_MAX_ELAPSED_NS
    # accumulation, not the rounding of the start: at least one tick, an exact start, and most of
    # the release is the loop's own elapsed time
    assert vals["tick"] >= 1 and vals["start_ns"] <= 2**52 < vals["tick"] * vals["period_ns"]
    # the counterexample is real: the twin, run in Python, drifts from the proven function
    args = (vals["start_ns"], vals["period_ns"], vals["tick"])
    assert wrong_twins.release_time_float(*args) != deadline.release_time(*args)


# ---- the symbolic run is the operator: the F32 model evaluated == float32 arrays, bit for bit ----

_F32_EDGES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 1e-38, -1e-45, 3.0e38, -3.0e38, -100.0, -88.0])
_M32 = (st.floats(-1e4, 1e4, width=32) | _F32_EDGES).map(np.float32)
_STATE = st.tuples(
    _M32 | st.just(np.float32(-np.inf)), st.floats(1.0, 2.0**20, width=32), st.floats(-1e6, 1e6, width=32)
)


def _bits(x) -> int:
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


@settings(max_examples=150, deadline=None)
@given(_STATE, _STATE, st.floats(-1e6, 1e6, width=32))
def test_the_symbolic_run_is_the_operator_on_float32_arrays(a, b, other_column):
    """What the solver reasons about is what numpy computes: model.attention.merge / finalize run
    on symbolic binary32 values and evaluated at concrete inputs (exp = numpy's float32 exp)
    equal the operator on float32 arrays bit for bit -- m, l, every acc column (dv = 2: the second
    column computed apart, as the proof's per-column argument says) and the finalized output
    (150 examples, edges included: -inf, signed zeros, subnormals, huge)."""

    def state(m, l, acc):
        empty = m == -np.inf
        l, acc = (np.float32(0.0), np.float32(0.0)) if empty else (np.float32(l), np.float32(acc))
        return np.float32(m), l, acc

    (ma, la, aa), (mb, lb, ab) = state(*a), state(*b)
    if ma == mb == 0 and np.signbit(ma) != np.signbit(mb):
        return  # np.maximum's tie rule on +-0 is the platform's: the proof explores both sides
    cb = np.float32(0.0) if mb == -np.inf else np.float32(other_column)
    op = A.merge(
        A.SoftmaxState(np.array([ma]), np.array([la]), np.array([[aa, aa]])),
        A.SoftmaxState(np.array([mb]), np.array([lb]), np.array([[ab, cb]])),
    )
    y = A.finalize(op)  # [1, 2]

    def merged(impl, *v):
        st_ = impl(A.SoftmaxState(v[0], v[1], v[2]), A.SoftmaxState(v[3], v[4], v[5]))
        return (*st_, A.finalize(st_))

    for column, acc_b in ((0, ab), (1, cb)):
        got = ieee754.replay(merged, A.merge, [ma, la, aa, mb, lb, acc_b])
        want = [op.m[0], op.l[0], op.acc[0, column], y[0, column]]
        assert [_bits(g) for g in got] == [_bits(w) for w in want], (column, got, want)
