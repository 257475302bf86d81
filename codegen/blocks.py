"""The second of the generator's two hooks: what one layer computes (the block kind); the first,
how past keys are kept, is codegen/caches.py. `codegen/source.py` asks them for C text and never
looks inside.

A block kind supplies its weights (stacked over layers, one array per kind of weight, indexed by
layer: no pointer tables, so the library holds no relocated data), the kernels it calls, and the
layer function `tf_layer(s, l, b, pos)`, which reads the residual stream `s->h`, leaves the
layer's output there, stages what the commit will keep, and never writes the committed state.

Implemented: "attention" and "ssm" (the ssm block over the cache kind "state"). docs/codegen.md,
section "Extending the generator", says what a new kind supplies.

Not real-time code.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tickformer.model import names

from . import c_text, kernels, ssm_kernels, weights
from .c_text import f32
from .caches import CACHE_KINDS, Weight
from .plan import Plan

FFN_SCRATCH = "float ff[TF_D_FF];"  # residual_ffn_c's hidden layer: a scratch member of every kind


def residual_ffn_c(d: int, f: int, fmt: str = "fp32") -> str:
    """The C of every layer kind after its mixer wrote s->t [D]: residual + LayerNorm 1, the
    ReLU feed-forward (hidden layer s->ff, FFN_SCRATCH), residual + LayerNorm 2
    (model/transformer.py's post-norm order). fmt: the storage format of W_1, W_2 (codegen/weights.py)."""

    def mv(n_in: int, n_out: int, bias: bool) -> str:
        return kernels.matvec_name(n_in, n_out, bias, fmt)

    wa = weights.w_arg
    return f"""\
    for (i = 0; i < TF_D_MODEL; i++) {{
        s->t[i] = s->h[i] + s->t[i];
    }}
    tf_layer_norm_{d}(s->t, tf_ln1_g + l * {d}, tf_ln1_b + l * {d}, s->h, s->sq);
    {mv(d, f, True)}(s->h, {wa(fmt, "tf_w1", f"l * {d * f}", f"l * {f}")}, tf_b1 + l * {f}, s->ff);
    tf_relu_{f}(s->ff);
    {mv(f, d, True)}(s->ff, {wa(fmt, "tf_w2", f"l * {f * d}", f"l * {d}")}, tf_b2 + l * {d}, s->t);
    for (i = 0; i < TF_D_MODEL; i++) {{
        s->t[i] = s->h[i] + s->t[i];
    }}
    tf_layer_norm_{d}(s->t, tf_ln2_g + l * {d}, tf_ln2_b + l * {d}, s->h, s->sq);
"""


class AttentionBlock:
    """Post-LN decoder layer (model/transformer.py decoder_layer, the numpy backend's step):
    h = LN1(h + MHA(h)); h = LN2(h + FFN(h)), with Q, K, V from one [D, 3D] product."""

    name = "attention"
    layer_status = False  # tf_layer returns void (SsmBlock's returns a status)

    def kernels(self, plan: Plan) -> list[str]:
        return []

    def sums(self, plan: Plan) -> set[int]:
        return set()

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

    # tf_state's scratch members of this kind's layer, in order (source.py puts them after h, t, sq)
    scratch = (
        "float qkv[3 * TF_D_MODEL]; /* this position's q | k | v */",
        "float qs[TF_D_MODEL]; /* every head's query times 1/sqrt(dh) */",
        "float att[TF_D_MODEL]; /* heads side by side (merge_heads) */",
        "float acc[TF_D_MODEL]; /* the heads' weighted sums of cached values */",
        FFN_SCRATCH,
        "float sc[TF_HEADS * TF_ROWS]; /* every head's scores, then softmax numerators */",
    )

    def scratch_members(self, plan: Plan) -> list[str]:
        return list(self.scratch)

    def matvecs(self, plan: Plan) -> set[tuple[int, int, bool]]:
        d, f = plan.d, plan.config.d_ff
        return {(d, 3 * d, True), (d, d, True), (d, f, True), (f, d, True)}

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
        d, f, dh, fmt = plan.d, plan.config.d_ff, plan.dh, plan.weight_format
        scale = f32(float(np.float32(1.0 / np.sqrt(dh))))  # scaled_scores: dtype.type(1 / sqrt(d))
        mv, wa = kernels.matvec_name, weights.w_arg
        extra = CACHE_KINDS[plan.cache_kind].attention_args(plan)
        w_qkv, w_o = (
            wa(fmt, "tf_w_qkv", f"l * {d * 3 * d}", f"l * {3 * d}"),
            wa(fmt, "tf_w_o", f"l * {d * d}", f"l * {d}"),
        )
        return f"""\
/* One decoder layer l for batch row b at position pos: s->h [D] in, s->h out.
   Stages this position's k, v into s->k_new, s->v_new; reads, never writes, the cache. */
static void tf_layer(tf_state *s, int l, int b, int32_t pos)
{{
    int hd, d, i;
    {mv(d, 3 * d, True, fmt)}(s->h, {w_qkv}, tf_b_qkv + l * {3 * d}, s->qkv);
    for (hd = 0; hd < TF_HEADS; hd++) {{
        for (d = 0; d < TF_D_HEAD; d++) {{
            s->qs[hd * TF_D_HEAD + d] = s->qkv[hd * TF_D_HEAD + d] * {scale};
            s->k_new[l][b][hd][d] = s->qkv[TF_D_MODEL + hd * TF_D_HEAD + d];
            s->v_new[l][b][hd][d] = s->qkv[2 * TF_D_MODEL + hd * TF_D_HEAD + d];
        }}
    }}
    tf_attention(s->qs, &s->k[l][b][0][0][0], &s->v[l][b][0][0][0], s->qkv + TF_D_MODEL, s->qkv + 2 * TF_D_MODEL,
                 {extra}pos, s->sc, s->acc, s->att);
    {mv(d, d, True, fmt)}(s->att, {w_o}, tf_b_o + l * {d}, s->t);
{residual_ffn_c(d, f, fmt)}}}
"""


class SsmBlock(AttentionBlock):
    """Post-LN layer with the selective state-space mixer in place of self-attention (model/ssm.py
    ssm_step, runtime/backends/ssm.py's numpy step): h = LN1(h + mixer(h)); h = LN2(h + FFN(h)).

    The mixer, per channel d and state n (z, B, C from one [D, D + 2N] product):
        delta = softplus(z); s = delta a (a = exp(a_log), computed at generation by numpy in
        float32: the reference's own values); lam = exp(-s); keep = 2t / (1 + t), t = tanh(s / 2);
        u = x[d] B[n]; h_new = lam h + keep u; y[d] = sum_n h_new C[n] + d_skip x[d];
        out = y W_o + b_o.
    Reads state[pos & 1], writes state[1 - (pos & 1)], and checks the state it wrote against the
    manifest's per-layer `state_bound` (TF_E_STATE: finite and within the bound) before the step
    returns TF_OK."""

    name = "ssm"
    layer_status = True  # tf_layer returns TF_E_STATE when the state it wrote breaks its bound

    def _groups(self, plan: Plan) -> tuple[tuple[names.Group, names.Group, names.Group, names.Group], ...]:
        return names.ssm_layers(plan.config)

    def weights(self, plan: Plan) -> list[Weight]:
        d, f, n = plan.d, plan.config.d_ff, plan.d_state
        groups = self._groups(plan)

        def stack(fn: Callable[[int], np.ndarray]) -> np.ndarray:
            return np.stack([fn(i) for i in range(len(groups))])

        def mix(i: int, leaf: str, shape: tuple[int, ...]) -> np.ndarray:
            return plan.param(groups[i][0][leaf], shape)

        def norm(i: int, which: int, leaf: str) -> np.ndarray:
            return plan.param(groups[i][which][leaf], (d,))

        def ffn(i: int, leaf: str, shape: tuple[int, ...]) -> np.ndarray:
            return plan.param(groups[i][2][leaf], shape)

        w_zbc = stack(
            lambda i: np.concatenate(
                [mix(i, "w_delta", (d, d)), mix(i, "w_b", (d, n)), mix(i, "w_c", (d, n))], axis=1
            )
        )  # [L, D, D + 2N]
        b_zbc = stack(
            lambda i: np.concatenate([mix(i, "b_delta", (d,)), mix(i, "b_b", (n,)), mix(i, "b_c", (n,))])
        )
        a = stack(
            lambda i: np.exp(mix(i, "a_log", (d, n)))
        )  # [L, D, N] float32, numpy's exp as the reference
        return [
            Weight("tf_w_zbc", w_zbc, "dec.i.ssm.w_delta | w_b | w_c, columns side by side"),
            Weight("tf_b_zbc", b_zbc, "dec.i.ssm.b_delta | b_b | b_c"),
            Weight("tf_ssm_a", a, "exp(dec.i.ssm.a_log), numpy float32 (model/ssm.py coefficients)"),
            Weight("tf_d_skip", stack(lambda i: mix(i, "d_skip", (d,))), "dec.i.ssm.d_skip"),
            Weight("tf_w_o", stack(lambda i: mix(i, "w_o", (d, d))), "dec.i.ssm.w_o"),
            Weight("tf_b_o", stack(lambda i: mix(i, "b_o", (d,))), "dec.i.ssm.b_o"),
            Weight("tf_ln1_g", stack(lambda i: norm(i, 1, "g")), "dec.i.ln1.g"),
            Weight("tf_ln1_b", stack(lambda i: norm(i, 1, "b")), "dec.i.ln1.b"),
            Weight("tf_w1", stack(lambda i: ffn(i, "w1", (d, f))), "dec.i.ffn.w1"),
            Weight("tf_b1", stack(lambda i: ffn(i, "b1", (f,))), "dec.i.ffn.b1"),
            Weight("tf_w2", stack(lambda i: ffn(i, "w2", (f, d))), "dec.i.ffn.w2"),
            Weight("tf_b2", stack(lambda i: ffn(i, "b2", (d,))), "dec.i.ffn.b2"),
            Weight("tf_ln2_g", stack(lambda i: norm(i, 3, "g")), "dec.i.ln2.g"),
            Weight("tf_ln2_b", stack(lambda i: norm(i, 3, "b")), "dec.i.ln2.b"),
        ]

    scratch = (
        "float zbc[TF_D_MODEL + 2 * TF_D_STATE]; /* this position's z | B | C */",
        "float delta[TF_D_MODEL]; /* softplus(z) */",
        "float prod[TF_D_MODEL * TF_D_STATE]; /* h_new C, summed per channel */",
        "float ymix[TF_D_MODEL]; /* the mixer's readout before W_o */",
        FFN_SCRATCH,
    )

    def matvecs(self, plan: Plan) -> set[tuple[int, int, bool]]:
        d, f, n = plan.d, plan.config.d_ff, plan.d_state
        return {(d, d + 2 * n, True), (d, d, True), (d, f, True), (f, d, True)}

    def sums(self, plan: Plan) -> set[int]:
        return {plan.d_state}

    def layer_norm_bound(self, plan: Plan) -> float:
        d, worst = plan.d, 0.0
        for _, mixer_norm, _, ffn_norm in self._groups(plan):
            for norm in (mixer_norm, ffn_norm):
                g = float(np.abs(plan.param(norm["g"], (d,))).max())
                b = float(np.abs(plan.param(norm["b"], (d,))).max())
                worst = max(worst, g * float(np.sqrt(d)) + b)
        return worst * (1 + 1e-5)

    def kernels(self, plan: Plan) -> list[str]:
        return [ssm_kernels.elementary_c(), self._mixer_c(plan), self._state_check_c(plan)]

    def _mixer_c(self, plan: Plan) -> str:
        d, n = plan.d, plan.d_state
        return f"""\
/* The selective state-space mixer of one layer for one batch row (model/ssm.py ssm_step): x [D] in,
   hr [D][N] the state read, hw [D][N] the state written, out [D]. zbc: x [W_delta | W_B | W_C] + b. */
static void tf_mixer(const float *restrict x, const float *restrict zbc, const float *restrict a,
                     const float *restrict d_skip, const float *restrict hr, float *restrict hw,
                     float *restrict delta, float *restrict prod, float *restrict y)
{{
    int d, n;
    const float *restrict bt = zbc + {d};
    const float *restrict ct = zbc + {d + n};
    for (d = 0; d < {d}; d++) {{
        delta[d] = tf_softplus(zbc[d]); /* > 0 (0 only where it underflows) */
    }}
    for (d = 0; d < {d}; d++) {{
        const float xd = x[d];
        const float dd = delta[d];
        for (n = 0; n < {n}; n++) {{
            const float sv = dd * a[d * {n} + n];      /* s = delta a >= 0 */
            const float lam = tf_expneg(-sv);           /* exp(-s) in [0, 1] */
            const float t = tf_tanh_pos(sv * 0.5f);
            const float keep = (t + t) / (1.0f + t);    /* 1 - exp(-s), as one_minus_exp_neg */
            const float u = xd * bt[n];
            const float hn = lam * hr[d * {n} + n] + keep * u;
            hw[d * {n} + n] = hn;
            prod[d * {n} + n] = hn * ct[n];
        }}
    }}
    for (d = 0; d < {d}; d++) {{
        y[d] = tf_sum_{n}(prod + d * {n}) + d_skip[d] * x[d]; /* readout: (h C).sum(-1) + d_skip x */
    }}
}}
"""

    def _state_check_c(self, plan: Plan) -> str:
        bounds = ", ".join(c_text.f32_up(b) for b in plan.state_bound)
        return f"""\
/* The state written by this step, every layer l finite and within the manifest's state_bound S_l
   (contracts/state_bound.py: |h| <= S_l for inputs in the domain, from lam in [0, 1]). NaN fails. */
static const float tf_state_bound[TF_LAYERS] = {{{bounds}}};

static int tf_check_state(const float *restrict hw, int l)
{{
    int i;
    const float bound = tf_state_bound[l];
    int bad = 0;
    for (i = 0; i < TF_D_MODEL * TF_D_STATE; i++) {{
        const float v = hw[i];
        bad |= !((v < 0.0f ? -v : v) <= bound);
    }}
    return bad ? TF_E_STATE : TF_OK;
}}
"""

    def layer_c(self, plan: Plan) -> str:
        d, f, n = plan.d, plan.config.d_ff, plan.d_state
        mv = kernels.matvec_name
        return f"""\
/* One layer l for batch row b at position pos: s->h [D] in, s->h out. Reads state[pos & 1], writes
   state[1 - (pos & 1)] (never the state read); returns TF_E_STATE if the written state breaks its bound. */
static int tf_layer(tf_state *s, int l, int b, int32_t pos)
{{
    int i;
    const int rd = (int)(pos & 1);
    {mv(d, d + 2 * n, True)}(s->h, tf_w_zbc + l * {d * (d + 2 * n)}, tf_b_zbc + l * {d + 2 * n}, s->zbc);
    tf_mixer(s->h, s->zbc, tf_ssm_a + l * {d * n}, tf_d_skip + l * {d}, &s->state[rd][b][l][0][0],
             &s->state[1 - rd][b][l][0][0], s->delta, s->prod, s->ymix);
    {mv(d, d, True)}(s->ymix, tf_w_o + l * {d * d}, tf_b_o + l * {d}, s->t);
{residual_ffn_c(d, f)}    return tf_check_state(&s->state[1 - rd][b][l][0][0], l);
}}
"""


BLOCK_KINDS = {"attention": AttentionBlock(), "ssm": SsmBlock()}
