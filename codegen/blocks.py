"""The two hooks the generator is built around: how past keys are kept (cache kind) and what one
layer computes (block kind). `codegen/source.py` asks them for C text and never looks inside.

A cache kind supplies the committed state's members, the per-head attention kernel over that
state (which rows are live at position pos: the selection), the commit (which row position pos
is written to) and the reset. A block kind supplies its weights (stacked over layers, one
array per kind of weight, indexed by layer: no pointer tables, so the library holds no
relocated data), the kernels it calls, and the layer function `tf_layer(s, l, b, pos)`, which
reads the residual stream `s->h`, leaves the layer's output there, stages what the commit
will keep, and never writes the committed state.

Implemented: cache kind "static" and block kind "attention". What a ring cache (windowed
attention) and a diagonal state-space block need is written in docs/codegen.md, section
"Extending the generator".

Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tickformer.model import names

from . import kernels
from .c_text import f32
from .plan import Plan


@dataclass(frozen=True)
class Weight:
    """One emitted constant array: C name, values (float32, emitted flat in C order), comment."""

    name: str
    values: np.ndarray
    comment: str


class StaticCache:
    """N = max_len rows; row p holds position p; at position pos rows j >= pos are stale and
    selected out (keys to -inf, values to +0). Reset only sets the position to 0."""

    name = "static"

    def rows(self, plan: Plan) -> int:
        return plan.config.max_len

    def state_members(self, plan: Plan) -> list[str]:
        return [
            "float k[TF_LAYERS][TF_BATCH][TF_HEADS][TF_D_HEAD][TF_ROWS]; /* committed keys, transposed: "
            "column p = position p */",
            "float v[TF_LAYERS][TF_BATCH][TF_ROWS][TF_HEADS][TF_D_HEAD]; /* committed values: row p = "
            "position p, heads side by side */",
            "float k_new[TF_LAYERS][TF_BATCH][TF_HEADS][TF_D_HEAD]; /* staged by tf_stage, written by tf_commit */",
            "float v_new[TF_LAYERS][TF_BATCH][TF_HEADS][TF_D_HEAD];",
        ]

    def kernels(self, plan: Plan) -> list[str]:
        rows = self.rows(plan)
        return [
            kernels.values_c(rows, plan.heads, plan.dh),
            kernels.attention_static_c(rows, plan.heads, plan.dh),
        ]

    def matvecs(self, plan: Plan) -> set[tuple[int, int, bool, bool]]:
        return {(plan.dh, self.rows(plan), False, False)}  # one head's scores

    def sums(self, plan: Plan) -> set[int]:
        return {self.rows(plan)}

    def commit_c(self, plan: Plan) -> str:
        return """\
    int l, b, hd, d;
    if (pos < 0 || pos >= TF_ROWS) {
        return; /* tf_stage refused this position; nothing was staged for it */
    }
    for (l = 0; l < TF_LAYERS; l++) {
        for (b = 0; b < TF_BATCH; b++) {
            for (hd = 0; hd < TF_HEADS; hd++) {
                for (d = 0; d < TF_D_HEAD; d++) {
                    s->k[l][b][hd][d][pos] = s->k_new[l][b][hd][d];
                    s->v[l][b][pos][hd][d] = s->v_new[l][b][hd][d];
                }
            }
        }
    }
"""

    def reset_c(self, plan: Plan) -> str:
        return "    /* static cache: nothing to clear, stale rows are selected out by position */\n"


class AttentionBlock:
    """Post-LN decoder layer (model/transformer.py decoder_layer, the numpy backend's step):
    h = LN1(h + MHA(h)); h = LN2(h + FFN(h)), with Q, K, V from one [D, 3D] product."""

    name = "attention"

    def weights(self, plan: Plan) -> list[Weight]:
        d, f, n = plan.d, plan.config.d_ff, plan.config.n_layers

        layers = names.decoder_layers(plan.config)

        def stack(fn: Callable[[int], np.ndarray]) -> np.ndarray:
            return np.stack([fn(i) for i in range(n)])

        def attn(i: int, w: str) -> np.ndarray:
            return plan.param(layers[i].self_attn[w], (d, d) if w.startswith("w") else (d,))

        def ln1(i: int, leaf: str) -> np.ndarray:
            return plan.param(layers[i].self_attn_norm[leaf], (d,))

        def ffn(i: int, leaf: str, shape: tuple[int, ...]) -> np.ndarray:
            return plan.param(layers[i].ffn[leaf], shape)

        def ln2(i: int, leaf: str) -> np.ndarray:
            return plan.param(layers[i].ffn_norm[leaf], (d,))

        qkv = stack(
            lambda i: np.concatenate([attn(i, "w_q"), attn(i, "w_k"), attn(i, "w_v")], axis=1)
        )  # [L, D, 3D]
        b_qkv = stack(lambda i: np.concatenate([attn(i, "b_q"), attn(i, "b_k"), attn(i, "b_v")]))  # [L, 3D]
        return [
            Weight("tf_w_qkv", qkv, "dec.i.self_attn.w_q | w_k | w_v, columns side by side"),
            Weight("tf_b_qkv", b_qkv, "dec.i.self_attn.b_q | b_k | b_v"),
            Weight("tf_w_o", stack(lambda i: attn(i, "w_o")), "dec.i.self_attn.w_o"),
            Weight("tf_b_o", stack(lambda i: attn(i, "b_o")), "dec.i.self_attn.b_o"),
            Weight("tf_ln1_g", stack(lambda i: ln1(i, "g")), "dec.i.ln1.g"),
            Weight("tf_ln1_b", stack(lambda i: ln1(i, "b")), "dec.i.ln1.b"),
            Weight("tf_w1", stack(lambda i: ffn(i, "w1", (d, f))), "dec.i.ffn.w1"),
            Weight("tf_b1", stack(lambda i: ffn(i, "b1", (f,))), "dec.i.ffn.b1"),
            Weight("tf_w2", stack(lambda i: ffn(i, "w2", (f, d))), "dec.i.ffn.w2"),
            Weight("tf_b2", stack(lambda i: ffn(i, "b2", (d,))), "dec.i.ffn.b2"),
            Weight("tf_ln2_g", stack(lambda i: ln2(i, "g")), "dec.i.ln2.g"),
            Weight("tf_ln2_b", stack(lambda i: ln2(i, "b")), "dec.i.ln2.b"),
        ]

    def scratch_members(self, plan: Plan) -> list[str]:
        return [
            "float qkv[3 * TF_D_MODEL]; /* this position's q | k | v */",
            "float qs[TF_D_MODEL]; /* every head's query times 1/sqrt(dh) */",
            "float att[TF_D_MODEL]; /* heads side by side (merge_heads) */",
            "float acc[TF_D_MODEL]; /* the heads' weighted sums of cached values */",
            "float ff[TF_D_FF];",
            "float sc[TF_HEADS * TF_ROWS]; /* every head's scores, then softmax numerators */",
        ]

    def matvecs(self, plan: Plan) -> set[tuple[int, int, bool, bool]]:
        d, f = plan.d, plan.config.d_ff
        return {(d, 3 * d, True, False), (d, d, True, False), (d, f, True, False), (f, d, True, False)}

    def layer_norms(self, plan: Plan) -> set[int]:
        return {plan.d}

    def layer_norm_bound(self, plan: Plan) -> float:
        """max over every LayerNorm of max|g| sqrt(D) + max|b|, with 1e-5 relative margin for
        the roundings of the normalisation (kernels._ln_assertion)."""
        d, worst = plan.d, 0.0
        for layer in names.decoder_layers(plan.config):
            for norm in (layer.self_attn_norm, layer.ffn_norm):
                g = float(np.abs(plan.param(norm["g"], (d,))).max())
                b = float(np.abs(plan.param(norm["b"], (d,))).max())
                worst = max(worst, g * float(np.sqrt(d)) + b)
        return worst * (1 + 1e-5)

    def relus(self, plan: Plan) -> set[int]:
        return {plan.config.d_ff}

    def layer_c(self, plan: Plan) -> str:
        d, f, dh = plan.d, plan.config.d_ff, plan.dh
        scale = f32(float(np.float32(1.0 / np.sqrt(dh))))  # scaled_scores: dtype.type(1 / sqrt(d))
        mv = kernels.matvec_name
        return f"""\
/* One decoder layer l for batch row b at position pos: s->h [D] in, s->h out.
   Stages this position's k, v into s->k_new, s->v_new; reads, never writes, the cache. */
static void tf_layer(tf_state *s, int l, int b, int32_t pos)
{{
    int hd, d, i;
    {mv(d, 3 * d, True)}(s->h, tf_w_qkv + l * {d * 3 * d}, tf_b_qkv + l * {3 * d}, s->qkv);
    for (hd = 0; hd < TF_HEADS; hd++) {{
        for (d = 0; d < TF_D_HEAD; d++) {{
            s->qs[hd * TF_D_HEAD + d] = s->qkv[hd * TF_D_HEAD + d] * {scale};
            s->k_new[l][b][hd][d] = s->qkv[TF_D_MODEL + hd * TF_D_HEAD + d];
            s->v_new[l][b][hd][d] = s->qkv[2 * TF_D_MODEL + hd * TF_D_HEAD + d];
        }}
    }}
    tf_attention(s->qs, &s->k[l][b][0][0][0], &s->v[l][b][0][0][0], s->qkv + TF_D_MODEL, s->qkv + 2 * TF_D_MODEL, pos,
                 s->sc, s->acc, s->att);
    {mv(d, d, True)}(s->att, tf_w_o + l * {d * d}, tf_b_o + l * {d}, s->t);
    for (i = 0; i < TF_D_MODEL; i++) {{
        s->t[i] = s->h[i] + s->t[i];
    }}
    tf_layer_norm_{d}(s->t, tf_ln1_g + l * {d}, tf_ln1_b + l * {d}, s->h, s->sq);
    {mv(d, f, True)}(s->h, tf_w1 + l * {d * f}, tf_b1 + l * {f}, s->ff);
    tf_relu_{f}(s->ff);
    {mv(f, d, True)}(s->ff, tf_w2 + l * {f * d}, tf_b2 + l * {d}, s->t);
    for (i = 0; i < TF_D_MODEL; i++) {{
        s->t[i] = s->h[i] + s->t[i];
    }}
    tf_layer_norm_{d}(s->t, tf_ln2_g + l * {d}, tf_ln2_b + l * {d}, s->h, s->sq);
}}
"""


CACHE_KINDS = {"static": StaticCache()}
BLOCK_KINDS = {"attention": AttentionBlock()}
