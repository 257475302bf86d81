"""The exported graphs: full-sequence `model`, cached `step`, and `encoder` (encoder-decoder).

Written from the numpy parameters with `GraphBuilder` (no tracing), computing what
model/transformer.py computes (Vaswani et al. 2017, post-LN). The I/O contract of every graph is
documented in docs/artifact_format.md; in short (B batch, N max_len, L decoder layers):

    model    x [B, T, d_in] -> y [B, T, d_out]   (tokens [B, T] -> logits [B, T, V]); T <= N
    step     x [B, 1, d_in], pos [1], k_cache, v_cache [L, B, H, N, dh]
             -> y [B, 1, d_out], k_new, v_new [L, B, H, 1, dh]
             (+ cross_k, cross_v [L, B, H, N, dh], src_valid [B, N] for encoder-decoder)
    encoder  src [B, N], src_valid [B, N] -> cross_k, cross_v [L, B, H, N, dh]

The step attends over two pieces merged by the online-softmax rule: the cache, whose stale rows
(key_index >= pos) are selected out -- Where(live, s, -inf) for the max, Where(live, exp, 0) for
the weights -- so they get weight exactly 0 whatever finite values they hold, and the new key
itself (blocks.attend_cached). Every shape of `step` and `encoder` is static (TensorRT:
min = opt = max).

Not real-time code: runs once, at export.
"""

from __future__ import annotations

import numpy as np
import onnx

from tickformer.model.attention import causal_mask
from tickformer.model.config import Config
from tickformer.model.layers import positional_encoding

from . import blocks as b
from .blocks import Params
from .builder import GraphBuilder


def io_names(config: Config) -> tuple[str, str]:
    """(input name, output name) of model.onnx / step.onnx for this config."""
    return ("tokens", "logits") if config.inputs == "tokens" else ("x", "y")


def out_width(config: Config) -> int:
    return config.vocab_size if config.inputs == "tokens" else config.d_out


def cache_shape(config: Config, batch: int, rows: int | None = None) -> list[int]:
    """[L, B, H, N, dh] (rows=None) or [L, B, H, rows, dh]."""
    n = config.max_len if rows is None else rows
    return [config.n_layers, batch, config.n_heads, n, config.d_head]


def _embed(g: GraphBuilder, params: Params, config: Config, x: str, pe_rows: str) -> str:
    """Token or continuous embedding plus the given positional rows [T, D] -> [B, T, D]."""
    if config.inputs == "tokens":
        e = g.op("Gather", b.param(g, params, "tok_embed"), x, axis=0)  # [B, T] -> [B, T, D]
        h = g.op("Mul", e, g.scalar(np.sqrt(config.d_model)))
    else:
        h = b.linear(g, params, x, "in_proj.w", "in_proj.b")  # [B, T, d_in] -> [B, T, D]
    return g.op("Add", h, pe_rows)  # [B, T, D]


def _project_out(g: GraphBuilder, params: Params, config: Config, h: str) -> str:
    if config.inputs == "tokens":
        et = g.op("Transpose", b.param(g, params, "tok_embed"), perm=[1, 0])  # [V, D] -> [D, V]
        return g.op("MatMul", h, et)  # [B, T, V] (tied)
    return b.linear(g, params, h, "out_proj.w", "out_proj.b")  # [B, T, d_out]


def _pe(g: GraphBuilder, config: Config) -> str:
    return g.const(positional_encoding(config.max_len, config.d_model), "pe")  # [N, D]


def _ffn_block(g: GraphBuilder, params: Params, config: Config, h: str, prefix: str, norm: str) -> str:
    ff = b.feed_forward(g, params, h, f"{prefix}.ffn")
    return b.layer_norm(g, params, g.op("Add", h, ff), f"{prefix}.{norm}", config.ln_eps)


def _self_attn_full(g: GraphBuilder, params: Params, config: Config, h: str, prefix: str, batch: int, allowed: str | None) -> str:
    """Post-LN self-attention sublayer over the whole sequence."""
    nh, dh = config.n_heads, config.d_head
    q, k, v = (b.project_heads(g, params, h, prefix + ".self_attn", w, batch, nh, dh) for w in "qkv")  # [B, H, T, dh]
    heads = b.attend(g, q, k, v, allowed, dh)  # [B, H, T, dh]
    attn = b.out_proj(g, params, heads, prefix + ".self_attn", batch, config.d_model)  # [B, T, D]
    return b.layer_norm(g, params, g.op("Add", h, attn), f"{prefix}.ln1", config.ln_eps)


def build_model(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """Decoder-only full pass: exactly one input, one output, T symbolic (1..max_len)."""
    if config.arch != "decoder":
        raise ValueError("build_model is for decoder-only configs; encoder-decoder exports encoder + step")
    g = GraphBuilder("tickformer_model", opset)
    in_name, out_name = io_names(config)
    if config.inputs == "tokens":
        x = g.input(in_name, "int64", [batch, "T"])
    else:
        x = g.input(in_name, "float32", [batch, "T", config.d_in])
    t = g.op("Shape", x, start=1, end=2)  # [1] = T
    zero = g.ints([0])
    pe = g.op("Slice", _pe(g, config), zero, t, zero)  # [T, D]
    causal = g.const(causal_mask(config.max_len), "causal")  # [N, N] bool, j <= i
    allowed = g.op("Slice", causal, g.ints([0, 0]), g.op("Concat", t, t, axis=0), g.ints([0, 1]))  # [T, T]
    h = _embed(g, params, config, x, pe)  # [B, T, D]
    for i in range(config.n_layers):
        h = _self_attn_full(g, params, config, h, f"dec.{i}", batch, allowed)
        h = _ffn_block(g, params, config, h, f"dec.{i}", "ln2")
    y = _project_out(g, params, config, h)
    g.output(y, out_name, "float32", [batch, "T", out_width(config)])
    return g.model()


def _cached_self_attn(g: GraphBuilder, params: Params, config: Config, h: str, batch: int, caches: tuple[str, str], layer: int, allowed: str) -> tuple[str, str, str]:
    """One position's self-attention over the static cache of `layer` plus its own key.
    Returns (attention output [B, 1, D], k_new, v_new [B, H, 1, dh])."""
    nh, dh = config.n_heads, config.d_head
    prefix = f"dec.{layer}.self_attn"
    q, k_new, v_new = (b.project_heads(g, params, h, prefix, w, batch, nh, dh) for w in "qkv")  # [B, H, 1, dh]
    index = g.const(np.asarray(layer, dtype=np.int64))
    kc = g.op("Gather", caches[0], index, axis=0)  # [L, B, H, N, dh] -> [B, H, N, dh]
    vc = g.op("Gather", caches[1], index, axis=0)
    qs = b.scaled_query(g, q, dh)  # [B, H, 1, dh]
    s_cache = b.scores(g, qs, kc)  # [B, H, 1, N] over all N rows: constant work
    heads = b.attend_cached(g, s_cache, allowed, vc, b.scores(g, qs, k_new), v_new)  # [B, H, 1, dh]
    return b.out_proj(g, params, heads, prefix, batch, config.d_model), k_new, v_new


def build_step(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """One position over a static KV cache of max_len rows; all shapes static."""
    g = GraphBuilder("tickformer_step", opset)
    in_name, out_name = io_names(config)
    if config.inputs == "tokens":
        x = g.input(in_name, "int64", [batch, 1])
    else:
        x = g.input(in_name, "float32", [batch, 1, config.d_in])
    pos = g.input("pos", "int64", [1])
    caches = (g.input("k_cache", "float32", cache_shape(config, batch)), g.input("v_cache", "float32", cache_shape(config, batch)))
    cross = config.arch == "encoder-decoder"
    if cross:
        cross_kv = (g.input("cross_k", "float32", cache_shape(config, batch)), g.input("cross_v", "float32", cache_shape(config, batch)))
        src_valid = g.input("src_valid", "bool", [batch, config.max_len])
        src_allowed = g.op("Reshape", src_valid, g.ints([batch, 1, 1, config.max_len]))  # [B, 1, 1, N]
    key_index = g.const(np.arange(config.max_len, dtype=np.int64), "key_index")  # [N]
    allowed = g.op("Less", key_index, pos)  # [N]: rows 0..pos-1 are live
    pe_row = g.op("Gather", _pe(g, config), pos, axis=0)  # [1, D]
    h = _embed(g, params, config, x, pe_row)  # [B, 1, D]
    new_k: list[str] = []
    new_v: list[str] = []
    for i in range(config.n_layers):
        prefix = f"dec.{i}"
        attn, k_new, v_new = _cached_self_attn(g, params, config, h, batch, caches, i, allowed)
        new_k.append(g.op("Unsqueeze", k_new, g.ints([0])))  # [1, B, H, 1, dh]
        new_v.append(g.op("Unsqueeze", v_new, g.ints([0])))
        h = b.layer_norm(g, params, g.op("Add", h, attn), f"{prefix}.ln1", config.ln_eps)
        if cross:
            q = b.project_heads(g, params, h, f"{prefix}.cross_attn", "q", batch, config.n_heads, config.d_head)
            index = g.const(np.asarray(i, dtype=np.int64))
            ck = g.op("Gather", cross_kv[0], index, axis=0)  # [B, H, N, dh]
            cv = g.op("Gather", cross_kv[1], index, axis=0)
            heads = b.attend(g, q, ck, cv, src_allowed, config.d_head)  # [B, H, 1, dh]
            c = b.out_proj(g, params, heads, f"{prefix}.cross_attn", batch, config.d_model)
            h = b.layer_norm(g, params, g.op("Add", h, c), f"{prefix}.ln2", config.ln_eps)
        h = _ffn_block(g, params, config, h, prefix, "ln3" if cross else "ln2")
    y = _project_out(g, params, config, h)
    g.output(y, out_name, "float32", [batch, 1, out_width(config)])
    g.output(_stack(g, new_k), "k_new", "float32", cache_shape(config, batch, rows=1))
    g.output(_stack(g, new_v), "v_new", "float32", cache_shape(config, batch, rows=1))
    return g.model()


def _stack(g: GraphBuilder, rows: list[str]) -> str:
    return rows[0] if len(rows) == 1 else g.op("Concat", *rows, axis=0)  # [L, B, H, 1, dh]


def build_encoder(params: Params, config: Config, batch: int, opset: int) -> onnx.ModelProto:
    """Encoder stack over a padded source, then every decoder layer's cross-attention K/V."""
    if config.arch != "encoder-decoder":
        raise ValueError("build_encoder is for encoder-decoder configs")
    g = GraphBuilder("tickformer_encoder", opset)
    n = config.max_len
    src = g.input("src", "int64", [batch, n])
    src_valid = g.input("src_valid", "bool", [batch, n])
    allowed = g.op("Reshape", src_valid, g.ints([batch, 1, 1, n]))  # [B, 1, 1, N] over keys
    h = _embed(g, params, config, src, _pe(g, config))  # [B, N, D]
    for i in range(config.n_enc_layers):
        h = _self_attn_full(g, params, config, h, f"enc.{i}", batch, allowed)
        h = _ffn_block(g, params, config, h, f"enc.{i}", "ln2")
    ks: list[str] = []
    vs: list[str] = []
    for i in range(config.n_layers):
        for which, out in (("k", ks), ("v", vs)):
            kv = b.project_heads(g, params, h, f"dec.{i}.cross_attn", which, batch, config.n_heads, config.d_head)  # [B, H, N, dh]
            out.append(g.op("Unsqueeze", kv, g.ints([0])))  # [1, B, H, N, dh]
    g.output(_stack(g, ks), "cross_k", "float32", cache_shape(config, batch))
    g.output(_stack(g, vs), "cross_v", "float32", cache_shape(config, batch))
    return g.model()


def build_graphs(params: Params, config: Config, batch: int, opset: int) -> dict[str, onnx.ModelProto]:
    """Every graph of the artifact, by name: decoder -> model, step; encoder-decoder -> encoder, step."""
    if config.arch == "decoder":
        return {"model": build_model(params, config, batch, opset), "step": build_step(params, config, batch, opset)}
    return {"encoder": build_encoder(params, config, batch, opset), "step": build_step(params, config, batch, opset)}
