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
candidates moves inside the loops over weight and cache rows. tests/runtime/test_peek.py checks
the equality through the Session (backend "c" against itself stepping the chosen candidate);
tests/codegen/test_peek.py plants mutants of the text that it must catch.

Not real-time code (text generation).
"""

from __future__ import annotations

import numpy as np

from . import kernels, weights
from .c_text import f32
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
    args = (
        f"const float *restrict x, {weights.w_param(fmt)}, "
        + ("const float *restrict b, " if bias else "")
        + "float *restrict y"
    )
    singles = 1 + (n_in - 1) % UNROLL
    plus = " + bias" if bias else ""
    body = [
        f"""/* {batch} x [{n_in}] x [{n_in}][{n_out}] -> {batch} x [{n_out}]{plus}: matvec_c's order, candidates in */
static void {name}({args})
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
                yk[o] = yk[o] + x0 * {weights.load_expr(fmt, "w0[o]")};
            }}
        }}
    }}""")
    if singles < n_in:
        rows = "\n".join(
            f"        const {weights.C_TYPE[fmt]} *restrict w{u} = w + (i + {u}) * {n_out};"
            for u in range(UNROLL)
        )
        loads = "\n".join(
            f"            const float x{u} = x[k * {x_pitch} + i + {u}];" for u in range(UNROLL)
        )
        expr = "yk[o]"
        for u in range(UNROLL):
            wu = weights.load_expr(fmt, f"w{u}[o]")
            expr = f"({expr} + x{u} * {wu})" if u < UNROLL - 1 else f"{expr} + x{u} * {wu}"
        body.append(f"""    for (i = {singles}; i < {n_in}; i += {UNROLL}) {{
{rows}
        for (k = 0; k < {batch}; k++) {{
{loads}
            float *restrict yk = y + k * {y_pitch};
            for (o = 0; o < {n_out}; o++) {{
                yk[o] = {expr};
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
    kernels.attention_c's computation per candidate and head, in its order; the scores'
    product reads each key row once for all candidates, the values' pass each value row once."""
    b_n, rows, heads, dh, d = plan.batch, plan.rows, plan.heads, plan.dh, plan.d
    lanes_end = rows - rows % 8
    biased = bias_pitch is not None
    bias_arg = "\n                           const float *restrict bias," if biased else ""
    setup_line = f"\n    {setup}" if setup else ""
    if biased:
        select = f"""\
            {{
                const float *restrict bh = bias + hd * {bias_pitch} + boff;
                for (j = 0; j < {rows}; j++) {{
                    sh[j] = tf_live_or_neg_inf(sh[j] + bh[j], 0u - (uint32_t){live("j")});
                }}
            }}"""
        own_bias = f"\n            s_own = s_own + bias[hd * {bias_pitch} + {bias_own}]; /* distance 0 */"
    else:
        select = f"""\
            for (j = 0; j < {rows}; j++) {{
                sh[j] = tf_live_or_neg_inf(sh[j], 0u - (uint32_t){live("j")});
            }}"""
        own_bias = ""
    singles = rows % UNROLL
    single = (
        ""
        if not singles
        else f"""
    for (i = 0; i < {singles}; i++) {{
        const uint32_t m0 = 0u - (uint32_t){live("i")};
        for (hd = 0; hd < {heads}; hd++) {{
            const float *restrict w0 = v + i * {d} + hd * {dh};
            for (b = 0; b < {b_n}; b++) {{
                const float x0 = sc[(b * {heads} + hd) * {rows} + i];
                float *restrict yh = acc + b * {d} + hd * {dh};
                for (o = 0; o < {dh}; o++) {{
                    yh[o] = yh[o] + x0 * tf_and_bits(w0[o], m0);
                }}
            }}
        }}
    }}"""
    )
    masks = "\n".join(
        f"        const uint32_t m{u} = 0u - (uint32_t){live(f'(i + {u})')};" for u in range(UNROLL)
    )
    ws = "\n".join(
        f"            const float *restrict w{u} = v + (i + {u}) * {d} + hd * {dh};" for u in range(UNROLL)
    )
    xs = "\n".join(
        f"                const float x{u} = sc[(b * {heads} + hd) * {rows} + i + {u}];"
        for u in range(UNROLL)
    )
    expr = "yh[o]"
    for u in range(UNROLL):
        term = f"x{u} * tf_and_bits(w{u}[o], m{u})"
        expr = f"({expr} + {term})" if u < UNROLL - 1 else f"{expr} + {term}"
    groups = (
        ""
        if singles == rows
        else f"""
    for (i = {singles}; i < {rows}; i += {UNROLL}) {{
{masks}
        for (hd = 0; hd < {heads}; hd++) {{
{ws}
            for (b = 0; b < {b_n}; b++) {{
{xs}
                float *restrict yh = acc + b * {d} + hd * {dh};
                for (o = 0; o < {dh}; o++) {{
                    yh[o] = {expr};
                }}
            }}
        }}
    }}"""
    )
    scores = matmul_name(dh, rows, d, heads * rows, False)
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
{select}
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
            m = lane[0];
            for (k = 1; k < 8; k++) {{
                m = lane[k] > m ? lane[k] : m;
            }}
            m_c[b * {heads} + hd] = m;
            m_safe = m > -INFINITY ? m : 0.0f;
            for (j = 0; j < {rows}; j++) {{
                sh[j] = tf_expneg(sh[j] - m_safe);
            }}
            l_c[b * {heads} + hd] = tf_sum_{rows}(sh);
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
            float s_own = q[0] * kh[0];
            float m, alpha, beta, l;
            for (o = 1; o < {dh}; o++) {{
                s_own = s_own + q[o] * kh[o];
            }}{own_bias}
            if (s_own >= mc) {{
                m = s_own;
                alpha = tf_expneg(mc - m);
                beta = 1.0f;
            }} else {{
                m = mc;
                alpha = 1.0f;
                beta = tf_expneg(s_own - m);
            }}
            l = alpha * l_c[b * {heads} + hd] + beta * 1.0f;
            l = l < 1.0f ? 1.0f : l;
            for (o = hd * {dh}; o < (hd + 1) * {dh}; o++) {{
                out[b * {d} + o] = (alpha * acc[b * {d} + o] + beta * vn[o]) / l;
            }}
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
    for (l = 0; l < TF_LAYERS; l++) {{
        for (b = 0; b < TF_BATCH; b++) {{
            for (hd = 0; hd < TF_HEADS; hd++) {{
                for (d = 0; d < TF_D_HEAD; d++) {{
                    s->k[l][b][hd][d][row] = s->k_new[l][i][hd][d];
                    s->v[l][b][row][hd][d] = s->v_new[l][i][hd][d];
                }}
            }}
        }}
    }}
    return TF_OK;
}}
"""


HEADER_DECLS = """\
int tf_peek(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[TF_BATCH * TF_D_OUT]);
int tf_commit_candidate(tf_state *s, int32_t pos, int32_t i);
"""
