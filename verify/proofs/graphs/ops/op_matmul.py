"""MatMul: C[.., i, k] = sum_j A[.., i, j] B[.., j, k], the union over j of op_arith's Mul rule
per term: a term with an exactly-zero factor passes the other factor's atoms as soft only, and
the node is recorded as a zero-weight site (the report names it). A known 0 results where every
term has a zero factor and no known infinite one (0 * inf is NaN).

Edge cases: a row of attention weights exactly 0 at masked keys times V: V's masked rows reach
the output softly (independent of them only if they are finite); a 1-D operand is unsupported.
"""

from __future__ import annotations

import numpy as np

from ..values import Sym, Unsupported, Value, compress, known, pad, sel, union_all
from .base import Call

OPS = ("MatMul",)


def matmul(a: Sym, b: Sym, sites: dict[str, np.ndarray], site: str) -> Sym:
    """a @ b; the atoms passed softly are added to sites[site]."""
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise Unsupported("MatMul of a 1-D operand")
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    n, j, k = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != j:
        raise Unsupported(f"MatMul shapes {a.shape} x {b.shape}")
    nd = len(batch) + 2
    ah = compress(pad(a.hard, nd, True), True)[..., :, :, None, :]  # [.., i, j, 1, W]
    asf = compress(pad(a.soft, nd, True), True)[..., :, :, None, :]
    bh = compress(pad(b.hard, nd, True), True)[..., None, :, :, :]  # [.., 1, j, k, W]
    bsf = compress(pad(b.soft, nd, True), True)[..., None, :, :, :]
    ca = compress(pad(a.const, nd, False), False)[..., :, :, None]
    cb = compress(pad(b.const, nd, False), False)[..., None, :, :]
    az, bz = ca == 0, cb == 0
    parts_h, parts_s, moved = [], [asf, bsf], []
    for bits, to_soft in ((ah, bz & ~np.isfinite(ca)), (bh, az & ~np.isfinite(cb))):
        if not bits.any():  # a constant operand: no atoms to pass
            continue
        if to_soft.any():  # this side meets exact zeros of the other: through its finiteness only there
            parts_h.append(sel(~to_soft, bits))
            moved.append(sel(to_soft, bits))
        else:
            parts_h.append(bits)
    w = ah.shape[-1]
    hard = _reduce_j(parts_h, w, nd)
    soft = _reduce_j(parts_s + moved, w, nd)
    if moved:
        site_bits = union_all(_reduce_j(moved, w, nd))
        sites[site] = sites.get(site, np.zeros(w, np.uint64)) | site_bits
    bad = (known(ca) & ~np.isfinite(ca)) | (known(cb) & ~np.isfinite(cb))  # 0 * inf: NaN exactly
    const = np.where(np.all((az | bz) & ~bad, axis=-2), 0.0, np.nan)
    return Sym(
        batch + (n, k),
        compress(hard, True),
        compress(soft, True),
        compress(const, False),
        np.result_type(a.dtype, b.dtype),
    )


def _reduce_j(parts: list[np.ndarray], w: int, nd: int) -> np.ndarray:
    """OR over the contraction axis (-3 of [.., i, j, k, W]) of each part, then of the parts."""
    out = np.zeros((1,) * nd + (w,), dtype=np.uint64)
    for part in parts:
        out = out | np.bitwise_or.reduce(part, axis=-3)
    return out


def apply(call: Call, args: list[Value]) -> list[Value]:
    return [matmul(call.sym(args[0]), call.sym(args[1]), call.sites, call.label)]
