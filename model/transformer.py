"""The numpy reference Transformer: decoder-only (causal) and encoder-decoder, post-LN.

Parameters are a flat dict of named float32 arrays; the names are reused verbatim as ONNX
initializer names by the exporter. Naming scheme (prefix `enc.{i}.` / `dec.{i}.`):

    tok_embed                      [V, D]   tokens: shared source/target embedding, tied output
    in_proj.w, in_proj.b           [d_in, D], [D]      continuous inputs
    out_proj.w, out_proj.b         [D, d_out], [d_out] continuous outputs
    {layer}.self_attn.{w_q,b_q,w_k,b_k,w_v,b_v,w_o,b_o}
    {layer}.cross_attn.{...}       encoder-decoder decoder layers only
    {layer}.ffn.{w1,b1,w2,b2}
    {layer}.ln1.{g,b}, ln2, (ln3)  post-LN: x = LN(x + sublayer(x))

Source: Vaswani et al. 2017, "Attention Is All You Need" (sections 3.1-3.5); inference here,
dropout is identity. This file imports numpy and nothing else.
"""

from __future__ import annotations

import numpy as np

from .attention import causal_mask
from .config import Config
from .layers import feed_forward, layer_norm, linear, multi_head_attention, positional_encoding

ATTN_NAMES = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")
FFN_NAMES = ("w1", "b1", "w2", "b2")


def parameter_shapes(config: Config) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in a fixed order (the order of the ONNX initializers)."""
    d, f = config.d_model, config.d_ff
    shapes: dict[str, tuple[int, ...]] = {}
    if config.inputs == "tokens":
        shapes["tok_embed"] = (config.vocab_size, d)
    else:
        shapes["in_proj.w"] = (config.d_in, d)
        shapes["in_proj.b"] = (d,)
        shapes["out_proj.w"] = (d, config.d_out)
        shapes["out_proj.b"] = (config.d_out,)

    def attn(prefix: str) -> None:
        for name in ("q", "k", "v", "o"):
            shapes[f"{prefix}.w_{name}"] = (d, d)
            shapes[f"{prefix}.b_{name}"] = (d,)

    def ffn(prefix: str) -> None:
        shapes[f"{prefix}.w1"] = (d, f)
        shapes[f"{prefix}.b1"] = (f,)
        shapes[f"{prefix}.w2"] = (f, d)
        shapes[f"{prefix}.b2"] = (d,)

    def norm(prefix: str) -> None:
        shapes[f"{prefix}.g"] = (d,)
        shapes[f"{prefix}.b"] = (d,)

    for i in range(config.n_enc_layers):
        attn(f"enc.{i}.self_attn")
        norm(f"enc.{i}.ln1")
        ffn(f"enc.{i}.ffn")
        norm(f"enc.{i}.ln2")
    cross = config.arch == "encoder-decoder"
    for i in range(config.n_layers):
        attn(f"dec.{i}.self_attn")
        norm(f"dec.{i}.ln1")
        if cross:
            attn(f"dec.{i}.cross_attn")
            norm(f"dec.{i}.ln2")
        ffn(f"dec.{i}.ffn")
        norm(f"dec.{i}.ln3" if cross else f"dec.{i}.ln2")
    return shapes


def init_params(config: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded initialisation: Xavier-uniform matrices (Glorot & Bengio 2010), zero biases,
    unit LayerNorm gains, embedding N(0, D^-1/2) so that the sqrt(D)-scaled embedding has unit
    variance. Float32."""
    rng = np.random.default_rng(seed)
    params: dict[str, np.ndarray] = {}
    for name, shape in parameter_shapes(config).items():
        leaf = name.rsplit(".", 1)[-1]
        if name == "tok_embed":
            value = rng.normal(0.0, config.d_model**-0.5, size=shape)
        elif len(shape) == 2:
            limit = np.sqrt(6.0 / (shape[0] + shape[1]))
            value = rng.uniform(-limit, limit, size=shape)
        elif leaf == "g":
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        params[name] = value.astype(np.float32)
    return params


def sublayer_params(params: dict[str, np.ndarray], prefix: str, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {name: params[f"{prefix}.{name}"] for name in names}


def embed(params: dict[str, np.ndarray], config: Config, x: np.ndarray, *, start: int = 0) -> np.ndarray:
    """Input embedding plus sinusoidal positions start..start+T-1.

    tokens: x int [B, T] -> E[x] * sqrt(D) + PE; continuous: x [B, T, d_in] -> x W_in + b_in + PE.
    """
    t = x.shape[1]
    pe = positional_encoding(start + t, config.d_model)[start:]  # [T, D]
    if config.inputs == "tokens":
        h = params["tok_embed"][x] * np.float32(np.sqrt(config.d_model))  # [B, T] -> [B, T, D]
    else:
        h = linear(x, w=params["in_proj.w"], b=params["in_proj.b"])  # [B, T, d_in] -> [B, T, D]
    return h + pe.astype(h.dtype)  # [B, T, D]


def project_out(params: dict[str, np.ndarray], config: Config, h: np.ndarray) -> np.ndarray:
    """tokens: logits = h E^T (tied); continuous: y = h W_out + b_out."""
    if config.inputs == "tokens":
        return h @ params["tok_embed"].T  # [B, T, D] -> [B, T, V]
    return linear(h, w=params["out_proj.w"], b=params["out_proj.b"])  # [B, T, D] -> [B, T, d_out]


def encoder_layer(x: np.ndarray, params: dict[str, np.ndarray], prefix: str, config: Config, *, mask: np.ndarray | None) -> np.ndarray:
    attn = multi_head_attention(x, x, **sublayer_params(params, f"{prefix}.self_attn", ATTN_NAMES), n_heads=config.n_heads, mask=mask)  # [B, S, D]
    x = layer_norm(x + attn, **sublayer_params(params, f"{prefix}.ln1", ("g", "b")), eps=config.ln_eps)  # [B, S, D]
    ff = feed_forward(x, **sublayer_params(params, f"{prefix}.ffn", FFN_NAMES))  # [B, S, D]
    return layer_norm(x + ff, **sublayer_params(params, f"{prefix}.ln2", ("g", "b")), eps=config.ln_eps)  # [B, S, D]


def decoder_layer(
    x: np.ndarray,
    params: dict[str, np.ndarray],
    prefix: str,
    config: Config,
    *,
    self_mask: np.ndarray | None,
    memory: np.ndarray | None = None,
    memory_mask: np.ndarray | None = None,
) -> np.ndarray:
    eps = config.ln_eps
    attn = multi_head_attention(x, x, **sublayer_params(params, f"{prefix}.self_attn", ATTN_NAMES), n_heads=config.n_heads, mask=self_mask)  # [B, T, D]
    x = layer_norm(x + attn, **sublayer_params(params, f"{prefix}.ln1", ("g", "b")), eps=eps)  # [B, T, D]
    last_norm = "ln2"
    if memory is not None:
        cross = multi_head_attention(x, memory, **sublayer_params(params, f"{prefix}.cross_attn", ATTN_NAMES), n_heads=config.n_heads, mask=memory_mask)  # [B, T, D]
        x = layer_norm(x + cross, **sublayer_params(params, f"{prefix}.ln2", ("g", "b")), eps=eps)  # [B, T, D]
        last_norm = "ln3"
    ff = feed_forward(x, **sublayer_params(params, f"{prefix}.ffn", FFN_NAMES))  # [B, T, D]
    return layer_norm(x + ff, **sublayer_params(params, f"{prefix}.{last_norm}", ("g", "b")), eps=eps)  # [B, T, D]


def source_mask(src_valid: np.ndarray | None, tq: int) -> np.ndarray | None:
    """src_valid [B, S] bool (True = real token) -> [B, 1, Tq, S] mask over source keys."""
    if src_valid is None:
        return None
    return src_valid[:, None, None, :] & np.ones((1, 1, tq, 1), dtype=bool)  # [B, 1, Tq, S]


def encode(params: dict[str, np.ndarray], config: Config, src: np.ndarray, *, src_valid: np.ndarray | None = None) -> np.ndarray:
    """Encoder stack: src int [B, S] -> memory [B, S, D]. Padded source keys are masked out."""
    if config.arch != "encoder-decoder":
        raise ValueError("encode() is for encoder-decoder models; this config is decoder-only")
    h = embed(params, config, src)  # [B, S, D]
    mask = source_mask(src_valid, src.shape[1])
    for i in range(config.n_enc_layers):
        h = encoder_layer(h, params, f"enc.{i}", config, mask=mask)
    return h


def decode(
    params: dict[str, np.ndarray],
    config: Config,
    x: np.ndarray,
    *,
    memory: np.ndarray | None = None,
    src_valid: np.ndarray | None = None,
) -> np.ndarray:
    """Causal decoder stack plus output projection: x [B, T] tokens or [B, T, d_in] -> [B, T, V|d_out]."""
    t = x.shape[1]
    if t > config.max_len:
        raise ValueError(f"sequence length {t} exceeds max_len {config.max_len} of this model")
    h = embed(params, config, x)  # [B, T, D]
    self_mask = causal_mask(t)  # [T, T], position t never sees t+1..
    memory_mask = source_mask(src_valid, t) if memory is not None else None
    for i in range(config.n_layers):
        h = decoder_layer(h, params, f"dec.{i}", config, self_mask=self_mask, memory=memory, memory_mask=memory_mask)
    return project_out(params, config, h)


def forward(
    params: dict[str, np.ndarray],
    config: Config,
    x: np.ndarray,
    *,
    src: np.ndarray | None = None,
    src_valid: np.ndarray | None = None,
) -> np.ndarray:
    """Full-sequence pass. Decoder-only: forward(params, cfg, x). Encoder-decoder:
    forward(params, cfg, tgt_in, src=src) (teacher forcing). Returns [B, T, V] or [B, T, d_out]."""
    if config.arch == "encoder-decoder":
        if src is None:
            raise ValueError("encoder-decoder forward needs src=... (source tokens [B, S])")
        memory = encode(params, config, src, src_valid=src_valid)  # [B, S, D]
        return decode(params, config, x, memory=memory, src_valid=src_valid)
    if src is not None:
        raise ValueError("src given to a decoder-only model; it takes one input sequence")
    return decode(params, config, x)
