"""Training forward (cached activations, seeded dropout) and the hand-written backward pass.

No autograd library: each layer has a `*_forward` returning (output, cache) and a `*_backward`
taking the output gradient and the cache. The model-level `loss_and_grads` composes them in
the same order as `model.transformer.forward`, so with dropout 0 the training forward equals
the inference forward (up to float roundoff: attention here is P @ V with P from
`attention_weights`, the inference path folds V into the online-softmax state).

Dropout (Vaswani et al. 2017, section 5.4) is applied to the sum of embeddings and positional
encodings and to each sub-layer's output before the residual add. Its masks are drawn from the
numpy Generator passed in, so a seed fixes them; with rate 0 or no Generator nothing is drawn.

Losses: label-smoothed cross entropy (Szegedy et al. 2016: target (1-eps) one-hot + eps/V
uniform) for tokens, mean squared error for continuous outputs, both averaged over the
positions whose weight is nonzero.

Checked against central finite differences in float64 for every parameter tensor
(tests/model/test_grad.py). Gradient formulas: layer norm as in Ba et al. 2016; softmax
backward dS = P * (dP - rowsum(dP * P)), which is exactly zero at masked keys (P = 0) and on
fully masked rows.

Speed (numpy has no fused kernels, so every elementwise pass over an activation is a full
trip through memory): the [B, H, Tq, Tk] softmax (`model.attention.attention_weights`) and its
backward run in place in the one array each creates, relu' and dropout are single multiplications by a mask, and layer norm
reuses its temporaries. Each rewrite keeps the same floating-point operations in the same
order as the plain formula, except where a comment says otherwise.

Nothing here is real-time safe: training allocates freely. This file imports numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import attention_weights, causal_mask
from .config import Config
from .layers import merge_heads, positional_encoding, split_heads
from .transformer import ATTN_NAMES, FFN_NAMES, source_mask

Params = dict[str, np.ndarray]
Grads = dict[str, np.ndarray]


# ---------------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------------


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1])  # [..., n] -> [N, n]


def _matmul_rows(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x [..., n] @ w [n, m] as one 2-D product (numpy would otherwise call BLAS once per
    leading index; equal to it bit for bit on our machines) -> [..., m]."""
    return (_flat(x) @ w).reshape(x.shape[:-1] + (w.shape[1],))


def linear_forward(x: np.ndarray, *, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, Any]:
    y = _matmul_rows(x, w)  # [..., n_in] -> [..., n_out]
    y += b
    return y, (x, w)


def linear_backward(dy: np.ndarray, cache: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> dx [..., n_in], dw [n_in, n_out], db [n_out]."""
    x, w = cache
    dx = _matmul_rows(dy, w.T)  # [..., n_out] -> [..., n_in]
    dw = _flat(x).T @ _flat(dy)  # [n_in, N] @ [N, n_out]
    db = _flat(dy).sum(axis=0)  # [n_out]
    return dx, dw, db


def layer_norm_forward(x: np.ndarray, *, g: np.ndarray, b: np.ndarray, eps: float) -> tuple[np.ndarray, Any]:
    mean = x.mean(axis=-1, keepdims=True)  # [..., 1]
    xhat = x - mean  # [..., D], centred now, normalised below
    y = xhat * xhat  # [..., D], scratch: squares now, the output below
    var = y.mean(axis=-1, keepdims=True)  # [..., 1]
    rstd = 1.0 / np.sqrt(var + eps)  # [..., 1]
    xhat *= rstd
    np.multiply(g, xhat, out=y)
    y += b
    return y, (xhat, rstd, g)


def layer_norm_backward(dy: np.ndarray, cache: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> dx, dg, db. dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))."""
    xhat, rstd, g = cache
    t = dy * xhat  # [..., D], scratch
    dg = _flat(t).sum(axis=0)  # [D]
    db = _flat(dy).sum(axis=0)  # [D]
    dx = dy * g  # [..., D], dxhat now, dx below
    np.multiply(dx, xhat, out=t)
    c = t.mean(axis=-1, keepdims=True)  # [..., 1] mean(dxhat xhat)
    np.multiply(xhat, c, out=t)
    dx -= dx.mean(axis=-1, keepdims=True)
    dx -= t
    dx *= rstd
    return dx, dg, db


def dropout_forward(x: np.ndarray, rate: float, rng: np.random.Generator | None) -> tuple[np.ndarray, Any]:
    """Inverted dropout: keep with probability 1-rate and scale by 1/(1-rate). Draws nothing
    (and returns x itself) when rate is 0 or rng is None."""
    if rate <= 0.0 or rng is None:
        return x, None
    gain = (rng.random(x.shape, dtype=np.float64) >= rate).astype(x.dtype)  # [...] 1 = keep, 0 = drop
    gain *= x.dtype.type(1.0 / (1.0 - rate))  # [...] 1/(1-rate) or 0
    return x * gain, gain


def dropout_backward(dy: np.ndarray, cache: Any) -> np.ndarray:
    if cache is None:
        return dy
    return dy * cache  # the same gains: 1/(1-rate) where kept, 0 where dropped


def ffn_forward(x: np.ndarray, p: Params) -> tuple[np.ndarray, Any]:
    h, c1 = linear_forward(x, w=p["w1"], b=p["b1"])  # [..., D] -> [..., F]
    active = h > 0  # [..., F] bool
    r = np.maximum(h, 0, out=h)  # [..., F], h is not needed again
    y, c2 = linear_forward(r, w=p["w2"], b=p["b2"])  # [..., F] -> [..., D]
    return y, (c1, active, c2)


def ffn_backward(dy: np.ndarray, cache: Any) -> tuple[np.ndarray, Grads]:
    c1, active, c2 = cache
    dr, dw2, db2 = linear_backward(dy, c2)  # [..., F]
    # relu' by multiplying with the bool mask: one pass, ~10x faster than np.where(active, dr, 0)
    # here; equal to it except that 0 * dr is -0 for negative dr (and NaN for non-finite dr).
    dh = np.multiply(dr, active, out=dr)
    dx, dw1, db1 = linear_backward(dh, c1)  # [..., D]
    return dx, {"w1": dw1, "b1": db1, "w2": dw2, "b2": db2}


def mha_forward(x_q: np.ndarray, x_kv: np.ndarray, p: Params, *, n_heads: int, mask: np.ndarray | None) -> tuple[np.ndarray, Any]:
    """Multi-head attention with the softmax weights of `attention_weights` (the same
    selection masking and state arithmetic as the inference operator)."""
    ql, cq = linear_forward(x_q, w=p["w_q"], b=p["b_q"])  # [B, Tq, D]
    kl, ck = linear_forward(x_kv, w=p["w_k"], b=p["b_k"])  # [B, Tk, D]
    vl, cv = linear_forward(x_kv, w=p["w_v"], b=p["b_v"])  # [B, Tk, D]
    q, k, v = split_heads(ql, n_heads), split_heads(kl, n_heads), split_heads(vl, n_heads)  # [B, H, T, dh]
    probs = attention_weights(q, k, mask=mask).astype(q.dtype, copy=False)  # [B, H, Tq, Tk]
    heads = probs @ v  # [B, H, Tq, dh]
    y, co = linear_forward(merge_heads(heads), w=p["w_o"], b=p["b_o"])  # [B, Tq, D]
    return y, (cq, ck, cv, q, k, v, probs, co, n_heads)


def mha_backward(dy: np.ndarray, cache: Any) -> tuple[np.ndarray, np.ndarray, Grads]:
    """-> dx_q [B, Tq, D], dx_kv [B, Tk, D], grads of the eight projections."""
    cq, ck, cv, q, k, v, probs, co, n_heads = cache
    dmerged, dw_o, db_o = linear_backward(dy, co)  # [B, Tq, D]
    dheads = split_heads(dmerged, n_heads)  # [B, H, Tq, dh]
    dprobs = dheads @ np.swapaxes(v, -1, -2)  # [B, H, Tq, Tk]
    dv = np.swapaxes(probs, -1, -2) @ dheads  # [B, H, Tk, dh]
    # Softmax backward dS = P * (dP - rowsum(dP * P)), in place in dprobs. Not via
    # rowsum = dheads . heads (FlashAttention's D, a [B, H, Tq, dh] product): cheaper and equal
    # in exact arithmetic, but not bit for bit, and training amplifies roundoff: the seed-0
    # reduced-budget pendulum run of tests/model/test_train.py went from held-out ratio 0.67
    # to 0.98 (limit 0.8). Everything else here trains bit for bit as the plain formulas did.
    dscores = dprobs
    dscores -= (dprobs * probs).sum(axis=-1, keepdims=True)  # [B, H, Tq, 1]
    dscores *= probs
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]))
    dq = dscores @ k  # [B, H, Tq, dh]
    dq *= scale
    dk = np.swapaxes(dscores, -1, -2) @ q  # [B, H, Tk, dh]
    dk *= scale
    dx_q, dw_q, db_q = linear_backward(merge_heads(dq), cq)
    dx_k, dw_k, db_k = linear_backward(merge_heads(dk), ck)
    dx_v, dw_v, db_v = linear_backward(merge_heads(dv), cv)
    grads = {"w_q": dw_q, "b_q": db_q, "w_k": dw_k, "b_k": db_k, "w_v": dw_v, "b_v": db_v, "w_o": dw_o, "b_o": db_o}
    return dx_q, dx_k + dx_v, grads


# ---------------------------------------------------------------------------------------------
# Residual sub-layers and stacks (post-LN: x = LN(x + Dropout(sublayer(x))))
# ---------------------------------------------------------------------------------------------


def _sub(params: Params, prefix: str, names: tuple[str, ...]) -> Params:
    return {name: params[f"{prefix}.{name}"] for name in names}


def _add_grads(grads: Grads, prefix: str, local: Grads) -> None:
    for name, value in local.items():
        key = f"{prefix}.{name}"
        grads[key] = grads[key] + value if key in grads else value


def _ln(params: Params, prefix: str) -> Params:
    return _sub(params, prefix, ("g", "b"))


class _Tape:
    """Records each layer's cache in forward order; the backward pass walks it in reverse."""

    def __init__(self, params: Params, config: Config, rng: np.random.Generator | None, rate: float) -> None:
        self.params, self.config, self.rng, self.rate = params, config, rng, rate
        self.entries: list[tuple[str, str, Any]] = []


def _residual_attn(tape: _Tape, x: np.ndarray, kv: np.ndarray | None, prefix: str, ln: str, mask: np.ndarray | None) -> np.ndarray:
    """x -> LN(x + Dropout(MHA(x, kv or x))). kv=None means self-attention."""
    p, cfg = tape.params, tape.config
    a, c_attn = mha_forward(x, x if kv is None else kv, _sub(p, prefix, ATTN_NAMES), n_heads=cfg.n_heads, mask=mask)
    a, c_drop = dropout_forward(a, tape.rate, tape.rng)
    a += x  # a is a new array (projection or dropout output), not cached
    y, c_ln = layer_norm_forward(a, **_ln(p, ln), eps=cfg.ln_eps)
    tape.entries.append(("attn" if kv is None else "cross", prefix + "|" + ln, (c_attn, c_drop, c_ln)))
    return y


def _residual_ffn(tape: _Tape, x: np.ndarray, prefix: str, ln: str) -> np.ndarray:
    p, cfg = tape.params, tape.config
    f, c_ffn = ffn_forward(x, _sub(p, prefix, FFN_NAMES))
    f, c_drop = dropout_forward(f, tape.rate, tape.rng)
    f += x  # f is a new array, not cached
    y, c_ln = layer_norm_forward(f, **_ln(p, ln), eps=cfg.ln_eps)
    tape.entries.append(("ffn", prefix + "|" + ln, (c_ffn, c_drop, c_ln)))
    return y


def _embed_forward(tape: _Tape, x: np.ndarray, kind: str) -> np.ndarray:
    p, cfg = tape.params, tape.config
    t = x.shape[1]
    if t > cfg.max_len:
        raise ValueError(f"sequence length {t} exceeds max_len {cfg.max_len} of this model")
    pe = positional_encoding(t, cfg.d_model)  # [T, D]
    if cfg.inputs == "tokens":
        emb = p["tok_embed"]
        scale = emb.dtype.type(np.sqrt(cfg.d_model))
        h = emb[x] * scale  # [B, T] -> [B, T, D]
        cache: Any = (x, scale)
    else:
        h, cache = linear_forward(x, w=p["in_proj.w"], b=p["in_proj.b"])  # [B, T, d_in] -> [B, T, D]
    h += pe.astype(h.dtype)  # [B, T, D], h is new
    h, c_drop = dropout_forward(h, tape.rate, tape.rng)
    tape.entries.append((kind, "", (cache, c_drop)))
    return h


def _project_out(tape: _Tape, h: np.ndarray) -> np.ndarray:
    p, cfg = tape.params, tape.config
    if cfg.inputs == "tokens":
        out = h @ p["tok_embed"].T  # [B, T, D] -> [B, T, V], tied
        cache: Any = h
    else:
        out, cache = linear_forward(h, w=p["out_proj.w"], b=p["out_proj.b"])  # [B, T, d_out]
    tape.entries.append(("out", "", cache))
    return out


def forward_train(
    params: Params,
    config: Config,
    x: np.ndarray,
    *,
    src: np.ndarray | None = None,
    src_valid: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
    dropout: float | None = None,
) -> tuple[np.ndarray, _Tape]:
    """Same computation as `transformer.forward`, plus dropout (rate `dropout`, default
    config.dropout, masks drawn from `rng`; none if rng is None) and a tape for `backward`.
    Returns (outputs [B, T, V|d_out], tape)."""
    rate = config.dropout if dropout is None else dropout
    tape = _Tape(params, config, rng, rate)
    memory = None
    memory_mask = None
    if config.arch == "encoder-decoder":
        if src is None:
            raise ValueError("encoder-decoder training needs src=... (source tokens [B, S])")
        h = _embed_forward(tape, src, "enc_embed")  # [B, S, D]
        enc_mask = source_mask(src_valid, src.shape[1])
        for i in range(config.n_enc_layers):
            h = _residual_attn(tape, h, None, f"enc.{i}.self_attn", f"enc.{i}.ln1", enc_mask)
            h = _residual_ffn(tape, h, f"enc.{i}.ffn", f"enc.{i}.ln2")
        memory = h
        tape.entries.append(("memory", "", None))
        memory_mask = source_mask(src_valid, x.shape[1])
    elif src is not None:
        raise ValueError("src given to a decoder-only model; it takes one input sequence")
    h = _embed_forward(tape, x, "dec_embed")  # [B, T, D]
    self_mask = causal_mask(x.shape[1])  # [T, T]
    for i in range(config.n_layers):
        h = _residual_attn(tape, h, None, f"dec.{i}.self_attn", f"dec.{i}.ln1", self_mask)
        last = "ln2"
        if memory is not None:
            h = _residual_attn(tape, h, memory, f"dec.{i}.cross_attn", f"dec.{i}.ln2", memory_mask)
            last = "ln3"
        h = _residual_ffn(tape, h, f"dec.{i}.ffn", f"dec.{i}.{last}")
    return _project_out(tape, h), tape


def backward(dout: np.ndarray, tape: _Tape) -> Grads:
    """Gradients of every parameter given d(loss)/d(outputs) [B, T, V|d_out]."""
    p, cfg = tape.params, tape.config
    grads: Grads = {}
    dh = dout
    dmemory: np.ndarray | None = None
    for kind, names, cache in reversed(tape.entries):
        if kind == "out":
            if cfg.inputs == "tokens":
                h = cache
                d_emb = _flat(dh).T @ _flat(h)  # [V, N] @ [N, D] -> [V, D]
                grads["tok_embed"] = grads.get("tok_embed", 0) + d_emb
                dh = dh @ p["tok_embed"]  # [B, T, V] -> [B, T, D]
            else:
                dh, dw, db = linear_backward(dh, cache)
                grads["out_proj.w"], grads["out_proj.b"] = dw, db
        elif kind in ("attn", "cross", "ffn"):
            prefix, ln = names.split("|")
            c_sub, c_drop, c_ln = cache
            dsum, dg, db = layer_norm_backward(dh, c_ln)
            _add_grads(grads, ln, {"g": dg, "b": db})
            dsub = dropout_backward(dsum, c_drop)
            if kind == "ffn":
                dh, local = ffn_backward(dsub, c_sub)
                dh += dsum
            else:
                dh, dx_kv, local = mha_backward(dsub, c_sub)
                dh += dsum
                if kind == "attn":
                    dh += dx_kv
                else:
                    dmemory = dx_kv if dmemory is None else dmemory + dx_kv
            _add_grads(grads, prefix, local)
        elif kind in ("dec_embed", "enc_embed"):
            c_in, c_drop = cache
            de = dropout_backward(dh, c_drop)  # [B, T, D]
            if cfg.inputs == "tokens":
                tokens, scale = c_in
                d_emb = np.zeros_like(p["tok_embed"])  # [V, D]
                np.add.at(d_emb, tokens.reshape(-1), _flat(de) * scale)
                grads["tok_embed"] = grads.get("tok_embed", 0) + d_emb
            else:
                _, dw, db = linear_backward(de, c_in)
                grads["in_proj.w"], grads["in_proj.b"] = dw, db
        elif kind == "memory":
            # The decoder is done; continue backward through the encoder from d(memory).
            assert dmemory is not None
            dh = dmemory
        else:  # pragma: no cover - tape kinds are fixed above
            raise AssertionError(kind)
    return {name: np.asarray(grads[name], dtype=p[name].dtype) for name in p}


# ---------------------------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------------------------


def _weights(weight: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, float]:
    w = np.ones(shape, dtype=dtype) if weight is None else weight.astype(dtype)  # [B, T]
    total = float(w.sum())
    if total <= 0:
        raise ValueError("loss weights sum to zero: the batch has no position to learn from")
    return w, total


def cross_entropy(logits: np.ndarray, target: np.ndarray, *, weight: np.ndarray | None = None, smoothing: float = 0.1) -> tuple[float, np.ndarray]:
    """Label-smoothed cross entropy averaged over weighted positions.

    logits [B, T, V], target int [B, T], weight [B, T] (0 = ignore) -> (loss, dlogits [B, T, V]).
    """
    v = logits.shape[-1]
    z = logits - logits.max(axis=-1, keepdims=True)  # [B, T, V]
    logz = np.log(np.exp(z).sum(axis=-1, keepdims=True))  # [B, T, 1]
    logp = z - logz  # [B, T, V]
    q = np.full(logits.shape, smoothing / v, dtype=logits.dtype)  # [B, T, V]
    np.put_along_axis(q, target[..., None], 1.0 - smoothing + smoothing / v, axis=-1)
    w, total = _weights(weight, target.shape, logits.dtype)
    per_position = -(q * logp).sum(axis=-1)  # [B, T]
    loss = float((per_position * w).sum() / total)
    dlogits = (np.exp(logp) - q) * (w / total)[..., None]  # [B, T, V]
    return loss, dlogits.astype(logits.dtype, copy=False)


def mse(y: np.ndarray, target: np.ndarray, *, weight: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Mean squared error over weighted positions and output channels.

    y, target [B, T, d_out], weight [B, T] -> (loss, dy)."""
    w, total = _weights(weight, y.shape[:-1], y.dtype)
    n = total * y.shape[-1]
    err = y - target  # [B, T, d_out]
    loss = float((w[..., None] * err * err).sum() / n)
    dy = (2.0 / n) * w[..., None] * err
    return loss, dy.astype(y.dtype, copy=False)


@dataclass(frozen=True)
class Batch:
    """One training batch. x: decoder input (int [B, T] tokens or [B, T, d_in]); target:
    int [B, T] or [B, T, d_out]; weight [B, T] (0 = padding, ignored); src/src_valid for
    encoder-decoder models."""

    x: np.ndarray
    target: np.ndarray
    weight: np.ndarray | None = None
    src: np.ndarray | None = None
    src_valid: np.ndarray | None = None


def loss_and_grads(
    params: Params,
    config: Config,
    batch: Batch,
    *,
    rng: np.random.Generator | None = None,
    dropout: float | None = None,
    label_smoothing: float = 0.1,
) -> tuple[float, Grads]:
    """Training loss (label-smoothed CE for tokens, MSE for continuous) and its gradient for
    every parameter. Dropout masks come from `rng` (None: no dropout)."""
    out, tape = forward_train(params, config, batch.x, src=batch.src, src_valid=batch.src_valid, rng=rng, dropout=dropout)
    if config.inputs == "tokens":
        loss, dout = cross_entropy(out, batch.target, weight=batch.weight, smoothing=label_smoothing)
    else:
        loss, dout = mse(out, batch.target.astype(out.dtype, copy=False), weight=batch.weight)
    return loss, backward(dout, tape)
