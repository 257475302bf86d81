"""Contract: the recurrent state of an ssm artifact stays bounded (BIBO), at every step.

Statement
    For inputs in the declared domain, every layer's state |h_t[l, d, n]| <= S_l for every t,
    whatever the stream length; S_l is recorded in the manifest ("state_bound") at export.
Bound
    max |state[:, l]| <= S_l per layer l; every state value finite.
Reason
    h_t = lam h_{t-1} + (1 - lam) u_t with lam = exp(-softplus(z) exp(a_log)) in [0, 1] for every
    parameter value (model/ssm.py): a convex combination, so |h_t| <= max(|h_0|, sup |u|) with
    |u[d, n]| <= r[d] beta[n], r the radius of the mixer's input (layer 0: the input projection
    of the declared domain; later layers: the LayerNorm before them, |g| sqrt(D - 1) + |b|, for
    any input) and beta = |b_B| + |W_B|^T r (model/ssm.py `ssm_bounds`). The manifest's S_l is
    the float32 version (`ssm_float_state_bound`: rounding of each step, contracting where the
    computed lam stays below 1 by more than a few ulps) where that is finite, else the exact
    bound widened by FLOAT_STALL_SLACK (docs/ssm.md: where fl(lam) rounds to 1, a step adds
    fl((1 - lam) u) which rounds away once |h| exceeds sup |u| by a relative 2^-23).
    This function is the run-time witness of that chain, checked on the state the step wrote.

Real-time safety: `state_excess` makes one slice view per layer (an ndarray header, no data)
and scans it with `input_domain.value_range` (two bounded reductions on a state this size):
under 200 B of transient objects per layer, nothing that grows (tests/contracts/test_state_bound.py).
Referenced by: `runtime.monitor.ContractMonitor` (state_bound), tests/contracts/test_state_bound.py,
`tickformer verify` (the ssm plan's state_bounded property).
"""

from __future__ import annotations

import math

import numpy as np

from .input_domain import value_range

BOUND = "max |h_t[layer]| <= S_layer for every t (BIBO from lam in [0, 1]); state finite"

FLOAT_STALL_SLACK = 1e-3  # relative widening of the exact bound where the float bound is not uniform


def state_excess(state: np.ndarray, bound: np.ndarray) -> float:
    """0.0 when every layer l of state [B, L, ...] is finite and within [-bound[l], bound[l]];
    inf when a value is non-finite; else the largest max |state[:, l]| - bound[l]. Real-time safe."""
    worst = 0.0
    layer, layers = 0, state.shape[1]
    while layer < layers:  # no range iterator
        mn, mx = value_range(state[:, layer])
        if not (math.isfinite(mn) and math.isfinite(mx)):
            return math.inf
        b = bound.item(layer)
        worst = max(worst, -b - mn, mx - b)
        layer += 1
    return worst


def describe_state_violation(state: np.ndarray, bound: np.ndarray) -> str:
    """Failure path only (allocates): the layer and value that broke the bound."""
    if not np.isfinite(state).all():
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(state))[0])
        return f"state has a non-finite value at index {idx}; reset the session"
    per_layer = np.abs(state).max(axis=tuple(i for i in range(state.ndim) if i != 1))  # [L]
    layer = int(np.argmax(per_layer - np.asarray(bound)))
    return (
        f"layer {layer} state reaches {float(per_layer[layer]):.6g}, over its BIBO bound {float(bound[layer]):.6g}; "
        "the inputs left the declared domain or the weights are not this artifact's"
    )
