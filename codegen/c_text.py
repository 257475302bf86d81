"""C99 text for numbers and constant arrays: exact, deterministic, readable enough to audit.

Floats are written as C99 hexadecimal floating constants (ISO C99 6.4.4.2): `0x1.99999ap-4f`
denotes exactly the float32 it came from, so the emitted weights are the artifact's bits --
no decimal round trip, no dependence on the compiler's decimal conversion. Non-finite values
are refused (the artifact's weights are checked finite at load; a NaN in a constant would be a
bug upstream). Output is a pure function of the input, so the same artifact always generates
byte-identical C (the build cache and the golden tests rely on it).

Not real-time code.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

PER_LINE = 6  # constants per line of an emitted array


def f32(value: float) -> str:
    """The float32 nearest `value` as a C99 hex float constant with suffix f (exact)."""
    v = float(np.float32(value))
    if not math.isfinite(v):
        raise ValueError(f"cannot emit the non-finite constant {value!r}")
    if v == 0.0:
        return "-0.0f" if math.copysign(1.0, v) < 0 else "0.0f"
    text = v.hex()  # '0x1.99999a0000000p-4' (a float32 has at most 6 significant hex digits)
    mantissa, exponent = text.split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}f"


def up(value: float) -> np.float32:
    """The smallest float32 >= value."""
    v = np.float32(value)
    return np.nextafter(v, np.float32(np.inf)) if float(v) < value else v


def down(value: float) -> np.float32:
    """The largest float32 <= value."""
    v = np.float32(value)
    return np.nextafter(v, np.float32(-np.inf)) if float(v) > value else v


def f32_up(value: float) -> str:
    """The smallest float32 >= value (a bound rounded so that the C check is never stricter)."""
    return f32(float(up(value)))


def f32_down(value: float) -> str:
    """The largest float32 <= value."""
    return f32(float(down(value)))


def array(
    name: str,
    values: np.ndarray,
    *,
    comment: str = "",
    shapes_only_variant: bool = False,
    aligned: bool = False,
) -> str:
    """`static const float name[n] = {...};` for a float32 array of any shape (flattened,
    C order), with its logical shape in a comment. shapes_only_variant: also a declaration
    without the values under TF_WEIGHT_SHAPES_ONLY, for static analysers that need no values
    (cppcheck's parser is slow over 10^5 initialisers; no check of ours depends on them).
    aligned: placed on a 64-byte boundary (TF_ALIGN64, tf_model.h), so a 64-byte vector load of
    a row never straddles two cache lines."""
    flat = np.ascontiguousarray(values, dtype=np.float32).ravel()
    shape = "x".join(str(s) for s in values.shape) or "scalar"
    head = f"/* {comment} [{shape}] */\n" if comment else f"/* [{shape}] */\n"
    body = ",\n".join(
        "    " + ", ".join(f32(float(v)) for v in flat[i : i + PER_LINE])
        for i in range(0, flat.size, PER_LINE)
    )
    decl = f"static const float {name}[{flat.size}]" + (" TF_ALIGN64" if aligned else "")
    if not shapes_only_variant:
        return f"{head}{decl} = {{\n{body}\n}};\n"
    return f"{head}#if defined(TF_WEIGHT_SHAPES_ONLY)\n{decl};\n#else\n{decl} = {{\n{body}\n}};\n#endif\n"


def lines(parts: Iterable[str]) -> str:
    return "\n".join(parts)


def acsl_contract(
    arg: str, behaviors: Sequence[tuple[str, str, Sequence[str]]], complete: bool = True
) -> str:
    """The ACSL contract of a float function of one argument `arg` that Frama-C's EVA uses in place
    of its body: `assigns \\result \\from arg`, then a behavior per row (name, what it assumes of
    `arg`, what it ensures of \\result); `complete` where the rows cover every float and exclude
    each other (complete and disjoint behaviors)."""
    out = [f"/*@ assigns \\result \\from {arg};"]
    for name, assumes, ensures in behaviors:
        out += [
            f"    behavior {name}:",
            f"      assumes {assumes};",
            *(f"      ensures {e};" for e in ensures),
        ]
    if complete:
        out += ["    complete behaviors;", "    disjoint behaviors;"]
    return "\n".join([*out, "*/"])


def every_float32_main(declarations: str) -> str:
    """The head of an exhaustive check program's main (tf_expcheck.c, tf_ssmcheck.c): STRIDE from
    argv (1, the default: every one of the 2^32 float32 bit patterns; 0 is refused, exit 2), then
    the loop over the patterns with `x` the float of pattern u and `y` free for the result. The
    caller's `declarations` (its counters; they must declare `u`) come first; its loop body follows."""
    return f"""int main(int argc, char **argv)
{{
    const unsigned long stride = argc > 1 ? strtoul(argv[1], NULL, 10) : 1ul;
{declarations}
    tf_bits b;
    if (stride == 0ul) {{
        return 2;
    }}
    for (u = 0; u <= 0xFFFFFFFFull; u += stride) {{
        float x, y;
        b.u = (uint32_t)u;
        x = b.f;
"""
