"""The generated translation unit: `tf_model.h` (API, shapes, state struct) and `tf_model.c`.

The C API (the contract is in docs/codegen.md; the Python `c` backend uses stage/commit):

    int  tf_stage(tf_state *s, const tf_input x[], int32_t pos, float y[]);
         pos: the absolute position (static cache) or the ring position in [0, 3W) (ring
         cache, contracts.ring_buffer.ring_position); checks pos and x (finite, in the
         declared domain; token ids in [0, V)), runs the step, writes y, stages this
         position's K/V rows, checks y (finite, |y| <= the artifact's output bound). Never
         writes the committed state: on any status != TF_OK the cache is exactly as before.
    void tf_commit(tf_state *s, int32_t pos);   staged rows -> cache row of pos (ring: its slot)
    int  tf_step(tf_state *s, const tf_input x[], float y[]);
         the whole tick for callers without Python: stages, commits and advances s->pos only if
         everything succeeded; a static cache refuses when the context is full, a ring cache
         slides (s->pos walks the ring positions, next_ring_position).
    void tf_reset(tf_state *s);
Memory: the weights are `static const` arrays in this file; everything that changes (the KV
cache, the staged rows, the scratch activations, the position) is one `tf_state` struct of
compile-time size that the caller places -- `static tf_state state;` in a firmware image, a
buffer of `tf_layout(0)` bytes in the Python backend. The library itself holds no writable
data at all (tests/codegen/test_static_evidence.py checks the object file), so any number of
independent states can run the same code. No malloc, no recursion, no VLAs, constant loop
bounds; the only library function called is sqrtf. Not real-time code (text generation).
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.model import names

from . import c_text, kernels, peek
from . import weights as wformat
from .blocks import BLOCK_KINDS
from .caches import CACHE_KINDS, StaticCache, Weight
from .plan import Plan

STATUS = (
    ("TF_OK", 0, "the step ran; y holds the output (stage: rows staged)"),
    (
        "TF_E_POSITION",
        1,
        "pos outside 0..TF_POSITIONS-1 (static cache: max_len; ring cache: 3 W ring positions)",
    ),
    ("TF_E_NONFINITE", 2, "an input value is NaN or infinite"),
    ("TF_E_DOMAIN", 3, "an input value is outside the declared domain [TF_DOMAIN_LO, TF_DOMAIN_HI]"),
    ("TF_E_TOKEN", 4, "a token id is outside 0..TF_D_OUT-1"),
    (
        "TF_E_OUTPUT",
        5,
        "an output is NaN, infinite or beyond the artifact's output bound (nothing staged is committed)",
    ),
    ("TF_E_FULL", 6, "tf_step, static cache only: the context is full (position TF_MAX_LEN); call tf_reset"),
    (
        "TF_E_STATE",
        7,
        "ssm: the state written is NaN, infinite or beyond the manifest's state_bound (not committed)",
    ),
)
LAYOUT_FIELDS = StaticCache.layout  # the attention kinds' tf_layout fields: 0 sizeof, then byte offsets


# Modules outside codegen/ whose code decides the generated text (not only the artifact's
# numbers): the positional table, the parameter names, the ring-slot arithmetic, the state layout.
TEXT_DEPENDENCIES = (
    "tickformer.model.layers",
    "tickformer.model.names",
    "tickformer.contracts.ring_buffer",
    "tickformer.runtime.backends.c",  # the tf_layout fields (LAYOUTS)
)


def generator_id() -> str:
    """A digest of this package's own source files and of TEXT_DEPENDENCIES: changes whenever
    the generator or what its text is computed from does, so a build cache keyed by it never
    serves code from an older generator."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    for name in TEXT_DEPENDENCIES:
        module = importlib.import_module(name)
        digest.update(name.encode())
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


def model_sources(plan: Plan) -> dict[str, bytes]:
    """tf_model.h and tf_model.c only (what the `c` backend compiles)."""
    gen = generator_id()
    return {"tf_model.h": header(plan, gen).encode(), "tf_model.c": source(plan, gen).encode()}


def header(plan: Plan, generator: str) -> str:
    cfg = plan.config
    cache = CACHE_KINDS[plan.cache_kind]
    block = BLOCK_KINDS[plan.block_kind]
    status = "\n".join(f"    {name} = {code}, /* {text} */" for name, code, text in STATUS)
    members = "\n".join("    " + m for m in cache.state_members(plan))
    scratch = "\n".join(
        "    " + m
        for m in [
            "float h[TF_D_MODEL]; /* residual stream of the batch row being computed */",
            "float t[TF_D_MODEL];",
            f"float sq[{max(plan.d, 1)}]; /* LayerNorm scratch */",
            *block.scratch_members(plan),
            f"float out[{plan.d_out}];",
            *(peek.scratch_members(plan) if _peeks(plan) else []),
        ]
    )
    in_type = "int64_t" if plan.tokens else "float"
    what_pos = (
        "the session's position, only its parity matters"
        if plan.block_kind == "ssm"
        else ("the ring position" if plan.window else "the position")
    )
    layout_text = ", ".join(cache.layout[1:])
    pos_range = (
        "ssm: 0 or 1, the buffer read next"
        if plan.block_kind == "ssm"
        else ("ring position, in [0, 3W)" if plan.window else "in [0, max_len]")
    )
    lo, hi = plan.domain
    return f"""\
/* tf_model.h -- the step of one tickformer artifact as C99 (generated; do not edit).
   Artifact manifest_sha256 {plan.artifact_sha256}
   Generator {generator}; regenerate with `tickformer codegen ART --out DIR`.
   Contract, numbers and how they were measured: docs/codegen.md in the tickformer repository. */
#ifndef TF_MODEL_H
#define TF_MODEL_H

#include <stdint.h>

#define TF_BATCH {plan.batch}
#define TF_TOKENS {1 if plan.tokens else 0} /* 1: inputs are int64 token ids, outputs logits */
#define TF_D_IN {plan.d_in} /* inputs per batch row */
#define TF_D_OUT {plan.d_out} /* outputs per batch row */
#define TF_MAX_LEN {cfg.max_len}
#define TF_RING {1 if plan.window is not None else 0} /* 1: a ring cache (sliding window), tf_step never fills */
#define TF_WINDOW {plan.window or 0} /* the window W (ring cache), 0 for a static cache */
#define TF_SSM {1 if plan.block_kind == "ssm" else 0} /* 1: the state-space block, a fixed state, tf_step never fills */
#define TF_D_STATE {plan.d_state} /* states per channel (ssm), 0 for attention */
#define TF_ROWS {cache.rows(plan)} /* cache rows ({plan.cache_kind} cache) */
#define TF_POSITIONS {plan.positions} /* tf_stage's pos is in [0, TF_POSITIONS): {what_pos} */
#define TF_LAYERS {cfg.n_layers}
#define TF_HEADS {cfg.n_heads}
#define TF_D_HEAD {plan.dh}
#define TF_D_MODEL {plan.d}
#define TF_D_FF {cfg.d_ff}
#define TF_WEIGHT_FORMAT "{plan.weight_format}" /* layer matrices stored as fp32|fp16|bf16|int8; float32 arithmetic */
#define TF_DOMAIN_LO {c_text.f32_up(lo)} /* declared input domain (float32 inside [{lo!r}, {hi!r}]) */
#define TF_DOMAIN_HI {c_text.f32_down(hi)}
{_columns_h(plan)}
typedef {in_type} tf_input;

/* 64-byte alignment (one cache line, one AVX-512 vector) for the weights and the state, so no
   vector load of a row straddles two lines; GCC and Clang spell it this way, other compilers get
   the natural alignment (the same results, slower loads). */
#if defined(__GNUC__)
#define TF_ALIGN64 __attribute__((aligned(64)))
#else
#define TF_ALIGN64
#endif

enum tf_status {{
{status}
}};

/* Everything that changes. Place it in static storage (or any memory of tf_layout(0) bytes;
   64-byte aligned memory is the fastest).
   tf_reset makes ANY memory a valid initial state: nothing but `pos` is read before it is
   written, except cache rows, which are selected out until this stream commits them. */
typedef struct TF_ALIGN64 tf_state {{
    int32_t pos; /* tf_step's next position ({pos_range}) */
    int32_t pending; /* tf_defer_commit: the position whose staged rows tf_stage_pending commits first (-1: none) */
    int32_t reserved[14]; /* keeps the arrays 64-byte aligned when the state is */
{members}
    /* scratch: overwritten by every tf_stage, never read before written */
{scratch}
}} tf_state;

void tf_reset(tf_state *s);
int tf_stage(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[TF_BATCH * TF_D_OUT]);
void tf_commit(tf_state *s, int32_t pos);
int tf_stage_pending(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[TF_BATCH * TF_D_OUT]);
int tf_step(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], float y[TF_BATCH * TF_D_OUT]);
const char *tf_artifact_sha256(void);
int32_t tf_layout(int32_t field); /* 0: sizeof(tf_state); then byte offsets of {layout_text} */
{peek.HEADER_DECLS if _peeks(plan) else ""}
#endif
"""


def _peeks(plan: Plan) -> bool:
    """The attention kinds have the candidate entry (tf_peek, codegen/peek.py); ssm's peek is the
    Python backend's row copies of its state."""
    return plan.block_kind == "attention"


def _peek_c(plan: Plan) -> list[str]:
    """The candidate entry's kernels, layer and API (codegen/peek.py), after the step's."""
    if not _peeks(plan):
        return []
    cache = CACHE_KINDS[plan.cache_kind]
    live, setup, pitch, own = cache.selection(plan)
    return [
        *(  # the layer products (with bias) read the format; the scores' (no bias) the float32 cache
            peek.matmul_c(plan.batch, *shape, fmt=plan.weight_format if shape[-1] else "fp32")
            for shape in sorted(peek.matmuls(plan))
        ),
        peek.attention_c(plan, live, setup, pitch, own),
        peek.layer_c(plan, cache.attention_args(plan)),
    ]


def _weights(plan: Plan) -> list[Weight]:
    from tickformer.model.layers import positional_encoding

    cfg = plan.config
    out = (
        []
        if not plan.has_pe  # windowed models and ssm blocks have no absolute positions (model/transformer.py embed)
        else [
            Weight(
                "tf_pe",
                positional_encoding(cfg.max_len, cfg.d_model),
                "sinusoidal positions (model/layers.py positional_encoding)",
            )
        ]
    )
    if plan.tokens:
        e = plan.param(names.TOK_EMBED, (cfg.vocab_size, cfg.d_model))
        out.append(Weight("tf_embed", e, "tok_embed"))
        out.append(
            Weight(
                "tf_embed_t", np.ascontiguousarray(e.T), "tok_embed transposed (the tied output projection)"
            )
        )
    else:
        out += [
            Weight("tf_w_in", plan.param(names.IN_PROJ["w"], (cfg.d_in, cfg.d_model)), "in_proj.w"),
            Weight("tf_b_in", plan.param(names.IN_PROJ["b"], (cfg.d_model,)), "in_proj.b"),
            Weight("tf_w_out", plan.param(names.OUT_PROJ["w"], (cfg.d_model, cfg.d_out)), "out_proj.w"),
            Weight("tf_b_out", plan.param(names.OUT_PROJ["b"], (cfg.d_out,)), "out_proj.b"),
        ]
    return out + CACHE_KINDS[plan.cache_kind].weights(plan) + BLOCK_KINDS[plan.block_kind].weights(plan)


def _embed_c(plan: Plan) -> str:
    d = plan.d
    if plan.tokens:
        sqrt_d = c_text.f32(float(np.float32(np.sqrt(d))))
        pe, what = _pe_term(plan)
        return f"""\
/* E[id] * sqrt(D){what} (model/transformer.py embed) */
static void tf_embed_row(const tf_input *x, int32_t pos, float *restrict h)
{{
    int i;
    const float *e = tf_embed + (int32_t)x[0] * TF_D_MODEL; /* 0 <= x[0] < V: checked */{_unused_pos(plan)}
    for (i = 0; i < TF_D_MODEL; i++) {{
        h[i] = e[i] * {sqrt_d}{pe};
    }}
}}
"""
    if not plan.has_pe:
        return f"""\
/* x W_in + b_in (model/transformer.py embed; windowed or ssm: no absolute positions) */
static void tf_embed_row(const tf_input *x, int32_t pos, float *restrict h)
{{{_unused_pos(plan)}
    {kernels.matvec_name(plan.d_in, d, True)}(x, tf_w_in, tf_b_in, h);
}}
"""
    return f"""\
/* (x W_in + b_in) + PE[pos] (model/transformer.py embed) */
static void tf_embed_row(const tf_input *x, int32_t pos, float *restrict h)
{{
    int i;
    {kernels.matvec_name(plan.d_in, d, True)}(x, tf_w_in, tf_b_in, h);
    for (i = 0; i < TF_D_MODEL; i++) {{
        h[i] = h[i] + tf_pe[pos * TF_D_MODEL + i];
    }}
}}
"""


def _pe_term(plan: Plan) -> tuple[str, str]:
    """The positional term of a token embedding and its comment (none for windowed models)."""
    if not plan.has_pe:
        return "", " (windowed or ssm: no absolute positions)"
    return " + tf_pe[pos * TF_D_MODEL + i]", " + PE[pos]"


def _unused_pos(plan: Plan) -> str:
    return (
        ""
        if plan.has_pe
        else "\n    (void)pos; /* no absolute positions: the embedding does not depend on pos */"
    )


def _project_c(plan: Plan) -> str:
    if plan.tokens:
        return f"""\
/* logits = h E^T (tied output projection) */
static void tf_project_row(const float *restrict h, float *restrict y)
{{
    {kernels.matvec_name(plan.d, plan.d_out, False)}(h, tf_embed_t, y);
}}
"""
    return f"""\
/* y = h W_out + b_out */
static void tf_project_row(const float *restrict h, float *restrict y)
{{
    {kernels.matvec_name(plan.d, plan.d_out, True)}(h, tf_w_out, tf_b_out, y);
}}
"""


def _comment_text(value: Any, limit: int = 48) -> str:
    """A user's signal name or unit, safe inside a C comment: printable ASCII, no comment
    delimiters, at most `limit` characters (the names come from the user's data file)."""
    text = "".join(c if " " <= c <= "~" else "?" for c in str(value))[:limit]
    return text.replace("*/", "* /").replace("/*", "/ *")


def _columns_h(plan: Plan) -> str:
    """The header's input columns: what each of x's TF_D_IN values is (name, unit, from the
    manifest's "signals") and its declared domain, checked per column by tf_check_input
    (TF_DOMAIN_COLUMNS 1); and the outputs' meaning. Empty when the artifact declares neither."""
    one = (
        "#define TF_DOMAIN_COLUMNS 0 /* one domain for every input value */\n"
        "#define TF_INPUT_LO(i) TF_DOMAIN_LO /* the domain of input value i of a row */\n"
        "#define TF_INPUT_HI(i) TF_DOMAIN_HI\n"
    )
    if plan.tokens or (plan.columns is None and plan.signals is None):
        return one
    signals = plan.signals or {}
    names = {c.get("index"): c for c in signals.get("inputs", []) if isinstance(c, dict)}
    lines = ["/* Inputs, x[b * TF_D_IN + j], in this order:"]
    for j in range(plan.d_in):
        col = names.get(j, {})
        label = _comment_text(col.get("name", f"column {j}"))
        unit = f" [{_comment_text(col['unit'], 16)}]" if col.get("unit") else ""
        role = f" ({_comment_text(col['role'], 8)})" if col.get("role") else ""
        domain = "" if plan.columns is None else f" in [{plan.columns[0][j]!r}, {plan.columns[1][j]!r}]"
        lines.append(f"   j={j}: {label}{unit}{role}{domain}")
    outputs = [c for c in signals.get("outputs", []) if isinstance(c, dict)]
    if outputs:
        lines.append("   Outputs, y[b * TF_D_OUT + k]:")
        for c in outputs[: plan.d_out]:
            unit = f" [{_comment_text(c['unit'], 16)}]" if c.get("unit") else ""
            lines.append(
                f"   k={_comment_text(c.get('index'), 8)}: {_comment_text(c.get('name'))}{unit} "
                f"at t+{_comment_text(c.get('horizon'), 8)} minus at t"
            )
    lines[-1] += " */"
    if plan.columns is None:
        return "\n".join(lines) + "\n" + one
    lows = ", ".join(c_text.f32_up(v) for v in plan.columns[0])
    highs = ", ".join(c_text.f32_down(v) for v in plan.columns[1])
    return "\n".join(
        [
            *lines,
            "#define TF_DOMAIN_COLUMNS 1 /* each input column has its own domain (float32 inside it) */",
            f"static const float TF_DOMAIN_LO_COLUMN[TF_D_IN] = {{{lows}}};",
            f"static const float TF_DOMAIN_HI_COLUMN[TF_D_IN] = {{{highs}}};",
            "#define TF_INPUT_LO(i) TF_DOMAIN_LO_COLUMN[(i) % TF_D_IN] /* the domain of input value i */",
            "#define TF_INPUT_HI(i) TF_DOMAIN_HI_COLUMN[(i) % TF_D_IN]",
            "",
        ]
    )


def _check_input_c(plan: Plan) -> str:
    if plan.tokens:
        return """\
/* every token id in 0..V-1 */
static int tf_check_input(const tf_input x[TF_BATCH * TF_D_IN])
{
    int i;
    for (i = 0; i < TF_BATCH * TF_D_IN; i++) {
        if (x[i] < 0 || x[i] >= TF_D_OUT) {
            return TF_E_TOKEN;
        }
    }
    return TF_OK;
}
"""
    return """\
/* every input finite and inside the declared domain (contracts/input_domain.py); NaN fails
   every comparison, so the finiteness test comes first to name it */
static int tf_check_input(const tf_input x[TF_BATCH * TF_D_IN])
{
    int i;
    for (i = 0; i < TF_BATCH * TF_D_IN; i++) {
        const float v = x[i];
        if (!(v >= -FLT_MAX && v <= FLT_MAX)) {
            return TF_E_NONFINITE;
        }
        if (v < TF_DOMAIN_LO || v > TF_DOMAIN_HI) {
            return TF_E_DOMAIN;
        }
#if TF_DOMAIN_COLUMNS
        if (v < TF_INPUT_LO(i) || v > TF_INPUT_HI(i)) {
            return TF_E_DOMAIN;
        }
#endif
    }
    return TF_OK;
}
"""


def _check_output_c(plan: Plan) -> str:
    if plan.output_bound is None:
        what, test = "finite", "!((v < 0.0f ? -v : v) <= FLT_MAX)"
    else:
        what = f"finite and |y| <= {plan.output_bound!r} (the artifact's output bound, valid for any finite input)"
        test = f"!((v < 0.0f ? -v : v) <= {c_text.f32_up(plan.output_bound)})"
    return f"""\
/* every output {what}; NaN fails the comparison */
static int tf_check_output(const float y[TF_BATCH * TF_D_OUT])
{{
    int i;
    for (i = 0; i < TF_BATCH * TF_D_OUT; i++) {{
        const float v = y[i];
        if ({test}) {{
            return TF_E_OUTPUT;
        }}
    }}
    return TF_OK;
}}
"""


def source(plan: Plan, generator: str) -> str:
    what_pos = (
        "the session's position: buffer pos & 1 is read"
        if plan.block_kind == "ssm"
        else ("the ring position" if plan.window else "the absolute position")
    )
    what_step = "never full" if plan.window or plan.block_kind == "ssm" else "refuses a full context"
    cache = CACHE_KINDS[plan.cache_kind]
    block = BLOCK_KINDS[plan.block_kind]
    layer_call = (
        "status = tf_layer(s, l, b, pos);\n"
        "            if (status != TF_OK) {\n                return status;\n            }"
        if block.layer_status
        else "tf_layer(s, l, b, pos);"
    )
    fmt = plan.weight_format  # the layer matrices' storage (codegen/weights.py); the rest is float32
    matvecs = {(*m, fmt) for m in block.matvecs(plan)} | {(*m, "fp32") for m in cache.matvecs(plan)}
    matvecs.add((plan.d, plan.d_out, not plan.tokens, "fp32"))
    if not plan.tokens:
        matvecs.add((plan.d_in, plan.d, True, "fp32"))
    sums = set(cache.sums(plan)) | set(block.sums(plan)) | set(block.layer_norms(plan))
    sum_texts, leaves = [], set()
    for n in sorted(sums):
        text, used = kernels.sum_c(n)
        sum_texts.append(text)
        leaves |= used
    weights = "\n".join(
        wformat.array_c(w.name, w.values, w.comment, fmt)
        if fmt != "fp32" and w.name in wformat.QUANTISED
        else c_text.array(w.name, w.values, comment=w.comment, shapes_only_variant=True, aligned=True)
        for w in _weights(plan)
    )
    fields = ", ".join(
        ("(int32_t)sizeof(tf_state)", *(f"(int32_t)offsetof(tf_state, {f})" for f in cache.layout[1:]))
    )
    parts = [
        f"""\
/* tf_model.c -- the step of one tickformer artifact as C99 (generated; do not edit).
   Artifact manifest_sha256 {plan.artifact_sha256}; generator {generator}.
   Build: cc -std=c99 -O2 -ffp-contract=off -c tf_model.c (see the Makefile beside it).
   No malloc, no recursion, no VLAs, constant loop bounds; no writable static data; the only
   library function called is sqrtf. Equivalence to the numpy reference, static checks and
   timings: docs/codegen.md in the tickformer repository. */
#include <float.h>
#include <math.h>
#include <stddef.h>

#include "tf_model.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

typedef union {{
    float f;
    uint32_t u;
}} tf_bits; /* reading the member not last written reinterprets the bits (C99 TC3 6.5.2.3) */

#define TF_NEG_INF_BITS 0xFF800000u /* -inf */

/* ---- weights (hexadecimal constants: exactly the artifact's float32 values) ---- */
""",
        weights,
        cache.tables(plan),
        "/* ---- kernels ---- */\n",
        kernels.exp_c(),
        kernels.and_bits_c() + wformat.converters_c(fmt),
        *(kernels.matvec_c(*shape) for shape in sorted(matvecs)),
        *(kernels.pairwise_leaf_c(n) for n in sorted(leaves)),
        *sum_texts,
        *(
            kernels.layer_norm_c(n, plan.config.ln_eps, block.layer_norm_bound(plan))
            for n in sorted(block.layer_norms(plan))
        ),
        *(kernels.relu_c(n) for n in sorted(block.relus(plan))),
        *cache.kernels(plan),
        *block.kernels(plan),
        block.layer_c(plan),
        _embed_c(plan),
        _project_c(plan),
        _check_input_c(plan),
        _check_output_c(plan),
        *_peek_c(plan),
        f"""\
/* ---- the API (tf_model.h) ---- */

/* Runs the step at position pos ({what_pos}) on x; writes y; stages this
   position's K/V rows. Never writes the committed state. Bounded work, the same at every pos. */
int tf_stage(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[TF_BATCH * TF_D_OUT])
{{
    int status, b, l, o;
    if ({cache.position_refused(plan)}) {{
        return TF_E_POSITION;
    }}
    status = tf_check_input(x);
    if (status != TF_OK) {{
        return status;
    }}
    for (b = 0; b < TF_BATCH; b++) {{
        tf_embed_row(x + b * TF_D_IN, pos, s->h);
        for (l = 0; l < TF_LAYERS; l++) {{
            {layer_call}
        }}
        tf_project_row(s->h, s->out);
        for (o = 0; o < TF_D_OUT; o++) {{
            y[b * TF_D_OUT + o] = s->out[o];
        }}
    }}
    return tf_check_output(y);
}}

/* Copies the rows tf_stage staged into the cache row of pos ({cache.commit_row(plan)}). Call only after
   tf_stage(s, x, pos, y) returned TF_OK (and the caller accepted y). */
void tf_commit(tf_state *s, int32_t pos)
{{
{cache.commit_c(plan)}}}

/* tf_commit of s->pending if one is set, then tf_stage: one call per tick for a caller that records
   its commit as `s->pending = pos` (a store, no call) and stages again later -- the Python backend
   (runtime/backends/c.py). The committed state is the same as tf_commit at once; the rows of the
   pending position are written before this step reads the cache. */
int tf_stage_pending(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], int32_t pos, float y[TF_BATCH * TF_D_OUT])
{{
    if (s->pending >= 0) {{
        tf_commit(s, s->pending);
        s->pending = -1;
    }}
    return tf_stage(s, x, pos, y);
}}

/* One whole tick: stages, commits and advances only on success ({what_step}). */
int tf_step(tf_state *s, const tf_input x[TF_BATCH * TF_D_IN], float y[TF_BATCH * TF_D_OUT])
{{
{cache.step_c(plan)}}}

/* Starts a new sequence. Constant time. Valid on a state of any content. */
void tf_reset(tf_state *s)
{{
{cache.reset_c(plan)}    s->pos = 0;
    s->pending = -1;
}}

{peek.api_c(plan, cache.position_refused(plan), cache.commit_row(plan)) if _peeks(plan) else ""}
const char *tf_artifact_sha256(void)
{{
    return "{plan.artifact_sha256}";
}}

int32_t tf_layout(int32_t field)
{{
    static const int32_t offsets[{len(cache.layout)}] = {{{fields}}};
    if (field < 0 || field >= {len(cache.layout)}) {{
        return -1;
    }}
    return offsets[field];
}}
""",
    ]
    return "\n".join(parts)
