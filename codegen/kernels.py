"""C99 text of the step's kernels, each specialised to constant shapes by the generator.

Longer than 600 lines: the step's kernels and the emitters the candidate step (codegen/peek.py)
shares with them (`unrolled_sum`, `select_c`, `cache_piece_c`, `own_key_c`) stay in one module,
so that each addition order the bitwise step = candidate contract rests on is written once.

Why the loops look the way they do (every choice keeps results bitwise independent of the
optimisation level and the vector width, and lets GCC/Clang vectorise without -ffast-math):

- No reduction is ever left to the compiler. A loop that sums into one float cannot be
  vectorised without reassociation (which only -ffast-math permits, and which would make the
  result depend on the vector width). So every product with a contraction runs *output-major*
  -- `y[o] += x[i] * w[i][o]`, vectorised over o, summed in order i = 0, 1, ... for each o --
  and the three true reductions (max, sum of weights, LayerNorm moments) use explicit lanes
  whose order is fixed in the source.
- The LayerNorm and softmax sums follow numpy's pairwise summation exactly (numpy
  `pairwise_sum`: 8 lanes up to 128 values, halves above, rounded to multiples of 8), so the
  moments equal the reference's bit for bit when the inputs do.
- Selection, never arithmetic masks: stale cache rows become -inf by a bitwise blend of the
  score, and their value contributions by a bitwise AND with an all-ones / all-zeros mask --
  0 * inf = NaN cannot leak from a stale row, whatever it holds. Blends are written on the
  bits (a union, defined in C99 TC3 6.5.2.3) because GCC under its default -ftrapping-math
  does not if-convert a float `?:` whose arm is arithmetic, and would not vectorise the loop.
- exp is our own (`tf_expneg`): Cody-Waite reduction by ln 2 and a degree-6 polynomial
  (the Cephes expf coefficients), evaluated without fused multiply-add. Proven by exhaustive
  check over every float32 in its domain (tf_expcheck.c, codegen/testprog.py): error < 1 ULP (docs/codegen.md).
- The build uses -ffp-contract=off (GCC's default under -std=c99; Clang also gets the STDC
  pragma): a fused multiply-add rounds once where the reference rounds twice, and contraction
  would make results depend on -march.

Not real-time code (text generation).
"""

from __future__ import annotations

import textwrap
from typing import Callable

from . import weights
from .c_text import acsl_contract, f32

# --- exp ---------------------------------------------------------------------------------------
# Cephes expf (S. L. Moshier, Cephes Math Library): ln 2 split C1 + C2 with C1 = 355/512 (exact
# products n*C1 for |n| < 2^15), and the polynomial e^r ~ 1 + r + r^2 P(r) on |r| <= ln2 / 2.
EXP_POLY = (
    1.9875691500e-4,
    1.3981999507e-3,
    8.3334519073e-3,
    4.1665795894e-2,
    1.6666665459e-1,
    5.0000001201e-1,
)
EXP_LN2_HI = 0.693359375
EXP_LN2_LO = -2.12194440e-4
EXP_LOG2E = 1.44269504088896341
EXP_CLAMP = -87.0  # arguments below are clamped (so 2^n stays a normal float) ...
EXP_ZERO_BELOW = -86.5  # ... and results for x < -86.5 are 0 (exp(-86.5) = 2.7e-38 < 2^-125)
EXP_MAX_ULP = 0.982  # exhaustive check, every float32 in [-86.5, 0] (docs/codegen.md)
# tf_expneg's ACSL contract (c_text.acsl_contract rows), checked for every float by `make expcheck`
EXP_CONTRACT = (
    (
        "number",
        r"!\is_NaN(x)",
        (r"\is_finite(\result) && 0.0 <= \result <= 1.0", r"\is_minus_infinity(x) ==> \result == 0.0"),
    ),
    ("nan", r"\is_NaN(x)", (r"\is_NaN(\result)",)),
)


def exp_c() -> str:
    """`tf_expneg(x)`: e^x for x <= 0 (the softmax's only arguments after max subtraction)."""
    p = [f32(c) for c in EXP_POLY]
    return f"""\
/* e^x for x <= 0, without libm. Exhaustively checked over every float32 x in [-86.5, 0]
   against double-precision exp: error < 1 ULP (max {EXP_MAX_ULP}; `make expcheck`).
   Exactly 1 for x = 0 (the running max's own weight), exactly 0 for x = -inf (a stale row)
   and for x < -86.5 (true value < 2.7e-38), NaN for NaN (it reaches the output check).
   Cody-Waite: n = round(x log2 e) by the 1.5 * 2^23 trick (no float -> int conversion, so no
   undefined behaviour for any input), r = (x - n C1) - n C2, e^r = 1 + r + r^2 P(r), times 2^n
   built from bits. Branch-free: loops calling it vectorise. x > 0 (never an argument here) is
   taken as 0, so the contract below holds for every float; `make expcheck` checks it for all
   2^32 of them, and Frama-C's EVA uses it in place of the bit-level body. */
{acsl_contract("x", EXP_CONTRACT)}
static inline float tf_expneg(float x)
{{
    tf_bits xb, lo, t, scale, y;
    const uint32_t clamp = 0u - (uint32_t)(x < {f32(EXP_CLAMP)});
    const uint32_t under = 0u - (uint32_t)(x < {f32(EXP_ZERO_BELOW)});
    float xc, n, r, z, poly;
    xb.f = x;
    xb.u &= 0u - (uint32_t)!(x > 0.0f); /* x > 0 -> +0 */
    lo.f = {f32(EXP_CLAMP)};
    xb.u = (xb.u & ~clamp) | (lo.u & clamp); /* max(x, -87) by selection; NaN and -inf handled below */
    xc = xb.f;
    t.f = xc * {f32(EXP_LOG2E)} + 0x1.8p+23f; /* 1.5 * 2^23 + n: n sits in the low mantissa bits */
    n = t.f - 0x1.8p+23f;
    r = xc - n * {f32(EXP_LN2_HI)};
    r = r - n * {f32(EXP_LN2_LO)};
    z = r * r;
    poly = {p[0]};
    poly = poly * r + {p[1]};
    poly = poly * r + {p[2]};
    poly = poly * r + {p[3]};
    poly = poly * r + {p[4]};
    poly = poly * r + {p[5]};
    scale.u = (t.u - 0x4B400000u + 127u) << 23; /* 2^n, n in [-126, 0] after the clamp */
    y.f = (poly * z + r + 1.0f) * scale.f;
    y.u &= ~under; /* x < -86.5 and x = -inf: +0 */
    return y.f;
}}
"""


# --- products ---------------------------------------------------------------------------------
UNROLL = 4  # input rows per pass over y: y = (((y + x0 w0) + x1 w1) + x2 w2) + x3 w3, the same
# rounding as four separate passes (C evaluates + left to right), a quarter of the loads and stores of y


def matvec_name(n_in: int, n_out: int, bias: bool, fmt: str = "fp32") -> str:
    return f"tf_mv_{n_in}x{n_out}" + ("" if bias else "_nb") + weights.SUFFIX[fmt]


def unrolled(line: Callable[[int], str], pad: str) -> str:
    """`line(u)` for the UNROLL rows u of one pass, one C line each, indented by `pad`."""
    return "\n".join(pad + line(u) for u in range(UNROLL))


def unrolled_sum(acc: str, term: Callable[[int], str]) -> str:
    """`(((acc + term(0)) + term(1)) + term(2)) + term(3)`: one pass's UNROLL rows added in row
    order -- the rounding of UNROLL separate passes. Every unrolled product and value pass of the
    step and of the candidate step (codegen/peek.py) is this expression, so their order is one."""
    expr = acc
    for u in range(UNROLL):
        expr = f"({expr} + {term(u)})" if u < UNROLL - 1 else f"{expr} + {term(u)}"
    return expr


def operands(array: str, first: str, pad: str) -> str:
    """`const float x<u> = array[first + u];` for the UNROLL rows of a pass."""
    return unrolled(lambda u: f"const float x{u} = {array}[{first} + {u}];", pad)


def row_pointers(c_type: str, array: str, pitch: int, offset: str, pad: str) -> str:
    """`const c_type *restrict w<u> = array + (i + u) * pitch<offset>;` for the UNROLL rows of a pass."""
    return unrolled(lambda u: f"const {c_type} *restrict w{u} = {array} + (i + {u}) * {pitch}{offset};", pad)


def product_args(fmt: str, bias: bool) -> str:
    """The parameters of a product kernel (matvec_c, peek.matmul_c): x, w in `fmt`, b, y."""
    return (
        f"const float *restrict x, {weights.w_param(fmt)}, "
        + ("const float *restrict b, " if bias else "")
        + "float *restrict y"
    )


def product_term(fmt: str) -> Callable[[int], str]:
    """Row u's term of a product pass: x<u> times w<u>[o] read back from `fmt`."""
    return lambda u: f"x{u} * {weights.load_expr(fmt, f'w{u}[o]')}"


def matvec_c(n_in: int, n_out: int, bias: bool, fmt: str = "fp32") -> str:
    """y[o] = sum_i x[i] w[i * n_out + o] (+ b[o]) for w [n_in][n_out], summed in order
    i = 0..n_in-1 for each o (numpy: x @ w + b), vectorised over o, UNROLL rows per pass.
    (The attention's value half, where rows not selected must add +0 whatever they hold, is
    `values_c`.) fmt: the weights' storage format (codegen/weights.py), read back exactly."""
    name = matvec_name(n_in, n_out, bias, fmt)
    singles = 1 + (n_in - 1) % UNROLL  # rows 1.. handled one at a time, the rest UNROLL at a time
    body = [
        f"""/* [{n_in}] x [{n_in}][{n_out}] -> [{n_out}]{" + bias" if bias else ""}: output-major, order i = 0..{n_in - 1} per output */
static void {name}({product_args(fmt, bias)})
{{
    int i, o;
    for (o = 0; o < {n_out}; o++) {{
        y[o] = x[0] * {weights.load_expr(fmt, "w[o]")};
    }}"""
    ]
    if singles > 1:
        body.append(f"""    for (i = 1; i < {singles}; i++) {{
        const float x0 = x[i];
        const {weights.C_TYPE[fmt]} *restrict w0 = w + i * {n_out};
        for (o = 0; o < {n_out}; o++) {{
            y[o] = y[o] + {product_term(fmt)(0)};
        }}
    }}""")
    if singles < n_in:
        body.append(f"""    for (i = {singles}; i < {n_in}; i += {UNROLL}) {{
{operands("x", "i", " " * 8)}
{row_pointers(weights.C_TYPE[fmt], "w", n_out, "", " " * 8)}
        for (o = 0; o < {n_out}; o++) {{
            y[o] = {unrolled_sum("y[o]", product_term(fmt))};
        }}
    }}""")
    if bias:
        body.append(f"""    for (o = 0; o < {n_out}; o++) {{
        y[o] = y[o] + b[o];
    }}""")
    body.append("}\n")
    return "\n".join(body)


def and_bits_c() -> str:
    """The selections on bits (`tf_and_bits`, `tf_live_or_neg_inf`) and, for Frama-C only
    (TF_FRAMA_C), the same selections written as `?:`, which EVA's value domains track exactly
    (a union reinterpretation of masked bits is 'any float' to them). For masks that are all
    ones or all zeros -- the only ones the step makes -- the two are the same function;
    tests/codegen/test_frama_c.py runs both builds and compares the outputs bit for bit."""
    return """\
#if defined(TF_FRAMA_C)
static inline float tf_and_bits(float v, uint32_t m)
{
    return m != 0u ? v : 0.0f;
}

static inline float tf_live_or_neg_inf(float s, uint32_t keep)
{
    return keep != 0u ? s : -INFINITY;
}

static inline float tf_relu1(float v)
{
    return v < 0.0f ? 0.0f : v;
}
#else
/* v if m is all ones, +0 if m is zero, whatever v holds (inf, NaN): selection on the bits,
   so a stale cache row never meets a multiplication (0 * inf = NaN) */
static inline float tf_and_bits(float v, uint32_t m)
{
    tf_bits b;
    b.f = v;
    b.u &= m;
    return b.f;
}

/* s if keep is all ones, -inf if keep is zero (a stale row's score) */
static inline float tf_live_or_neg_inf(float s, uint32_t keep)
{
    tf_bits b;
    b.f = s;
    b.u = (b.u & keep) | (TF_NEG_INF_BITS & ~keep);
    return b.f;
}

/* np.maximum(v, 0): NaN stays NaN, -0 stays -0 */
static inline float tf_relu1(float v)
{
    tf_bits b;
    b.f = v;
    b.u &= 0u - (uint32_t)!(v < 0.0f);
    return b.f;
}
#endif
"""


# --- numpy's pairwise summation ------------------------------------------------------------------
def pairwise_expr(n: int, base: str, offset: int = 0) -> tuple[str, set[int]]:
    """C expression summing base[offset .. offset+n-1] in numpy's pairwise order, and the leaf
    lengths it calls (each a `tf_pw_<len>` function)."""
    if n <= 128:
        return f"tf_pw_{n}({base} + {offset})", {n}
    half = n // 2
    half -= half % 8
    left, lset = pairwise_expr(half, base, offset)
    right, rset = pairwise_expr(n - half, base, offset + half)
    return f"({left} + {right})", lset | rset


def pairwise_leaf_c(n: int) -> str:
    """numpy pairwise_sum for n <= 128 values: sequential below 8, else 8 lanes combined as
    ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest in order."""
    if n < 8:
        return f"""\
static float tf_pw_{n}(const float *restrict a)
{{
    float res = -0.0f;
    int i;
    for (i = 0; i < {n}; i++) {{
        res = res + a[i];
    }}
    return res;
}}
"""
    body_end = n - n % 8
    return f"""\
static float tf_pw_{n}(const float *restrict a)
{{
    float r[8];
    float res;
    int i, k;
    for (k = 0; k < 8; k++) {{
        r[k] = a[k];
    }}
    for (i = 8; i < {body_end}; i += 8) {{
        for (k = 0; k < 8; k++) {{
            r[k] = r[k] + a[i + k];
        }}
    }}
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (i = {body_end}; i < {n}; i++) {{
        res = res + a[i];
    }}
    return res;
}}
"""


def sum_c(n: int) -> tuple[str, set[int]]:
    """`tf_sum_<n>(a)`: numpy's np.sum of n contiguous float32 (0 + pairwise_sum)."""
    expr, leaves = pairwise_expr(n, "a")
    return (
        f"""\
/* numpy's sum of {n} float32: 0 + pairwise_sum (the same order, so the same bits) */
static float tf_sum_{n}(const float *restrict a)
{{
    return 0.0f + {expr};
}}
""",
        leaves,
    )


# --- LayerNorm ---------------------------------------------------------------------------------
def layer_norm_c(n: int, eps: float, bound: float | None = None) -> str:
    """model/layers.py layer_norm, operation for operation: mean = sum / n; var = sum((x - mean)^2)
    / n; rstd = 1 / sqrt(var + eps); y = g * ((x - mean) * rstd) + b (as numpy evaluates it)."""
    return f"""\
/* LayerNorm over {n} values (Ba et al. 2016; model/layers.py layer_norm, same operation order).
   sq: scratch [{n}]. sqrtf is IEEE 754 correctly rounded, so identical on every conforming target. */
static void tf_layer_norm_{n}(const float *restrict x, const float *restrict g, const float *restrict b,
                              float *restrict y, float *restrict sq)
{{
    int i;
    float mean, var, rstd;
    mean = tf_sum_{n}(x) / {f32(float(n))};
    for (i = 0; i < {n}; i++) {{
        const float c = x[i] - mean;
        sq[i] = c * c;
    }}
    var = tf_sum_{n}(sq) / {f32(float(n))};
    rstd = 1.0f / sqrtf(var + {f32(eps)});
    for (i = 0; i < {n}; i++) {{
        y[i] = g[i] * ((x[i] - mean) * rstd) + b[i];{_ln_assertion(bound)}
    }}
}}
"""


def _ln_assertion(bound: float | None) -> str:
    """ACSL: the LayerNorm output bound |y_i| <= max|g| sqrt(n) + max|b| (sum_i z_i^2 =
    n var / (var + eps) < n for z = (x - mean) rstd). True for every finite input; an interval
    domain cannot derive it (it needs the relation between x and mean), so Frama-C's EVA
    reports it as unknown and then assumes it -- the one assumption of that analysis."""
    if bound is None:
        return ""
    return f"""
        /*@ assert tf_ln_bound: -{f32(bound)} <= y[i] <= {f32(bound)}; */"""


def relu_c(n: int) -> str:
    """np.maximum(x, 0) in place, by selection on the bits (NaN and -0 pass through as in numpy)."""
    return f"""\
/* ReLU in place: np.maximum(x, 0) (NaN stays NaN, -0 stays -0), by selection */
static void tf_relu_{n}(float *restrict x)
{{
    int i;
    for (i = 0; i < {n}; i++) {{
        x[i] = tf_relu1(x[i]);
    }}
}}
"""


# --- the attention over the cache, all heads of one layer -----------------------------------------
def static_live(index: str) -> str:
    """The static cache's selection: row `index` holds an earlier position of this sequence iff
    index < pos (C int expression, 0 or 1)."""
    return f"({index} < pos)"


def ring_live(index: str) -> str:
    """The ring cache's selection at ring position pos, from the two numbers per ring position
    that codegen/caches.py RingCache derives from contracts.ring_buffer.slot_read (and checks
    against it for every ring position and slot): slot `index` is read iff index < lim and
    index != excl (C int expression, 0 or 1; `lim`, `excl` declared by RING_SETUP)."""
    return f"(({index} < lim) & ({index} != excl))"


RING_SETUP = "const int32_t lim = tf_ring_lim[pos], excl = tf_ring_excl[pos];"


def live_mask(live, index: str, u: int) -> str:
    """`const uint32_t m<u>`: all ones if row `index` is selected by `live`, zero if not."""
    return f"const uint32_t m{u} = 0u - (uint32_t){live(index)};"


def row_masks(live) -> str:
    """live_mask of the UNROLL rows i + u of a values pass."""
    return unrolled(lambda u: live_mask(live, f"(i + {u})", u), " " * 8)


def value_term(u: int) -> str:
    """Row u's term of a values pass: x<u> times w<u>[o], +0 for a row not selected (mask m<u>)."""
    return f"x{u} * tf_and_bits(w{u}[o], m{u})"


# --- fragments of the attention that the candidate kernel (codegen/peek.py) emits too ------------
# One emitting function each, so that tf_attention and tf_attention_k compute piece 1 and the merge
# in one order (peek.py's bitwise contract); the text differs only in indentation, in the names the
# caller passes and in the comments (`notes`: the one-row kernel explains, the candidate one refers).
def select_c(rows: int, live, bias_pitch: int | None, pad: str) -> str:
    """The selection of one head's scores sh[0..rows-1]: a row that `live` does not select scores
    -inf whatever it holds; with bias_pitch (windowed), the head's relative-position row (from offset
    `boff`) is added first, as model/attention.py adds it."""
    if bias_pitch is None:
        text = f"""\
for (j = 0; j < {rows}; j++) {{
    sh[j] = tf_live_or_neg_inf(sh[j], 0u - (uint32_t){live("j")});
}}"""
    else:
        text = f"""\
{{
    const float *restrict bh = bias + hd * {bias_pitch} + boff;
    for (j = 0; j < {rows}; j++) {{
        sh[j] = tf_live_or_neg_inf(sh[j] + bh[j], 0u - (uint32_t){live("j")});
    }}
}}"""
    return textwrap.indent(text, pad)


def cache_piece_c(rows: int, m: str, l: str, pad: str, keep: str = "", notes: bool = False) -> str:
    """Piece 1 of one head, the cache (model/attention.py chunk_state): `m` = the max of the selected
    scores sh[] (8 lanes, exact in any order; -inf when no row is live), then `keep` (a statement,
    if any), sh[j] = exp(sh[j] - m) (0 for a -inf score) and `l` = their numpy sum."""
    keep_line = f"\n{keep}" if keep else ""
    safe_note = " /* no live row: s - 0 stays -inf, exp gives 0 */" if notes else ""
    exp_note = " /* every argument <= 0 */" if notes else ""
    lanes_end = rows - rows % 8
    text = f"""\
for (k = 0; k < 8; k++) {{
    lane[k] = -INFINITY;
}}
for (j = 0; j < {lanes_end}; j += 8) {{
    for (k = 0; k < 8; k++) {{
        lane[k] = sh[j + k] > lane[k] ? sh[j + k] : lane[k];
    }}
}}
for (j = {lanes_end}; j < {rows}; j++) {{
    lane[0] = sh[j] > lane[0] ? sh[j] : lane[0];
}}
{m} = lane[0];
for (k = 1; k < 8; k++) {{
    {m} = lane[k] > {m} ? lane[k] : {m};
}}{keep_line}
m_safe = {m} > -INFINITY ? {m} : 0.0f;{safe_note}
for (j = 0; j < {rows}; j++) {{
    sh[j] = tf_expneg(sh[j] - m_safe);{exp_note}
}}
{l} = tf_sum_{rows}(sh);"""
    return textwrap.indent(text, pad)


def own_key_c(
    dh: int,
    m_c: str,
    l_c: str,
    row: str,
    bias_pitch: int | None,
    bias_own: int,
    pad: str,
    notes: bool = False,
) -> str:
    """Piece 2 of one head, its own key (q, kh, vn declared by the caller): s_own = q . kh (plus the
    distance-0 bias column bias_own, windowed), merged with piece 1 (`m_c`, `l_c`) and finalised
    into out[row + o] from acc[row + o] (`row`: "" or an offset ending in " + ")."""
    own_bias = (
        ""
        if bias_pitch is None
        else f"\ns_own = s_own + bias[hd * {bias_pitch} + {bias_own}]; /* distance 0 */"
    )
    merge_note = " /* merge: the side holding the max gets factor exp(0) = 1 exactly */" if notes else ""
    l_note = (
        " /* no-op: the max's own term is exactly 1 and sums of terms >= 0 never fall below a term\n"
        + " " * 28
        + "(contracts/softmax_stability.py S6); stated so a checker needs no relation */"
        if notes
        else ""
    )
    text = f"""\
float s_own = q[0] * kh[0];
float m, alpha, beta, l;
for (o = 1; o < {dh}; o++) {{
    s_own = s_own + q[o] * kh[o];
}}{own_bias}
if (s_own >= {m_c}) {{{merge_note}
    m = s_own;
    alpha = tf_expneg({m_c} - m);
    beta = 1.0f;
}} else {{
    m = {m_c};
    alpha = 1.0f;
    beta = tf_expneg(s_own - m);
}}
l = alpha * {l_c} + beta * 1.0f;
l = l < 1.0f ? 1.0f : l;{l_note}
for (o = hd * {dh}; o < (hd + 1) * {dh}; o++) {{
    out[{row}o] = (alpha * acc[{row}o] + beta * vn[o]) / l;
}}"""
    return textwrap.indent(text, pad)


def values_c(rows: int, heads: int, dh: int, live=static_live, setup: str = "") -> str:
    """acc[h][d] = sum_j p[h][j] v[j][h][d] over live rows j (`live`, a C predicate on the row
    index: static_live or ring_live), every head in one pass over the rows: 8 independent output
    vectors per row (d_model 64) instead of 2 per head, and the same order of additions per
    output (j = 0, 1, ...), UNROLL rows per pass."""
    d = heads * dh
    singles = rows % UNROLL
    single = (
        ""
        if not singles
        else f"""
    for (i = 0; i < {singles}; i++) {{
        {live_mask(live, "i", 0)}
        for (hd = 0; hd < {heads}; hd++) {{
            const float x0 = p[hd * {rows} + i];
            const float *restrict w0 = v + i * {d} + hd * {dh};
            float *restrict yh = acc + hd * {dh};
            for (o = 0; o < {dh}; o++) {{
                yh[o] = yh[o] + {value_term(0)};
            }}
        }}
    }}"""
    )
    setup_line = f"\n    {setup}" if setup else ""
    loop = (
        ""
        if singles == rows
        else f"""
    for (i = {singles}; i < {rows}; i += {UNROLL}) {{
{row_masks(live)}
        for (hd = 0; hd < {heads}; hd++) {{
{operands("p", f"hd * {rows} + i", " " * 12)}
{row_pointers("float", "v", d, f" + hd * {dh}", " " * 12)}
            float *restrict yh = acc + hd * {dh};
            for (o = 0; o < {dh}; o++) {{
                yh[o] = {unrolled_sum("yh[o]", value_term)};
            }}
        }}
    }}"""
    )
    return f"""\
/* Values of the live rows for every head: acc [{heads}][{dh}] = sum_j p[h][j] v[j][h][:], rows not selected
   add +0 whatever they hold. p: [{heads}][{rows}] softmax numerators; v: [{rows}][{heads}][{dh}]. */
static void tf_values(const float *restrict p, const float *restrict v, int32_t pos, float *restrict acc)
{{
    int i, hd, o;{setup_line}
    for (o = 0; o < {d}; o++) {{
        acc[o] = 0.0f;
    }}{single}{loop}
}}
"""


def attention_c(
    rows: int,
    heads: int,
    dh: int,
    live=static_live,
    setup: str = "",
    bias_pitch: int | None = None,
    bias_own: int = 0,
) -> str:
    """The online-softmax attention of every head of one layer (model/attention.py): per head,
    the cache rows as one piece (chunk_state with the rows `live` does not select set to -inf)
    and the own key as a second (m = s, l = 1, acc = v), merged and finalised as `merge` and
    `finalize` do.

    bias_pitch (windowed models): the scores get the relative-position term before the
    selection, as model/attention.py adds it -- per head a row of bias_pitch floats, read
    contiguously from offset `boff` (declared by `setup`) so the add vectorises with the score
    loop; the own key's term is the constant column bias_own."""
    d = heads * dh
    biased = bias_pitch is not None
    bias_arg = "\n                         const float *restrict bias," if biased else ""
    setup_line = f"\n    {setup}" if setup else ""
    if biased:
        why = """\
        /* relative-position term (model/attention.py: added before the selection), then the selection:
           a slot not read at this ring position scores -inf whatever it holds (NaN, inf, an evicted key) */"""
        what = "ring slots"
    else:
        why = (
            "        /* selection: a stale row's score is -inf whatever the row holds (NaN, inf, old keys) */"
        )
        what = "rows"
    return f"""\
/* All {heads} heads at position pos over the cache. kt: [{heads}][{dh}][{rows}] keys, transposed;
   v: [{rows}][{heads}][{dh}] values, row j = cache row j. qs: [{heads}][{dh}] queries scaled by 1/sqrt(dh);
   kn, vn: [{heads}][{dh}] this position's own keys and values. Which {what} are live: {live("j")}; the
   work is the same for every pos (all {rows} rows are read). sc: scratch [{heads}][{rows}]; acc: scratch [{d}];
   out: [{d}], the heads side by side (merge_heads). */
static void tf_attention(const float *restrict qs, const float *restrict kt, const float *restrict v,
                         const float *restrict kn, const float *restrict vn,{bias_arg} int32_t pos,
                         float *restrict sc, float *restrict acc, float *restrict out)
{{
    float lane[8];
    float m_c[{heads}], l_c[{heads}];
    int hd, j, k, o;{setup_line}
    for (hd = 0; hd < {heads}; hd++) {{
        float *restrict sh = sc + hd * {rows};
        float m_safe;
        /* scores of every cache row (constant work): sh[j] = sum_d qs[d] kt[d][j] */
        {matvec_name(dh, rows, False)}(qs + hd * {dh}, kt + hd * {dh * rows}, sh);
{why}
{select_c(rows, live, bias_pitch, " " * 8)}
        /* piece 1, the cache: m_c = max (exact in any order), -inf when no row is live */
{cache_piece_c(rows, "m_c[hd]", "l_c[hd]", " " * 8, notes=True)}
    }}
    /* acc = sum_j p_j v_j over live rows, all heads in one pass (rows not selected add +0) */
    tf_values(sc, v, pos, acc);
    /* piece 2, the own key: m = s_own, l = 1, acc = vn; merge; finalize (l >= 1: no 0/0) */
    for (hd = 0; hd < {heads}; hd++) {{
        const float *q = qs + hd * {dh};
        const float *kh = kn + hd * {dh};
{own_key_c(dh, "m_c[hd]", "l_c[hd]", "", bias_pitch, bias_own, " " * 8, notes=True)}
    }}
}}
"""
