"""Contract: softmax stability of the online-softmax operator (model/attention.py).

Statement (for every finite score row in the compute dtype; fp16 inputs are computed in fp32)
    S1  outputs and weights are finite;
    S2  every weight p_j lies in [0, 1];
    S3  for a row with n >= 1 selected keys, |sum_j p_j - 1| <= weight_sum_bound(n, dtype);
    S4  every exponent argument s_j - m (and m_a - m in a merge) is <= 0, so exp never overflows;
    S5  merge is commutative bit-for-bit, its running max is exact (it *is* one of the inputs'
        maxima), and it is associative within merge_assoc_bound(n, dtype) (relative, on l and on
        acc measured against the accumulated |v|);
    S6  the normalizer of a non-empty state is >= 1 (the max key contributes exp(0) = 1 exactly),
        so finalize never divides by a tiny number.

Bounds (u = unit roundoff of the compute dtype: 2**-24 for fp32, 2**-53 for fp64;
gamma_k = k u / (1 - k u), Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
sec. 3.1 and 4.2)
    S3: let e_j be the *computed* exponentials (whatever their error), L = sum_j e_j exactly,
        l = fl(sum e_j) = L (1 + t) with |t| <= gamma_{n-1} (recursive summation bound; numpy's
        pairwise summation is tighter), p_j = fl(e_j / l) = e_j / l (1 + d_j), |d_j| <= u. Then
        sum p_j = (1 + eta) / (1 + t) with |eta| <= u, so
            |sum p - 1| <= (u + gamma_{n-1}) / (1 - gamma_{n-1})  +  n * tiny
        where tiny is the smallest subnormal (a quotient that underflows has absolute, not
        relative, error). The exp error does not enter: the weights are normalized by the sum of
        the same computed exponentials. The check sums p in float64 (error <= gamma_n of fp64,
        added too).
    S5: commutativity is exact because IEEE max and + are commutative. Per merge the factor on
        the max side is exactly 1 (m_a - m = 0 exactly, exp(0) = 1); the other factor
        beta = fl(exp(fl(d))), d < 0, carries relative error <= (|d| + EXP_ULP) u (argument
        rounding |d| u, exp's own error) and the product and the sum u each. Its weight in l is
        beta l_b / l <= min(1, n e^{d}), and max_x min(1, n e^{-x}) x <= ln(n) + 1, so one merge
        has relative error <= (ln(max(n, e)) + 1 + EXP_ULP + 2) u =: merge_rel_bound(n).
        Two groupings of three states each take two merges from the same inputs:
            |grouping1 - grouping2| / scale <= 4 merge_rel_bound(n) (first order; we take 4.5x
        to cover second order terms).
    EXP_ULP = 4: an assumed bound on numpy's exp error in ULPs. Measured: max 2.54 ULP for
        numpy 2.4.6 float32 exp over 20M points of [-87, 0] against float64 exp (SIMD code
        paths differ by CPU; re-measure on a new target). The property tests check the
        consequence (merge associativity within the bound), not the ULP figure.
What is *not* claimed: that the weights equal the exact softmax to within u (that needs the exp
error and the conditioning of the scores); decode equivalence has its own bound
(`contracts.decode_equivalence`).

What the proofs rest on, and which code they are about.
    binary32, SMT (`tickformer prove --ieee754`, verify/proofs/ieee754.py): model.attention.merge,
        finalize and _safe_max THEMSELVES -- the functions the numpy backend calls -- executed on
        symbolic binary32 values (z3 FPSort, RNE), one row and one value column at a time, exp
        modelled by stated properties; the step from a row to the float32 arrays is elementwise
        numpy (the module docstring there). Max exact, no NaN, normalizer >= 1, empty row exactly
        0, commutative bit for bit; each with a wrong twin refuted. ONNX Runtime and TensorRT run
        the exported graph's one Softmax (graph-level proofs, `tickformer prove ART`); the C
        backend's merge (codegen/kernels.py) is not covered by these.
    `merged_max`, `safe_max`, `rescale_exponents`, `rescale_factor`, `merge_scalar`,
    `merge_assoc_gap` (PEP 316 contracts, CrossHair: `tickformer prove`): a *restatement* of the
        merge's (m, l) on Python floats (binary64, math.exp), not the code the runtime runs, in
        another precision and with another exp: evidence about the algorithm (associativity
        within the bound has no binary32 proof), tied to the operator by
        test_numpy_merge_agrees_with_scalar_spec (float64 arrays, l within 16 u), a test.
"""

from __future__ import annotations

import math

import numpy as np

# One-line summary for the assurance table (the docstring above has the statement and derivation).
BOUND = (
    "|sum p - 1| <= (u + gamma_{n-1}) / (1 - gamma_{n-1}) + n tiny; every exp argument <= 0; merge "
    "commutative exactly, max exact, associative within 4.5 (ln n + 7) u"
)

EXP_ULP = 4.0


def unit_roundoff(dtype: np.dtype | type) -> float:
    """u = eps / 2 of the dtype the operator computes in (fp16 inputs compute in fp32)."""
    dt = np.result_type(dtype, np.float32)
    return float(np.finfo(dt).eps) / 2.0


def gamma(k: int, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u), defined for k u < 1."""
    if k * u >= 1.0:
        raise ValueError(f"gamma_{k} undefined for u={u}: k*u >= 1 (row too long for this dtype)")
    return k * u / (1.0 - k * u)


def weight_sum_bound(n: int, dtype: np.dtype | type = np.float32) -> float:
    """S3: bound on |sum_j p_j - 1| for a row of n >= 1 selected keys (see module docstring)."""
    if n < 1:
        raise ValueError(f"row length {n} must be >= 1 (a fully masked row sums to exactly 0)")
    dt = np.result_type(dtype, np.float32)
    u = unit_roundoff(dt)
    g = gamma(n - 1, u)
    tiny = float(np.finfo(dt).smallest_subnormal)
    check_sum = gamma(n, 2.0**-53) * (1.0 + u)  # our float64 check of the sum
    return (u + g) / (1.0 - g) + n * tiny + check_sum


def merge_rel_bound(n: int, dtype: np.dtype | type = np.float32) -> float:
    """S5: relative error of one merge on l (and on acc against the accumulated |v|), for
    states over at most n keys in total."""
    u = unit_roundoff(dtype)
    return (math.log(max(n, math.e)) + 1.0 + EXP_ULP + 2.0) * u


def merge_assoc_bound(n: int, dtype: np.dtype | type = np.float32) -> float:
    """S5: |merge(merge(a,b),c) - merge(a,merge(b,c))| / scale for states over n keys in total."""
    return 4.5 * merge_rel_bound(n, dtype)


def weight_violations(p: np.ndarray, selected: np.ndarray | None = None) -> list[str]:
    """Check S1-S3 (and masking's zero weights) on weights p [..., Tk]; selected bool
    broadcastable to p (None = all selected). Returns human-readable violations ([] = holds).

    Not real-time safe (test / verify helper): allocates."""
    out: list[str] = []
    p64 = np.atleast_2d(p.astype(np.float64))  # [R, Tk] rows of weights
    sel = (
        np.ones(p64.shape, dtype=bool)
        if selected is None
        else np.broadcast_to(selected, p.shape).reshape(p64.shape)
    )
    p64 = p64.reshape(-1, p64.shape[-1])  # [R, Tk]
    sel = sel.reshape(p64.shape)  # [R, Tk]
    if not np.isfinite(p64).all():
        out.append("S1: a weight is not finite")
        return out
    if (p64 < 0).any() or (p64 > 1).any():
        out.append(f"S2: a weight is outside [0, 1] (min {p64.min()}, max {p64.max()})")
    if (p64[~sel] != 0).any():
        out.append("masking: a masked key has a non-zero weight")
    n = sel.sum(axis=-1)  # [R]
    sums = p64.sum(axis=-1)  # [R]
    for row in np.flatnonzero(n > 0):
        bound = weight_sum_bound(int(n[row]), p.dtype)
        if abs(sums[row] - 1.0) > bound:
            out.append(
                f"S3: row {row} sums to {sums[row]!r}, |sum-1| = {abs(sums[row] - 1):.3e} > bound "
                f"{bound:.3e} (n={int(n[row])})"
            )
            break
    if (sums[n == 0] != 0).any():
        out.append("masking: a fully masked row is not exactly zero")
    return out


# ---- scalar specification of the merge (Python floats; CrossHair: `tickformer prove`) ----


def merged_max(ma: float, mb: float) -> float:
    """S5 exact max: the merged running max is one of the two maxima, no arithmetic on it.
    States are never NaN (scores are finite; an empty state has m = -inf).

    pre: not (math.isnan(ma) or math.isnan(mb))
    post: __return__ == ma or __return__ == mb
    post: __return__ >= ma and __return__ >= mb
    """
    return ma if ma >= mb else mb


def safe_max(m: float) -> float:
    """The reference point for exponent arguments: m, or 0 for an empty state (m = -inf), so
    that -inf - m is -inf (exp -> 0) and never -inf - (-inf) = NaN.

    pre: not math.isnan(m) and m != math.inf
    post: math.isfinite(__return__)
    post: __return__ == m or (m == -math.inf and __return__ == 0.0)
    """
    return 0.0 if m == -math.inf else m


def rescale_exponents(ma: float, mb: float) -> tuple[float, float]:
    """S4: the exponent arguments of a merge, m_a - m and m_b - m. Both <= 0 and never NaN; the
    side holding the max gets exactly 0 (its factor is exactly 1) unless both states are empty.
    Holds in IEEE arithmetic (Sterbenz is not needed: x - x == 0 exactly; x - y <= 0 when
    x <= y because rounding is monotone).

    pre: not (math.isnan(ma) or math.isnan(mb))
    pre: ma != math.inf and mb != math.inf
    post: __return__[0] <= 0.0 and __return__[1] <= 0.0
    post: not (math.isnan(__return__[0]) or math.isnan(__return__[1]))
    post: __return__[0] == 0.0 or __return__[1] == 0.0 or (ma == -math.inf and mb == -math.inf)
    """
    m = safe_max(merged_max(ma, mb))
    return ma - m, mb - m


def rescale_factor(d: float) -> float:
    """A merge's rescale factor exp(d) for an exponent argument d <= 0: in (0, 1] over the reals.
    In IEEE arithmetic exp underflows to 0 below about -745.1 (fp64) / -103.9 (fp32), so the
    claim 'in (0, 1]' is stated with that precondition; below it the factor is exactly 0, which
    is the correctly rounded weight of a key e^745 times less likely than the max.

    pre: -700.0 <= d <= 0.0
    post: 0.0 < __return__ <= 1.0
    """
    return math.exp(d)


def merge_scalar(ma: float, la: float, mb: float, lb: float) -> tuple[float, float]:
    """The merge of model.attention.merge restated on one row's (m, l), Python floats (a copy:
    the runtime never calls it; see "What the proofs below rest on").
    A non-empty state has l >= 1 (S6), an empty one (m = -inf) has l = 0; the merge keeps both
    invariants: the normalizer is positive exactly when some key was selected.

    pre: not (math.isnan(ma) or math.isnan(mb)) and ma != math.inf and mb != math.inf
    pre: (ma == -math.inf and la == 0.0) or (math.isfinite(ma) and 1.0 <= la <= 1e6)
    pre: (mb == -math.inf and lb == 0.0) or (math.isfinite(mb) and 1.0 <= lb <= 1e6)
    post: __return__[0] == ma or __return__[0] == mb
    post: (__return__[1] >= 1.0) == (la > 0.0 or lb > 0.0)
    post: (__return__[1] == 0.0) == (la == 0.0 and lb == 0.0)
    """
    da, db = rescale_exponents(ma, mb)
    m = merged_max(ma, mb)
    return m, math.exp(da) * la + math.exp(db) * lb


def merge_assoc_gap(ma: float, mb: float, mc: float) -> float:
    """S5 associativity of the normalizer over three singleton states (l = 1 each): the relative
    difference between the two groupings, which must be within merge_assoc_bound(3, float64).

    pre: all(-1e6 <= m <= 1e6 for m in (ma, mb, mc))
    post: __return__ <= 4.5 * (math.log(3) + 1 + 4 + 2) * 2.0 ** -53
    """
    mab, lab = merge_scalar(ma, 1.0, mb, 1.0)
    left = merge_scalar(mab, lab, mc, 1.0)
    mbc, lbc = merge_scalar(mb, 1.0, mc, 1.0)
    right = merge_scalar(ma, 1.0, mbc, lbc)
    return abs(left[1] - right[1]) / max(left[1], right[1])
