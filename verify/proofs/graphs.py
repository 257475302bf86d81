"""Proofs about the exported graphs themselves: which cache rows (or which inputs along the time
axis) each output of an ONNX graph can depend on, for *every* position of a finite position
domain, and that the graph's work per call is bounded (`tickformer prove ART`, `prove FILE.onnx`).

The claims (for our artifacts; `prove_step_graph`, `prove_model_graph`):
    step.onnx, for every pos in [0, max_len):
        reads only live rows   no output depends on a cache row r unless the contract says the step
                               at pos reads it (`contracts.masking.cache_row_live(r, pos)`: r < pos);
        reads every live row   the output y has an unblocked path from every live row of every
                               layer's K and V cache, and from the step's own new K/V rows;
    model.onnx, for every length T in [1, max_len] and every t < T:
        causal                 y[:, t] depends on no x[:, t'] unless `masking.causal_allowed(t, t', 0)`;
        reads every past input y[:, t] has an unblocked path from every x[:, t'], t' <= t;
    both:
        bounded work           no control flow, static shapes (step: every input and every
                               intermediate shape is the same at every position; model: only T
                               varies, T <= max_len), no shape computed from data.

How (no sampling). The graph is interpreted once per state of the domain (each pos, each T):
  * the *position subgraph* -- every node whose inputs are constants, the integer domain inputs
    (pos) or shapes -- is evaluated concretely with onnx.reference's operator implementations
    (the ONNX reference semantics), so the masks are exactly what the graph computes for that
    state;
  * every other tensor is abstract: per element, the set of *atoms* (a cache row, an input time
    step, another input, one of the step's own new rows) it can depend on, kept as bitsets; a
    Where whose condition is concrete selects elementwise, so a row selected out by the mask
    does not reach its consumers. Per element the abstraction also keeps a *known constant*
    c ("this element is exactly c, or NaN when one of its own atoms is"): Where(mask, s, -inf)
    gives exactly -inf, Softmax and Exp then give exactly 0.
  * A product with an exactly-zero factor (MatMul(p, V) where p's weight is 0) is not
    independent of the other factor: 0 * inf and 0 * NaN are NaN (and 0 * v carries v's sign
    into a zero result). Atoms reaching an output *only* through such products are reported
    apart ("soft"): the output is independent of them if and only if those factors are finite.
    A claim that holds for the hard atoms but not for the soft ones is "proven if finite", and
    the report names the nodes where the zero weight meets the unselected factor. Selecting V
    as well (export/blocks.attend_step: Gather(Concat(V, zero row), index), stale rows naming the
    zero row) removes them: 0 * 0 is 0 whatever the stale row holds.
The abstraction over-approximates: an atom outside an element's set cannot influence it (every
operator rule is a union, narrowed only by concrete selection and exact zeros). "reads every live
row" is the structural converse: the live row is not selected out on some path; it does not
claim the values cannot cancel. Operators outside the supported set, or a shape computed from
data, end the proof as FAILED ("cannot analyse"), never as proven.

Position domains are generic (`PositionDomain`): `StepPositions` (a static cache),
`FullLengths` (the full pass), `RingPositions` (a sliding window on a ring of slots, from
`contracts.ring_buffer`; for the windowed step graph). A domain lists its states (the feeds of
the integer inputs and the shapes of the data inputs) and, per state, which rows each target
may read (from the contracts' predicates, evaluated once into a table).

A step graph must not depend on a row outside the live set *whatever it holds* (stale rows hold
the previous sequence's keys after a reset, or anything a fault left): there "proven if finite"
is a FAILED claim. Our step graphs select V rows as well as scores (export/blocks.attend_step),
so "reads only live rows" is proven outright; the full pass multiplies zero weights by the V of
later inputs, so its causality is "proven if finite" (inputs are finite by the input-domain
contract, checked at run time), for every length T <= max_len (a windowed model.onnx accepts
any T; longer calls are not covered by the enumeration).

ssm artifacts (`prove_ssm_step`, `prove_ssm_model`): the step has no position input and no
cache, so the claims are position-free: its only inputs are x and the state (state-only), every
layer's state reaches y, a layer's new state reads no deeper layer's state, bounded work; the full
graph is one Scan, proven causal *for every T* from its structure (forward scan over the time
axis of the input, a constant initial state, the body's outputs a function of (state, x_t) only),
with its trip count the length of x.

Not real-time code. Cost: one interpretation per state: the tiny preset (max_len 16) well under a
second for both graphs; the control preset (max_len 256, two layers) 8-16 s on the shared 2-core
CI machine, most of it the full pass (T^2 grows with T); measured per artifact kind in
claims/results/prove_graphs.json (claims/prove_graphs.py). ssm artifacts: one interpretation each.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

PROVEN, IF_FINITE, FAILED = "proven", "proven if finite", "FAILED"
_FLOATS = (np.float16, np.float32, np.float64)


class Unsupported(Exception):
    """The analysis cannot decide this graph (an operator outside the supported set, a shape
    computed from data, control flow): the proof fails, it is never assumed."""


# --- position domains --------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """One point of a position domain: the integer inputs' values and the data inputs' shapes."""

    label: str  # "pos 5", "T 17"
    value: int  # pos or T
    feeds: dict[str, np.ndarray]  # integer domain inputs (e.g. pos [1] int64)
    shapes: dict[str, tuple[int, ...]]  # data inputs whose shape depends on the state


class PositionDomain:
    """A finite domain of positions: `states()` and, per state and source, the rows a target
    element may read (`live`: bool [n_t, n_rows], n_t = 1 for a target without a position axis)."""

    kind = "positions"

    def states(self) -> list[State]:
        raise NotImplementedError

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class StepPositions(PositionDomain):
    """pos in [0, max_len) over a static cache of max_len rows (the own new row is passed apart, as
    k_new / v_new). The rows each step may read are built from the session's history, not from
    the mask predicate the graph builder calls (contracts.masking.cache_row_live): after a reset
    nothing is written; the step at p reads what the steps before it committed, and its commit
    writes row p (contracts.position P3, runtime/backends/layout.py). A builder whose predicate
    is wrong (row <= pos, say) therefore fails against this table."""

    max_len: int
    pos_input: str = "pos"
    kind = "step positions"

    def states(self) -> list[State]:
        return [
            State(f"pos {p}", p, {self.pos_input: np.array([p], dtype=np.int64)}, {})
            for p in range(self.max_len)
        ]

    def _table(self) -> np.ndarray:
        n = self.max_len
        table = np.zeros((n, n), dtype=bool)  # [pos, row]
        written = np.zeros(n, dtype=bool)  # rows committed since the reset
        for p in range(n):
            table[p] = written  # the step at p reads what was committed before it
            written[p] = True  # ... and commits row p
        return table

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        return _cached(self, "_live", self._table)[state.value][None, :n_rows]


@dataclass(frozen=True)
class FullLengths(PositionDomain):
    """T in [1, max_len] for a full pass whose input `input` has its time axis at `axis`: y[t] may
    read x[t'] iff x[t'] arrived no later than x[t] (causal) and, windowed, is one of the last R
    inputs, R = L (W - 1) + 1 the receptive field of L layers of window W (each layer reaches W - 1
    back). Built from the order of arrival, not from the predicates the builder calls
    (masking.causal_allowed / window_allowed). Lengths above max_len are not states of this
    domain: a windowed model.onnx accepts any T, and a proof over [1, max_len] says nothing about
    longer ones."""

    max_len: int
    input: str
    shape: tuple[int | str, ...]  # the declared input shape (the symbolic entry is the time axis)
    axis: int = 1
    window: int | None = None
    layers: int = 1
    kind = "full-pass lengths"

    def states(self) -> list[State]:
        out = []
        for t in range(1, self.max_len + 1):
            dims = tuple(t if i == self.axis else int(d) for i, d in enumerate(self.shape))
            out.append(State(f"T {t}", t, {}, {self.input: dims}))
        return out

    def receptive_field(self) -> int | None:
        return None if self.window is None else self.layers * (self.window - 1) + 1

    def _table(self) -> np.ndarray:
        n, field = self.max_len, self.receptive_field()
        table = np.zeros((n, n), dtype=bool)  # [t, t']
        arrived: list[int] = []  # the inputs so far, oldest first
        for t in range(n):
            arrived.append(t)
            recent = arrived if field is None else arrived[-field:]  # windowed: the last R only
            table[t, recent] = True
        return table

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        return _cached(self, "_live", self._table)[:n_t, :n_rows]


@dataclass(frozen=True)
class RingPositions(PositionDomain):
    """A sliding window of `window` keys (the own key and window - 1 cached ones) on a ring of
    `window` slots, for every ring position r in [0, 3W) the session feeds (runtime/session.py).
    The slots the step at r may read are built by simulating the ring, not from the slot
    predicate the graph builder calls (ring_buffer.slot_read): the positions 0..r-1 committed to
    slot q mod W (the layout, runtime/backends/layout.py), a slot read iff the position it holds
    is one of the W - 1 before r. Ring position r stands for every absolute position p with
    ring_position(p) = r, and the step reads alike at both (ring_buffer R10, proven), so the
    3W states cover every position of an unbounded stream."""

    window: int
    positions: int
    pos_input: str = "pos"
    kind = "ring positions"

    def states(self) -> list[State]:
        return [
            State(f"pos {p}", p, {self.pos_input: np.array([p], dtype=np.int64)}, {})
            for p in range(self.positions)
        ]

    def live(self, state: State, source: str, n_t: int, n_rows: int) -> np.ndarray:
        w, p = self.window, state.value
        held = [-1] * w  # the position each slot holds (-1: never written)
        for q in range(p):
            held[q % w] = q
        row = np.array([q >= 0 and q in range(p - w + 1, p) for q in held], dtype=bool)
        return row[None, :n_rows]


def _cached(obj: Any, name: str, make: Callable[[], np.ndarray]) -> np.ndarray:
    table = obj.__dict__.get(name)
    if table is None:
        table = make()
        object.__setattr__(obj, name, table)  # frozen dataclass: a memo, not state
    return table


# --- the abstract values -------------------------------------------------------------------------


@dataclass
class Sym:
    """An abstract tensor. hard/soft: uint64 bitsets [..., W] over the atoms, broadcastable to
    shape + (W,) (a size-1 axis: the same for every element along it); const: float64 broadcastable
    to shape, c = 'exactly c, or NaN caused by this element's own atoms', NaN = not a known
    constant. soft atoms reach the element only through a product with an exactly-zero factor."""

    shape: tuple[int, ...]
    hard: np.ndarray
    soft: np.ndarray
    const: np.ndarray
    dtype: np.dtype


Value = Any  # np.ndarray (concrete) or Sym


def _w(a: Sym) -> int:
    return a.hard.shape[-1]


def _nodeps(shape: Sequence[int], w: int) -> np.ndarray:
    return np.zeros((1,) * len(shape) + (w,), dtype=np.uint64)


def lift(value: np.ndarray, w: int) -> Sym:
    """A concrete tensor as an abstract one: no atoms, every element a known constant."""
    value = np.asarray(value)
    const = value.astype(np.float64) if value.dtype.kind in "fiub" else np.full(value.shape, np.nan)
    return Sym(value.shape, _nodeps(value.shape, w), _nodeps(value.shape, w), const, value.dtype)


def compress(arr: np.ndarray, keep_last: bool) -> np.ndarray:
    """Shrink every axis along which `arr` is constant to size 1 (the W axis of a bitset kept)."""
    axes = range(arr.ndim - 1 if keep_last else arr.ndim)
    for ax in axes:
        if arr.shape[ax] > 1:
            first = arr.take([0], axis=ax)
            same = (
                (arr == first) | (np.isnan(arr) & np.isnan(first)) if arr.dtype.kind == "f" else arr == first
            )
            if same.all():
                arr = first
    return arr


def _pad(arr: np.ndarray, ndim: int, last: bool) -> np.ndarray:
    """Prepend size-1 axes so that arr has ndim data axes (+ the W axis when last)."""
    have = arr.ndim - (1 if last else 0)
    return arr.reshape((1,) * (ndim - have) + arr.shape) if have < ndim else arr


def _full(arr: np.ndarray, shape: Sequence[int], last: bool) -> np.ndarray:
    target = tuple(shape) + ((arr.shape[-1],) if last else ())
    return np.broadcast_to(_pad(arr, len(shape), last), target)


def _sel(mask: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """bits where mask (broadcast over the W axis), else 0."""
    return np.where(mask[..., None], bits, np.uint64(0))


def _union_all(arr: np.ndarray) -> np.ndarray:
    """OR of every element's bitset: [W]."""
    return np.bitwise_or.reduce(arr.reshape(-1, arr.shape[-1]), axis=0)


def _or_reduce(bits: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    out = bits
    for ax in sorted(axes, reverse=True):
        out = np.bitwise_or.reduce(out, axis=ax, keepdims=True)
    if not keepdims:
        out = out.squeeze(axis=tuple(axes))
    return out


# --- operator rules (abstract) -------------------------------------------------------------------


def _elementwise(inputs: list[Sym], out_dtype: np.dtype, const: np.ndarray | None = None) -> Sym:
    """Every input element reaches the output element it is broadcast to (a union of atoms)."""
    shape = tuple(np.broadcast_shapes(*(a.shape for a in inputs)))
    n = len(shape)
    hard = _pad(inputs[0].hard, n, True)
    soft = _pad(inputs[0].soft, n, True)
    for a in inputs[1:]:
        hard = hard | _pad(a.hard, n, True)
        soft = soft | _pad(a.soft, n, True)
    if const is None:
        const = np.full((1,) * n, np.nan)
    return Sym(shape, hard, soft, _pad(const, n, False), np.dtype(out_dtype))


def _known(c: np.ndarray) -> np.ndarray:
    return ~np.isnan(c)


def _arith(op: str, a: Sym, b: Sym) -> Sym:
    """Add / Sub / Mul / Div with the IEEE facts the proof needs: inf + anything = inf or NaN;
    0 * x = 0 when x is finite (else NaN: x then reaches the result only through its finiteness)."""
    n = max(len(a.shape), len(b.shape))
    ca, cb = _pad(a.const, n, False), _pad(b.const, n, False)
    dt = np.result_type(a.dtype, b.dtype)
    with np.errstate(all="ignore"):
        both = _known(ca) & _known(cb)
        fa, fb = ca.astype(dt) if dt.kind == "f" else ca, cb.astype(dt) if dt.kind == "f" else cb
        exact = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op](fa, fb)
        exact = np.where(both, exact.astype(np.float64), np.nan)
        if op in ("Add", "Sub"):
            sb = -cb if op == "Sub" else cb
            exact = np.where(~both & np.isinf(ca), ca, exact)
            exact = np.where(~both & np.isinf(cb), sb, exact)
    if op != "Mul":
        return _elementwise([a, b], dt, exact)
    # Mul: a zero factor times an unknown one
    az, bz = ca == 0, cb == 0
    afin, bfin = np.isfinite(ca), np.isfinite(cb)
    a_soft = bz & ~afin  # a meets an exact zero and may be non-finite: a reaches only via its finiteness
    b_soft = az & ~bfin
    ah, bh = _pad(a.hard, n, True), _pad(b.hard, n, True)
    hard = _sel(~a_soft, ah) | _sel(~b_soft, bh)
    soft = _pad(a.soft, n, True) | _pad(b.soft, n, True) | _sel(a_soft, ah) | _sel(b_soft, bh)
    const = np.where(both, exact, np.where(az | bz, 0.0, np.nan))  # 0 (or NaN via the other's atoms)
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    return Sym(shape, hard, soft, const, dt)


def _unary(a: Sym, f: Callable[[np.ndarray], np.ndarray] | None, out_dtype: np.dtype | None = None) -> Sym:
    dt = np.dtype(out_dtype or a.dtype)
    if f is None:
        const = np.full(a.const.shape, np.nan)
    else:
        with np.errstate(all="ignore"):
            const = np.where(_known(a.const), f(a.const.astype(dt)).astype(np.float64), np.nan)
    return Sym(a.shape, a.hard, a.soft, const, dt)


def _where(cond: Value, a: Sym, b: Sym) -> Sym:
    if isinstance(cond, Sym):  # a data-dependent selection: it may pick either side
        n = max(len(cond.shape), len(a.shape), len(b.shape))
        ca, cb = _pad(a.const, n, False), _pad(b.const, n, False)
        same = np.where(_known(ca) & (ca == cb), ca, np.nan)
        return _elementwise([cond, a, b], np.result_type(a.dtype, b.dtype), same)
    cond = np.asarray(cond, dtype=bool)
    shape = tuple(np.broadcast_shapes(cond.shape, a.shape, b.shape))
    n = len(shape)
    c = _pad(cond, n, False)
    hard = np.where(c[..., None], _pad(a.hard, n, True), _pad(b.hard, n, True))
    soft = np.where(c[..., None], _pad(a.soft, n, True), _pad(b.soft, n, True))
    const = np.where(c, _pad(a.const, n, False), _pad(b.const, n, False))
    return Sym(
        shape,
        compress(hard, True),
        compress(soft, True),
        compress(const, False),
        np.result_type(a.dtype, b.dtype),
    )


def _axes(attr_axes: Sequence[int] | None, ndim: int) -> list[int]:
    if attr_axes is None:
        return list(range(ndim))
    return sorted({int(ax) % ndim for ax in attr_axes})


def _reduce(op: str, a: Sym, axes: list[int], keepdims: bool) -> Sym:
    hard = _or_reduce(_full(a.hard, a.shape, True), axes, keepdims)
    soft = _or_reduce(_full(a.soft, a.shape, True), axes, keepdims)
    full = _full(a.const, a.shape, False)
    if op in ("ReduceMax", "ReduceMin"):
        const = (np.max if op == "ReduceMax" else np.min)(full, axis=tuple(axes), keepdims=keepdims)
    else:  # sums and means: exactly 0 only if every term is a known 0
        zero = np.all(full == 0, axis=tuple(axes), keepdims=keepdims)
        const = np.where(zero, 0.0, np.nan)
    shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape) if keepdims or i not in axes)
    return Sym(shape, compress(hard, True), compress(soft, True), compress(np.asarray(const), False), a.dtype)


def _softmax(a: Sym, axis: int) -> Sym:
    """Every output of a row depends on the whole row (the max and the normalizer); an entry that is
    exactly -inf gets exactly 0 (or NaN with its row) unless the whole row is -inf (then NaN)."""
    ax = axis % len(a.shape)
    hard = np.bitwise_or.reduce(_full(a.hard, a.shape, True), axis=ax, keepdims=True)
    soft = np.bitwise_or.reduce(_full(a.soft, a.shape, True), axis=ax, keepdims=True)
    ninf = _full(a.const, a.shape, False) == -np.inf
    row_all = np.all(ninf, axis=ax, keepdims=True)
    const = np.where(ninf & ~row_all, 0.0, np.nan)
    return Sym(a.shape, compress(hard, True), compress(soft, True), compress(const, False), a.dtype)


def _matmul(a: Sym, b: Sym, sites: dict[str, np.ndarray], site: str) -> Sym:
    """C[.., i, k] = sum_j A[.., i, j] B[.., j, k]: the union over j of the term rule of `_arith`'s
    Mul (a term with an exactly-zero factor passes the other factor's atoms as soft only)."""
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise Unsupported("MatMul of a 1-D operand")
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    n, j, k = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.shape[-2] != j:
        raise Unsupported(f"MatMul shapes {a.shape} x {b.shape}")
    nd = len(batch) + 2
    ah = compress(_pad(a.hard, nd, True), True)[..., :, :, None, :]  # [.., i, j, 1, W]
    asf = compress(_pad(a.soft, nd, True), True)[..., :, :, None, :]
    bh = compress(_pad(b.hard, nd, True), True)[..., None, :, :, :]  # [.., 1, j, k, W]
    bsf = compress(_pad(b.soft, nd, True), True)[..., None, :, :, :]
    ca = compress(_pad(a.const, nd, False), False)[..., :, :, None]
    cb = compress(_pad(b.const, nd, False), False)[..., None, :, :]
    az, bz = ca == 0, cb == 0
    parts_h, parts_s, moved = [], [asf, bsf], []
    for bits, to_soft in ((ah, bz & ~np.isfinite(ca)), (bh, az & ~np.isfinite(cb))):
        if not bits.any():  # a constant operand: no atoms to pass
            continue
        if to_soft.any():  # this side meets exact zeros of the other: through its finiteness only there
            parts_h.append(_sel(~to_soft, bits))
            moved.append(_sel(to_soft, bits))
        else:
            parts_h.append(bits)
    w = ah.shape[-1]
    hard = _reduce_j(parts_h, w, nd)
    soft = _reduce_j(parts_s + moved, w, nd)
    if moved:
        site_bits = _union_all(_reduce_j(moved, w, nd))
        sites[site] = sites.get(site, np.zeros(w, np.uint64)) | site_bits
    bad = (_known(ca) & ~np.isfinite(ca)) | (_known(cb) & ~np.isfinite(cb))  # 0 * inf: NaN exactly
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


def _transpose(a: Sym, perm: Sequence[int]) -> Sym:
    nd = len(a.shape)
    return Sym(
        tuple(a.shape[p] for p in perm),
        _pad(a.hard, nd, True).transpose(*perm, nd),
        _pad(a.soft, nd, True).transpose(*perm, nd),
        _pad(a.const, nd, False).transpose(*perm),
        a.dtype,
    )


def _restructure(a: Sym, shape: tuple[int, ...], f: Callable[[np.ndarray], np.ndarray]) -> Sym:
    """Materialize, apply a pure index map f (reshape, gather, ...), compress again."""
    hard = f(np.ascontiguousarray(_full(a.hard, a.shape, True)))
    soft = f(np.ascontiguousarray(_full(a.soft, a.shape, True)))
    const = f(np.ascontiguousarray(_full(a.const, a.shape, False))[..., None])[..., 0]
    return Sym(tuple(shape), compress(hard, True), compress(soft, True), compress(const, False), a.dtype)


def _slice_axis(a: Sym, ax: int, index: slice | np.ndarray) -> Sym:
    nd = len(a.shape)

    def take(arr: np.ndarray, last: bool) -> np.ndarray:
        arr = _pad(arr, nd, last)
        if arr.shape[ax] == 1:
            return arr
        return arr[(slice(None),) * ax + (index,)]

    length = len(range(a.shape[ax])[index]) if isinstance(index, slice) else len(index)
    shape = tuple(length if i == ax else d for i, d in enumerate(a.shape))
    return Sym(shape, take(a.hard, True), take(a.soft, True), take(a.const, False), a.dtype)


def _concat(parts: list[Sym], ax: int) -> Sym:
    nd = len(parts[0].shape)
    ax %= nd
    sizes = [p.shape[ax] for p in parts]
    shape = tuple(sum(sizes) if i == ax else parts[0].shape[i] for i in range(nd))

    def cat(get: Callable[[Sym], np.ndarray], last: bool) -> np.ndarray:
        arrs = [_pad(get(p), nd, last) for p in parts]
        other = [max(x.shape[i] for x in arrs) for i in range(nd)]
        full = []
        for p, x in zip(parts, arrs):
            tgt = [p.shape[ax] if i == ax else other[i] for i in range(nd)]
            full.append(np.broadcast_to(x, tuple(tgt) + ((x.shape[-1],) if last else ())))
        return compress(np.concatenate(full, axis=ax), last)

    return Sym(
        shape,
        cat(lambda p: p.hard, True),
        cat(lambda p: p.soft, True),
        cat(lambda p: p.const, False),
        parts[0].dtype,
    )


def _gather(data: Value, idx: Value, axis: int, w: int) -> Sym:
    if isinstance(idx, Sym):  # data-dependent indices (token ids): the whole axis, plus the index atoms
        d = data if isinstance(data, Sym) else lift(data, w)
        ax = axis % len(d.shape)
        whole = _reduce("ReduceMax", d, [ax], keepdims=False)  # union along the gathered axis
        out_shape = d.shape[:ax] + idx.shape + d.shape[ax + 1 :]
        ni = len(idx.shape)

        def place(arr: np.ndarray, last: bool) -> np.ndarray:
            arr = _pad(arr, len(whole.shape), last)
            return arr.reshape(arr.shape[:ax] + (1,) * ni + arr.shape[ax:])

        def idx_place(arr: np.ndarray, last: bool) -> np.ndarray:
            arr = _pad(arr, ni, last)
            lead, trail = (1,) * ax, (1,) * (len(d.shape) - ax - 1)
            return arr.reshape(lead + arr.shape[:ni] + trail + ((arr.shape[-1],) if last else ()))

        hard = place(whole.hard, True) | idx_place(idx.hard, True)
        soft = place(whole.soft, True) | idx_place(idx.soft, True)
        return Sym(out_shape, hard, soft, np.full((1,) * len(out_shape), np.nan), d.dtype)
    idx = np.asarray(idx).astype(np.int64)
    d = data
    ax = axis % len(d.shape)
    idx = np.where(idx < 0, idx + d.shape[ax], idx)
    out_shape = d.shape[:ax] + idx.shape + d.shape[ax + 1 :]
    return _restructure(d, out_shape, lambda arr: np.take(arr, idx, axis=ax))


# --- the interpreter -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Atoms:
    """The atoms of one state: each position source's rows, every other data input, and the taps
    (graph outputs that the graph also consumes: the step's own new K/V rows)."""

    offsets: dict[str, tuple[int, int]]  # name -> (first atom, count)
    n: int

    @property
    def words(self) -> int:
        return max(1, -(-self.n // 64))

    def bits(self, name: str, index: int = 0) -> tuple[int, int]:
        a = self.offsets[name][0] + index
        return a // 64, a % 64

    def mask(self, words: np.ndarray, name: str) -> np.ndarray:
        """bool [count] of the atoms of `name` set in a [W] bitset."""
        first, count = self.offsets[name]
        flags = np.unpackbits(words.astype("<u8").view(np.uint8), bitorder="little")
        return flags[first : first + count].astype(bool)


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class Interpreter:
    """Abstract interpretation of one ONNX graph (see the module docstring)."""

    UNARY: dict[str, Callable[[np.ndarray], np.ndarray] | None] = {
        "Identity": lambda x: x,
        "Exp": np.exp,
        "Relu": lambda x: np.maximum(x, 0),
        "Neg": np.negative,
        "Abs": np.abs,
        "Sqrt": np.sqrt,
        "Tanh": np.tanh,
        "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "Erf": None,
        "Log": np.log,
        "Reciprocal": lambda x: 1 / x,
        "Not": None,
        "IsNaN": None,
        "IsInf": None,
        "Sin": np.sin,
        "Cos": np.cos,
        "Softplus": None,
        "Gelu": None,
    }
    BOOL_OUT = frozenset({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor"})

    def __init__(self, model: Any, domain_inputs: Sequence[str]) -> None:
        from onnx import numpy_helper
        from onnx.reference import ReferenceEvaluator

        self.model = model
        self.graph = model.graph
        self.nodes = list(self.graph.node)
        self.attrs = [_attrs(n) for n in self.nodes]
        for node in self.nodes:
            if any(a.HasField("g") or len(a.graphs) for a in node.attribute):
                raise Unsupported(f"node {node.name!r} ({node.op_type}) holds a subgraph (control flow)")
        self.inits = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.inputs = [i.name for i in self.graph.input if i.name not in self.inits]
        self.outputs = [o.name for o in self.graph.output]
        self.domain_inputs = set(domain_inputs)
        self.input_dtypes = {i.name: _elem_dtype(i) for i in self.graph.input}
        # kinds: "const" (initializers, constant nodes), "state" (position subgraph), "sym" (data)
        kind: dict[str, str] = {name: "const" for name in self.inits}
        kind[""] = "const"
        for name in self.inputs:
            kind[name] = "state" if name in self.domain_inputs else "sym"
        self.node_kind = []
        for node in self.nodes:
            ins = [kind[i] for i in node.input]
            if node.op_type in ("Shape", "Size"):
                k = "state"
            elif all(x == "const" for x in ins):
                k = "const"
            elif all(x in ("const", "state") for x in ins):
                k = "state"
            else:
                k = "sym"
            self.node_kind.append(k)
            for out in node.output:
                kind[out] = k
        self.kind = kind
        consumed = {i for n in self.nodes for i in n.input}
        self.taps = [o for o in self.outputs if o in consumed]
        self._ref = ReferenceEvaluator(model)
        self.const_values: dict[str, np.ndarray] = dict(self.inits)
        for i, node in enumerate(self.nodes):
            if self.node_kind[i] == "const":
                outs = self._ref.rt_nodes_[i].run(*[self.const_values[x] if x else None for x in node.input])
                for name, val in zip(node.output, outs):
                    self.const_values[name] = np.asarray(val)

    # -- per state --
    def atoms(self, sources: dict[str, int | None], shapes: dict[str, tuple[int, ...]]) -> Atoms:
        offsets: dict[str, tuple[int, int]] = {}
        n = 0
        for name in self.inputs:
            if name in self.domain_inputs:
                continue
            axis = sources.get(name)
            count = 1 if axis is None else shapes[name][axis]
            offsets[name] = (n, count)
            n += count
        for name in self.taps:
            offsets["own:" + name] = (n, 1)
            n += 1
        return Atoms(offsets, n)

    def run(
        self,
        state: State,
        sources: dict[str, int | None],
        static_shapes: dict[str, tuple[int, ...]],
    ) -> tuple[dict[str, Value], Atoms, dict[str, np.ndarray], dict[str, tuple[int, ...]]]:
        """Interpret the graph at one state: (outputs, atoms, zero-weight sites, every node's shapes)."""
        shapes = {**static_shapes, **state.shapes}
        atoms = self.atoms(sources, shapes)
        w = atoms.words
        env: dict[str, Value] = dict(self.const_values)
        env[""] = None
        for name in self.inputs:
            if name in self.domain_inputs:
                env[name] = state.feeds[name]
                continue
            shape = shapes[name]
            axis = sources.get(name)
            first, count = atoms.offsets[name]
            dims = [1] * len(shape)
            if axis is not None:
                dims[axis] = shape[axis]
            hard = np.zeros((count, w), dtype=np.uint64)
            index = first + np.arange(count)
            hard[np.arange(count), index // 64] = np.left_shift(np.uint64(1), (index % 64).astype(np.uint64))
            if axis is None:
                hard = np.bitwise_or.reduce(hard, axis=0)
            hard = hard.reshape(tuple(dims) + (w,))
            env[name] = Sym(
                shape, hard, _nodeps(shape, w), np.full((1,) * len(shape), np.nan), self.input_dtypes[name]
            )
        sites: dict[str, np.ndarray] = {}
        node_shapes: dict[str, tuple[int, ...]] = {}
        for i, node in enumerate(self.nodes):
            k = self.node_kind[i]
            if k == "const":
                continue
            args = [env[x] for x in node.input]
            label = f"{node.name or node.output[0]} ({node.op_type})"
            if k == "state":
                outs = self._state_node(i, node, args)
            else:
                try:
                    outs = self._sym_node(node, self.attrs[i], args, w, sites, label)
                except Unsupported:
                    raise
                except Exception as exc:  # a rule that cannot apply to these shapes
                    raise Unsupported(f"{label}: {type(exc).__name__}: {exc}") from None
            for name, val in zip(node.output, outs):
                if isinstance(val, Sym) and name in self.taps:
                    word, bit = atoms.bits("own:" + name)
                    tap = _nodeps(val.shape, w)
                    tap[..., word] = np.uint64(1) << np.uint64(bit)
                    val = Sym(val.shape, val.hard | tap, val.soft, val.const, val.dtype)
                env[name] = val
                node_shapes[name] = tuple(val.shape) if isinstance(val, Sym) else tuple(np.shape(val))
        return {o: env[o] for o in self.outputs}, atoms, sites, node_shapes

    def _state_node(self, i: int, node: Any, args: list[Value]) -> list[Value]:
        if node.op_type in ("Shape", "Size"):
            shape = args[0].shape if isinstance(args[0], Sym) else np.shape(args[0])
            if node.op_type == "Size":
                return [np.array(int(np.prod(shape)), dtype=np.int64)]
            a = self.attrs[i]
            start, end = a.get("start", 0), a.get("end", None)
            return [np.array(list(shape)[start:end], dtype=np.int64)]
        outs = self._ref.rt_nodes_[i].run(*args)
        return [np.asarray(o) for o in outs]

    def _sym_node(
        self,
        node: Any,
        attrs: dict[str, Any],
        args: list[Value],
        w: int,
        sites: dict[str, np.ndarray],
        label: str,
    ) -> list[Value]:
        op = node.op_type
        concrete = [not isinstance(a, Sym) for a in args]

        def S(a: Value) -> Sym:
            return a if isinstance(a, Sym) else lift(a, w)

        def C(a: Value, what: str) -> np.ndarray:
            if isinstance(a, Sym):
                raise Unsupported(f"{label}: its {what} is computed from data (a data-dependent shape)")
            return np.asarray(a)

        if op in self.UNARY:
            return [_unary(S(args[0]), self.UNARY[op])]
        if op == "Cast":
            to = _onnx_dtype(attrs["to"])
            a = S(args[0])
            keep = a.dtype.kind == "f" and to.kind == "f"
            return [_unary(a, (lambda x: x) if keep else None, to)]
        if op in ("Add", "Sub", "Mul", "Div"):
            return [_arith(op, S(args[0]), S(args[1]))]
        if op in ("Pow", "Max", "Min", "Mod", "Sum", "Mean", "PRelu"):
            return [_elementwise([S(a) for a in args if a is not None], S(args[0]).dtype)]
        if op in self.BOOL_OUT:
            return [_elementwise([S(a) for a in args], np.dtype(bool))]
        if op == "Where":
            cond = args[0] if isinstance(args[0], Sym) else np.asarray(args[0])
            return [_where(cond, S(args[1]), S(args[2]))]
        if op == "Clip":
            return [_elementwise([S(a) for a in args if a is not None], S(args[0]).dtype)]
        if op in ("MatMul", "Gemm"):
            a, b = S(args[0]), S(args[1])
            if op == "Gemm":
                if attrs.get("transA", 0):
                    a = _transpose(a, [1, 0])
                if attrs.get("transB", 0):
                    b = _transpose(b, [1, 0])
            y = _matmul(a, b, sites, label)
            if op == "Gemm":
                alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
                if alpha != 1.0:
                    y = _arith("Mul", y, lift(np.array(alpha, np.float32), w))
                if len(args) > 2 and args[2] is not None:
                    c = S(args[2])
                    if beta != 1.0:
                        c = _arith("Mul", c, lift(np.array(beta, np.float32), w))
                    y = _arith("Add", y, c)
            return [y]
        if op == "Softmax":
            return [_softmax(S(args[0]), attrs.get("axis", -1))]
        if op in ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean"):
            a = S(args[0])
            axes = attrs.get("axes")
            if len(args) > 1 and args[1] is not None:
                axes = [int(v) for v in C(args[1], "axes")]
            if axes is not None and len(axes) == 0 and attrs.get("noop_with_empty_axes", 0):
                return [a]
            return [
                _reduce(op, a, _axes(axes if axes else None, len(a.shape)), bool(attrs.get("keepdims", 1)))
            ]
        if op == "LayerNormalization":
            x = S(args[0])
            ax = attrs.get("axis", -1) % len(x.shape)
            stats = _reduce("ReduceSum", x, list(range(ax, len(x.shape))), keepdims=True)
            parts = [x, stats] + [S(a) for a in args[1:] if a is not None]
            y = _elementwise(parts, x.dtype)
            y = Sym(x.shape, y.hard, y.soft, y.const, x.dtype)
            return [y] + [stats] * (len(node.output) - 1)
        if op == "Transpose":
            a = S(args[0])
            perm = attrs.get("perm", list(range(len(a.shape)))[::-1])
            return [_transpose(a, perm)]
        if op == "Reshape":
            a = S(args[0])
            target = [int(v) for v in C(args[1], "target shape")]
            if attrs.get("allowzero", 0) == 0:
                target = [a.shape[i] if v == 0 else v for i, v in enumerate(target)]
            shape = tuple(np.empty(a.shape, dtype=np.bool_).reshape(target).shape)
            return [_restructure(a, shape, lambda arr: arr.reshape(shape + arr.shape[-1:]))]
        if op == "Flatten":
            a = S(args[0])
            ax = attrs.get("axis", 1) % (len(a.shape) + 1)
            shape = (int(np.prod(a.shape[:ax])), int(np.prod(a.shape[ax:])))
            return [_restructure(a, shape, lambda arr: arr.reshape(shape + arr.shape[-1:]))]
        if op in ("Squeeze", "Unsqueeze"):
            a = S(args[0])
            axes = attrs.get("axes")
            if len(args) > 1 and args[1] is not None:
                axes = [int(v) for v in C(args[1], "axes")]
            if op == "Squeeze":
                axes = (
                    _axes(axes, len(a.shape))
                    if axes is not None
                    else [i for i, d in enumerate(a.shape) if d == 1]
                )
                shape = tuple(d for i, d in enumerate(a.shape) if i not in axes)
            else:
                nd = len(a.shape) + len(axes)
                ins = sorted(int(x) % nd for x in axes)
                it = iter(a.shape)
                shape = tuple(1 if i in ins else next(it) for i in range(nd))
            return [_restructure(a, shape, lambda arr: arr.reshape(shape + arr.shape[-1:]))]
        if op == "Expand":
            a = S(args[0])
            target = tuple(int(v) for v in C(args[1], "target shape"))
            shape = tuple(np.broadcast_shapes(a.shape, target))
            nd = len(shape)
            return [
                Sym(shape, _pad(a.hard, nd, True), _pad(a.soft, nd, True), _pad(a.const, nd, False), a.dtype)
            ]
        if op == "Split":
            a = S(args[0])
            ax = attrs.get("axis", 0) % len(a.shape)
            if len(args) > 1 and args[1] is not None:
                sizes = [int(v) for v in C(args[1], "split sizes")]
            elif "split" in attrs:
                sizes = [int(v) for v in attrs["split"]]
            else:
                n = len(node.output)
                sizes = [-(-a.shape[ax] // n)] * n
                sizes[-1] = a.shape[ax] - sum(sizes[:-1])
            outs, start = [], 0
            for s in sizes:
                outs.append(_slice_axis(a, ax, slice(start, start + s)))
                start += s
            return outs
        if op == "Slice":
            a = S(args[0])
            starts = C(args[1], "starts")
            ends = C(args[2], "ends")
            axes = C(args[3], "axes") if len(args) > 3 and args[3] is not None else np.arange(len(starts))
            steps = (
                C(args[4], "steps") if len(args) > 4 and args[4] is not None else np.ones(len(starts), int)
            )
            for s, e, ax, st in zip(starts, ends, axes, steps):
                ax = int(ax) % len(a.shape)
                rng = slice(*slice(int(s), int(e), int(st)).indices(a.shape[ax]))
                a = _slice_axis(a, ax, rng)
            return [a]
        if op == "Concat":
            return [_concat([S(x) for x in args], attrs["axis"])]
        if op == "Gather":
            data = args[0] if isinstance(args[0], Sym) else np.asarray(args[0])
            idx = args[1]
            if not isinstance(data, Sym) and not isinstance(idx, Sym):
                raise Unsupported(f"{label}: concrete Gather in the data part")  # kinds guarantee otherwise
            if not isinstance(data, Sym) and isinstance(idx, Sym):
                return [_gather(data, idx, attrs.get("axis", 0), w)]
            return [_gather(S(data), idx, attrs.get("axis", 0), w)]
        if op == "ConstantOfShape":
            raise Unsupported(f"{label}: ConstantOfShape of a data-dependent shape")
        del concrete
        raise Unsupported(f"{label}: operator {op} is not supported by the graph prover")


def _elem_dtype(value_info: Any) -> np.dtype:
    return _onnx_dtype(value_info.type.tensor_type.elem_type)


def _onnx_dtype(code: int) -> np.dtype:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(code))


def declared_shape(value_info: Any) -> tuple[int | str, ...]:
    dims = value_info.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)


# --- claims and proofs -----------------------------------------------------------------------------


@dataclass
class Claim:
    name: str
    status: str  # PROVEN | IF_FINITE | FAILED
    detail: str


@dataclass
class GraphProof:
    """Every claim about one graph, over every state of its domain."""

    graph: str  # "step", "model"
    where: str  # the file
    domain: str
    states: int
    nodes: int
    seconds: float
    claims: list[Claim] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != FAILED for c in self.claims)

    @property
    def status(self) -> str:
        if not self.ok:
            return FAILED
        return IF_FINITE if any(c.status == IF_FINITE for c in self.claims) else PROVEN

    def to_json(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "file": self.where,
            "domain": self.domain,
            "states": self.states,
            "nodes": self.nodes,
            "seconds": round(self.seconds, 3),
            "status": self.status,
            "claims": [{"name": c.name, "status": c.status, "detail": c.detail} for c in self.claims],
        }


@dataclass(frozen=True)
class GraphSpec:
    """What to prove about one graph: its position sources (input -> position axis), the targets
    (output -> position axis or None), the primary output that must read every live row, and the
    domain."""

    graph: str
    sources: dict[str, int]
    targets: dict[str, int | None]
    primary: str
    domain: PositionDomain
    static: bool  # step graphs: every shape the same at every state
    source_word: str = "row"  # "row" (cache rows) or "input" (time steps)


def _rows(bits: np.ndarray, atoms: Atoms, source: str) -> np.ndarray:
    return atoms.mask(bits, source)


def _unpack(words: np.ndarray) -> np.ndarray:
    """bool [n, 64 W] of bitsets [n, W] (atom a = bit a % 64 of word a // 64)."""
    flat = np.ascontiguousarray(words.astype("<u8")).view(np.uint8).reshape(words.shape[0], -1)
    return np.unpackbits(flat, axis=1, bitorder="little").astype(bool)


def _fmt_rows(rows: Iterable[int], limit: int = 6) -> str:
    rows = sorted(rows)
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (f", ... ({len(rows)} in all)" if len(rows) > limit else "")


def prove_graph(model: Any, spec: GraphSpec, where: str, *, stop_at_first: bool = False) -> GraphProof:
    """Interpret `model` at every state of `spec.domain` and decide the claims (module docstring).
    stop_at_first: end at the first state with a counterexample (mutants)."""
    start = time.monotonic()
    proof = GraphProof(spec.graph, where, spec.domain.kind, 0, len(model.graph.node), 0.0)
    pos_input = getattr(spec.domain, "pos_input", None)
    domain_inputs = [pos_input] if pos_input is not None else []
    try:
        interp = Interpreter(model, domain_inputs)
    except Unsupported as exc:
        proof.claims.append(Claim("bounded work", FAILED, str(exc)))
        proof.seconds = time.monotonic() - start
        return proof
    static_shapes = {}
    for vi in model.graph.input:
        if vi.name in interp.inputs:
            dims = declared_shape(vi)
            if all(isinstance(d, int) and d > 0 for d in dims):
                static_shapes[vi.name] = tuple(int(d) for d in dims)
    word = spec.source_word
    stale_any: str | None = None  # first counterexample: a non-live atom in hard deps
    soft_only: dict[str, set[str]] = {}  # source -> sites, for atoms outside the live set reached softly
    dropped: str | None = None
    own_missing: str | None = None
    shapes_first: dict[str, tuple[int, ...]] | None = None
    shape_change: str | None = None
    failure: str | None = None
    states = spec.domain.states()
    for state in states:
        try:
            outs, atoms, sites, shapes = interp.run(state, spec.sources, static_shapes)
        except Unsupported as exc:
            failure = f"at {state.label}: {exc}"
            break
        proof.states += 1
        if shapes_first is None:
            shapes_first = shapes
        elif spec.static and shape_change is None and shapes != shapes_first:
            bad = next(k for k in shapes if shapes[k] != shapes_first.get(k))
            shape_change = (
                f"tensor {bad!r} is {shapes_first.get(bad)} at {states[0].label} "
                f"but {shapes[bad]} at {state.label}"
            )
        w = atoms.words
        for target, t_axis in spec.targets.items():
            val = outs[target]
            if not isinstance(val, Sym):
                continue
            hard = _full(val.hard, val.shape, True)
            soft = _full(val.soft, val.shape, True)
            if t_axis is None:
                per_t_h, per_t_s = _union_all(hard)[None], _union_all(soft)[None]
            else:
                axes = [i for i in range(len(val.shape)) if i != t_axis]
                per_t_h = _or_reduce(hard, axes, keepdims=False).reshape(-1, w)
                per_t_s = _or_reduce(soft, axes, keepdims=False).reshape(-1, w)
            n_t = per_t_h.shape[0]
            flags_h = _unpack(per_t_h)  # [n_t, atoms]
            flags_s = _unpack(per_t_s) & ~flags_h
            for source in spec.sources:
                first, n_rows = atoms.offsets[source]
                live = spec.domain.live(state, source, n_t, n_rows)  # [n_t, n_rows]
                h = flags_h[:, first : first + n_rows]
                s = flags_s[:, first : first + n_rows]
                leak = h & ~live
                if leak.any() and stale_any is None:
                    t = int(np.flatnonzero(leak.any(axis=1))[0])
                    at = state.label + ("" if t_axis is None else f", t {t}")
                    stale_any = (
                        f"at {at}: {target} depends on {source} {word}(s) {_fmt_rows(np.flatnonzero(leak[t]))}, "
                        f"which the contract says are not read (live: {_fmt_rows(np.flatnonzero(live[t]))})"
                    )
                soft_leak = (s & ~live).any(axis=0)
                if soft_leak.any():
                    names = {
                        site for site, bits in sites.items() if (_rows(bits, atoms, source) & soft_leak).any()
                    }
                    soft_only.setdefault(source, set()).update(names)
                if target == spec.primary and dropped is None:
                    missing = live & ~h
                    if missing.any():
                        t = int(np.flatnonzero(missing.any(axis=1))[0])
                        at = state.label + ("" if t_axis is None else f", t {t}")
                        dropped = (
                            f"at {at}: {target} does not depend on live {source} {word}(s) "
                            f"{_fmt_rows(np.flatnonzero(missing[t]))} (selected out)"
                        )
            if target == spec.primary and own_missing is None:
                for tap in interp.taps:
                    if not _rows(_union_all(hard), atoms, "own:" + tap).any():
                        own_missing = (
                            f"at {state.label}: {target} does not depend on the step's own new row {tap}"
                        )
        if stop_at_first and (stale_any or dropped or own_missing or shape_change):
            break
    proof.seconds = time.monotonic() - start
    n_states = len(states)
    span = f"all {n_states} states ({states[0].label} .. {states[-1].label})" if states else "no states"
    if failure is not None:
        proof.claims.append(Claim("analysis", FAILED, f"cannot analyse the graph {failure}"))
        return proof
    # bounded work
    work = _bounded_work(model, interp, spec, shape_change)
    proof.claims.append(work)
    # reads only live rows / causal
    name = "causal" if word == "input" else "reads only live rows"
    if stale_any is not None:
        proof.claims.append(Claim(name, FAILED, stale_any))
    elif soft_only:
        where_txt = "; ".join(f"{src} via {', '.join(sorted(s))}" for src, s in sorted(soft_only.items()))
        # A step graph must not depend on stale cache rows whatever they hold (after a reset they
        # hold the previous sequence, which nothing validates now): "only if finite" fails it. A
        # full pass reads only this call's inputs, finite by the input-domain contract.
        proof.claims.append(
            Claim(
                name,
                FAILED if word == "row" else IF_FINITE,
                f"over {span}: only live {word}s reach the outputs by value, but {word}s outside the live set "
                f"still reach them through a product with an exactly-zero weight ({where_txt}): independent of "
                "them only if they are finite (0 * inf = NaN; a zero result also takes their sign); "
                + (
                    "select the V rows too (stale rows replaced by a zero row, as export/blocks.attend_step does) "
                    "to make it hold whatever they hold"
                    if word == "row"
                    else "holds for finite value vectors (inputs in a finite domain that do not overflow V)"
                ),
            )
        )
    else:
        proof.claims.append(
            Claim(name, PROVEN, f"over {span}: no {word} outside the contract's live set reaches any output")
        )
    every = "reads every past input" if word == "input" else "reads every live row"
    if dropped is not None:
        proof.claims.append(Claim(every, FAILED, dropped))
    elif own_missing is not None:
        proof.claims.append(Claim(every, FAILED, own_missing))
    else:
        own = f" and its own new rows ({', '.join(interp.taps)})" if interp.taps else ""
        proof.claims.append(
            Claim(
                every,
                PROVEN,
                f"over {span}: {spec.primary} has an unselected path from every live {word}{own}",
            )
        )
    return proof


def _bounded_work(model: Any, interp: Interpreter, spec: GraphSpec, shape_change: str | None) -> Claim:
    from tickformer.artifact import graph_rules

    flow = [n.op_type for n in model.graph.node if n.op_type in graph_rules.CONTROL_FLOW_OPS]
    if flow:
        return Claim("bounded work", FAILED, f"control flow: {sorted(set(flow))}")
    symbolic = [
        f"{vi.name}{list(declared_shape(vi))}"
        for vi in list(model.graph.input) + list(model.graph.output)
        if vi.name in interp.inputs + interp.outputs
        and not all(isinstance(d, int) and d > 0 for d in declared_shape(vi))
    ]
    if spec.static and symbolic:
        return Claim("bounded work", FAILED, f"symbolic I/O shapes {symbolic}")
    if shape_change is not None:
        return Claim("bounded work", FAILED, f"the work depends on the position: {shape_change}")
    if spec.static:
        return Claim(
            "bounded work",
            PROVEN,
            f"no control flow; static I/O shapes; every one of the {len(model.graph.node)} nodes has the same "
            "shapes at every position; no shape computed from data",
        )
    windowed = getattr(spec.domain, "window", None) is not None
    bound = (
        "its work grows with T and is fixed by T alone (a windowed model.onnx takes any T)"
        if windowed
        else f"at most {getattr(spec.domain, 'max_len', '?')}"
    )
    return Claim(
        "bounded work",
        PROVEN,
        f"no control flow; the only symbolic dimension is the length (I/O {symbolic}), {bound}; no shape "
        "computed from data",
    )


# --- our artifacts' graphs ---------------------------------------------------------------------------


def step_spec(model: Any, max_len: int | None = None, window: int | None = None) -> GraphSpec:
    """The spec of a step graph (format.step_signature): pos [1], k_cache.i [B, H, dh, N] (rows on
    axis 3), v_cache.i [B, H, N, dh] (rows on axis 2); targets: every output."""
    from tickformer.artifact import format as fmt

    ins = {vi.name: declared_shape(vi) for vi in model.graph.input}
    if "pos" not in ins:
        raise Unsupported("not a step graph: it has no 'pos' input")
    sources: dict[str, int] = {}
    i = 0
    while fmt.k_cache(i) in ins and fmt.v_cache(i) in ins:
        sources[fmt.k_cache(i)], sources[fmt.v_cache(i)] = 3, 2
        i += 1
    if not sources:
        raise Unsupported("not a step graph: no k_cache.0 / v_cache.0 inputs")
    n = ins[fmt.v_cache(0)][2]
    if not isinstance(n, int) or n < 1:
        raise Unsupported(f"{fmt.v_cache(0)} has no static row count ({ins[fmt.v_cache(0)]})")
    if window is None and any(t.name == "ring_slot" for t in model.graph.initializer):
        window = n  # our windowed step graph (export/graphs.py): a ring of W rows
    outs = [vi.name for vi in model.graph.output]
    if window is not None:
        if window != n:
            raise Unsupported(f"the ring cache has {n} rows but the window is {window}")
        # the session feeds the ring position r in [0, 3W) (runtime/session.py, contracts R11)
        domain: PositionDomain = RingPositions(window, 3 * window)
        return GraphSpec("step", sources, {o: None for o in outs}, outs[0], domain, static=True)
    if max_len is not None and max_len != n:
        raise Unsupported(f"the cache has {n} rows but max_len is {max_len}")
    return GraphSpec("step", sources, {o: None for o in outs}, outs[0], StepPositions(n), static=True)


def model_spec(model: Any, max_len: int, window: int | None = None, layers: int = 1) -> GraphSpec:
    """The spec of a full-pass graph: one input [B, T, ...] (tokens [B, T]) with T symbolic, one
    output [B, T, ...]; y[t] against x[t'] along axis 1."""
    ins = [vi for vi in model.graph.input if vi.name not in {t.name for t in model.graph.initializer}]
    outs = list(model.graph.output)
    if len(ins) != 1 or len(outs) != 1:
        raise Unsupported(
            f"a full-pass graph has one input and one output; this one has {[i.name for i in ins]} -> "
            f"{[o.name for o in outs]}"
        )
    shape = declared_shape(ins[0])
    if len(shape) < 2 or isinstance(shape[1], int):
        raise Unsupported(f"input {ins[0].name} {list(shape)} has no symbolic length on axis 1")
    if not all(isinstance(d, int) and d > 0 for i, d in enumerate(shape) if i != 1):
        raise Unsupported(f"input {ins[0].name} {list(shape)}: only the length may be symbolic")
    domain = FullLengths(max_len, ins[0].name, shape, 1, window, layers)
    return GraphSpec(
        "model", {ins[0].name: 1}, {outs[0].name: 1}, outs[0].name, domain, static=False, source_word="input"
    )


def prove_model_proto(
    model: Any,
    where: str,
    *,
    max_len: int | None = None,
    window: int | None = None,
    layers: int = 1,
    stop_at_first: bool = False,
) -> GraphProof:
    """Prove one of our graphs, recognised by its inputs: a step graph (pos, k_cache.i, v_cache.i)
    or a full pass (one input with a symbolic length; needs max_len)."""
    names = {vi.name for vi in model.graph.input}
    try:
        if "pos" in names:
            spec = step_spec(model, max_len, window)
        else:
            if max_len is None:
                raise Unsupported(
                    "a full-pass graph has a symbolic length T: pass --max-len N (the artifact's max_len)"
                )
            spec = model_spec(model, max_len, window, layers)
    except Unsupported as exc:
        return GraphProof(
            "?", where, "?", 0, len(model.graph.node), 0.0, [Claim("analysis", FAILED, str(exc))]
        )
    proof = prove_graph(model, spec, where, stop_at_first=stop_at_first)
    domain = spec.domain
    if isinstance(domain, FullLengths) and domain.window is not None:
        note = (
            f" [window W = {domain.window}, {domain.layers} layer(s): y[t] may read the last "
            f"{domain.receptive_field()} inputs; lengths T <= {domain.max_len} only: this model.onnx accepts "
            "longer T, which the enumeration does not cover]"
        )
        for c in proof.claims:
            if c.name in ("causal", "reads every past input"):
                c.detail += note
    return proof


# --- ssm artifacts: a position-free step, and a full pass that is one Scan --------------------------


def _single_state() -> State:
    return State("the one state (no position input)", 0, {}, {})


def _dependencies(model: Any, sources: dict[str, int | None]) -> tuple[dict[str, Any], Atoms, Interpreter]:
    """Interpret a graph with no position input once: (outputs, atoms, interpreter). Raises
    Unsupported when a shape is not static or an operator is outside the supported set."""
    interp = Interpreter(model, [])
    static = {}
    for vi in model.graph.input:
        if vi.name in interp.inputs:
            dims = declared_shape(vi)
            if not all(isinstance(d, int) and d > 0 for d in dims):
                raise Unsupported(f"input {vi.name} {list(dims)} has a symbolic dimension")
            static[vi.name] = tuple(int(d) for d in dims)
    outs, atoms, _, _ = interp.run(_single_state(), sources, static)
    return outs, atoms, interp


def _reads(val: Any, atoms: Atoms, source: str, axis: int | None = None, *, soft: bool = False) -> np.ndarray:
    """bool [n_t, count of `source`'s atoms]: which atoms each index along `axis` of the output
    depends on by value (soft=True: also through an exactly-zero factor, for claims of absence)."""
    if not isinstance(val, Sym):
        return np.zeros((1, atoms.offsets[source][1]), dtype=bool)
    bits = _full(val.hard | val.soft if soft else val.hard, val.shape, True)
    w = atoms.words
    if axis is None:
        per = _union_all(bits)[None]
    else:
        per = _or_reduce(bits, [i for i in range(len(val.shape)) if i != axis], keepdims=False).reshape(-1, w)
    first, count = atoms.offsets[source]
    return _unpack(per)[:, first : first + count]


def prove_ssm_step(model: Any, where: str) -> GraphProof:
    """An ssm step graph (x, state -> y, state_new): state-only, reads every layer's state, layer
    order, bounded work (module docstring)."""
    from tickformer.artifact import format as fmt

    start = time.monotonic()
    proof = GraphProof("step", where, "position-free (one state)", 1, len(model.graph.node), 0.0)
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi.name for vi in model.graph.input if vi.name not in inits]
    outputs = [vi.name for vi in model.graph.output]
    data = [n for n in inputs if n != fmt.SSM_STATE]
    if fmt.SSM_STATE not in inputs or len(data) != 1 or fmt.SSM_STATE_NEW not in outputs or len(outputs) != 2:
        proof.claims.append(
            Claim(
                "state-only",
                FAILED,
                f"an ssm step has inputs (x, {fmt.SSM_STATE}) and outputs (y, {fmt.SSM_STATE_NEW}); this one "
                f"has {inputs} -> {outputs}",
            )
        )
        proof.seconds = time.monotonic() - start
        return proof
    x, y = data[0], next(o for o in outputs if o != fmt.SSM_STATE_NEW)
    try:
        outs, atoms, interp = _dependencies(model, {fmt.SSM_STATE: 1, x: None})
    except Unsupported as exc:
        proof.claims.append(Claim("analysis", FAILED, f"cannot analyse the graph: {exc}"))
        proof.seconds = time.monotonic() - start
        return proof
    proof.claims.append(_bounded_work(model, interp, _SSM_STEP_SPEC, None))
    proof.claims.append(
        Claim(
            "state-only",
            PROVEN,
            f"the graph's only inputs are {x} and {fmt.SSM_STATE} (no position, no cache): the step is the "
            "same function of (x, state) at every position of a stream of any length",
        )
    )
    n_layers = atoms.offsets[fmt.SSM_STATE][1]
    y_state = _reads(outs[y], atoms, fmt.SSM_STATE)[0]
    y_x = _reads(outs[y], atoms, x)[0]
    new_state = _reads(outs[fmt.SSM_STATE_NEW], atoms, fmt.SSM_STATE, axis=1)  # [L (new), L (old)]
    new_x = _reads(outs[fmt.SSM_STATE_NEW], atoms, x, axis=1)  # [L, 1]
    if not (y_state.all() and y_x.all() and new_x.all() and np.diagonal(new_state).all()):
        missing = [f"layer {i}" for i in np.flatnonzero(~y_state)] + ([x] if not y_x.all() else [])
        proof.claims.append(
            Claim(
                "reads its state",
                FAILED,
                f"{y} does not depend on {', '.join(missing) or 'x'}, or a layer's new state not on its own "
                f"state and {x}",
            )
        )
    else:
        proof.claims.append(
            Claim(
                "reads its state",
                PROVEN,
                f"{y} depends on {x} and on the state of each of the {n_layers} layers; each layer's new state "
                f"on its own state and {x}",
            )
        )
    any_state = _reads(outs[fmt.SSM_STATE_NEW], atoms, fmt.SSM_STATE, axis=1, soft=True)
    deeper = np.triu(any_state, k=1)  # new state of layer i reading the state of a layer j > i
    if deeper.any():
        i, j = (int(v) for v in np.argwhere(deeper)[0])
        proof.claims.append(
            Claim(
                "layer order", FAILED, f"the new state of layer {i} depends on the state of layer {j} > {i}"
            )
        )
    else:
        proof.claims.append(
            Claim(
                "layer order",
                PROVEN,
                "the new state of layer l depends on the states of layers <= l only (a deeper layer's state "
                "cannot reach a shallower one)",
            )
        )
    proof.seconds = time.monotonic() - start
    return proof


_SSM_STEP_SPEC = GraphSpec("step", {}, {}, "", PositionDomain(), static=True)


def _body_model(model: Any, body: Any) -> Any:
    """The Scan body as a model of its own: its inputs and outputs, the outer graph's initializers
    it reads (outer scope), the outer opsets."""
    from onnx import helper

    used = {i for n in body.node for i in n.input}
    inits = [t for t in model.graph.initializer if t.name in used]
    graph = helper.make_graph(list(body.node), body.name, list(body.input), list(body.output), inits)
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def prove_ssm_model(model: Any, where: str) -> GraphProof:
    """An ssm full graph: one forward Scan over axis 1 of the input, from a constant state; causal
    and bounded for every T by its structure, every past input read through the carried state."""
    from onnx import helper

    from tickformer.artifact import graph_rules

    start = time.monotonic()
    proof = GraphProof("model", where, "Scan structure, every length T", 0, len(model.graph.node), 0.0)

    def fail(name: str, why: str) -> GraphProof:
        proof.claims.append(Claim(name, FAILED, why))
        proof.seconds = time.monotonic() - start
        return proof

    inits = {t.name for t in model.graph.initializer}
    consts = inits | {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    scans = [n for n in model.graph.node if n.op_type == "Scan"]
    flow = [n.op_type for n in model.graph.node if n.op_type in graph_rules.CONTROL_FLOW_OPS]
    if len(inputs) != 1 or len(scans) != 1 or len(flow) != 1:
        return fail(
            "analysis",
            f"an ssm full graph has one input and exactly one Scan (no other control flow); this one has inputs "
            f"{[i.name for i in inputs]} and control flow {flow}",
        )
    x, scan = inputs[0].name, scans[0]
    a = {at.name: helper.get_attribute_value(at) for at in scan.attribute}
    n_scan = int(a.get("num_scan_inputs", 0))
    states, scanned = (
        list(scan.input)[: len(scan.input) - n_scan],
        list(scan.input)[len(scan.input) - n_scan :],
    )
    directions = list(a.get("scan_input_directions", [])) + list(a.get("scan_output_directions", []))
    n_state = len(states)
    scan_outputs = list(scan.output)[n_state:]
    shape = declared_shape(inputs[0])
    problems = []
    if scanned != [x] or list(a.get("scan_input_axes", [0])) != [1]:
        problems.append(
            f"its scan input is {scanned} on axes {list(a.get('scan_input_axes', [0]))}, not {x} on 1"
        )
    if any(d != 0 for d in directions):
        problems.append(f"it scans in reverse (directions {directions}): output t would read later inputs")
    if any(s not in consts for s in states):
        problems.append(f"its initial state {[s for s in states if s not in consts]} is not a constant")
    if len(shape) < 2 or isinstance(shape[1], int) and shape[1] < 1:
        problems.append(f"input {x} {list(shape)} has no time axis 1")
    consumers = [n.name or n.op_type for n in model.graph.node if x in n.input and n is not scan]
    if consumers:
        problems.append(f"{x} is also read outside the Scan, by {consumers}")
    outs = [o.name for o in model.graph.output]
    producers = {o: n for n in model.graph.node for o in n.output}
    y = outs[0] if len(outs) == 1 else None
    while y is not None and y in producers and producers[y].op_type == "Identity":
        y = producers[y].input[0]
    if y not in scan_outputs or list(a.get("scan_output_axes", [0])) != [1] * len(scan_outputs):
        problems.append(f"the output {outs} is not the Scan's scan output along axis 1")
    if problems:
        return fail("causal", "; ".join(problems))
    body = a["body"]
    try:
        body_model = _body_model(model, body)
        body_in = [vi.name for vi in body.input]
        body_out = [vi.name for vi in body.output]
        k = n_state + scan_outputs.index(y)  # the body output that becomes the graph output
        got, atoms, interp = _dependencies(body_model, {name: None for name in body_in})
    except Unsupported as exc:
        return fail("analysis", f"cannot analyse the Scan body: {exc}")
    x_t, carried = body_in[-1], body_in[:n_state]
    y_t, carried_out = got[body_out[k]], [got[o] for o in body_out[:n_state]]
    proof.states = 1
    body_work = _bounded_work(body_model, interp, _SSM_STEP_SPEC, None)
    if body_work.status == FAILED:
        return fail("bounded work", f"the Scan body: {body_work.detail}")
    proof.claims.append(
        Claim(
            "bounded work",
            PROVEN,
            f"one Scan whose trip count is T, the length of {x} on axis 1 (a graph input: no loop count "
            f"computed from data); its body, the same at every iteration: {body_work.detail}",
        )
    )
    proof.claims.append(
        Claim(
            "causal",
            PROVEN,
            f"for every T, by the Scan's structure: iteration t reads {x}[:, t] and the state carried from "
            "iterations < t only (forward scan, constant initial state, the body a function of (state, x_t)); "
            f"{outs[0]}[:, t] is iteration t's scan output, so it depends on {x}[:, t'] for t' <= t only",
        )
    )
    reach = all(_reads(y_t, atoms, s)[0].all() for s in carried + [x_t]) and all(
        _reads(c, atoms, x_t)[0].all() and all(_reads(c, atoms, s)[0].any() for s in carried)
        for c in carried_out
    )
    proof.claims.append(
        Claim(
            "reads every past input",
            PROVEN if reach else FAILED,
            f"the body's scan output depends on x_t and the carried state, and the carried state out on x_t and "
            f"the state in: {outs[0]}[:, t] has a path from every {x}[:, t'], t' <= t"
            if reach
            else "the body's output or carried state does not depend on x_t and the state in",
        )
    )
    proof.seconds = time.monotonic() - start
    return proof


# --- loading and dispatch ------------------------------------------------------------------------------


def load_onnx(data: bytes, where: str, *, allowed: frozenset[str] = frozenset(), max_trip: int = 1) -> Any:
    """Parse verified bytes and apply the artifact graph rules (no external data, standard operators
    only, no control flow but `allowed` with a static trip count): raises ArtifactError."""
    import onnx

    from tickformer.artifact import graph_rules
    from tickformer.errors import ArtifactError

    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:
        raise ArtifactError(
            f"{where}: not a valid ONNX model ({type(exc).__name__}); pass an exported graph"
        ) from None
    graph_rules.check_graph(model, allowed=allowed, max_trip=max_trip, where=where, what="a graph to prove")
    return model


def _ssm_kind(model: Any) -> str | None:
    """'step' for an ssm step graph (a `state` input), 'model' for an ssm full graph (a Scan), else None."""
    from tickformer.artifact import format as fmt

    if fmt.SSM_STATE in {vi.name for vi in model.graph.input}:
        return "step"
    if any(n.op_type == "Scan" for n in model.graph.node):
        return "model"
    return None


def _window_of(model: Any) -> tuple[int, int] | None:
    """(W, layers) of one of our windowed full-pass graphs, read from its relative-position bias
    initializers (one [H, W] table per self-attention layer, names.py), or None."""
    from onnx import numpy_helper

    tables = [t for t in model.graph.initializer if t.name.endswith(".rel_bias")]
    if not tables:
        return None
    widths = {numpy_helper.to_array(t).shape[-1] for t in tables}
    if len(widths) != 1:
        raise Unsupported(f"relative-position tables of different widths {sorted(widths)}")
    return int(widths.pop()), len(tables)


def prove_artifact(path: str, *, trust: Any = None) -> list[GraphProof]:
    """Prove every graph of an artifact we can analyse (decoder, windowed: model and step;
    encoder-decoder: step; ssm: model and step), read through the verifying reader."""
    from tickformer.artifact import format as fmt
    from tickformer.artifact import open_artifact, verified_graph_bytes

    art = open_artifact(path, trust=trust)
    kind = fmt.artifact_kind(art.config)
    proofs = []
    for graph in ("model", "step"):
        if graph not in art.manifest["graphs"]:
            continue
        where = str(art.root / fmt.GRAPH_FILES[graph])
        allowed = fmt.allowed_control_flow(kind, graph)
        model = load_onnx(verified_graph_bytes(art, graph), where, allowed=allowed, max_trip=art.max_len)
        cfg = art.config
        if kind == "ssm":
            proofs.append(prove_ssm_model(model, where) if graph == "model" else prove_ssm_step(model, where))
        else:
            proofs.append(
                prove_model_proto(model, where, max_len=art.max_len, window=cfg.window, layers=cfg.n_layers)
            )
    return proofs


def prove_file(path: str, *, max_len: int | None = None) -> list[GraphProof]:
    """Prove a bare .onnx file (one of our exported graphs), read once through tickformer.safe_files.
    Recognised by its inputs: an ssm step (state), an ssm full graph (one Scan), a step (pos), or a
    full pass (needs max_len; windowed ones by their relative-position tables)."""
    import onnx

    from tickformer.errors import ArtifactError, ConfigError, FileRefused
    from tickformer.safe_files import read_path

    try:
        data = read_path(path)
    except FileRefused as exc:
        raise ArtifactError(f"{exc}; pass an artifact directory or an exported .onnx graph") from None
    try:
        kind = _ssm_kind(onnx.load_model_from_string(data))
    except Exception:
        kind = None  # load_onnx below names the problem
    if kind is not None:
        if max_len is not None:
            raise ConfigError(f"{path} is an ssm graph: it has no max_len (drop --max-len)")
        allowed = frozenset({"Scan"}) if kind == "model" else frozenset()
        model = load_onnx(data, str(path), allowed=allowed)
        return [prove_ssm_model(model, str(path)) if kind == "model" else prove_ssm_step(model, str(path))]
    model = load_onnx(data, str(path))
    if "pos" not in {vi.name for vi in model.graph.input} and max_len is None:
        raise ConfigError(
            f"{path} is a full-pass graph (no 'pos' input) with a symbolic length: pass --max-len N "
            "(its artifact's max_len) to prove it for every T <= N"
        )
    if "pos" in {vi.name for vi in model.graph.input}:
        return [prove_model_proto(model, str(path), max_len=max_len)]
    try:
        windowed = _window_of(model)
    except Unsupported as exc:
        return [
            GraphProof(
                "?", str(path), "?", 0, len(model.graph.node), 0.0, [Claim("analysis", FAILED, str(exc))]
            )
        ]
    window, layers = windowed if windowed is not None else (None, 1)
    return [prove_model_proto(model, str(path), max_len=max_len, window=window, layers=layers)]


# --- the report ----------------------------------------------------------------------------------


def report(proofs: Sequence[GraphProof], wall_s: float) -> dict[str, Any]:
    """The JSON report of `tickformer prove ART | FILE.onnx`: every graph's claims and the worst
    status over them (FAILED > proven if finite > proven)."""
    statuses = [p.status for p in proofs]
    status = FAILED if FAILED in statuses else IF_FINITE if IF_FINITE in statuses else PROVEN
    return {
        "tool": "tickformer.verify.proofs.graphs",
        "method": "exhaustive over the position domain: concrete position subgraph (onnx.reference), "
        "abstract per-element dependency sets over the float part",
        "wall_s": round(wall_s, 3),
        "status": status,
        "ok": status != FAILED,
        "graphs": [p.to_json() for p in proofs],
    }


def report_text(data: dict[str, Any]) -> str:
    """The report as plain text, one block per graph, one line per claim."""
    lines = []
    for g in data["graphs"]:
        lines.append(
            f"{g['graph']} ({g['file']}): {g['status']} -- {g['domain']}: {g['states']} state(s), "
            f"{g['nodes']} nodes, {g['seconds']:.2f} s"
        )
        for c in g["claims"]:
            lines.append(f"  {c['status']:<17} {c['name']}: {c['detail']}")
    lines.append(
        f"{data['status'].upper() if data['status'] == FAILED else data['status']}: "
        f"{len(data['graphs'])} graph(s), {data['wall_s']:.2f} s wall"
    )
    return "\n".join(lines)
