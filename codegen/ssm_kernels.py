"""C99 text of the state-space block's elementary functions, and the program that checks them.

The selective update (model/ssm.py) needs, besides tf_expneg (codegen/kernels.py):

    tf_softplus(z)    log(1 + e^z) as numpy's logaddexp(0, z) computes it: max(z, 0) +
                      log1p(e^-|z|); e^-|z| by tf_expneg, log1p on [0, 1] by `tf_log1p01`
                      (Cephes logf's polynomial on log(u), u = fl(1 + e), plus the rounding
                      error of 1 + e, which Fast2Sum gives exactly: log1p(e) = log(u) + c / u)
    tf_tanh_pos(x)    tanh for x >= 0: Cephes tanhf's odd polynomial below 0.625, (1 - e) / (1 + e)
                      with e = tf_expneg(-2x) above (no cancellation there: e <= 0.29); 1 for
                      large x and +inf (e = 0), NaN for NaN

with keep = 1 - exp(-s) written as numpy does, (t + t) / (1 + t), t = tf_tanh_pos(s / 2)
(model/ssm.py one_minus_exp_neg). All branch-free (the selections between two computed values
are plain `?:`, which GCC turns into blends), so the D x N update loop vectorises.

Error bounds, exhaustive over float32 (`make ssmcheck`, tf_ssmcheck.c against glibc's double
log1p / exp / tanh / expm1): the relative error in units of u = 2^-24 where the exact value is a
normal float32, which model/ssm.py assumes of every elementary function (ELEMENTARY_ERROR_U):

    softplus(z)           every z >= -86.5; below (exact value < 2.7e-38) the result is 0
                          (tf_expneg flushes): an underestimate of Delta only raises lam toward 1,
                          which the state bound allows (it needs upper bounds on lam and keep)
    tanh_pos(x)           every x >= 0
    keep(s)               every s >= 0 (the product the step forms)

and the ACSL contracts Frama-C's EVA uses in place of the bodies (-eva-use-spec): softplus of a
finite z is finite and in [0, max(z, 0) + 1]; tanh_pos of x >= 0 is in [0, 1]; NaN gives NaN.

Not real-time code (text generation).
"""

from __future__ import annotations

import textwrap

from . import c_text
from .c_text import f32

# Cephes tanhf (S. L. Moshier): tanh(x) = x + x^3 P(x^2) on |x| < 0.625
TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
TANH_SMALL = 0.625
# Cephes logf: log(1 + f) = f - f^2 / 2 + f^3 P(f) on f in [sqrt(1/2) - 1, sqrt(2) - 1]
LOG_POLY = (
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
)
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4  # ln 2 = LN2_HI + LN2_LO (Cody-Waite, as in exp)
SQRT2 = 1.41421356237309504880
# The ACSL contracts (c_text.acsl_contract rows) EVA uses in place of the bodies; tf_ssmcheck.c checks them
SOFTPLUS_CONTRACT = (
    ("finite", r"\is_finite(z)", (r"\is_finite(\result) && 0.0 <= \result <= \max(z, 0.0) + 1.0",)),
    ("plus_infinity", r"\is_plus_infinity(z)", (r"\is_plus_infinity(\result)",)),
    ("minus_infinity", r"\is_minus_infinity(z)", (r"\result == 0.0",)),
    ("nan", r"\is_NaN(z)", (r"\is_NaN(\result)",)),
)
TANH_POS_CONTRACT = (  # x < 0 is never an argument: not complete
    ("number", r"!\is_NaN(x) && x >= 0.0", (r"\is_finite(\result) && 0.0 <= \result <= 1.0",)),
    ("nan", r"\is_NaN(x)", (r"\is_NaN(\result)",)),
)


def elementary_c() -> str:
    """tf_log1p01, tf_softplus, tf_tanh_pos (module docstring); after tf_expneg."""
    lp = [f32(c) for c in LOG_POLY]
    tp = [f32(c) for c in TANH_POLY]
    log_poly = f"{lp[0]}"
    for c in lp[1:]:
        log_poly = f"({log_poly}) * f + {c}"
    return f"""\
/* log(1 + e) for e in [0, 1] (NaN: NaN). u = 1 + e rounded, c = e - (u - 1) its rounding error
   (exact: Fast2Sum, 1 >= e); log(u) = k ln2 + log(1 + f) with f = u - 1 (k = 0) or u / 2 - 1
   (k = 1, u > sqrt 2), both exact (Sterbenz), by Cephes logf's polynomial; then + c / u. */
static inline float tf_log1p01(float e)
{{
    const float u = 1.0f + e;
    const float c = e - (u - 1.0f);
    const int big = u > {f32(SQRT2)};
    const float f_lo = u - 1.0f;
    const float f_hi = u * 0.5f - 1.0f;
    const float f = big ? f_hi : f_lo;
    const float k = big ? 1.0f : 0.0f;
    const float z = f * f;
    float y = ({log_poly}) * f * z;
    y = y + k * {f32(LN2_LO)};
    y = y + -0.5f * z;
    y = f + y;
    y = y + k * {f32(LN2_HI)};
    return y + c / u;
}}

/* softplus(z) = log(1 + e^z) as numpy's logaddexp(0, z): max(z, 0) + log1p(e^-|z|) (model/ssm.py).
   Exhaustively checked (make ssmcheck): within the relative error model/ssm.py assumes
   (ELEMENTARY_ERROR_U) wherever the exact value is a normal float32; 0 for z < -86.5. */
{c_text.acsl_contract("z", SOFTPLUS_CONTRACT)}
static inline float tf_softplus(float z)
{{
    tf_bits a;
    float e, m;
    a.f = z;
    a.u &= 0x7FFFFFFFu; /* |z| */
    e = tf_expneg(-a.f);  /* e^-|z| in [0, 1] */
    m = tf_relu1(z);      /* max(z, 0) */
    return m + tf_log1p01(e);
}}

/* tanh(x) for x >= 0: Cephes tanhf's polynomial below {TANH_SMALL}, (1 - e) / (1 + e), e = e^-2x, above;
   exhaustively checked (make ssmcheck). */
{c_text.acsl_contract("x", TANH_POS_CONTRACT, complete=False)}
static inline float tf_tanh_pos(float x)
{{
    const float z = x * x;
    float p = {tp[0]};
    float small, e, large;
    p = p * z + {tp[1]};
    p = p * z + {tp[2]};
    p = p * z + {tp[3]};
    p = p * z + {tp[4]};
    small = p * z * x + x;
    e = tf_expneg(-2.0f * x);
    large = (1.0f - e) / (1.0f + e);
    return x < {f32(TANH_SMALL)} ? small : large;
}}
"""


def _worst(normal: str, y: str, f: str, pad: str) -> str:
    """tf_ssmcheck.c's record of function `f` (sp, th, kp) where `normal` holds (the exact value
    `ex` is a normal float32): its relative error in u, the worst so far (w_f) and its argument
    (at_f), and the count of values checked (n_f)."""
    return textwrap.indent(
        f"""\
if ({normal}) {{
    const double e = rel_u({y}, ex);
    if (e > w_{f}) {{
        w_{f} = e;
        at_{f} = x;
    }}
    n_{f}++;
}}""",
        pad,
    )


SSMCHECK_C = (
    r"""/* tf_ssmcheck.c -- the state-space block's elementary functions against glibc's double-precision
   log1p, exp, tanh, expm1 (generated; do not edit). Usage: tf_ssmcheck [STRIDE]; STRIDE 1 (the
   default) checks every float32 argument of each function:
     softplus(z)   every float32 z: relative error (units of u = 2^-24) for z >= -86.5 where the
                   exact value is a normal float32; elsewhere (tf_expneg flushes e^z < 2.7e-38 to 0)
                   0 <= y <= the exact value's upper side; ACSL contract
                   (finite z: finite, 0 <= y <= max(z, 0) + 1; +inf: +inf; -inf: 0; NaN: NaN);
     tanh_pos(x)   every x >= 0 (and +inf, NaN): relative error; 0 <= y <= 1;
     keep(s)       (t + t) / (1 + t), t = tanh_pos(s / 2), every s >= 0: relative to 1 - e^-s
                   where that is normal; 0 <= y <= 1.
   Exit status 0 when every maximum is <= TF_ELEMENTARY_ERROR_U (model/ssm.py ELEMENTARY_ERROR_U)
   and no contract is broken. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tf_model.c"

#define U32 0x1p-24

static double rel_u(float y, double exact)
{
    return fabs((double)y - exact) / fabs(exact) / U32;
}

"""
    + c_text.every_float32_main(
        r"""    unsigned long long u, n_sp = 0, n_th = 0, n_kp = 0, bad = 0;
    double w_sp = 0.0, w_th = 0.0, w_kp = 0.0;
    float at_sp = 0.0f, at_th = 0.0f, at_kp = 0.0f;"""
    )
    + r"""        /* softplus over every float32 */
        y = tf_softplus(x);
        if (x != x) {
            bad += (y == y);
        } else if (isinf(x)) {
            bad += x > 0 ? !(isinf(y) && y > 0) : (y != 0.0f);
        } else {
            const double ex = x > 0 ? (double)x + log1p(exp(-(double)x)) : log1p(exp((double)x));
            bad += !(y >= 0.0f && y <= (x > 0.0f ? x : 0.0f) + 1.0f && isfinite(y));
"""
    + _worst("x >= -86.5f && ex >= 0x1p-126", "y", "sp", " " * 12)
    + r""" else {
                bad += !((double)y <= ex * (1.0 + TF_ELEMENTARY_ERROR_U * U32));
            }
        }
        if (!(x >= 0.0f) && x == x) {
            continue; /* tanh_pos and keep: x >= 0 (+0 included; -0 compares >= 0 too) */
        }
        /* tanh_pos over x >= 0 */
        y = tf_tanh_pos(x);
        if (x != x) {
            bad += (y == y);
            continue;
        }
        bad += !(y >= 0.0f && y <= 1.0f);
        {
            const double ex = tanh((double)x);
"""
    + _worst("ex >= 0x1p-126", "y", "th", " " * 12)
    + r"""
        }
        /* keep(s) = 1 - e^-s as the step forms it, s = x */
        {
            const float t = tf_tanh_pos(x * 0.5f);
            const float k = (t + t) / (1.0f + t);
            const double ex = -expm1(-(double)x);
            bad += !(k >= 0.0f && k <= 1.0f);
"""
    + _worst("ex >= 0x1p-126", "k", "kp", " " * 12)
    + r"""
        }
    }
    printf("ssm elementary (stride %lu, bound %.1f u): softplus %llu values max %.3f u at z = %a; "
           "tanh %llu values max %.3f u at x = %a; keep %llu values max %.3f u at s = %a; "
           "contracts: %llu broken\n",
           stride, (double)TF_ELEMENTARY_ERROR_U, n_sp, w_sp, (double)at_sp, n_th, w_th, (double)at_th, n_kp, w_kp,
           (double)at_kp, bad);
    return (w_sp <= TF_ELEMENTARY_ERROR_U && w_th <= TF_ELEMENTARY_ERROR_U && w_kp <= TF_ELEMENTARY_ERROR_U && bad == 0)
               ? 0
               : 1;
}
"""
)


def ssmcheck_c(elementary_error_u: float) -> str:
    return SSMCHECK_C.replace(
        '#include "tf_model.c"',
        f'#include "tf_model.c"\n\n#define TF_ELEMENTARY_ERROR_U {float(elementary_error_u)!r}',
    )
