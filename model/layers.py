"""Transformer layers as small pure functions over activations, weights as keyword arguments.

picoGPT style: `layer_norm(x, *, g, b)`; a shape comment on every array line. Inference only
(dropout is identity here); training's cached forward and backward live in `model.grad`.
Sources: Vaswani et al. 2017 (sections 3.1-3.5); Ba et al. 2016 (layer normalization).

This file imports numpy and nothing else.
"""

from __future__ import annotations

import numpy as np

from .attention import attention


def linear(x: np.ndarray, *, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return x @ w + b  # [..., n_in] @ [n_in, n_out] -> [..., n_out]


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def layer_norm(x: np.ndarray, *, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)  # [..., 1]
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # [..., 1], biased, as in Ba et al.
    return g * (x - mean) / np.sqrt(var + eps) + b  # [..., D]


def feed_forward(x: np.ndarray, *, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    return linear(relu(linear(x, w=w1, b=b1)), w=w2, b=b2)  # [..., D] -> [..., F] -> [..., D]


def positional_encoding(max_len: int, d_model: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).

    Computed in float64 and rounded once, so every backend that loads the table agrees exactly.
    """
    pos = np.arange(max_len, dtype=np.float64)[:, None]  # [T, 1]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]  # [1, ceil(D/2)]
    angle = pos / np.power(10000.0, two_i / d_model)  # [T, ceil(D/2)]
    pe = np.zeros((max_len, d_model), dtype=np.float64)  # [T, D]
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return pe.astype(np.float32)


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads).transpose(0, 2, 1, 3)  # [B, T, D] -> [B, H, T, dh]


def merge_heads(x: np.ndarray) -> np.ndarray:
    b, h, t, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dh)  # [B, H, T, dh] -> [B, T, D]


def multi_head_attention(
    x_q: np.ndarray,
    x_kv: np.ndarray,
    *,
    w_q: np.ndarray,
    b_q: np.ndarray,
    w_k: np.ndarray,
    b_k: np.ndarray,
    w_v: np.ndarray,
    b_v: np.ndarray,
    w_o: np.ndarray,
    b_o: np.ndarray,
    n_heads: int,
    mask: np.ndarray | None = None,
    chunk: int | None = None,
) -> np.ndarray:
    """Concat(head_1..head_h) W^O with head_i = Attention(x_q W_i^Q, x_kv W_i^K, x_kv W_i^V).

    x_q [B, Tq, D], x_kv [B, Tk, D]; mask bool broadcastable to [B, H, Tq, Tk].
    """
    q = split_heads(linear(x_q, w=w_q, b=b_q), n_heads)  # [B, H, Tq, dh]
    k = split_heads(linear(x_kv, w=w_k, b=b_k), n_heads)  # [B, H, Tk, dh]
    v = split_heads(linear(x_kv, w=w_v, b=b_v), n_heads)  # [B, H, Tk, dh]
    heads = attention(q, k, v, mask=mask, chunk=chunk)  # [B, H, Tq, dh]
    return linear(merge_heads(heads).astype(x_q.dtype, copy=False), w=w_o, b=b_o)  # [B, Tq, D]
