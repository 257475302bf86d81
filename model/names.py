"""Parameter names: the one place that spells them.

Every parameter of the model lives in a flat dict keyed by these names, and the same strings are
the ONNX initializer names of the exported graphs and the keys of `weights.npz` in checkpoints
and artifacts. They are therefore a file format: changing one breaks every saved model. They are
composed here and nowhere else, so a reader finds the scheme in one place and a typo cannot
create a second spelling.

The scheme (post-LN layers: each sub-layer is followed by its own norm):

    tok_embed                              [V, D]   token models: shared embedding, tied output
    in_proj.{w,b}   out_proj.{w,b}                  continuous models: linear in / linear out
    enc.{i}.self_attn.{w_q,b_q,w_k,b_k,w_v,b_v,w_o,b_o}   enc.{i}.ln1.{g,b}
    enc.{i}.ffn.{w1,b1,w2,b2}                             enc.{i}.ln2.{g,b}
    dec.{i}.self_attn.{...}                               dec.{i}.ln1.{g,b}
    dec.{i}.cross_attn.{...}                              dec.{i}.ln2.{g,b}   (encoder-decoder)
    dec.{i}.ffn.{...}                                     dec.{i}.ln2.{g,b}   decoder-only
                                                          dec.{i}.ln3.{g,b}   encoder-decoder
    dec.{i}.self_attn.rel_bias   [H, W]  windowed models (config.window = W): the relative-position
                                         bias of the self-attention scores, column r for distance r

The one irregularity is the decoder's last norm: `ln2` in a decoder-only model, `ln3` when a
cross-attention sub-layer (with its own `ln2`) sits in between. `Layer.ffn_norm` hides it.

API (pure Python, no numpy; the exporter and the runtime backends can use it as they are):

    Group(prefix, leaves)     a named set of weights, e.g. Group("dec.0.ffn", FFN_NAMES)
        group["w1"]           -> "dec.0.ffn.w1" (a KeyError names the leaves that exist)
        group.names()         -> ("dec.0.ffn.w1", "dec.0.ffn.b1", ...), in leaf order
        group.take(params)    -> {"w1": params["dec.0.ffn.w1"], ...}: keyword weights for a
                                 layer function, ffn(x, **group.take(params))
        group.derived("s")    -> "dec.0.ffn.s": an exporter constant derived from the group
                                 (folded biases, fused QKV), never a parameter
    Layer                     one layer's groups: self_attn, self_attn_position (windowed models,
                              else None), self_attn_norm, cross_attn (or None), cross_attn_norm
                              (or None), ffn, ffn_norm; layer.groups() in parameter order
    encoder_layer(i), decoder_layer(i, cross=..., windowed=...)   one layer's names
    encoder_layers(config), decoder_layers(config)       every layer of a Config
    input_group(config), output_group(config)            TOK_EMBED's group or in_proj / out_proj
    parameter_names(config)   every name, in the order of `transformer.parameter_shapes` (the
                              order of the ONNX initializers)
    parameter_groups(config)  every Group once, in that order
    leaf(name)                "dec.0.ln1.g" -> "g"

Switching a site over: where runtime/backends/numpy.py builds a layer's weights from
f"dec.{i}" and ("ln1", "ln2", "ln3"), `layer = decoder_layer(i, cross=...)` gives
`layer.self_attn.take(p)`, `layer.cross_attn.take(p)` (None-checked), `layer.ffn.take(p)` and
the norms in order `layer.self_attn_norm`, `layer.cross_attn_norm`, `layer.ffn_norm`; where
export/graphs.py passes prefixes ("dec.0.self_attn", "ln2"), `layer.self_attn.prefix` and
`layer.ffn_norm.prefix` are the same strings and `group["w_q"]` the initializer name.

Not real-time code: build the names once, at load, and keep the dicts `take` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # only for annotations: names.py must stay importable on its own
    from .config import Config

TOK_EMBED = "tok_embed"
ATTN_NAMES = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")
FFN_NAMES = ("w1", "b1", "w2", "b2")
NORM_NAMES = ("g", "b")
LINEAR_NAMES = ("w", "b")
POSITION_NAMES = ("rel_bias",)  # a windowed self-attention's relative-position bias [H, W]


@dataclass(frozen=True)
class Group:
    """The weights of one layer function under one prefix: `prefix.leaf` for each leaf."""

    prefix: str
    leaves: tuple[str, ...]

    def __getitem__(self, leaf: str) -> str:
        if leaf not in self.leaves:
            raise KeyError(f"{self.prefix!r} has no weight {leaf!r}; its weights are {self.leaves}")
        return self.prefix + "." + leaf if self.prefix else leaf

    def names(self) -> tuple[str, ...]:
        return tuple(self[leaf] for leaf in self.leaves)

    def take(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword weights {leaf: params[prefix.leaf]} for a layer function."""
        return {leaf: params[self[leaf]] for leaf in self.leaves}

    def derived(self, suffix: str) -> str:
        """The name of a constant the exporter derives from this group's weights (a folded bias,
        fused projections): `prefix.suffix`. Never a parameter name: `suffix` is not a leaf."""
        if suffix in self.leaves:
            raise ValueError(f"{suffix!r} is a weight of {self.prefix!r}, not a derived constant")
        return f"{self.prefix}.{suffix}" if self.prefix else suffix


IN_PROJ = Group("in_proj", LINEAR_NAMES)
OUT_PROJ = Group("out_proj", LINEAR_NAMES)
EMBEDDING = Group("", (TOK_EMBED,))  # EMBEDDING[TOK_EMBED] == "tok_embed"


@dataclass(frozen=True)
class Layer:
    """One encoder or decoder layer: each sub-layer's weights and the norm that follows it."""

    prefix: str  # "enc.0", "dec.1"
    self_attn: Group
    self_attn_norm: Group
    cross_attn: Group | None
    cross_attn_norm: Group | None
    ffn: Group
    ffn_norm: Group
    self_attn_position: Group | None = None  # windowed: Group("dec.i.self_attn", ("rel_bias",))

    def groups(self) -> tuple[Group, ...]:
        """In parameter order: self-attention, [its position bias], its norm, [cross-attention, its
        norm], ffn, its norm."""
        cross = (
            ()
            if self.cross_attn is None or self.cross_attn_norm is None
            else (self.cross_attn, self.cross_attn_norm)
        )
        position = () if self.self_attn_position is None else (self.self_attn_position,)
        return (self.self_attn, *position, self.self_attn_norm, *cross, self.ffn, self.ffn_norm)


def _layer(prefix: str, *, cross: bool, windowed: bool = False) -> Layer:
    def group(name: str, leaves: tuple[str, ...]) -> Group:
        return Group(f"{prefix}.{name}", leaves)

    return Layer(
        prefix=prefix,
        self_attn=group("self_attn", ATTN_NAMES),
        self_attn_position=group("self_attn", POSITION_NAMES) if windowed else None,
        self_attn_norm=group("ln1", NORM_NAMES),
        cross_attn=group("cross_attn", ATTN_NAMES) if cross else None,
        cross_attn_norm=group("ln2", NORM_NAMES) if cross else None,
        ffn=group("ffn", FFN_NAMES),
        ffn_norm=group("ln3" if cross else "ln2", NORM_NAMES),
    )


def encoder_layer(i: int) -> Layer:
    return _layer(f"enc.{i}", cross=False)


def decoder_layer(i: int, *, cross: bool, windowed: bool = False) -> Layer:
    """cross=True for the decoder layers of an encoder-decoder model; windowed=True for a model
    with a sliding window (config.window), whose self-attention has a relative-position bias."""
    return _layer(f"dec.{i}", cross=cross, windowed=windowed)


@lru_cache(maxsize=64)  # Config is frozen (hashable); the forward asks on every call
def encoder_layers(config: "Config") -> tuple[Layer, ...]:
    return tuple(encoder_layer(i) for i in range(config.n_enc_layers))


@lru_cache(maxsize=64)
def decoder_layers(config: "Config") -> tuple[Layer, ...]:
    cross = config.arch == "encoder-decoder"
    windowed = config.window is not None
    return tuple(decoder_layer(i, cross=cross, windowed=windowed) for i in range(config.n_layers))


def input_group(config: "Config") -> Group:
    return EMBEDDING if config.inputs == "tokens" else IN_PROJ


def output_group(config: "Config") -> Group:
    """Token models project out with the tied embedding; continuous ones with out_proj."""
    return EMBEDDING if config.inputs == "tokens" else OUT_PROJ


def parameter_groups(config: "Config") -> tuple[Group, ...]:
    """Every group once, in parameter order (the tied embedding is not repeated)."""
    io = (EMBEDDING,) if config.inputs == "tokens" else (IN_PROJ, OUT_PROJ)
    layers = encoder_layers(config) + decoder_layers(config)
    return io + tuple(group for layer in layers for group in layer.groups())


def parameter_names(config: "Config") -> tuple[str, ...]:
    return tuple(name for group in parameter_groups(config) for name in group.names())


def leaf(name: str) -> str:
    """The last component of a parameter name: "dec.0.ln1.g" -> "g"."""
    return name.rsplit(".", 1)[-1]
