"""The BIBO state bound an ssm artifact declares (contracts/state_bound.py), from its weights and
input domain.

Per layer l the mixer's input x is bounded componentwise by a radius r_l [D]:
    layer 0, continuous inputs in [lo, hi]: r = |b_in| + |W_in|^T m, m = max(|lo|, |hi|) per input;
    layer 0, tokens: r[d] = sqrt(D) max_v |E[v, d]| (the scaled embedding, no positions);
    layer l > 0: the LayerNorm that ends layer l - 1, |g| sqrt(D - 1) + |b| (export/bounds.py's
        argument; any input), times 1 + ROUNDING_SLACK for its float32 rounding.
Then model/ssm.py gives the state bound of that layer: `ssm_float_state_bound` (the step as
computed in float32) where it is finite; where the computed lam may round to 1 (it is not
uniform there) the exact bound `ssm_bounds(...).state` widened by FLOAT_STALL_SLACK.
The manifest records S_l = max over (d, n) per layer, the radii's maxima and the reason.

Not real-time code: runs once, at export.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from tickformer.contracts.state_bound import FLOAT_STALL_SLACK
from tickformer.model import names
from tickformer.model.config import Config
from tickformer.model.ssm import ssm_bounds, ssm_float_state_bound

from .bounds import ROUNDING_SLACK


def mixer_input_radii(
    params: Mapping[str, np.ndarray], config: Config, domain: tuple[float, float]
) -> list[np.ndarray]:
    """r_l [D] for every layer l (module docstring), float64."""
    d = config.d_model
    if config.inputs == "tokens":
        table = np.abs(params[names.TOK_EMBED].astype(np.float64))  # [V, D]
        first = math.sqrt(d) * table.max(axis=0)  # [D]
    else:
        m = max(abs(domain[0]), abs(domain[1]))
        w = np.abs(params[names.IN_PROJ["w"]].astype(np.float64))  # [d_in, D]
        first = np.abs(params[names.IN_PROJ["b"]].astype(np.float64)) + m * w.sum(axis=0)  # [D]
    radii = [first * (1 + ROUNDING_SLACK)]
    for _, _, _, ffn_norm in names.ssm_layers(config)[:-1]:
        g = np.abs(params[ffn_norm["g"]].astype(np.float64))
        b = np.abs(params[ffn_norm["b"]].astype(np.float64))
        radii.append((g * math.sqrt(d - 1) + b) * (1 + ROUNDING_SLACK))  # [D]
    return radii


def state_bound(
    params: Mapping[str, np.ndarray], config: Config, domain: tuple[float, float]
) -> dict[str, Any]:
    """The manifest's "state_bound" entry: {"layers": [S_l], "exact": [...], "input_radius": [...],
    "float_bound_uniform": [bool], "reason": ...}."""
    layers, uniform, exact, radius = [], [], [], []
    for (mixer, *_), r in zip(names.ssm_layers(config), mixer_input_radii(params, config, domain)):
        weights = mixer.take(params)
        ex = ssm_bounds(x_max=r, **weights).state  # [D, N]
        fl = ssm_float_state_bound(x_max=r, **weights)  # [D, N], inf where not uniform
        finite = np.isfinite(fl)
        per = np.where(finite, fl, ex * (1 + FLOAT_STALL_SLACK))  # [D, N]
        layers.append(float(per.max()))
        uniform.append(bool(finite.all()))
        exact.append(float(ex.max()))
        radius.append(float(r.max()))
    return {
        "layers": layers,
        "exact": exact,
        "input_radius": radius,
        "float_bound_uniform": uniform,
        "reason": (
            "h_t = lam h_{t-1} + (1 - lam) u_t with lam in [0, 1] (convex): |h| <= sup |u| = r beta, r the mixer "
            "input's radius (layer 0 from the input domain, later layers from the LayerNorm before them); float32 "
            "rounding per model/ssm.py ssm_float_state_bound, or the exact bound x (1 + "
            f"{FLOAT_STALL_SLACK}) where the computed lam may round to 1 (docs/ssm.md)"
        ),
    }
