"""Golden vectors: the numpy reference's step outputs, as a C header the test program checks.

The reference is the numpy model's full pass (model/transformer.py `forward`: the model's own
functions and the one online-softmax operator over the whole sequence, with the window mask
and relative-position bias for windowed models) -- not a step implementation, so the C step
is checked against the definition rather than against another step. For the state-space block
it is the numpy recurrence (the model's functions with model/ssm.py `ssm_recurrent`, i.e.
`ssm_step` position by position): the full pass there is the training scan, a different
summation of the same recurrence (docs/ssm.md bounds the two apart), and the C step is the
recurrence; 4 max_len steps, a reset, 8 more. Two sequences: the
first over every position 0..max_len-1 (a ring cache: max(max_len, 4W + 1) positions, so
every ring position [0, 3W) and the wrap from 3W - 1 back to W are crossed; inputs uniform in
the declared domain (per input column when declared so), the first two pinned at its edges; token ids across the vocabulary, both
ends included), then -- after a reset -- a second sequence (8 positions; a ring cache 2W + 1,
so it wraps too), which checks that rows of the first one never leak into the second.

Bounds the test program applies (docs/codegen.md, "Equivalence"):
    per element   |c - r| <= atol + rtol |r|, the artifact's own tolerance (manifest.json
                  `tolerance`, derived at export for every backend of this artifact);
    normwise      max |c - r| <= NORMWISE_U * u * max |r| over each sequence, u = 2^-24.

Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import c_text
from .plan import Plan

NORMWISE_U = 64  # in units of u = 2^-24: the measured values are in docs/codegen.md (claims registry)
UNIT_ROUNDOFF = 2.0**-24
SECOND_SEQUENCE = 8  # positions of the sequence after the reset


@dataclass(frozen=True)
class Golden:
    inputs: np.ndarray  # [T, B, d_in] float32 or [T, B, 1] int64, T = max_len + second
    outputs: np.ndarray  # [T, B, d_out] float32 (the reference's)
    first: int  # positions of the first sequence; a reset precedes position `first`
    atol: float
    rtol: float
    fp32_outputs: np.ndarray | None = None  # a weight format's: the fp32 model's outputs [T, B, d_out]
    fp32_bound: float = 0.0  # ... and max |c - r32| <= this * max |r32| per sequence (weights.fp32_bound)


def sequence_lengths(plan: Plan) -> tuple[int, int]:
    """(first, second) golden sequence lengths (module docstring)."""
    n, w = plan.config.max_len, plan.window
    if plan.block_kind == "ssm":
        return 4 * n, SECOND_SEQUENCE
    if w is None:
        return n, min(SECOND_SEQUENCE, n)
    return max(n, 4 * w + 1), max(SECOND_SEQUENCE, 2 * w + 1)


def reference_inputs(plan: Plan, seed: int = 0) -> tuple[np.ndarray, int]:
    """[T, B, 1, d_in] float32 / [T, B, 1] int64 step inputs and the length of the first sequence."""
    cfg, b = plan.config, plan.batch
    n, second = sequence_lengths(plan)
    rng = np.random.default_rng(seed)
    if plan.tokens:
        seq = rng.integers(0, cfg.vocab_size, size=(n + second, b, 1), dtype=np.int64)  # [T, B, 1]
        seq[0], seq[1] = 0, cfg.vocab_size - 1
        return seq, n
    lows, highs = plan.columns if plan.columns is not None else ((plan.domain[0],), (plan.domain[1],))
    lo = np.array([c_text.up(v) for v in lows], np.float32)  # [d_in] or [1]: the float32 domains' edges
    hi = np.array([c_text.down(v) for v in highs], np.float32)  # per input column when declared so
    seq = rng.uniform(lo, hi, size=(n + second, b, 1, cfg.d_in)).astype(np.float32)  # [T, B, 1, d_in]
    seq = np.clip(seq, lo, hi)  # a float32 rounding of a uniform draw may leave [lo, hi]
    seq[0], seq[min(1, n - 1)] = lo, hi
    return seq, n


def compute(plan: Plan, artifact_path: str, seed: int = 0) -> Golden:
    """The numpy reference model's full pass (model.transformer.forward) over each golden
    sequence: the outputs a correct step reproduces position by position within the artifact's
    tolerance. With a weight format (plan.weight_format) the model's matrices are the format's
    rounded values (codegen/weights.py rounded_params): the reference of that C step, whose
    arithmetic is the same float32. Not real-time (seconds)."""
    from tickformer.artifact import open_artifact
    from tickformer.model.transformer import forward

    from .weights import fp32_bound, rounded_params

    art = open_artifact(artifact_path)
    fmt = plan.weight_format
    xs, first = reference_inputs(plan, seed)  # [T, B, 1(, d_in)]

    def full_pass(params: dict[str, np.ndarray]) -> np.ndarray:
        outputs = []
        for seq in (xs[:first], xs[first:]):
            x = np.moveaxis(seq[:, :, 0], 0, 1)  # [B, t(, d_in)]
            outputs.append(
                np.moveaxis(forward(params, art.config, np.ascontiguousarray(x)), 1, 0)
            )  # [t, B, d_out]
        return np.concatenate(outputs)  # [T, B, d_out]

    y32 = None
    if plan.block_kind == "ssm":
        ys = _ssm_recurrence(art, xs, first)  # [T, B, d_out]
    else:
        ys = full_pass(rounded_params(art.params(), art.config, fmt))  # the weights as stored
        y32 = None if fmt == "fp32" else full_pass(art.params()).astype(np.float32)
    tol = art.tolerance
    inputs = xs if plan.tokens else xs[:, :, 0, :]  # [T, B, 1] / [T, B, d_in]
    return Golden(
        inputs=inputs,
        outputs=ys.astype(np.float32),
        first=first,
        atol=float(tol["atol"]),
        rtol=float(tol["rtol"]),
        fp32_outputs=y32,
        fp32_bound=fp32_bound(fmt) if y32 is not None else 0.0,
    )


def _ssm_recurrence(art, xs: np.ndarray, first: int) -> np.ndarray:
    """The ssm reference: the model's own functions with the mixer as its recurrence
    (model/ssm.py ssm_recurrent: ssm_step position by position, what the numpy backend steps),
    not the training scan; layer by layer over each sequence (every other sublayer is
    positionwise). xs [T, B, 1(, d_in)] -> [T, B, d_out], the state zero at 0 and at `first`."""
    from tickformer.model import names
    from tickformer.model.layers import feed_forward, layer_norm
    from tickformer.model.ssm import ssm_recurrent
    from tickformer.model.transformer import embed, project_out

    cfg, p = art.config, art.params()
    outputs = []
    for seq in (xs[:first], xs[first:]):
        h = embed(p, cfg, np.ascontiguousarray(np.moveaxis(seq[:, :, 0], 0, 1)))  # [B, t, D], no positions
        for mixer, mixer_norm, ffn, ffn_norm in names.ssm_layers(cfg):
            out, _ = ssm_recurrent(h, **mixer.take(p))  # [B, t, D], from a zero state
            h = layer_norm(h + out, **mixer_norm.take(p), eps=cfg.ln_eps)
            h = layer_norm(
                h + feed_forward(h, **ffn.take(p)), **ffn_norm.take(p), eps=cfg.ln_eps
            )  # [B, t, D]
        outputs.append(np.moveaxis(project_out(p, cfg, h), 1, 0))  # [t, B, d_out]
    return np.concatenate(outputs)  # [T, B, d_out]


def header(golden: Golden, plan: Plan) -> str:
    """tf_golden.h: inputs, reference outputs and the bounds, for tf_test.c."""
    t = golden.inputs.shape[0]
    if plan.tokens:
        ids = ", ".join(str(int(v)) for v in golden.inputs.ravel())
        inputs = f"/* [{t}][{plan.batch}] token ids */\nstatic const tf_input tf_golden_x[{golden.inputs.size}] = {{{ids}}};\n"
    else:
        inputs = c_text.array("tf_golden_x", golden.inputs, comment="inputs").replace(
            "static const float", "static const tf_input"
        )
    return f"""\
/* tf_golden.h -- reference outputs of the numpy model (full pass) for tf_test.c (generated; do not edit).
   Sequence 1: positions 0..{golden.first - 1}; tf_reset; sequence 2: positions 0..{t - golden.first - 1}. */
#ifndef TF_GOLDEN_H
#define TF_GOLDEN_H

#define TF_GOLDEN_STEPS {t}
#define TF_GOLDEN_FIRST {golden.first}
#define TF_GOLDEN_ATOL {c_text.f32_up(golden.atol)} /* manifest tolerance: |c - r| <= atol + rtol |r| */
#define TF_GOLDEN_RTOL {c_text.f32_up(golden.rtol)}
#define TF_GOLDEN_NORMWISE {c_text.f32(NORMWISE_U * UNIT_ROUNDOFF)} /* {NORMWISE_U} u: max |c - r| <= this * max |r| */

{inputs}
{c_text.array("tf_golden_y", golden.outputs, comment="reference outputs")}{_fp32_part(golden, plan)}
#endif
"""


def _fp32_part(golden: Golden, plan: Plan) -> str:
    """A weight format's second reference: the fp32 model's outputs and the stated bound
    (codegen/weights.py fp32_bound: measured, not proved), which tf_test checks per sequence."""
    if golden.fp32_outputs is None:
        return ""
    return f"""
#define TF_GOLDEN_WEIGHTS "{plan.weight_format}"
#define TF_GOLDEN_FP32_BOUND {c_text.f32_up(golden.fp32_bound)} /* max |c - r32| <= this * max |r32| per sequence */
{c_text.array("tf_golden_y32", golden.fp32_outputs, comment="the fp32 model's outputs (weights not rounded)")}"""
