"""Weights in fewer bytes: the storage formats of the C step's layer matrices (issue 40).

    codegen --weights fp32|fp16|bf16|int8

Only the storage changes; every product, sum and activation stays float32. The four matrices of
every attention layer -- W_qkv [D, 3D], W_o [D, D], W_1 [D, F], W_2 [F, D], the bytes of a step --
are stored as

    fp32  the artifact's float32 (the default: the generated C is what it was before formats)
    fp16  IEEE binary16 bits (uint16), rounded to nearest even (numpy's astype(float16)),
          subnormals kept; read back exactly with integer operations (the exponent rebiased;
          a subnormal half as the integer m times 2^-24), so flush-to-zero modes change nothing
    bf16  the upper 16 bits of the float32 (uint16), rounded to nearest even; read back as
          bits << 16 (exact)
    int8  q = rint(w / s_o) in [-127, 127] with one float32 scale s_o = max_i |w[i][o]| / 127 per
          output channel o (column of the [n_in, n_out] matrix, per layer); read back as
          (float)q * s_o, one float32 product

The inner loops read the stored value and convert it in registers (`load_expr`): the C step of
format F computes x * Q_F(w) where Q_F(w) = `rounded(w, F)` exactly, so numpy with the weights
`rounded_params(params, config, F)` is its reference under the same bitwise contract as fp32
(docs/codegen.md, "Weights in fewer bytes"). Elementwise rounding bound (proved in the module
tests over the formats' edges): |w - Q(w)| <= 2^-11 |w| (fp16, |w| >= 2^-14; below, <= 2^-25
absolute), <= 2^-8 |w| (bf16), <= s_o / 2 (int8). Everything else (embedding, output projection,
biases, LayerNorm, positional table, relative-position bias) stays float32.

ssm artifacts accept fp32 only (refused by name). Not real-time code.
"""

from __future__ import annotations

import numpy as np

from tickformer.errors import ArtifactError

FORMATS = ("fp32", "fp16", "bf16", "int8")
QUANTISED = ("tf_w_qkv", "tf_w_o", "tf_w1", "tf_w2")  # the emitted arrays stored in the format
BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
C_TYPE = {"fp32": "float", "fp16": "uint16_t", "bf16": "uint16_t", "int8": "int8_t"}
SUFFIX = {"fp32": "", "fp16": "_f16", "bf16": "_bf16", "int8": "_i8"}


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ArtifactError(f"unknown weight format {fmt!r}; use one of {', '.join(FORMATS)}")
    return fmt


def quantise(w: np.ndarray, fmt: str, name: str = "weights") -> tuple[np.ndarray, np.ndarray | None]:
    """(codes, scales) of float32 `w` [..., n_in, n_out] in `fmt`: codes uint16 / int8 of w's shape,
    scales float32 [..., n_out] for int8 (None otherwise). Raises ArtifactError for a value the format
    cannot hold (fp16 above 65504)."""
    w = np.asarray(w, dtype=np.float32)
    if fmt == "fp16":
        with np.errstate(over="ignore"):
            h = w.astype(np.float16)
        if not np.isfinite(h).all():
            raise ArtifactError(
                f"{name} holds a value beyond fp16's range (|w| > 65504); use --weights bf16 or fp32"
            )
        return h.view(np.uint16), None
    if fmt == "bf16":
        bits = w.view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest, ties to even
        if (rounded & 0x7F80 == 0x7F80).any():
            raise ArtifactError(f"{name} rounds to infinity in bf16; use --weights fp32")
        return rounded.astype(np.uint16), None
    if fmt == "int8":
        amax = np.abs(w).max(axis=-2)  # [..., n_out]: one scale per output channel
        scales = (amax / np.float32(127)).astype(np.float32)
        safe = np.where(scales > 0, scales, np.float32(1))
        q = np.clip(np.rint(w / safe[..., None, :]), -127, 127).astype(np.int8)
        return q, scales
    raise ArtifactError(f"cannot quantise to {fmt!r}")


def dequantise(codes: np.ndarray, scales: np.ndarray | None, fmt: str) -> np.ndarray:
    """The float32 values the C step multiplies (exactly what load_expr computes)."""
    if fmt == "fp16":
        return codes.view(np.float16).astype(np.float32)
    if fmt == "bf16":
        return (codes.astype(np.uint32) << 16).view(np.float32)
    if fmt == "int8":
        assert scales is not None
        return codes.astype(np.float32) * scales[..., None, :]  # one float32 product, as in C
    raise ArtifactError(f"cannot dequantise {fmt!r}")


def rounded(w: np.ndarray, fmt: str, name: str = "weights") -> np.ndarray:
    """Q_F(w): float32 `w` as format `fmt` stores it, read back (fp32: w itself)."""
    if fmt == "fp32":
        return w
    return dequantise(*quantise(w, fmt, name), fmt)


def matrix_names(config) -> list[str]:
    """The artifact parameter names stored in the format (per layer: w_q, w_k, w_v, w_o, w1, w2)."""
    from tickformer.model import names

    out = []
    for layer in names.decoder_layers(config):
        out += [layer.self_attn[k] for k in ("w_q", "w_k", "w_v", "w_o")]
        out += [layer.ffn["w1"], layer.ffn["w2"]]
    return out


def rounded_params(params: dict[str, np.ndarray], config, fmt: str) -> dict[str, np.ndarray]:
    """The artifact's parameters with every stored-in-format matrix replaced by Q_F of it: the
    numpy reference of the C step of format `fmt`. Per-channel int8 scales per matrix equal the
    stacked arrays' (a column of [W_q | W_k | W_v] is a column of one of them)."""
    if fmt == "fp32":
        return params
    out = dict(params)
    for name in matrix_names(config):
        out[name] = rounded(params[name], fmt, name)
    return out


def stored_bytes(values: np.ndarray, fmt: str) -> int:
    """Bytes of one emitted array in `fmt` (int8: the codes and the float32 scales)."""
    n = int(values.size) * BYTES[fmt]
    if fmt == "int8":
        n += 4 * int(np.prod(values.shape[:-2])) * int(values.shape[-1])
    return n


# --- C text ----------------------------------------------------------------------------------
def converters_c(fmt: str) -> str:
    """The exact stored-value -> float32 conversions (static inline, branch-free)."""
    if fmt == "fp16":
        return """\
/* binary16 bits -> float32, exact for every finite value, with integer operations and one exact
   float product of normal numbers only (so no subnormal float32 is formed: the result is the same
   under flush-to-zero / denormals-are-zero): a normal half's 15 magnitude bits shifted into a
   float32 with the exponent rebiased (15 -> 127: + 112 << 23); a subnormal half (m < 0x400) is
   m 2^-24, from the integer m; then the sign */
static inline float tf_from_f16(uint16_t h)
{
    tf_bits v, sub;
    const uint32_t m = (uint32_t)(h & 0x7FFFu);
    uint32_t sel;
    v.u = (m << 13) + 0x38000000u;
    sub.f = (float)(int32_t)m * 0x1p-24f;
    sel = 0u - (uint32_t)(m < 0x400u); /* all ones for a subnormal half: a blend, not a branch */
    v.u = (sub.u & sel) | (v.u & ~sel);
    v.u = v.u | ((uint32_t)(h & 0x8000u) << 16);
    return v.f;
}
"""
    if fmt == "bf16":
        return """\
/* bfloat16 bits -> float32: the upper half of the float32 (exact) */
static inline float tf_from_bf16(uint16_t h)
{
    tf_bits v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
"""
    return ""


def load_expr(fmt: str, ref: str) -> str:
    """The float32 weight of the stored element `ref` (e.g. `w0[o]`); int8 reads the scale ws[o]."""
    if fmt == "fp16":
        return f"tf_from_f16({ref})"
    if fmt == "bf16":
        return f"tf_from_bf16({ref})"
    if fmt == "int8":
        return f"((float){ref} * ws[o])"
    return ref


def w_param(fmt: str) -> str:
    """The kernel's weight parameter(s)."""
    extra = ", const float *restrict ws" if fmt == "int8" else ""
    return f"const {C_TYPE[fmt]} *restrict w{extra}"


def w_arg(fmt: str, name: str, offset: str, scale_offset: str) -> str:
    """The call's weight argument(s): `tf_w1 + l * 16384` (int8: and `tf_w1_s + l * 256`)."""
    base = f"{name} + {offset}"
    return base + (f", {name}_s + {scale_offset}" if fmt == "int8" else "")


def array_c(name: str, values: np.ndarray, comment: str, fmt: str) -> str:
    """The emitted constant(s) of a QUANTISED array in `fmt`: codes (and int8 scales)."""
    from . import c_text

    codes, scales = quantise(values, fmt, name)
    shape = "x".join(str(s) for s in values.shape)
    flat = np.ascontiguousarray(codes).ravel()
    per = 12
    text = ",\n".join(
        "    " + ", ".join(str(int(v)) for v in flat[i : i + per]) for i in range(0, flat.size, per)
    )
    decl = f"static const {C_TYPE[fmt]} {name}[{flat.size}] TF_ALIGN64"
    out = (
        f"/* {comment} [{shape}], stored as {fmt} */\n#if defined(TF_WEIGHT_SHAPES_ONLY)\n{decl};\n"
        f"#else\n{decl} = {{\n{text}\n}};\n#endif\n"
    )
    if scales is not None:
        out += c_text.array(
            f"{name}_s", scales, comment=f"{name}'s per-output-channel scales", shapes_only_variant=True
        )
    return out


# --- the bound against the fp32 model, and the bytes ------------------------------------------
BOUND_K = 64  # in units of the format's eps: a MEASURED bound (docs/codegen.md), not a proof


def eps(fmt: str) -> float:
    """The format's relative rounding unit: 2^-11 (fp16), 2^-8 (bf16), 1/254 of the channel's
    max |w| (int8: the error s/2 with s = max|w| / 127), 2^-24 (fp32)."""
    return {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8, "int8": 1.0 / 254}[fmt]


def fp32_bound(fmt: str) -> float:
    """max |y_F - y_fp32| <= fp32_bound(F) * max |y_fp32| over a sequence: BOUND_K eps_F. Rests on
    measurement (the worst measured factor is in docs/codegen.md), with the per-weight rounding
    |w - Q(w)| <= eps_F |w| (int8: <= s_o / 2) proven elementwise in the tests."""
    return BOUND_K * eps(fmt)
