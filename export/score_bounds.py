"""Score bounds from the trained weights: the analysis behind `contracts.score_bound`.

Computes, per attention layer, the per-head bounds on |q_h|_2 and |k_h|_2 (spectral norms of the
projections, the input-norm bound of each layer, see the contract's docstring for the derivation)
and the layer's score bound, recorded in the manifest at export. Not real-time code (SVDs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tickformer.contracts.score_bound import FP16_MAX, fp16_safe, inflated_score, rounding_inflation
from tickformer.model import names
from tickformer.model.config import Config
from tickformer.model.layers import positional_encoding

__all__ = ["FP16_MAX", "LayerScoreBound", "fp16_scores_safe", "score_bound_report", "score_bounds"]


@dataclass(frozen=True)
class LayerScoreBound:
    layer: str  # the attention group's prefix, e.g. "dec.0.self_attn"
    q_norm: float  # bound on |q_h|_2 over heads
    k_norm: float  # bound on |k_h|_2 over heads
    score: float  # bound on |q . k| / sqrt(dh)

    @property
    def fp16_safe(self) -> bool:
        return fp16_safe(self.q_norm, self.k_norm, self.score)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fp16_safe": self.fp16_safe}


def spectral_norm(w: np.ndarray) -> float:
    """||w||_2, the largest singular value (float64 SVD)."""
    return float(np.linalg.norm(w.astype(np.float64), 2))


def layer_norm_output_bound(g: np.ndarray, b: np.ndarray) -> float:
    """max |g * z + b|_2 over all inputs: max|g| sqrt(D) + |b|_2."""
    d = g.shape[-1]
    return float(np.max(np.abs(g.astype(np.float64)))) * float(np.sqrt(d)) + float(
        np.linalg.norm(b.astype(np.float64))
    )


def max_position_norm(config: Config) -> float:
    pe = positional_encoding(config.max_len, config.d_model).astype(np.float64)  # [T, D]
    return float(np.linalg.norm(pe, axis=-1).max())


def embedding_output_bound(
    config: Config, params: dict[str, np.ndarray], input_domain: tuple[float, float] | None
) -> float:
    """Bound on |embed(x)_t|_2 for the first layer's input."""
    pe = max_position_norm(config)
    if config.inputs == "tokens":
        rows = np.linalg.norm(params[names.TOK_EMBED].astype(np.float64), axis=-1)  # [V]
        return float(rows.max()) * float(np.sqrt(config.d_model)) + pe
    if input_domain is None:
        raise ValueError("continuous models need the declared input domain (lo, hi) to bound their scores")
    lo, hi = input_domain
    x_norm = float(np.sqrt(config.d_in)) * max(abs(lo), abs(hi))
    return (
        spectral_norm(params[names.IN_PROJ["w"]]) * x_norm
        + float(np.linalg.norm(params[names.IN_PROJ["b"]].astype(np.float64)))
        + pe
    )


def projection_norm_bounds(w: np.ndarray, b: np.ndarray, n_heads: int, x_norm: float) -> list[float]:
    """Per head: ||W[:, h]||_2 x_norm + |b[h]|_2."""
    d = w.shape[1]
    dh = d // n_heads
    return [
        spectral_norm(w[:, h * dh : (h + 1) * dh]) * x_norm
        + float(np.linalg.norm(b[h * dh : (h + 1) * dh].astype(np.float64)))
        for h in range(n_heads)
    ]


def attention_bound(
    attn: names.Group, params: dict[str, np.ndarray], config: Config, xq_norm: float, xk_norm: float
) -> LayerScoreBound:
    qs = projection_norm_bounds(params[attn["w_q"]], params[attn["b_q"]], config.n_heads, xq_norm)
    ks = projection_norm_bounds(params[attn["w_k"]], params[attn["b_k"]], config.n_heads, xk_norm)
    inflate = rounding_inflation(config.d_model)
    score = inflated_score(qs, ks, config.d_head, config.d_model)
    return LayerScoreBound(attn.prefix, max(qs) * inflate, max(ks) * inflate, score)


def score_bound_report(
    config: Config, params: dict[str, np.ndarray], input_domain: tuple[float, float] | None
) -> list[LayerScoreBound]:
    """Every attention layer's bounds, in model order: encoder self-attention layers, then per
    decoder layer its self-attention and (encoder-decoder) cross-attention."""
    out: list[LayerScoreBound] = []
    x0 = embedding_output_bound(config, params, input_domain)

    def ln(norm: names.Group) -> float:
        return layer_norm_output_bound(params[norm["g"]], params[norm["b"]])

    x = x0
    for layer in names.encoder_layers(config):
        out.append(attention_bound(layer.self_attn, params, config, x, x))
        x = ln(layer.ffn_norm)
    memory = x if config.n_enc_layers else None
    x = x0
    for layer in names.decoder_layers(config):
        out.append(attention_bound(layer.self_attn, params, config, x, x))
        if layer.cross_attn is not None:
            assert memory is not None
            out.append(attention_bound(layer.cross_attn, params, config, ln(layer.self_attn_norm), memory))
        x = ln(layer.ffn_norm)
    return out


def score_bounds(
    config: Config, params: dict[str, np.ndarray], input_domain: tuple[float, float] | None
) -> list[float]:
    """Score bound per attention layer (model order, see `score_bound_report`); for the manifest."""
    return [b.score for b in score_bound_report(config, params, input_domain)]


def fp16_scores_safe(
    config: Config, params: dict[str, np.ndarray], input_domain: tuple[float, float] | None
) -> bool:
    """True when every layer's q, k and score bounds fit fp16 with FP16_MARGIN; else fp32 required."""
    return all(b.fp16_safe for b in score_bound_report(config, params, input_domain))
