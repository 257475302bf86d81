"""A selective diagonal state-space mixer: the recurrent block, as a forward/backward pair.

Longer than 600 lines: the mixer (`ssm_mixer`: one function, the form of its state update a
parameter), its parallel form and the bounds proven about them (the scan's rounding, BIBO, the
float32 state and output bounds) stay together, each bound next to the arithmetic it bounds, in
the order docs/ssm.md derives them.

What it computes, per batch row, channel d (of D) and state n (of N), for t = 0..T-1:

    z_t     = x_t W_delta + b_delta                          [D]   step-size pre-activation
    Delta_t = softplus(z_t) > 0                              [D]   input-dependent step (selective)
    a       = exp(a_log) > 0                                 [D, N] A = -a, real diagonal
    lam_t   = exp(-Delta_t a)            in (0, 1)           [D, N] ZOH of dh/dt = -a h
    B_t     = x_t W_b + b_b,  C_t = x_t W_c + b_c            [N]   input-dependent (selective)
    u_t     = x_t[d] B_t[n]                                  [D, N]
    h_t     = lam_t h_{t-1} + (1 - lam_t) u_t                [D, N] a convex combination
    y_t[d]  = sum_n C_t[n] h_t[d, n] + d_skip[d] x_t[d]      [D]
    out_t   = y_t W_o + b_o                                  [D]

Which papers, and where it differs:
  * Mamba's S6 layer (Gu & Dao 2023, Algorithm 2): diagonal A per (channel, state), Delta, B, C
    functions of x_t (selection), Delta through softplus, the skip D, A = -exp(a_log) with the
    S4D-Real initialisation A_n = -(n + 1) (Gu et al. 2022, "On the Parameterization and
    Initialization of Diagonal State Space Models", S4D-Real), Delta's bias initialised to
    softplus^-1 of a log-uniform draw in [dt_min, dt_max] = [1e-3, 1e-1] as in Mamba.
  * Discretisation: the exact zero-order hold of Mamba's eq. (4) for both A and B
    (B_bar = (Delta A)^-1 (exp(Delta A) - I) Delta B = (1 - lam) B / a), not the Euler
    B_bar = Delta B of Mamba's code; and B is measured in units of a, i.e. B here is a * B_Mamba
    (for a fixed a the same family of functions). That makes h_t a convex combination of h_{t-1}
    and u_t, which gives the BIBO bound below independent of Delta, a and T.
  * Left out of Mamba's block: the input expansion, the causal conv1d, the SiLU gate and the
    low-rank Delta projection (W_delta is full D x D). The mixer sits in the post-LN residual
    stack exactly where self-attention sits (x = LN(x + Dropout(mixer(x)))), so W_o plays the
    part of the attention's W^O; the FFN after it does the channel mixing.
  * Real, not complex (unlike S4/S4D-Lin/LRU): Mamba reports real diagonal A sufficient with
    selection, a real state exports to ONNX and C as plain float arrays, and the convex-
    combination argument is componentwise. A complex LRU-style variant (Orvieto et al. 2023,
    lam = exp(-exp(nu_log) + i theta), state kept as separate re/im arrays) is a phase-B option
    (docs/ssm.md).
  * No positional encoding: the recurrence is causal and order-aware by construction.

Stable by construction: lam = exp(-softplus(z) exp(a_log)) lies in [0, 1] for every finite
parameter value and input (Delta > 0 and a > 0 in exact arithmetic; in floating point Delta may
underflow to 0, making lam exactly 1 and 1 - lam exactly 0, still a convex combination).

Parallel form (training) and recurrence (inference): `linear_scan` solves h_t = a_t h_{t-1} + b_t
for all t as a two-level blocked scan over the associative pairs (a, b) o (a', b') =
(a a', a' b + b') (Blelloch 1990's reduce-then-scan: in-block recurrences and products for all
blocks at once, the block ends by log-depth odd-even recursive doubling, one fix-up pass). It never
forms cumulative products to divide by, so there is no 0/0 when products of small lam underflow:
an underflowed product is 0 and its term's true weight is below the underflow threshold anyway.
`ssm_step` is the recurrence; unrolled over T (`ssm_recurrent`) it equals `ssm_forward` within
`ssm_parallel_recurrent_bound` (docs/ssm.md: gamma_k with k linear in T).

BIBO (`ssm_bounds`): for |x_t[d]| <= r[d] and |h_0| <= H0, every state satisfies
|h_t[d, n]| <= max(H0, r[d] beta[n]) with beta = |b_b| + |W_b|^T r, for every t, Delta and a;
the output bound follows through C, the skip and W_o. `ssm_float_state_bound` adds the rounding
of the recurrence as computed in float32 (docs/ssm.md derives both).

Sources: Gu & Dao 2023 (Mamba, S6); Gu, Gupta, Goel & Re 2022 (S4D); Gu, Goel & Re 2022 (S4);
Orvieto et al. 2023 (LRU, the stable-by-construction exponential parametrisation); Blelloch
1990 (prefix sums); Higham 2002, "Accuracy and Stability of Numerical Algorithms", ch. 3
(gamma_k = k u / (1 - k u)). Backward checked against float64 central finite differences on
every parameter tensor (tests/model/test_ssm_grad.py).

Not real-time safe: every function allocates its outputs (the runtime's step will preallocate,
phase B). This file imports numpy and the model's own layers, nothing else.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .layers import LinearCache, linear_backward, linear_forward

# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------

DT_MIN, DT_MAX = 1e-3, 1e-1  # Mamba's initial step-size range


def ssm_shapes(d_model: int, d_state: int) -> dict[str, tuple[int, ...]]:
    """Leaf -> shape, in the order of names.SSM_NAMES."""
    d, n = d_model, d_state
    return {
        "w_delta": (d, d),
        "b_delta": (d,),
        "w_b": (d, n),
        "b_b": (n,),
        "w_c": (d, n),
        "b_c": (n,),
        "a_log": (d, n),
        "d_skip": (d,),
        "w_o": (d, d),
        "b_o": (d,),
    }


def inverse_softplus(y: np.ndarray) -> np.ndarray:
    """softplus^-1(y) = y + log(1 - exp(-y)) for y > 0 (Mamba's dt bias initialisation)."""
    return y + np.log(-np.expm1(-y))  # [...]


def ssm_init(
    d_model: int,
    d_state: int,
    rng: np.random.Generator,
    *,
    dt_min: float = DT_MIN,
    dt_max: float = DT_MAX,
    dtype: type = np.float32,
) -> dict[str, np.ndarray]:
    """Mamba / S4D-Real initialisation (leaf -> array):

    a_log[d, n] = log(n + 1)                   (S4D-Real: A_n = -(n + 1), every channel)
    b_delta     = softplus^-1(dt), dt log-uniform in [dt_min, dt_max]   (Mamba)
    w_delta     ~ U(+-D^-1/2)                  (Mamba's dt_proj "random" init, rank D here)
    w_b, w_c    ~ U(+-D^-1/2)                  (a torch Linear's default bound 1/sqrt(fan_in))
    b_b, b_c = 0, d_skip = 1 (Mamba's D), w_o Xavier-uniform, b_o = 0 (as the attention's W^O)
    """
    d, n = d_model, d_state
    bound = d**-0.5
    dt = np.exp(rng.uniform(np.log(dt_min), np.log(dt_max), size=d))  # [D]
    limit_o = np.sqrt(6.0 / (d + d))
    value = {
        "w_delta": rng.uniform(-bound, bound, size=(d, d)),
        "b_delta": inverse_softplus(dt),
        "w_b": rng.uniform(-bound, bound, size=(d, n)),
        "b_b": np.zeros(n),
        "w_c": rng.uniform(-bound, bound, size=(d, n)),
        "b_c": np.zeros(n),
        "a_log": np.broadcast_to(np.log(np.arange(1, n + 1, dtype=np.float64)), (d, n)),
        "d_skip": np.ones(d),
        "w_o": rng.uniform(-limit_o, limit_o, size=(d, d)),
        "b_o": np.zeros(d),
    }
    # order="C": a copy of the broadcast a_log with the default order "K" is column-major
    return {leaf: np.array(value[leaf], dtype=dtype, order="C") for leaf in ssm_shapes(d, n)}


# ---------------------------------------------------------------------------------------------
# Elementwise pieces
# ---------------------------------------------------------------------------------------------


def softplus(z: np.ndarray) -> np.ndarray:
    """log(1 + e^z), without overflow (logaddexp); > 0 unless it underflows for z << 0."""
    return np.logaddexp(np.zeros((), dtype=z.dtype), z)  # [...]


def softplus_grad_from_value(delta: np.ndarray) -> np.ndarray:
    """sigmoid(z) from delta = softplus(z): 1 - e^-delta (e^-softplus(z) = 1 / (1 + e^z)).
    In [0, 1]; no overflow for either sign of z."""
    return one_minus_exp_neg(delta)  # [...]


def one_minus_exp_neg(s: np.ndarray) -> np.ndarray:
    """1 - e^-s for s >= 0, to a few ulps relative for every s (no cancellation near s = 0):
    2 tanh(s/2) / (1 + tanh(s/2)), an identity. Not -expm1(-s): ONNX has no Expm1 operator, while
    Tanh, Add and Div exist in every backend (and numpy's float32 tanh is ~4x faster than expm1)."""
    t = np.tanh(s * s.dtype.type(0.5))  # [...] in [0, 1]
    return (t + t) / (1 + t)  # [...] in [0, 1]


class Coefficients(NamedTuple):
    """The input-dependent coefficients of one step or of every step (leading dims [...])."""

    z_in: LinearCache
    b_in: LinearCache
    c_in: LinearCache
    delta: np.ndarray  # [..., D]    softplus(z)
    a: np.ndarray  # [D, N]          exp(a_log)
    lam: np.ndarray  # [..., D, N]   exp(-delta a)
    keep: np.ndarray  # [..., D, N]  1 - lam, as one_minus_exp_neg(delta a) (accurate near lam = 1)
    u: np.ndarray  # [..., D, N]     x[d] B[n]
    bt: np.ndarray  # [..., N]       B_t
    ct: np.ndarray  # [..., N]       C_t


def coefficients(
    x: np.ndarray,
    *,
    w_delta: np.ndarray,
    b_delta: np.ndarray,
    w_b: np.ndarray,
    b_b: np.ndarray,
    w_c: np.ndarray,
    b_c: np.ndarray,
    a_log: np.ndarray,
) -> Coefficients:
    """x [..., D] -> the coefficients of h = lam h_prev + keep u and of the readout. The same
    operations for one step ([B, D]) and for a sequence ([B, T, D]), elementwise after the three
    projections."""
    z, cz = linear_forward(x, w=w_delta, b=b_delta)  # [..., D] -> [..., D]
    delta = softplus(z)  # [..., D]
    a = np.exp(a_log)  # [D, N]
    s = delta[..., :, None] * a  # [..., D, 1] * [D, N] -> [..., D, N]  s = delta a >= 0
    lam = np.exp(-s)  # [..., D, N] in [0, 1]
    keep = one_minus_exp_neg(s)  # [..., D, N] in [0, 1]
    bt, cb = linear_forward(x, w=w_b, b=b_b)  # [..., D] -> [..., N]
    ct, cc = linear_forward(x, w=w_c, b=b_c)  # [..., D] -> [..., N]
    u = x[..., :, None] * bt[..., None, :]  # [..., D, 1] * [..., 1, N] -> [..., D, N]
    return Coefficients(cz, cb, cc, delta, a, lam, keep, u, bt, ct)


def readout(h: np.ndarray, ct: np.ndarray, x: np.ndarray, d_skip: np.ndarray) -> np.ndarray:
    """y[d] = sum_n C[n] h[d, n] + d_skip[d] x[d]; the sum over n along the contiguous last axis
    (the same reduction per row for one step and for a sequence)."""
    y = (h * ct[..., None, :]).sum(axis=-1)  # [..., D, N] * [..., 1, N] -> [..., D]
    y += d_skip * x  # [..., D]
    return y


# ---------------------------------------------------------------------------------------------
# The parallel form: a blocked scan over (a_t, b_t) pairs
# ---------------------------------------------------------------------------------------------


def linear_scan(
    a: np.ndarray, b: np.ndarray, h0: np.ndarray | None = None, *, block: int | None = None
) -> np.ndarray:
    """h_t = a_t h_{t-1} + b_t for t = 0..T-1 along axis 1, h_{-1} = h0 (zeros if None).

    a, b [B, T, ...], h0 [B, ...] -> h [B, T, ...]. A two-level scan over the associative pairs
    (a, b) o (a', b') = (a a', a' b + b') (reduce-then-scan, Blelloch 1990): time is cut into
    blocks of `block` steps (default ceil(sqrt(T))); every block runs its own recurrence and
    the cumulative product P of its a, all blocks at once (`block` vectorised steps); the states
    at the block ends are then the scan of the pairs (P_end, h_end) over blocks (`_scan`, log
    depth); a last pass adds P_t carry_{k-1} to every position of block k. Depth
    O(sqrt(T) + log T), ~5T products and sums in all. No division anywhere: a product of small
    a that underflows is 0, never 0/0 (the term it multiplies is below the underflow threshold).
    """
    if h0 is not None:
        b = b.copy()  # [B, T, ...]
        b[:, 0] += a[:, 0] * h0  # [B, ...] fold the initial state into the first step
    bsz, t = a.shape[:2]
    rest = a.shape[2:]
    size = max(1, math.ceil(math.sqrt(t))) if block is None else block
    nb = -(-t // size)  # blocks
    if nb * size > t:  # pad the last block with the identity pair (1, 0)
        a = np.concatenate([a, np.ones((bsz, nb * size - t, *rest), dtype=a.dtype)], axis=1)  # [B, nb L, ...]
        b = np.concatenate(
            [b, np.zeros((bsz, nb * size - t, *rest), dtype=b.dtype)], axis=1
        )  # [B, nb L, ...]
    a_blk = a.reshape(bsz, nb, size, *rest)  # [B, nb, L, ...]
    b_blk = b.reshape(bsz, nb, size, *rest)  # [B, nb, L, ...]
    h = np.empty(b_blk.shape, dtype=np.result_type(a, b))  # [B, nb, L, ...] in-block states
    prod = np.empty(a_blk.shape, dtype=a.dtype)  # [B, nb, L, ...] in-block products of a
    h[:, :, 0] = b_blk[:, :, 0]
    prod[:, :, 0] = a_blk[:, :, 0]
    for i in range(1, size):
        np.multiply(a_blk[:, :, i], h[:, :, i - 1], out=h[:, :, i])  # [B, nb, ...]
        h[:, :, i] += b_blk[:, :, i]
        np.multiply(a_blk[:, :, i], prod[:, :, i - 1], out=prod[:, :, i])  # [B, nb, ...]
    if nb > 1:
        carry = _scan(prod[:, :, -1], h[:, :, -1])  # [B, nb, ...] the true state at each block end
        h[:, 1:] += prod[:, 1:] * carry[:, :-1, None]  # [B, nb-1, L, ...]
    return h.reshape(bsz, nb * size, *rest)[:, :t]  # [B, T, ...]


def _scan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The scan by odd-even recursive doubling (log depth): pair (2i, 2i+1) combines to
    (a_{2i+1} a_{2i}, a_{2i+1} b_{2i} + b_{2i+1}); the half-length problem gives h at odd t; one
    more step per even t fills those in. a, b [B, T, ...] -> h [B, T, ...], h_{-1} = 0."""
    t = a.shape[1]
    if t == 1:
        return b.copy()  # [B, 1, ...]
    h = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=np.result_type(a, b))  # [B, T, ...]
    if t % 2:  # odd: the first T - 1, then one step
        h[:, :-1] = _scan(a[:, :-1], b[:, :-1])  # [B, T-1, ...]
        h[:, -1] = a[:, -1] * h[:, -2] + b[:, -1]  # [B, ...]
        return h
    a0, a1 = a[:, 0::2], a[:, 1::2]  # [B, T/2, ...] even, odd steps
    b0, b1 = b[:, 0::2], b[:, 1::2]  # [B, T/2, ...]
    h[:, 1::2] = _scan(a1 * a0, a1 * b0 + b1)  # [B, T/2, ...] h at odd t
    h[:, 0] = b0[:, 0]  # [B, ...]
    h[:, 2::2] = a0[:, 1:] * h[:, 1:-1:2] + b0[:, 1:]  # [B, T/2-1, ...] h at even t > 0
    return h


def reverse_linear_scan(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    """g_t = q_t + a_{t+1} g_{t+1} for t = T-1..0 (g_T = 0): the adjoint of `linear_scan`.

    a, q [B, T, ...] -> g [B, T, ...]; the same scan run on reversed time."""
    shifted = np.zeros_like(a)  # [B, T, ...] a_{t+1}, 0 at t = T-1 (multiplies g_T = 0)
    shifted[:, :-1] = a[:, 1:]
    return _scan(shifted[:, ::-1], q[:, ::-1])[:, ::-1]  # [B, T, ...]


def recurrence(a: np.ndarray, b: np.ndarray, h0: np.ndarray | None = None) -> np.ndarray:
    """The same h_t = a_t h_{t-1} + b_t one step at a time (the reference the scan is checked
    against; ssm_step does this arithmetic): a, b [B, T, ...] -> h [B, T, ...]."""
    h = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=np.result_type(a, b))  # [B, T, ...]
    prev = np.zeros_like(h[:, 0]) if h0 is None else h0  # [B, ...]
    for t in range(a.shape[1]):
        h[:, t] = a[:, t] * prev + b[:, t]  # [B, ...]
        prev = h[:, t]
    return h


# ---------------------------------------------------------------------------------------------
# The mixer: forward, backward, step
# ---------------------------------------------------------------------------------------------


class SsmCache(NamedTuple):
    x: np.ndarray  # [B, T, D]
    co: Coefficients  # every step's coefficients ([B, T, ...])
    h0: np.ndarray  # [B, D, N]
    h: np.ndarray  # [B, T, D, N] every state
    d_skip: np.ndarray  # [D]
    out: LinearCache


FORMS = ("scan", "step")  # the state update: every step at once (training), or one (inference)


def ssm_mixer(
    x: np.ndarray,
    h_prev: np.ndarray | None,
    *,
    form: str,
    d_skip: np.ndarray,
    w_o: np.ndarray,
    b_o: np.ndarray,
    **coefficient_weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, SsmCache | None]:
    """The mixer, with the form of its state update as a parameter: the same coefficient,
    readout and output functions around either update --

        form "scan"  x [B, T, D], h_prev [B, D, N] (zeros if None) -> every state [B, T, D, N]
                     by `linear_scan` (the parallel, training form)
        form "step"  x [B, D], h_prev [B, D, N] -> the next state [B, D, N] by one step of the
                     recurrence, h = lam h_prev + (1 - lam) u (constant work per step)

    The weights: the skip and the output projection (d_skip, w_o, b_o) here, the rest
    (w_delta, b_delta, w_b, b_b, w_c, b_c, a_log) `coefficients`'.
    -> (out [..., D], the states, the cache `ssm_backward` needs: the scan form's, else None)."""
    co = coefficients(x, **coefficient_weights)
    a_log = coefficient_weights["a_log"]
    if form == "scan":
        h = linear_scan(co.lam, co.keep * co.u, h_prev)  # [B, T, D, N]
    elif form == "step" and h_prev is not None:
        h = co.lam * h_prev  # [B, D, N]
        h += co.keep * co.u  # [B, D, N] lam h + (1 - lam) u
    else:
        raise ValueError(f"form={form!r} must be one of {FORMS} (the step form needs h_prev)")
    y = readout(h, co.ct, x, d_skip)  # [..., D]
    out, c_out = linear_forward(y, w=w_o, b=b_o)  # [..., D] -> [..., D]
    if form != "scan":
        return out, h, None
    b, d = x.shape[0], x.shape[-1]
    start = np.zeros((b, d, a_log.shape[-1]), dtype=h.dtype) if h_prev is None else h_prev  # [B, D, N]
    return out, h, SsmCache(x, co, start, h, d_skip, c_out)


def ssm_forward(
    x: np.ndarray, *, h0: np.ndarray | None = None, **weights: np.ndarray
) -> tuple[np.ndarray, SsmCache]:
    """The parallel (training) form: x [B, T, D], h0 [B, D, N] (zeros if None), the weights of
    names.SSM_NAMES -> out [B, T, D], and the cache `ssm_backward` needs (its h[:, -1] is the
    state after the last step)."""
    out, _, cache = ssm_mixer(x, h0, form="scan", **weights)
    assert cache is not None  # the scan form's
    return out, cache


def ssm(x: np.ndarray, **weights: np.ndarray) -> np.ndarray:
    """`ssm_forward` without its cache: x [B, T, D] -> [B, T, D]."""
    return ssm_forward(x, **weights)[0]


def ssm_backward(dy: np.ndarray, cache: SsmCache) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """dy [B, T, D] -> dx [B, T, D], the gradient of every leaf of names.SSM_NAMES.

    With g_t = dL/dh_t (everything h_t reaches, through y_t and through h_{t+1}):
        g_t = C_t dy_t[d] + lam_{t+1} g_{t+1}                          (reverse_linear_scan)
        dL/ds_t = lam_t g_t (u_t - h_{t-1})    (s = delta a; d lam/ds = -lam, d keep/ds = lam)
        dL/du_t = keep_t g_t,  dL/dC_t = sum_d dy_t[d] h_t[d, :]
    and the projections' backward passes (model/layers.py) for W_delta, W_b, W_c, W_o.
    """
    x, co, h0, h = cache.x, cache.co, cache.h0, cache.h
    dyc, g_o = linear_backward(dy, cache.out)  # [B, T, D] gradient of y (before W_o)
    d_dskip = (dyc * x).reshape(-1, x.shape[-1]).sum(axis=0)  # [D]
    dx = dyc * cache.d_skip  # [B, T, D]
    dct = (dyc[..., :, None] * h).sum(axis=-2)  # [B, T, D, N] -> [B, T, N]
    q = dyc[..., :, None] * co.ct[..., None, :]  # [B, T, D, 1] * [B, T, 1, N] -> [B, T, D, N]
    g = reverse_linear_scan(co.lam, q)  # [B, T, D, N] dL/dh_t
    h_prev = np.concatenate([h0[:, None], h[:, :-1]], axis=1)  # [B, T, D, N]
    ds = co.lam * g * (co.u - h_prev)  # [B, T, D, N]
    du = g * co.keep  # [B, T, D, N]
    dx += (du * co.bt[..., None, :]).sum(axis=-1)  # [B, T, D]
    dbt = (du * x[..., :, None]).sum(axis=-2)  # [B, T, N]
    ddelta = (ds * co.a).sum(axis=-1)  # [B, T, D]
    da = (ds * co.delta[..., :, None]).reshape(-1, *co.a.shape).sum(axis=0)  # [D, N]
    dz = ddelta * softplus_grad_from_value(co.delta)  # [B, T, D]
    dxz, g_z = linear_backward(dz, co.z_in)  # [B, T, D]
    dxb, g_b = linear_backward(dbt, co.b_in)  # [B, T, D]
    dxc, g_c = linear_backward(dct, co.c_in)  # [B, T, D]
    dx += dxz
    dx += dxb
    dx += dxc
    grads = {
        "w_delta": g_z["w"],
        "b_delta": g_z["b"],
        "w_b": g_b["w"],
        "b_b": g_b["b"],
        "w_c": g_c["w"],
        "b_c": g_c["b"],
        "a_log": da * co.a,  # d a / d a_log = a
        "d_skip": d_dskip,
        "w_o": g_o["w"],
        "b_o": g_o["b"],
    }
    return dx, grads


def ssm_step(x_t: np.ndarray, h_prev: np.ndarray, **weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The recurrence, one position: x_t [B, D], h_prev [B, D, N], the weights of
    names.SSM_NAMES -> (out_t [B, D], h_t [B, D, N]).

    Constant work per step (no dependence on how many steps ran); the runtime's step. The same
    mixer as `ssm_forward` (`ssm_mixer`); only the state update differs (one step instead of
    the scan)."""
    out, h, _ = ssm_mixer(x_t, h_prev, form="step", **weights)
    return out, h


def ssm_recurrent(
    x: np.ndarray, h0: np.ndarray | None = None, **weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`ssm_step` unrolled over T (the inference path): x [B, T, D], h0 [B, D, N] ->
    (out [B, T, D], h_T [B, D, N])."""
    b, t, d = x.shape
    h = (
        np.zeros((b, d, weights["a_log"].shape[-1]), dtype=np.result_type(x, weights["a_log"]))
        if h0 is None
        else h0
    )  # [B, D, N]
    out = np.empty(x.shape, dtype=np.result_type(x, weights["w_o"]))  # [B, T, D]
    for i in range(t):
        out[:, i], h = ssm_step(x[:, i], h, **weights)  # [B, D], [B, D, N]
    return out, h


# ---------------------------------------------------------------------------------------------
# Error bound of the parallel form
# ---------------------------------------------------------------------------------------------


def gamma(k: int | float, u: float) -> float:
    """Higham's gamma_k = k u / (1 - k u): the relative error bound of k roundings (inf if k u >= 1)."""
    return k * u / (1.0 - k * u) if k * u < 1.0 else math.inf


def scan_roundings(t: int, steps: int) -> int:
    """How many roundings a term of h_t can carry, summed over the two forms (docs/ssm.md):
    the recurrence 2(t + 1) (a product and a sum per step); the blocked scan 2(t + 1) in its
    in-block recurrences, products and fix-up, plus 6 per level of the carry scan (two each going
    up, coming down and on an odd tail) and 4 for the fix-up; ceil(log2 T) levels at most."""
    levels = max(1, math.ceil(math.log2(max(steps, 1))))
    return 4 * (t + 1) + 6 * levels + 4


def scan_error_bound(a: np.ndarray, b: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """Per element, |linear_scan(a, b) - recurrence(a, b)| <= gamma_k(u) h_hat_t with h_hat the
    recurrence run on |b| (a >= 0 here: the lam are) and k = scan_roundings(t, T).
    a, b [B, T, ...] -> bound [B, T, ...] (float64)."""
    u = float(np.finfo(dtype).eps) / 2
    t_len = a.shape[1]
    h_hat = recurrence(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))  # [B, T, ...]
    k = np.array([gamma(scan_roundings(t, t_len), u) for t in range(t_len)])  # [T]
    return h_hat * k.reshape((1, t_len) + (1,) * (a.ndim - 2))  # [B, T, ...]


def ssm_parallel_recurrent_bound(
    *, steps: int, x_max: np.ndarray | float, dtype: type = np.float32, **weights: np.ndarray
) -> np.ndarray:
    """A bound on |ssm_forward(x) - ssm_recurrent(x)| per output channel, both in `dtype`, for
    |x| <= x_max, h0 = 0 and T = steps. -> [D] (float64).

    Three sources, to first order in u (docs/ssm.md):
      the scan's reassociation: gamma_{4T + 6 ceil(log2 T) + 4} U (scan_roundings; h_hat <= U);
      the projections: one [B*T, D] product against T [B, D] products round differently
        (BLAS kernels depend on the shape), each within gamma_{D+1} of exact: u_t differs by
        2 gamma_{D+1} U, s = delta a by a relative 2 gamma_{D+1} Z (Z = sup |z|, since
        sigmoid(z) <= softplus(z)), which moves h by at most 2 (that relative change) U;
      the readout: C_t by 2 gamma_{D+1} |C|, each dot product by gamma of its length.
    """
    u = float(np.finfo(dtype).eps) / 2
    d, n = weights["w_b"].shape
    g_proj = gamma(d + 1, u)
    r = np.broadcast_to(np.abs(np.asarray(x_max, dtype=np.float64)), (d,))  # [D]
    ex = ssm_bounds(x_max=r, **weights)
    z_abs = _abs_proj(weights["w_delta"], weights["b_delta"], r)  # [D] sup |z|
    rel_s = 2 * g_proj * z_abs  # [D]
    state_err = (
        gamma(scan_roundings(steps - 1, steps), u) + 2 * g_proj + 2 * rel_s[:, None]
    ) * ex.state  # [D, N]
    core_err = (
        state_err @ ex.gamma_c + 2 * g_proj * (ex.state @ ex.gamma_c) + 2 * gamma(n + 2, u) * ex.core
    )  # [D]
    w_o = np.abs(weights["w_o"].astype(np.float64))  # [D, D]
    return w_o.T @ core_err + 2 * gamma(d + 1, u) * ex.out  # [D]


# ---------------------------------------------------------------------------------------------
# BIBO: the state and the output stay bounded for bounded inputs
# ---------------------------------------------------------------------------------------------

# Relative error assumed of one exp / logaddexp / one_minus_exp_neg evaluation, in units of u:
# measured on this machine (numpy 2.4.6) by tests/model/test_ssm_bounds.py, stated in docs/ssm.md.
ELEMENTARY_ERROR_U = 8.0


class SsmBound(NamedTuple):
    """Exact-arithmetic bounds for |x_t[d]| <= r[d] (every t) and |h_0| <= h0_max."""

    beta: np.ndarray  # [N]    sup |B_t[n]|
    gamma_c: np.ndarray  # [N]  sup |C_t[n]|
    state: np.ndarray  # [D, N] sup |h_t[d, n]|, every t: max(h0_max, r[d] beta[n])
    core: np.ndarray  # [D]    sup |y_t[d]| before W_o
    out: np.ndarray  # [D]     sup |out_t[j]|


def _abs_proj(w: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    """sup over |x| <= r of |x w + b|: |b| + |w|^T r (attained at a corner of the box)."""
    return np.abs(b.astype(np.float64)) + np.abs(w.astype(np.float64)).T @ r  # [m]


def ssm_bounds(
    *,
    x_max: np.ndarray | float,
    h0_max: float = 0.0,
    w_b: np.ndarray,
    b_b: np.ndarray,
    w_c: np.ndarray,
    b_c: np.ndarray,
    d_skip: np.ndarray,
    w_o: np.ndarray,
    b_o: np.ndarray,
    **_unused: np.ndarray,
) -> SsmBound:
    """The BIBO bound from the weights and the input domain (exact arithmetic, float64).

    |h_t| <= max(|h_{t-1}|, |u_t|) because h_t = lam h_{t-1} + (1 - lam) u_t with lam in [0, 1];
    |u_t[d, n]| = |x_t[d]| |B_t[n]| <= r[d] beta[n]. No dependence on T, Delta or a_log (the
    step-size weights are accepted and ignored, so `ssm_bounds(**group.take(p), x_max=r)` works).
    The state bound is tight: a constant corner input drives h to it as t -> inf
    (docs/ssm.md); the output bound is a sum of per-term sups and need not be attained."""
    d = w_b.shape[0]
    r = np.broadcast_to(np.abs(np.asarray(x_max, dtype=np.float64)), (d,))  # [D]
    beta = _abs_proj(w_b, b_b, r)  # [N]
    gamma_c = _abs_proj(w_c, b_c, r)  # [N]
    state = np.maximum(float(h0_max), r[:, None] * beta[None, :])  # [D, N]
    core = state @ gamma_c + np.abs(d_skip.astype(np.float64)) * r  # [D]
    out = _abs_proj(w_o, b_o, core)  # [D]
    return SsmBound(beta, gamma_c, state, core, out)


def ssm_lambda_max(
    *,
    x_max: np.ndarray | float,
    w_delta: np.ndarray,
    b_delta: np.ndarray,
    a_log: np.ndarray,
    dtype: type = np.float32,
    **_unused: np.ndarray,
) -> np.ndarray:
    """An upper bound on exp(-s) for the s = delta a that the `dtype` computation can produce on
    the domain |x| <= r: the smallest z, softplus and a lowered by their rounding. -> [D, N]."""
    u = float(np.finfo(dtype).eps) / 2
    eps_f = ELEMENTARY_ERROR_U * u
    d = w_delta.shape[0]
    r = np.broadcast_to(np.abs(np.asarray(x_max, dtype=np.float64)), (d,))  # [D]
    spread = np.abs(w_delta.astype(np.float64)).T @ r  # [D]
    b64 = b_delta.astype(np.float64)  # [D]
    z_lo = b64 - spread - gamma(d + 1, u) * (np.abs(b64) + spread)  # [D] smallest computed z
    tiny = float(np.finfo(dtype).smallest_normal)  # below it relative error bounds fail: use 0

    def lowered(v: np.ndarray) -> np.ndarray:
        return np.where(v >= tiny, v, 0.0)  # [...]

    delta_lo = lowered(np.logaddexp(0.0, z_lo) * (1 - eps_f))  # [D]
    a_lo = lowered(np.exp(a_log.astype(np.float64)) * (1 - eps_f))  # [D, N]
    return np.exp(-lowered(delta_lo[:, None] * a_lo * (1 - u)))  # [D, N]


def ssm_float_state_bound(
    *,
    x_max: np.ndarray | float,
    h0_max: float = 0.0,
    dtype: type = np.float32,
    steps: int | None = None,
    **weights: np.ndarray,
) -> np.ndarray:
    """A bound on |h_t| as `ssm_step` computes it in `dtype` (round to nearest), every t.

    One step: |fl(fl(lam h) + fl(keep u))| <= rho (lam* |h| + (1 - lam*) |u~|), rho =
    (1 + u)^2 (1 + eps_f), lam* = exp(-s) of the computed s, |u~| <= U (1 + gamma_{D+1})(1 + u).
    Where rho lam_max < 1 this contracts to the uniform bound max(h0, U~ rho (1 - lam_max) /
    (1 - rho lam_max)) (+ the subnormal slack); where it does not (lam within ~8u of 1, so fl
    may make lam exactly 1), only rho^steps max(h0, U~) holds, and without `steps` the bound is
    inf there. -> [D, N] (float64)."""
    u = float(np.finfo(dtype).eps) / 2
    eta = float(np.finfo(dtype).smallest_subnormal)
    eps_f = ELEMENTARY_ERROR_U * u
    exact = ssm_bounds(x_max=x_max, h0_max=0.0, **weights)
    d = weights["w_b"].shape[0]
    u_tilde = exact.state * (1 + gamma(d + 1, u)) * (1 + u)  # [D, N]
    rho = (1 + u) ** 2 * (1 + eps_f)
    lam_max = ssm_lambda_max(x_max=x_max, dtype=dtype, **weights)  # [D, N]
    contracts = rho * lam_max < 1  # [D, N]
    den = np.where(contracts, 1 - rho * lam_max, 1.0)  # [D, N]
    uniform = np.maximum(h0_max, u_tilde * rho * (1 - lam_max) / den + 2 * eta / den)  # [D, N]
    if steps is None:
        grown = np.full_like(uniform, np.inf)  # [D, N]
    else:
        grown = rho**steps * np.maximum(h0_max, u_tilde) + 2 * eta * steps  # [D, N]
    return np.where(contracts, np.minimum(uniform, grown), grown)  # [D, N]


def ssm_float_out_bound(
    state: np.ndarray, *, x_max: np.ndarray | float, dtype: type = np.float32, **weights: np.ndarray
) -> np.ndarray:
    """A bound on |out_t| as computed in `dtype`, given a bound `state` [D, N] on the computed
    state: the exact output bound's propagation with each dot product inflated by gamma of its
    length. -> [D] (float64)."""
    u = float(np.finfo(dtype).eps) / 2
    d, n = weights["w_b"].shape
    r = np.broadcast_to(np.abs(np.asarray(x_max, dtype=np.float64)), (d,))  # [D]
    gamma_c = _abs_proj(weights["w_c"], weights["b_c"], r) * (1 + gamma(d + 1, u))  # [N]
    core = (state @ gamma_c + np.abs(weights["d_skip"].astype(np.float64)) * r) * (1 + gamma(n + 2, u))  # [D]
    return _abs_proj(weights["w_o"], weights["b_o"], core) * (1 + gamma(d + 1, u))  # [D]
