"""The candidate entry of the attention kinds: K candidate inputs over ONE history in one call.

A controller evaluates K candidate commands per tick over the stream's history and commits the
one it chooses (`Session.peek` / `Session.commit`, runtime/session.py). The artifact is exported
with batch K; its K batch rows are the candidates of one stream, so their caches hold the same
history. Two entry points of the generated library (tf_model.h):

    int  tf_peek(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[...]);
         what tf_stage computes for every batch row, over the cache of batch row 0 only: the
         shared history is read once for all K candidates (each key and value row is loaded
         once and used by every candidate while it is in L1), and every weight row once for
         all K (the products run candidate-inner). Stages every candidate's K/V rows, checks
         input and output as tf_stage does, never writes the committed state. Applies a pending
         deferred commit first (as tf_stage_pending).
    int  tf_commit_candidate(tf_state *s, int32_t pos, int32_t i);
         candidate i's staged rows -> cache row of pos (ring: its slot) of EVERY batch row, so
         the rows stay one history; TF_E_POSITION for a pos or i out of range (nothing written).

Bitwise contract: for a state whose batch rows hold the same history, tf_peek's outputs and
staged rows are bit for bit tf_stage's. Every output is summed in the same order as the
one-row kernels of codegen/kernels.py (products: i = 0, 1, ..., UNROLL rows per pass; the
values: rows j = 0, 1, ...; the same pairwise sums, exp and merge), only the loop over the
candidates moves inside the loops over weight and cache rows. The parts written alike -- each
unrolled pass's sum, the selection, the cache piece's max and numerators, the own key's merge,
the copy of staged rows -- are emitted for both by the same functions (kernels.unrolled_sum,
select_c, cache_piece_c, own_key_c; caches.copy_staged_c). tests/runtime/test_peek.py checks
the equality through the Session (backend "c" against itself stepping the chosen candidate);
tests/codegen/test_peek.py plants mutants of the text that it must catch.

Not real-time code (text generation).
"""

from __future__ import annotations

import numpy as np

from . import kernels, weights
from .c_text import f32
from .caches import copy_staged_c
from .plan import Plan

UNROLL = kernels.UNROLL


def scratch_members(plan: Plan) -> list[str]:
    """tf_state members of the candidate step: every activation once per candidate."""
    return [
        "/* tf_peek's scratch: one row per candidate (batch row) */",
        "float kh[TF_BATCH][TF_D_MODEL]; /* residual streams */",
        "float kt[TF_BATCH][TF_D_MODEL];",
        "float kqkv[TF_BATCH][3 * TF_D_MODEL];",
        "float kqs[TF_BATCH][TF_D_MODEL];",
        "float katt[TF_BATCH][TF_D_MODEL];",
        "float kacc[TF_BATCH][TF_D_MODEL];",
        "float kff[TF_BATCH][TF_D_FF];",
        "float ksc[TF_BATCH][TF_HEADS][TF_ROWS]; /* scores, then softmax numerators */",
        "float km[TF_BATCH][TF_HEADS]; /* the cache piece's max per candidate and head */",
        "float kl[TF_BATCH][TF_HEADS]; /* ... and its normaliser */",
    ]


def matmul_name(n_in: int, n_out: int, x_pitch: int, y_pitch: int, bias: bool, fmt: str = "fp32") -> str:
    return f"tf_mk_{n_in}x{n_out}_{x_pitch}_{y_pitch}" + ("" if bias else "_nb") + weights.SUFFIX[fmt]


def matmul_c(
    batch: int, n_in: int, n_out: int, x_pitch: int, y_pitch: int, bias: bool, fmt: str = "fp32"
) -> str:
    """y[k][o] = sum_i x[k][i] w[i][o] (+ b[o]) for the `batch` candidates k (x rows x_pitch
    apart, y rows y_pitch apart): per output exactly kernels.matvec_c's order (i = 0, then the
    single rows, then UNROLL rows per pass, then the bias), with the candidates inside the loop
    over weight rows: each group of UNROLL weight rows is loaded once for all candidates."""
    name = matmul_name(n_in, n_out, x_pitch, y_pitch, bias, fmt)
    singles = 1 + (n_in - 1) % UNROLL
    plus = " + bias" if bias else ""
    term = kernels.product_term(fmt)
    body = [
        f"""/* {batch} x [{n_in}] x [{n_in}][{n_out}] -> {batch} x [{n_out}]{plus}: matvec_c's order, candidates in */
static void {name}({kernels.product_args(fmt, bias)})
{{
    int i, k, o;
    for (k = 0; k < {batch}; k++) {{
        const float x0 = x[k * {x_pitch}];
        float *restrict yk = y + k * {y_pitch};
        for (o = 0; o < {n_out}; o++) {{
            yk[o] = x0 * {weights.load_expr(fmt, "w[o]")};
        }}
    }}"""
    ]
    if singles > 1:
        body.append(f"""    for (i = 1; i < {singles}; i++) {{
        const {weights.C_TYPE[fmt]} *restrict w0 = w + i * {n_out};
        for (k = 0; k < {batch}; k++) {{
            const float x0 = x[k * {x_pitch} + i];
            float *restrict yk = y + k * {y_pitch};
            for (o = 0; o < {n_out}; o++) {{
                yk[o] = yk[o] + {term(0)};
            }}
        }}
    }}""")
    if singles < n_in:
        body.append(f"""    for (i = {singles}; i < {n_in}; i += {UNROLL}) {{
{kernels.row_pointers(weights.C_TYPE[fmt], "w", n_out, "", " " * 8)}
        for (k = 0; k < {batch}; k++) {{
{kernels.operands("x", f"k * {x_pitch} + i", " " * 12)}
            float *restrict yk = y + k * {y_pitch};
            for (o = 0; o < {n_out}; o++) {{
                yk[o] = {kernels.unrolled_sum("yk[o]", term)};
            }}
        }}
    }}""")
    if bias:
        body.append(f"""    for (k = 0; k < {batch}; k++) {{
        float *restrict yk = y + k * {y_pitch};
        for (o = 0; o < {n_out}; o++) {{
            yk[o] = yk[o] + b[o];
        }}
    }}""")
    body.append("}\n")
    return "\n".join(body)


def matmuls(plan: Plan) -> set[tuple[int, int, int, int, bool]]:
    """(n_in, n_out, x_pitch, y_pitch, bias) of every product tf_peek makes."""
    d, f, rows, heads, dh = plan.d, plan.config.d_ff, plan.rows, plan.heads, plan.dh
    return {
        (d, 3 * d, d, 3 * d, True),
        (d, d, d, d, True),
        (d, f, d, f, True),
        (f, d, f, d, True),
        (dh, rows, d, heads * rows, False),  # one head's scores of every candidate
    }


def attention_c(plan: Plan, live, setup: str, bias_pitch: int | None, bias_own: int) -> str:
    """Every head of one layer for every candidate, over one cache (kt, v: batch row 0's):
    kernels.attention_c's computation per candidate and head, in its order (the selection, piece
    1 and the own key's merge are emitted by the same kernels functions); the scores' product
    reads each key row once for all candidates, the values' pass each value row once."""
    b_n, rows, heads, dh, d = plan.batch, plan.rows, plan.heads, plan.dh, plan.d
    bias_arg = "\n                           const float *restrict bias," if bias_pitch is not None else ""
    setup_line = f"\n    {setup}" if setup else ""
    singles = rows % UNROLL
    single = (
        ""
        if not singles
        else f"""
    for (i = 0; i < {singles}; i++) {{
        {kernels.live_mask(live, "i", 0)}
        for (hd = 0; hd < {heads}; hd++) {{
            const float *restrict w0 = v + i * {d} + hd * {dh};
            for (b = 0; b < {b_n}; b++) {{
                const float x0 = sc[(b * {heads} + hd) * {rows} + i];
                float *restrict yh = acc + b * {d} + hd * {dh};
                for (o = 0; o < {dh}; o++) {{
                    yh[o] = yh[o] + {kernels.value_term(0)};
                }}
            }}
        }}
    }}"""
    )
    groups = (
        ""
        if singles == rows
        else f"""
    for (i = {singles}; i < {rows}; i += {UNROLL}) {{
{kernels.row_masks(live)}
        for (hd = 0; hd < {heads}; hd++) {{
{kernels.row_pointers("float", "v", d, f" + hd * {dh}", " " * 12)}
            for (b = 0; b < {b_n}; b++) {{
{kernels.operands("sc", f"(b * {heads} + hd) * {rows} + i", " " * 16)}
                float *restrict yh = acc + b * {d} + hd * {dh};
                for (o = 0; o < {dh}; o++) {{
                    yh[o] = {kernels.unrolled_sum("yh[o]", kernels.value_term)};
                }}
            }}
        }}
    }}"""
    )
    scores = matmul_name(dh, rows, d, heads * rows, False)
    piece = kernels.cache_piece_c(
        rows, "m", f"l_c[b * {heads} + hd]", " " * 12, keep=f"m_c[b * {heads} + hd] = m;"
    )
    own = kernels.own_key_c(dh, "mc", f"l_c[b * {heads} + hd]", f"b * {d} + ", bias_pitch, bias_own, " " * 12)
    return f"""\
/* Every head of one layer for the {b_n} candidates at position pos over ONE cache: kt [{heads}][{dh}][{rows}] and
   v [{rows}][{heads}][{dh}] of batch row 0. qs: [{b_n}][{d}] scaled queries; qkv: [{b_n}][{3 * d}], the own keys at
   +{d}, values at +{2 * d}. Per candidate and head exactly tf_attention's computation and order; each key row
   and value row is read once for all candidates. sc: [{b_n}][{heads}][{rows}]; m_c, l_c: [{b_n}][{heads}];
   acc, out: [{b_n}][{d}]. */
static void tf_attention_k(const float *restrict qs, const float *restrict kt, const float *restrict v,
                           const float *restrict qkv,{bias_arg} int32_t pos, float *restrict sc,
                           float *restrict m_c, float *restrict l_c, float *restrict acc, float *restrict out)
{{
    float lane[8];
    int b, hd, i, j, k, o;{setup_line}
    for (hd = 0; hd < {heads}; hd++) {{
        /* scores of every candidate (constant work): sc[b][hd][j] = sum_d qs[b][hd][d] kt[hd][d][j] */
        {scores}(qs + hd * {dh}, kt + hd * {dh * rows}, sc + hd * {rows});
        for (b = 0; b < {b_n}; b++) {{
            float *restrict sh = sc + (b * {heads} + hd) * {rows};
            float m, m_safe;
{kernels.select_c(rows, live, bias_pitch, " " * 12)}
{piece}
        }}
    }}
    for (o = 0; o < {b_n * d}; o++) {{
        acc[o] = 0.0f;
    }}{single}{groups}
    for (b = 0; b < {b_n}; b++) {{
        for (hd = 0; hd < {heads}; hd++) {{
            const float *q = qs + b * {d} + hd * {dh};
            const float *kh = qkv + b * {3 * d} + {d} + hd * {dh};
            const float *vn = qkv + b * {3 * d} + {2 * d};
            const float mc = m_c[b * {heads} + hd];
{own}
        }}
    }}
}}
"""


def layer_c(plan: Plan, extra: str) -> str:
    """`tf_layer_k(s, l, pos)`: blocks.AttentionBlock's layer for every candidate, over batch row
    0's cache; stages every candidate's k, v rows (s->k_new[l][b], s->v_new[l][b])."""
    d, f, dh, b_n, fmt = plan.d, plan.config.d_ff, plan.dh, plan.batch, plan.weight_format
    scale = f32(float(np.float32(1.0 / np.sqrt(dh))))
    wa = weights.w_arg

    def mk(n_in: int, n_out: int, x_pitch: int, y_pitch: int, bias: bool) -> str:
        return matmul_name(n_in, n_out, x_pitch, y_pitch, bias, fmt)

    w_qkv, w_o = (
        wa(fmt, "tf_w_qkv", f"l * {d * 3 * d}", f"l * {3 * d}"),
        wa(fmt, "tf_w_o", f"l * {d * d}", f"l * {d}"),
    )
    w1, w2 = wa(fmt, "tf_w1", f"l * {d * f}", f"l * {f}"), wa(fmt, "tf_w2", f"l * {f * d}", f"l * {d}")

    return f"""\
/* One decoder layer l for every candidate at position pos: s->kh [B][D] in, s->kh out. Stages every
   candidate's k, v into s->k_new[l][b], s->v_new[l][b]; reads batch row 0's cache, never writes the cache. */
static void tf_layer_k(tf_state *s, int l, int32_t pos)
{{
    int b, hd, d, i;
    {mk(d, 3 * d, d, 3 * d, True)}(&s->kh[0][0], {w_qkv}, tf_b_qkv + l * {3 * d}, &s->kqkv[0][0]);
    for (b = 0; b < {b_n}; b++) {{
        for (hd = 0; hd < TF_HEADS; hd++) {{
            for (d = 0; d < TF_D_HEAD; d++) {{
                s->kqs[b][hd * TF_D_HEAD + d] = s->kqkv[b][hd * TF_D_HEAD + d] * {scale};
                s->k_new[l][b][hd][d] = s->kqkv[b][TF_D_MODEL + hd * TF_D_HEAD + d];
                s->v_new[l][b][hd][d] = s->kqkv[b][2 * TF_D_MODEL + hd * TF_D_HEAD + d];
            }}
        }}
    }}
    tf_attention_k(&s->kqs[0][0], &s->k[l][0][0][0][0], &s->v[l][0][0][0][0], &s->kqkv[0][0], {extra}pos,
                   &s->ksc[0][0][0], &s->km[0][0], &s->kl[0][0], &s->kacc[0][0], &s->katt[0][0]);
    {mk(d, d, d, d, True)}(&s->katt[0][0], {w_o}, tf_b_o + l * {d}, &s->kt[0][0]);
    for (b = 0; b < {b_n}; b++) {{
        for (i = 0; i < TF_D_MODEL; i++) {{
            s->kt[b][i] = s->kh[b][i] + s->kt[b][i];
        }}
        tf_layer_norm_{d}(s->kt[b], tf_ln1_g + l * {d}, tf_ln1_b + l * {d}, s->kh[b], s->sq);
    }}
    {mk(d, f, d, f, True)}(&s->kh[0][0], {w1}, tf_b1 + l * {f}, &s->kff[0][0]);
    for (b = 0; b < {b_n}; b++) {{
        tf_relu_{f}(s->kff[b]);
    }}
    {mk(f, d, f, d, True)}(&s->kff[0][0], {w2}, tf_b2 + l * {d}, &s->kt[0][0]);
    for (b = 0; b < {b_n}; b++) {{
        for (i = 0; i < TF_D_MODEL; i++) {{
            s->kt[b][i] = s->kh[b][i] + s->kt[b][i];
        }}
        tf_layer_norm_{d}(s->kt[b], tf_ln2_g + l * {d}, tf_ln2_b + l * {d}, s->kh[b], s->sq);
    }}
}}
"""


def api_c(plan: Plan, position_refused: str, commit_row: str) -> str:
    """tf_peek and tf_commit_candidate (the module docstring)."""
    return f"""\
/* K = TF_BATCH candidate inputs at position pos over ONE history, batch row 0's cache (codegen/peek.py):
   for a state whose batch rows hold the same history, bit for bit what tf_stage computes, with the
   cache and every weight read once for all candidates. Applies a pending deferred commit first. Stages
   every candidate's rows; never writes the committed state. */
int tf_peek(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[TF_BATCH * TF_D_OUT])
{{
    int status, b, l;
    if (s->pending >= 0) {{
        tf_commit(s, s->pending);
        s->pending = -1;
    }}
    if ({position_refused}) {{
        return TF_E_POSITION;
    }}
    status = tf_check_input(x);
    if (status != TF_OK) {{
        return status;
    }}
    for (b = 0; b < TF_BATCH; b++) {{
        tf_embed_row(x + b * TF_D_IN, pos, s->kh[b]);
    }}
    for (l = 0; l < TF_LAYERS; l++) {{
        tf_layer_k(s, l, pos);
    }}
    for (b = 0; b < TF_BATCH; b++) {{
        tf_project_row(s->kh[b], y + b * TF_D_OUT);
    }}
    return tf_check_output(y);
}}

/* Candidate i's staged rows into the cache row of pos ({commit_row}) of EVERY batch row: the rows stay
   one history. Call only after tf_peek (or tf_stage) at pos returned TF_OK. TF_E_POSITION, nothing
   written, for a pos or i out of range. */
int tf_commit_candidate(tf_state *s, int32_t pos, int32_t i)
{{
    int l, b, hd, d;
    int32_t row;
    if ({position_refused} || i < 0 || i >= TF_BATCH) {{
        return TF_E_POSITION;
    }}
    row = {commit_row};
{copy_staged_c("i")}
    return TF_OK;
}}
"""


HEADER_DECLS = """\
int tf_peek(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[TF_BATCH * TF_D_OUT]);
int tf_commit_candidate(tf_state *s, int32_t pos, int32_t i);
"""
