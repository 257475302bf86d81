"""verify/proofs/ieee754.py: the online-softmax merge, finalize and safe max proven on binary32
(z3 FPSort, RNE) by running the runtime's own scalar rows on symbolic values; every wrong twin
refuted with a counterexample; a planted bug in the runtime's function is caught.

CI time: the whole set once (module fixture), about 2.5 minutes on two shared cores."""

from __future__ import annotations

import json

import numpy as np
import pytest
import z3

from tickformer.cli import main
from tickformer.contracts import softmax_stability as ss
from tickformer.verify.proofs import ieee754


@pytest.fixture(scope="module")
def results():
    return {r.claim.name: r for r in ieee754.run_all(timeout_ms=60_000)}


def test_every_claim_proven_and_every_twin_refuted(results):
    assert set(results) == {c.name for c in ieee754.CLAIMS}
    for name, r in results.items():
        assert r.spec.status == "proven", (name, r.spec)
        assert r.twin.status == "counterexample" and "->" in r.twin.counterexample, (name, r.twin)
        assert r.spec.paths >= 1 and r.spec.seconds >= 0
    data = ieee754.to_json(list(results.values()), None, 1.0)
    assert data["ok"] and all(c["twin_status"] == "refuted" for c in data["claims"])


def test_twins_refuted_for_their_reason(results):
    # the unguarded merge: NaN from two empty states; the unguarded finalize: 0 / 0
    assert "nan" in results["no NaN (merge)"].twin.counterexample
    assert "l=0.0" in results["no NaN (finalize)"].twin.counterexample
    assert "-inf" in results["safe max"].twin.counterexample


def test_m_is_not_bitwise_commutative_only_for_signed_zeros():
    v = ieee754.m_bits_fact(timeout_ms=60_000)
    assert v.status == "counterexample"
    assert ("ma=0.0" in v.counterexample and "mb=-0.0" in v.counterexample) or (
        "ma=-0.0" in v.counterexample and "mb=0.0" in v.counterexample
    )


def test_a_bug_planted_in_the_runtime_function_is_caught(monkeypatch):
    """The proof runs the runtime's function itself: break safe_max (which merge_row calls) and
    the empty-row claim gets a counterexample."""
    claim = next(c for c in ieee754.CLAIMS if c.name == "empty row is 0")
    assert ieee754.check(claim, claim.impl).status == "proven"
    monkeypatch.setattr(ss, "safe_max", lambda m: m)
    bad = ieee754.check(claim, claim.impl)
    assert bad.status == "counterexample" and "nan" in bad.counterexample


def test_exp_axioms_hold_for_numpy_expf():
    """E1-E4 are properties of the exp the runtime calls: checked on float32 numpy exp at the
    edges and on a grid (monotone, exp(+-0) = 1, exp(-inf) = +0, [0, 1] below 0, > 0 above -87.33)."""
    x = np.concatenate(
        [np.linspace(-120, 0, 200_001, dtype=np.float32), np.float32([-0.0, 0.0, -np.inf, -87.33, -1e-45])]
    )
    x = np.sort(x)
    e = np.exp(x)
    assert np.all(np.diff(e) >= 0)
    assert np.exp(np.float32(0.0)) == 1 and np.exp(np.float32(-0.0)) == 1
    assert np.exp(np.float32(-np.inf)) == 0 and not np.signbit(np.exp(np.float32(-np.inf)))
    assert np.all((e >= 0) & (e <= 1)) and not np.any(np.signbit(e))
    assert np.all(e[x >= np.float32(ieee754.EXP_NORMAL_FROM)] > 0)


def test_symbolic_values_only_inside_a_run():
    with pytest.raises(RuntimeError, match="explore"):
        bool(ieee754.F32(z3.FP("x", ieee754.SORT)) > 0.0)


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

    v = ieee754.release_drift(timeout_ms=60_000)
    assert v.status == "counterexample", v
    vals = {k: int(x) for k, x in re.findall(r"(start_ns|period_ns|tick)=(\d+)", v.counterexample)}
    for name, (lo, hi) in ieee754.DRIFT_PRE.items():
        assert lo <= vals[name] <= hi
    assert vals["tick"] * vals["period_ns"] <= ieee754.DRIFT_MAX_ELAPSED_NS
    # accumulation, not the rounding of the start: at least one tick, an exact start, and most of
    # the release is the loop's own elapsed time
    assert vals["tick"] >= 1 and vals["start_ns"] <= 2**52 < vals["tick"] * vals["period_ns"]
    # the counterexample is real: the twin, run in Python, drifts from the proven function
    args = (vals["start_ns"], vals["period_ns"], vals["tick"])
    assert wrong_twins.release_time_float(*args) != deadline.release_time(*args)
