"""tf_eva.c: the entry point for Frama-C's EVA (abstract interpretation) over the C step.

`tf_eva_main` calls tf_step once for EVERY input in the declared domain (each value an
interval [TF_DOMAIN_LO, TF_DOMAIN_HI]; token ids [0, V)), every position [0, max_len] (max_len:
the full-context refusal; a ring cache: every int32 value of the stored ring position, the
ones outside [0, 3W) refused), and a cache whose rows hold any float of magnitude <= the bound on
what the step itself can write there (`cache_bound`): one analysis covers every state a
sequence can reach. EVA then reports every operation that may be undefined or produce a NaN
(out-of-bounds index, invalid shift, signed overflow, NaN; -warn-special-float nan: the -inf of
the selection is intended). Its one assumption is the LayerNorm bound, an ACSL assertion in
tf_layer_norm_* (codegen/kernels.py `_ln_assertion`) that it reports as "unknown"; tf_expneg is
used through its ACSL contract, which `make expcheck` proves for all 2^32 float32.

cache_bound: a committed key or value is a column of h W + b with h a LayerNorm output;
|(x_i - mean) / sd| <= sqrt(D) (the squares of a normalised vector sum to at most D), so
|h_i| <= |g_i| sqrt(D) + |b_i| and |k_j| <= sum_i |W_ij| max|h| + |b_j| (the same reasoning as
contracts/score_bound.py). The bound is rounded up and applied to every row.

Not real-time code.
"""

from __future__ import annotations

import numpy as np

from tickformer.model import names

from .c_text import f32_up
from .plan import Plan


def cache_bound(plan: Plan) -> float:
    """Bound on |k|, |v| of any committed row (see the module docstring)."""
    d = plan.d
    layers = names.decoder_layers(plan.config)
    bound = 0.0
    for i, layer in enumerate(layers):
        if i == 0:
            hmax = _embed_bound(plan)
        else:  # layer i reads the output of layer i - 1's last LayerNorm
            norm = layers[i - 1].ffn_norm
            g = np.abs(plan.param(norm["g"], (d,))).astype(np.float64)
            b = np.abs(plan.param(norm["b"], (d,))).astype(np.float64)
            hmax = float(np.max(g * np.sqrt(d) + b))
        for w in ("k", "v"):
            wm = np.abs(plan.param(layer.self_attn[f"w_{w}"], (d, d))).astype(np.float64)
            bm = np.abs(plan.param(layer.self_attn[f"b_{w}"], (d,))).astype(np.float64)
            bound = max(bound, float(np.max(wm.sum(axis=0) * hmax + bm)))
    return bound * (1 + 1e-5) + 1e-30


def _embed_bound(plan: Plan) -> float:
    """Bound on |h| entering layer 0: the embedding plus |PE| <= 1 (windowed: no PE; the 1 is kept
    as margin)."""
    if plan.tokens:
        e = np.abs(plan.param(names.TOK_EMBED, (plan.config.vocab_size, plan.d))).astype(np.float64)
        return float(e.max()) * float(np.sqrt(plan.d)) + 1.0
    lo, hi = plan.domain
    xmax = max(abs(lo), abs(hi))
    w = np.abs(plan.param(names.IN_PROJ["w"], (plan.config.d_in, plan.d))).astype(np.float64)
    b = np.abs(plan.param(names.IN_PROJ["b"], (plan.d,))).astype(np.float64)
    return float(np.max(w.sum(axis=0) * xmax + b)) + 1.0


def eva_c(plan: Plan) -> str:
    if plan.block_kind == "ssm":
        return _eva_ssm_c(plan)
    pos = (
        "s.pos = Frama_C_interval(-2147483647 - 1, 2147483647); /* every int32: ring positions and refusals */"
        if plan.window is not None
        else "s.pos = Frama_C_interval(0, TF_MAX_LEN); /* every position, and a full context */"
    )
    if plan.tokens:
        inputs = "        x[i] = Frama_C_interval(0, TF_D_OUT - 1);"
    else:
        inputs = "        x[i] = Frama_C_float_interval(TF_DOMAIN_LO, TF_DOMAIN_HI);"
    return f"""\
/* tf_eva.c -- Frama-C EVA entry point for the generated step (generated; do not edit).
   make frama-c: the step for every input in the declared domain, every position, and every
   cache content a sequence can produce (|k|, |v| <= TF_EVA_CACHE_BOUND). */
#include "tf_model.h"

#ifdef TF_FRAMA_C
#include "__fc_builtin.h"

#define TF_EVA_CACHE_BOUND {f32_up(cache_bound(plan))}

static tf_state s;

int tf_eva_main(void)
{{
    tf_input x[TF_BATCH * TF_D_IN];
    float y[TF_BATCH * TF_D_OUT];
    float *k = &s.k[0][0][0][0][0];
    float *v = &s.v[0][0][0][0][0];
    int i, status;
    for (i = 0; i < (int)(sizeof(s.k) / sizeof(float)); i++) {{
        k[i] = Frama_C_float_interval(-TF_EVA_CACHE_BOUND, TF_EVA_CACHE_BOUND);
        v[i] = Frama_C_float_interval(-TF_EVA_CACHE_BOUND, TF_EVA_CACHE_BOUND);
    }}
    for (i = 0; i < TF_BATCH * TF_D_IN; i++) {{
{inputs}
    }}
    {pos}
    status = tf_step(&s, x, y);              /* check, stage, output check, commit */
    s.pending = Frama_C_interval(-1, TF_POSITIONS); /* a deferred commit of any position, or none */
    status = status == TF_OK ? tf_stage_pending(&s, x, s.pos, y) : status;
    tf_reset(&s);
    (void)tf_layout(Frama_C_interval(-1, 7));
    (void)tf_artifact_sha256();
    return status;
}}
#endif
"""


def _eva_ssm_c(plan: Plan) -> str:
    """The ssm entry point: the state's interval assumption (both buffers, every layer l in
    [-S_l, S_l], the manifest's state_bound: contracts/state_bound.py, monitored at run time and
    checked by the step itself, TF_E_STATE), every input in the domain, every position."""
    inputs = (
        "        x[i] = Frama_C_interval(0, TF_D_OUT - 1);"
        if plan.tokens
        else "        x[i] = Frama_C_float_interval(TF_DOMAIN_LO, TF_DOMAIN_HI);"
    )
    bounds = ", ".join(f32_up(b) for b in plan.state_bound)
    return f"""\
/* tf_eva.c -- Frama-C EVA entry point for the generated ssm step (generated; do not edit).
   make frama-c: the step for every input in the declared domain, every position (any int32: its
   parity picks the buffer; negative ones are refused), and every state within the manifest's
   per-layer state_bound (the assumption: contracts/state_bound.py, which the step checks on the
   state it writes). */
#include "tf_model.h"

#ifdef TF_FRAMA_C
#include "__fc_builtin.h"

static const float tf_eva_state_bound[TF_LAYERS] = {{{bounds}}};

static tf_state s;

int tf_eva_main(void)
{{
    tf_input x[TF_BATCH * TF_D_IN];
    float y[TF_BATCH * TF_D_OUT];
    int i, p, b, l, d, n, status;
    for (p = 0; p < 2; p++) {{
        for (b = 0; b < TF_BATCH; b++) {{
            for (l = 0; l < TF_LAYERS; l++) {{
                for (d = 0; d < TF_D_MODEL; d++) {{
                    for (n = 0; n < TF_D_STATE; n++) {{
                        s.state[p][b][l][d][n] = Frama_C_float_interval(-tf_eva_state_bound[l], tf_eva_state_bound[l]);
                    }}
                }}
            }}
        }}
    }}
    for (i = 0; i < TF_BATCH * TF_D_IN; i++) {{
{inputs}
    }}
    s.pos = Frama_C_interval(-2147483647 - 1, 2147483647); /* every int32: its parity, and refusals */
    status = tf_stage(&s, x, s.pos, y);
    tf_commit(&s, s.pos);
    status = status == TF_OK ? tf_step(&s, x, y) : status;
    tf_reset(&s);
    (void)tf_layout(Frama_C_interval(-1, 4));
    (void)tf_artifact_sha256();
    return status;
}}
#endif
"""
