"""Two numbers the manifest states with their reasons: the output bound and the fp32 tolerance.

Output bound (valid for ANY finite input). The model is post-LN: the last thing before the
output projection is y = g * z / sqrt(var + eps) + b with z = h - mean(h). Because sum(z) = 0,
Cauchy-Schwarz gives z_i^2 = (sum_{j != i} z_j)^2 <= (D - 1) sum_{j != i} z_j^2 = (D - 1)(D var - z_i^2),
so z_i^2 <= (D - 1) var and |z_i| / sqrt(var + eps) < sqrt(D - 1). Hence
|h_i| <= |g_i| sqrt(D - 1) + |b_i| =: c_i and, for the projection out = h W + b_out (tokens:
h E^T), |out_k| <= sum_i c_i |W_ik| + |b_out_k|. The bound is that maximum over k, times
1 + 1e-3 to cover float32 rounding of the LayerNorm and the projection (relative error
~ D * 2^-24 << 1e-3 for D <= 4096).

Tolerance. Backends compute the same float32 arithmetic in different orders (BLAS blocking,
fused ORT kernels, LayerNorm's one-pass variance). For a length-n dot product the rounding
error is <= gamma_n sum |a_i b_i| with gamma_n = n u / (1 - n u), u = 2^-24 (Higham, "Accuracy
and Stability of Numerical Algorithms", 2002, section 3.1); with rounding errors that behave as
independent zero-mean variables it is ~ sqrt(n) u (Higham & Mary, SIAM J. Sci. Comput. 2019).
Activations are renormalised by LayerNorm after every sublayer, so errors add over sublayers
instead of compounding. With n = max(d_model, d_ff, max_len) and S sublayers on the path
(2 per layer, 3 with cross-attention, + embedding and output projection) we state

    atol = rtol = 8 * S * sqrt(n) * u * max(1, |out|_bound-free scale)  ->  floored at 1e-5

and compare |a - b| <= atol + rtol |b| elementwise. The factor 8 covers exp/sqrt/div ulps and
the softmax normaliser; the measured errors (recorded in the manifest, typically 1e-7..1e-6)
sit one to two orders of magnitude below the stated tolerance.

Not real-time code: runs once, at export.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from tickformer.model import names
from tickformer.model.config import Config

U_FP32 = 2.0**-24
ROUNDING_SLACK = 1e-3


def output_bound(params: Mapping[str, np.ndarray], config: Config) -> float:
    """max |output| over all finite inputs (see the module docstring for the derivation)."""
    if config.block == "ssm":  # the same post-LN argument: an ssm stack also ends in its FFN's norm
        norm = names.ssm_layers(config)[-1][3]
    else:
        norm = names.decoder_layers(config)[-1].ffn_norm  # the last thing before the output projection
    g = np.abs(params[norm["g"]].astype(np.float64))  # [D]
    b = np.abs(params[norm["b"]].astype(np.float64))  # [D]
    c = g * math.sqrt(config.d_model - 1) + b  # [D] bound on |h_i|
    if config.inputs == "tokens":
        per_out = np.abs(params[names.TOK_EMBED].astype(np.float64)) @ c  # [V, D] @ [D] -> [V]
    else:
        w = np.abs(params[names.OUT_PROJ["w"]].astype(np.float64))  # [D, d_out]
        per_out = c @ w + np.abs(params[names.OUT_PROJ["b"]].astype(np.float64))  # [d_out]
    return float(per_out.max() * (1.0 + ROUNDING_SLACK))


def sum_tolerance(n: int, sublayers: int) -> float:
    """max(1e-5, 8 S sqrt(n) u): the agreement tolerance of float32 sums of length <= n in
    different orders (~ sqrt(n) u each, probabilistic) through S post-LN sublayers (errors stay
    additive); the one formula of fp32_tolerance and export/ssm_graphs.ssm_tolerance."""
    return max(1e-5, 8 * sublayers * math.sqrt(n) * U_FP32)


def fp32_tolerance(config: Config) -> dict[str, object]:
    """The stated agreement tolerance between backends, with its reason (module docstring)."""
    n = max(config.d_model, config.d_ff, config.max_len)
    per_layer = 3 if config.arch == "encoder-decoder" else 2
    sublayers = per_layer * config.n_layers + 2 * config.n_enc_layers + 2
    tol = sum_tolerance(n, sublayers)
    reason = (
        f"float32 (u = 2^-24), same math in different summation orders: per dot product of length "
        f"n = {n} the error is ~ sqrt(n) u (probabilistic bound; worst case n u), LayerNorm after each "
        f"of the S = {sublayers} sublayers keeps errors additive; tol = max(1e-5, 8 S sqrt(n) u), "
        f"checked as |a - b| <= atol + rtol |b| elementwise at every position 1..{config.max_len}"
    )
    return {"atol": tol, "rtol": tol, "reason": reason}
