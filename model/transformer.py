"""The numpy reference Transformer: decoder-only (causal) and encoder-decoder, post-LN.

Longer than 600 lines: the one forward pass and the typed records its backward pass consumes
sit together, each record next to the block that makes it, so a block's forward and backward
read in one place.

There is one forward pass. Inference calls it without a tape; training calls it with a `Tape`,
and then every block also appends a typed record of what its backward pass needs (each record
class sits next to the block that makes it and carries its own `backward`), and dropout is
applied at the tape's rate. With dropout 0 the training forward is the inference forward, bit for
bit: the same functions (model/layers.py) run in the same order. Attention always goes through
the one online-softmax operator (model/attention.py); the records keep its unnormalised weights
p and normalizer l, from which the backward pass forms P = p / l.

Parameters are a flat dict of named float32 arrays; the names (model/names.py, the one place
that composes them) are reused verbatim as ONNX initializer names by the exporter and as
checkpoint keys.

Source: Vaswani et al. 2017, "Attention Is All You Need" (sections 3.1-3.5, dropout 5.4);
the forward/backward pairing follows llm.c's train_gpt2.c. Not real-time safe: every pass
allocates (the runtime's step is the real-time path). Imports numpy, the model's own modules and
the window predicates of tickformer.contracts (masking.window_allowed, ring_buffer.window_distance:
the mask and the bias index are built by calling them, as the step graph does).

Windowed models (config.window = W, docs/streaming.md): no sinusoidal table; every decoder
self-attention selects keys with window_allowed(i, j, W) and adds the learned relative-position
bias rel_bias[h, window_distance(i, j, W)] (T5-style, one [H, W] table per layer) to its scores
before the selection, so the model is a function of the inputs' order within the window only,
never of absolute positions: the computation at step 10 and at step 10^7 is the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from tickformer.contracts.masking import window_allowed
from tickformer.contracts.ring_buffer import window_distance

from . import names
from .attention import causal_mask
from .config import Config
from .layers import (
    AttentionCache,
    LayerNormCache,
    LinearCache,
    dropout_backward,
    dropout_forward,
    ffn_backward,
    ffn_forward,
    layer_norm_backward,
    layer_norm_forward,
    linear_backward,
    linear_forward,
    matmul,
    mha_backward,
    mha_forward,
    positional_encoding,
)
from .names import ATTN_NAMES, FFN_NAMES  # re-exported: importers of these names predate names.py
from .ssm import ssm_backward, ssm_forward, ssm_init, ssm_shapes

Params = dict[str, np.ndarray]


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1])  # [..., n] -> [N, n]


__all__ = [
    "ATTN_NAMES",
    "FFN_NAMES",
    "Flow",
    "Tape",
    "decode",
    "embed",
    "encode",
    "forward",
    "init_params",
    "parameter_shapes",
    "project_out",
    "source_mask",
]


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


def _group_shapes(group: names.Group, config: Config) -> dict[str, tuple[int, ...]]:
    d, f = config.d_model, config.d_ff
    if group == names.EMBEDDING:
        return {names.TOK_EMBED: (config.vocab_size, d)}
    if group == names.IN_PROJ:
        return {"w": (config.d_in, d), "b": (d,)}
    if group == names.OUT_PROJ:
        return {"w": (d, config.d_out), "b": (config.d_out,)}
    if group.leaves == ATTN_NAMES:
        return {leaf: (d, d) if leaf.startswith("w") else (d,) for leaf in ATTN_NAMES}
    if group.leaves == FFN_NAMES:
        return {"w1": (d, f), "b1": (f,), "w2": (f, d), "b2": (d,)}
    if group.leaves == names.NORM_NAMES:
        return {"g": (d,), "b": (d,)}
    if group.leaves == names.SSM_NAMES:
        return dict(ssm_shapes(d, config.d_state))
    if group.leaves == names.POSITION_NAMES and config.window is not None:
        return {"rel_bias": (config.n_heads, config.window)}
    raise AssertionError(f"no shapes for {group}")  # pragma: no cover - names.py makes only these


def parameter_shapes(config: Config) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in a fixed order (the order of the ONNX initializers)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for group in names.parameter_groups(config):
        for leaf, shape in _group_shapes(group, config).items():
            shapes[group[leaf]] = shape
    return shapes


def init_params(config: Config, seed: int = 0) -> Params:
    """Seeded initialisation: Xavier-uniform matrices (Glorot & Bengio 2010), zero biases,
    unit LayerNorm gains, embedding N(0, D^-1/2) so that the sqrt(D)-scaled embedding has unit
    variance; relative-position biases [H, W] start as ALiBi's recency ramps (Press et al. 2022:
    -slope_h * r, slope_h = 2^(-8 (h + 1) / H)), then are learned. Float32. An SSM mixer gets
    model/ssm.py's Mamba / S4D-Real initialisation, drawn after every other parameter (so the
    attention models' draws are unchanged)."""
    rng = np.random.default_rng(seed)
    params: Params = {}
    mixers = [groups[0] for groups in names.ssm_layers(config)] if config.block == "ssm" else []
    mixer_names = {name for group in mixers for name in group.names()}
    for name, shape in parameter_shapes(config).items():
        if name in mixer_names:
            params[name] = np.zeros(shape, dtype=np.float32)  # placeholder keeping the order
        elif names.leaf(name) == names.POSITION_NAMES[0]:
            value = alibi_ramps(*shape)
        elif name == names.TOK_EMBED:
            value = rng.normal(0.0, config.d_model**-0.5, size=shape)
        elif len(shape) == 2:
            limit = np.sqrt(6.0 / (shape[0] + shape[1]))
            value = rng.uniform(-limit, limit, size=shape)
        elif names.leaf(name) == "g":
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        if name not in mixer_names:
            params[name] = value.astype(np.float32)
    for group in mixers:
        for leaf, value in ssm_init(config.d_model, config.d_state, rng).items():
            params[group[leaf]] = value
    return params


def alibi_ramps(n_heads: int, window: int) -> np.ndarray:
    """[H, W] float32: -2^(-8 (h + 1) / H) * r for distance r (ALiBi's slopes, Press et al. 2022)."""
    slopes = 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)  # [H]
    return (-slopes[:, None] * np.arange(window)[None, :]).astype(np.float32)  # [H, W]


def window_mask(t: int, window: int) -> np.ndarray:
    """[T, T] bool: contracts.masking.window_allowed on index arrays (i - W < j <= i)."""
    i = np.arange(t)
    return window_allowed(i[:, None], i[None, :], window)  # [T, T]


def window_distances(t: int, window: int) -> np.ndarray:
    """[T, T] int: contracts.ring_buffer.window_distance(i, j, W) = (i - j) mod W, the true distance
    i - j wherever window_allowed holds (the bias column each score reads)."""
    i = np.arange(t)
    return window_distance(i[:, None], i[None, :], window)  # [T, T] in [0, W)


# ---------------------------------------------------------------------------------------------
# The tape: what a training forward keeps, and the state its backward pass carries
# ---------------------------------------------------------------------------------------------


@dataclass
class Flow:
    """The backward pass in progress: the gradient of the residual stream at the current record,
    the gradient reaching the encoder output from every cross-attention, and the parameter
    gradients so far."""

    dh: np.ndarray
    grads: Params = field(default_factory=dict)
    dmemory: np.ndarray | None = None

    def add(self, group: names.Group, local: dict[str, np.ndarray]) -> None:
        for leaf, value in local.items():
            key = group[leaf]
            self.grads[key] = self.grads[key] + value if key in self.grads else value


class Record(Protocol):
    def backward(self, flow: Flow) -> None: ...


@dataclass
class Tape:
    """A training forward's memory: the parameters it ran with, its dropout (rate and the
    Generator its masks come from; none if rate is 0 or rng is None) and, in forward order,
    one record per block. `model.grad.backward` walks the records in reverse and consumes them."""

    params: Params
    dropout: float = 0.0
    rng: np.random.Generator | None = None
    records: list[Record] = field(default_factory=list)

    def drop(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        return dropout_forward(x, rate=self.dropout, rng=self.rng)


@dataclass(frozen=True)
class DropoutRecord:
    gain: np.ndarray  # [...] 1/(1-rate) where kept, 0 where dropped

    def backward(self, flow: Flow) -> None:
        flow.dh = dropout_backward(flow.dh, self.gain)


def _dropout(x: np.ndarray, tape: Tape | None) -> np.ndarray:
    """Dropout on a stream that is not a residual branch (the embeddings); identity without a tape."""
    if tape is None:
        return x
    y, gain = tape.drop(x)
    if gain is not None:
        tape.records.append(DropoutRecord(gain))
    return y


# ---------------------------------------------------------------------------------------------
# Embedding in, projection out
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenEmbedRecord:
    tokens: np.ndarray  # [B, T] int
    scale: np.floating  # sqrt(D) in the table's dtype
    table: np.ndarray  # [V, D], for the gradient's shape and dtype

    def backward(self, flow: Flow) -> None:
        """Scatter-add of the rows' gradients into their tokens' rows: rows sorted by token and
        summed per run (np.add.reduceat: vectorised, where np.add.at goes element by element);
        deterministic."""
        tokens = self.tokens.reshape(-1)  # [N]
        order = np.argsort(tokens, kind="stable")  # [N]
        ordered = tokens[order]  # [N], runs of equal tokens
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # [U] first row of each run
        d_table = np.zeros_like(self.table)  # [V, D]
        d_table[ordered[starts]] = np.add.reduceat(
            _flat(flow.dh)[order] * self.scale, starts, axis=0
        )  # [U, D]
        flow.add(names.EMBEDDING, {names.TOK_EMBED: d_table})


@dataclass(frozen=True)
class InputProjRecord:
    cache: LinearCache

    def backward(self, flow: Flow) -> None:
        _, local = linear_backward(flow.dh, self.cache)  # the inputs need no gradient
        flow.add(names.IN_PROJ, local)


def embed(
    params: Params, config: Config, x: np.ndarray, *, start: int = 0, tape: Tape | None = None
) -> np.ndarray:
    """Input embedding plus sinusoidal positions start..start+T-1 (windowed models and SSM blocks:
    no positions; the recurrence is order-aware by itself, and a position-free step has no max_len).

    tokens: x int [B, T] -> E[x] * sqrt(D) + PE; continuous: x [B, T, d_in] -> x W_in + b_in + PE.
    """
    t = x.shape[1]
    record: Record
    if config.inputs == "tokens":
        table = params[names.TOK_EMBED]  # [V, D]
        scale = table.dtype.type(np.sqrt(config.d_model))
        h = table[x] * scale  # [B, T] -> [B, T, D]
        record = TokenEmbedRecord(x, scale, table)
    else:
        h, cache = linear_forward(x, **names.IN_PROJ.take(params))  # [B, T, d_in] -> [B, T, D]
        record = InputProjRecord(cache)
    if config.window is None and config.block != "ssm":  # windowed / ssm: no absolute positions
        h += positional_encoding(start + t, config.d_model)[start:].astype(h.dtype)  # [B, T, D], h is new
    if tape is not None:
        tape.records.append(record)
    return h


@dataclass(frozen=True)
class TiedOutputRecord:
    h: np.ndarray  # [B, T, D]
    table: np.ndarray  # [V, D]

    def backward(self, flow: Flow) -> None:
        flow.add(names.EMBEDDING, {names.TOK_EMBED: _flat(flow.dh).T @ _flat(self.h)})  # [V, N] @ [N, D]
        flow.dh = matmul(flow.dh, self.table)  # [B, T, V] -> [B, T, D]


@dataclass(frozen=True)
class OutputProjRecord:
    cache: LinearCache

    def backward(self, flow: Flow) -> None:
        flow.dh, local = linear_backward(flow.dh, self.cache)  # [B, T, D]
        flow.add(names.OUT_PROJ, local)


def project_out(params: Params, config: Config, h: np.ndarray, *, tape: Tape | None = None) -> np.ndarray:
    """tokens: logits = h E^T (tied); continuous: y = h W_out + b_out."""
    record: Record
    if config.inputs == "tokens":
        table = params[names.TOK_EMBED]  # [V, D]
        out = matmul(h, table.T)  # [B, T, D] -> [B, T, V]
        record = TiedOutputRecord(h, table)
    else:
        out, cache = linear_forward(h, **names.OUT_PROJ.take(params))  # [B, T, D] -> [B, T, d_out]
        record = OutputProjRecord(cache)
    if tape is not None:
        tape.records.append(record)
    return out


# ---------------------------------------------------------------------------------------------
# Residual sub-layers (post-LN: x = LN(x + Dropout(sublayer(x))))
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionRecord:
    attn: names.Group
    norm: names.Group
    cross: bool  # keys and values from the encoder output: their gradient goes to flow.dmemory
    mha: AttentionCache
    gain: np.ndarray | None  # dropout on the sub-layer output
    ln: LayerNormCache
    position: names.Group | None = None  # windowed: the rel_bias group
    distance: np.ndarray | None = None  # [Tq, Tk] int, the bias column of each score
    bias_shape: tuple[int, ...] = ()  # [H, W] of the table

    def backward(self, flow: Flow) -> None:
        dsum, local = layer_norm_backward(flow.dh, self.ln)  # [B, Tq, D]
        flow.add(self.norm, local)
        dx, dkv, local = mha_backward(dropout_backward(dsum, self.gain), self.mha)
        d_bias = local.pop("bias", None)  # [B, H, Tq, Tk] gradient of the score term
        flow.add(self.attn, local)
        if self.position is not None and self.distance is not None and d_bias is not None:
            table = rel_bias_backward(d_bias, self.distance, self.bias_shape)
            flow.add(self.position, {"rel_bias": table})
        dx += dsum  # the residual path
        if self.cross:
            flow.dmemory = dkv if flow.dmemory is None else flow.dmemory + dkv
        else:
            dx += dkv  # self-attention: keys and values are x too
        flow.dh = dx


def rel_bias_backward(d_bias: np.ndarray, distance: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Gradient of the [H, W] bias table from the score gradient d_bias [B, H, Tq, Tk]: the sum,
    per head, over every score that read column r (distance == r). Scores outside the window have
    d_bias exactly 0 (p = 0 there), so their wrapped column index adds nothing."""
    n_heads, window = shape
    per_head = d_bias.sum(axis=0).reshape(n_heads, -1)  # [H, Tq * Tk]
    cols = distance.reshape(-1)  # [Tq * Tk] in [0, W)
    rows = [np.bincount(cols, weights=row, minlength=window) for row in per_head]  # H x [W] float64
    return np.stack(rows).astype(d_bias.dtype)  # [H, W]


def position_bias(params: Params, position: names.Group, distance: np.ndarray) -> np.ndarray:
    """rel_bias [H, W] gathered at the distances [Tq, Tk] -> [H, Tq, Tk], broadcast over the batch."""
    return params[position["rel_bias"]][:, distance]  # [H, Tq, Tk]


def attention_sublayer(
    x: np.ndarray,
    kv: np.ndarray,
    params: Params,
    attn: names.Group,
    norm: names.Group,
    config: Config,
    *,
    mask: np.ndarray | None,
    tape: Tape | None = None,
    position: names.Group | None = None,
    distance: np.ndarray | None = None,
) -> np.ndarray:
    """x [B, Tq, D] -> LN(x + Dropout(MHA(x, kv))) [B, Tq, D]; kv is x itself for
    self-attention, the encoder output [B, S, D] for cross-attention. position/distance
    (windowed self-attention): the bias group and the [Tq, Tk] distances it is read at."""
    bias = None if position is None or distance is None else position_bias(params, position, distance)
    a, c_attn = mha_forward(
        x, kv, **attn.take(params), n_heads=config.n_heads, mask=mask, bias=bias
    )  # [B, Tq, D]
    a, gain = (a, None) if tape is None else tape.drop(a)
    a += x  # a is a new array (projection or dropout output)
    y, c_ln = layer_norm_forward(a, **norm.take(params), eps=config.ln_eps)  # [B, Tq, D]
    if tape is not None:
        shape = () if position is None else tuple(params[position["rel_bias"]].shape)
        record = AttentionRecord(attn, norm, kv is not x, c_attn, gain, c_ln, position, distance, shape)
        tape.records.append(record)
    return y


Backward = Callable[[np.ndarray, Any], tuple[np.ndarray, Params]]  # (dy, cache) -> (dx, local grads)


@dataclass(frozen=True)
class ResidualRecord:
    """What the backward of LN(x + Dropout(F(x))) needs, for an F whose backward is
    `inner(dy, cache) -> (dx, local grads)` (each subclass's default): the layer norm's backward, the
    dropout's, F's, then the residual path. One body for every such sublayer (FFN, SSM mixer)."""

    group: names.Group  # F's parameters
    norm: names.Group
    cache: Any  # F's forward cache, as `inner` takes it
    gain: np.ndarray | None
    ln: LayerNormCache
    inner: Backward  # F's backward

    def backward(self, flow: Flow) -> None:
        dsum, local = layer_norm_backward(flow.dh, self.ln)  # [B, T, D]
        flow.add(self.norm, local)
        dx, local = self.inner(dropout_backward(dsum, self.gain), self.cache)
        flow.add(self.group, local)
        dx += dsum  # the residual path
        flow.dh = dx


@dataclass(frozen=True)
class FeedForwardRecord(ResidualRecord):
    inner: Backward = ffn_backward


@dataclass(frozen=True)
class SsmRecord(ResidualRecord):
    inner: Backward = ssm_backward


def _residual_sublayer(
    x: np.ndarray,
    params: Params,
    group: names.Group,
    norm: names.Group,
    config: Config,
    tape: Tape | None,
    inner: Callable[..., tuple[np.ndarray, Any]],
    record: Callable[..., ResidualRecord],
) -> np.ndarray:
    """x [B, T, D] -> LN(x + Dropout(inner(x, **group's params))) [B, T, D]; with a tape, one
    `record` (whose backward is inner's) is appended."""
    f, cache = inner(x, **group.take(params))  # [B, T, D]
    f, gain = (f, None) if tape is None else tape.drop(f)
    f += x  # f is a new array (projection or dropout output)
    y, c_ln = layer_norm_forward(f, **norm.take(params), eps=config.ln_eps)  # [B, T, D]
    if tape is not None:
        tape.records.append(record(group, norm, cache, gain, c_ln))
    return y


def ffn_sublayer(
    x: np.ndarray,
    params: Params,
    ffn: names.Group,
    norm: names.Group,
    config: Config,
    *,
    tape: Tape | None = None,
) -> np.ndarray:
    """x [B, T, D] -> LN(x + Dropout(FFN(x))) [B, T, D]."""
    return _residual_sublayer(x, params, ffn, norm, config, tape, ffn_forward, FeedForwardRecord)


def ssm_sublayer(
    x: np.ndarray,
    params: Params,
    mixer: names.Group,
    norm: names.Group,
    config: Config,
    *,
    tape: Tape | None = None,
) -> np.ndarray:
    """x [B, T, D] -> LN(x + Dropout(SSM(x))) [B, T, D]: the state-space mixer where
    self-attention sits (model/ssm.py), the parallel (scan) form."""
    return _residual_sublayer(x, params, mixer, norm, config, tape, ssm_forward, SsmRecord)


# ---------------------------------------------------------------------------------------------
# Layers and stacks
# ---------------------------------------------------------------------------------------------


def encoder_layer(
    x: np.ndarray,
    params: Params,
    layer: names.Layer,
    config: Config,
    *,
    mask: np.ndarray | None,
    tape: Tape | None = None,
) -> np.ndarray:
    x = attention_sublayer(
        x, x, params, layer.self_attn, layer.self_attn_norm, config, mask=mask, tape=tape
    )  # [B, S, D]
    return ffn_sublayer(x, params, layer.ffn, layer.ffn_norm, config, tape=tape)  # [B, S, D]


def decoder_layer(
    x: np.ndarray,
    params: Params,
    layer: names.Layer,
    config: Config,
    *,
    self_mask: np.ndarray | None,
    memory: np.ndarray | None = None,
    memory_mask: np.ndarray | None = None,
    tape: Tape | None = None,
    distance: np.ndarray | None = None,
) -> np.ndarray:
    x = attention_sublayer(
        x,
        x,
        params,
        layer.self_attn,
        layer.self_attn_norm,
        config,
        mask=self_mask,
        tape=tape,
        position=layer.self_attn_position,
        distance=distance,
    )  # [B, T, D]
    if layer.cross_attn is not None and layer.cross_attn_norm is not None:
        if memory is None:
            raise ValueError("decode() of an encoder-decoder model needs memory=encode(params, config, src)")
        x = attention_sublayer(
            x, memory, params, layer.cross_attn, layer.cross_attn_norm, config, mask=memory_mask, tape=tape
        )  # [B, T, D]
    return ffn_sublayer(x, params, layer.ffn, layer.ffn_norm, config, tape=tape)  # [B, T, D]


def source_mask(src_valid: np.ndarray | None, tq: int) -> np.ndarray | None:
    """src_valid [B, S] bool (True = real token) -> [B, 1, Tq, S] mask over source keys."""
    if src_valid is None:
        return None
    return src_valid[:, None, None, :] & np.ones((1, 1, tq, 1), dtype=bool)  # [B, 1, Tq, S]


def encode(
    params: Params,
    config: Config,
    src: np.ndarray,
    *,
    src_valid: np.ndarray | None = None,
    tape: Tape | None = None,
) -> np.ndarray:
    """Encoder stack: src int [B, S] -> memory [B, S, D]. Padded source keys are masked out."""
    if config.arch != "encoder-decoder":
        raise ValueError("encode() is for encoder-decoder models; this config is decoder-only")
    h = _dropout(embed(params, config, src, tape=tape), tape)  # [B, S, D]
    mask = source_mask(src_valid, src.shape[1])
    for layer in names.encoder_layers(config):
        h = encoder_layer(h, params, layer, config, mask=mask, tape=tape)
    return h


@dataclass(frozen=True)
class MemoryRecord:
    """The encoder output: the decoder's backward pass ends here and the encoder's starts from
    the gradient every cross-attention sent to the memory."""

    def backward(self, flow: Flow) -> None:
        if flow.dmemory is None:  # pragma: no cover - forward records cross-attention after this
            raise AssertionError("no cross-attention gradient reached the encoder output")
        flow.dh, flow.dmemory = flow.dmemory, None


def decode(
    params: Params,
    config: Config,
    x: np.ndarray,
    *,
    memory: np.ndarray | None = None,
    src_valid: np.ndarray | None = None,
    tape: Tape | None = None,
) -> np.ndarray:
    """Causal decoder stack plus output projection: x [B, T] tokens or [B, T, d_in] -> [B, T, V|d_out].
    Windowed models take any T (no positional table): the window mask and relative bias."""
    t = x.shape[1]
    if config.block == "ssm":  # no positions, no cache: any length
        h = _dropout(embed(params, config, x, tape=tape), tape)  # [B, T, D]
        for mixer, mixer_norm, ffn, ffn_norm in names.ssm_layers(config):
            h = ssm_sublayer(h, params, mixer, mixer_norm, config, tape=tape)  # [B, T, D]
            h = ffn_sublayer(h, params, ffn, ffn_norm, config, tape=tape)  # [B, T, D]
        return project_out(params, config, h, tape=tape)
    if t > config.max_len and config.window is None:
        raise ValueError(f"sequence length {t} exceeds max_len {config.max_len} of this model")
    h = _dropout(embed(params, config, x, tape=tape), tape)  # [B, T, D]
    distance = None
    if config.window is None:
        self_mask = causal_mask(t)  # [T, T], position t never sees t+1..
    else:
        self_mask = window_mask(t, config.window)  # [T, T], i - W < j <= i
        distance = window_distances(t, config.window)  # [T, T]
    memory_mask = source_mask(src_valid, t) if memory is not None else None
    for layer in names.decoder_layers(config):
        h = decoder_layer(
            h,
            params,
            layer,
            config,
            self_mask=self_mask,
            memory=memory,
            memory_mask=memory_mask,
            tape=tape,
            distance=distance,
        )
    return project_out(params, config, h, tape=tape)


def forward(
    params: Params,
    config: Config,
    x: np.ndarray,
    *,
    src: np.ndarray | None = None,
    src_valid: np.ndarray | None = None,
    tape: Tape | None = None,
) -> np.ndarray:
    """Full-sequence pass. Decoder-only: forward(params, cfg, x). Encoder-decoder:
    forward(params, cfg, tgt_in, src=src) (teacher forcing). Returns [B, T, V] or [B, T, d_out].

    With a tape (training, `model.grad.forward_train`), dropout is applied at the tape's rate
    and every block records what its backward pass needs; without one, dropout is identity."""
    if config.arch == "encoder-decoder":
        if src is None:
            raise ValueError("encoder-decoder forward needs src=... (source tokens [B, S])")
        memory = encode(params, config, src, src_valid=src_valid, tape=tape)  # [B, S, D]
        if tape is not None:
            tape.records.append(MemoryRecord())
        return decode(params, config, x, memory=memory, src_valid=src_valid, tape=tape)
    if src is not None:
        raise ValueError("src given to a decoder-only model; it takes one input sequence")
    return decode(params, config, x, tape=tape)
