"""The float-drift twin of `contracts.deadline.release_time`, refuted on binary64 with z3
(`tickformer prove` runs it for that twin: crosshair.refute_by_drift). wrong_twins.
release_time_float computes the release in floating point; z3 finds realistic inputs (DRIFT_PRE:
nothing near overflow, the start exact in binary64, at least one tick) where it differs from the
exact integer release: the drift the twin exists for. Not real-time code.
"""

from __future__ import annotations

import time

import z3

from tickformer.contracts import deadline

from . import wrong_twins as twins
from .binary32 import RNE
from .ieee754 import Verdict

DRIFT_PRE = {
    # a CLOCK_MONOTONIC reading up to 2^52 ns (~52 days of uptime): exact in binary64, and at
    # least half of a release past 2^53 is then the loop's own accumulated tick * period -- the
    # witness shows accumulation, not the rounding of a start near 2^53
    "start_ns": (0, 2**52),
    "period_ns": (1_000, 10**10),  # 1 us .. 10 s
    "tick": (1, 2**40),  # at least one period accumulated
}
DRIFT_MAX_ELAPSED_NS = 2**54  # tick * period: the loop has run at most ~208 days
DRIFT_TRY_MS = 10_000  # one z3 try (a fresh random seed per try)


def drift_preconditions() -> str:
    """DRIFT_PRE and the elapsed-time bound in words (the report's condition text)."""
    ranges = ", ".join(f"{lo} <= {name} <= {hi}" for name, (lo, hi) in DRIFT_PRE.items())
    return f"{ranges}, tick * period_ns <= 2^54"


def release_drift(*, timeout_ms: int = 60_000) -> Verdict:
    """wrong_twins.release_time_float computes int(float(start) + float(tick) * float(period)) in
    binary64 (RNE; int() truncates). Ask z3 for realistic inputs (DRIFT_PRE, nothing near
    overflow, the start exact in binary64, at least one tick) where it differs from
    contracts.deadline.release_time's exact start + tick * period: the drift the twin exists for
    (a counterexample here refutes it for that reason, unlike CrossHair's, which only reaches an
    OverflowError at periods near 1.8e308). Run by `tickformer prove` for the twin of
    release_time (crosshair.refute_by_drift)."""
    start = time.monotonic()
    sort = z3.Float64()
    names = ("start_ns", "period_ns", "tick")
    # 64-bit signed vectors: start <= 2^53 and tick * period <= 2^54 (the product's overflow
    # excluded explicitly) keep the exact sum below 2^55. 128 bits said the same and bit-blasted a
    # 4x larger multiplier: it timed out at 60 s on the loaded 2-core CI machine.
    bits = 64
    ints = {n: z3.BitVec(n, bits) for n in names}
    facts = []
    for n, (lo, hi) in DRIFT_PRE.items():
        facts += [z3.BitVecVal(lo, bits) <= ints[n], ints[n] <= z3.BitVecVal(hi, bits)]  # signed
    facts.append(z3.BVMulNoOverflow(ints["tick"], ints["period_ns"], True))
    fp = {n: z3.fpSignedToFP(RNE, ints[n], sort) for n in names}  # float(int): rounds to nearest
    got_fp = z3.fpAdd(RNE, fp["start_ns"], z3.fpMul(RNE, fp["tick"], fp["period_ns"]))
    got = z3.fpToSBV(z3.RTZ(), got_fp, z3.BitVecSort(bits))  # int(): truncation
    exact = ints["start_ns"] + ints["tick"] * ints["period_ns"]  # < 2^55: no overflow in 64 bits
    facts.append(ints["tick"] * ints["period_ns"] <= z3.BitVecVal(DRIFT_MAX_ELAPSED_NS, bits))
    # Where to look: below 2^53 every operand, product and sum is an exactly representable integer,
    # so no drift exists there; narrowing the search to releases >= 2^53 loses no witness.
    facts.append(exact >= z3.BitVecVal(2**53, bits))
    facts.append(got != exact)
    # z3's time on this query depends on its random seed (1.4-7 s for most, 46 s seen for one on
    # the loaded 2-core machine): restarts with fresh seeds and a short budget each, within
    # timeout_ms in all.
    res, solver, tries = z3.unknown, z3.Solver(), 0
    while res == z3.unknown:
        left = timeout_ms - int((time.monotonic() - start) * 1000)
        if left <= 0:
            break
        solver = z3.Solver()
        solver.set("timeout", min(left, DRIFT_TRY_MS))
        solver.set("random_seed", tries)
        solver.add(*facts)
        res = solver.check()
        tries += 1
    seconds = round(time.monotonic() - start, 3)
    if res != z3.sat:
        return Verdict(
            "unknown" if res != z3.unsat else "proven",
            tries,
            seconds,
            f"{solver.reason_unknown()} after {tries} tries",
        )
    model = solver.model()
    vals = {n: model.eval(ints[n]).as_signed_long() for n in names}
    args = (vals["start_ns"], vals["period_ns"], vals["tick"])
    # The verdict is about the functions themselves, not the encoding: replay the witness through
    # the twin as Python runs it and through the proven function.
    twin_value = twins.release_time_float(*args)
    exact_value = deadline.release_time(*args)
    if twin_value == exact_value:
        return Verdict(
            "unknown", 1, seconds, f"the solver's witness {args} does not drift when run: encoding wrong"
        )
    text = (
        f"start_ns={vals['start_ns']}, period_ns={vals['period_ns']}, tick={vals['tick']} -> twin "
        f"{twin_value}, release_time {exact_value} (drift {twin_value - exact_value} ns)"
    )
    return Verdict("counterexample", tries, seconds, text)
