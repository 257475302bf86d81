"""Model configuration: the blueprint, kept apart from weights and run state (llama2.c style).

A frozen dataclass validated on construction; every error names the bad field and the fix.
Presets follow "Attention Is All You Need" (Vaswani et al. 2017), Table 3: base (d_model 512,
h 8, d_ff 2048, 6+6 layers) and big (1024, 16, 4096), both with a 37000-token vocabulary shared
between source and target and tied to the output projection.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tickformer import validation
from tickformer.errors import ConfigError

Arch = Literal["decoder", "encoder-decoder"]
InputKind = Literal["tokens", "continuous"]
Block = Literal["attention", "ssm"]

ARCHS = ("decoder", "encoder-decoder")
INPUT_KINDS = ("tokens", "continuous")
BLOCKS = ("attention", "ssm")
DEFAULT_D_STATE = 16  # the state size `--block ssm` uses unless told (Mamba's default N)
MAX_D_STATE = 1024  # states per channel accepted (Mamba uses 16, S4 up to 256): the state is L * D * N floats
# Fields added after the format was fixed: left out of to_dict at their default, so the
# config.json of every model that does not use them stays byte-identical.
_OPTIONAL_DEFAULTS = {"block": "attention", "d_state": 0}


@dataclass(frozen=True)
class Config:
    """Architecture of one Transformer.

    arch: "decoder" (causal, decoder-only) or "encoder-decoder" (the paper's).
    inputs: "tokens" (embedding scaled by sqrt(d_model), output tied to the embedding) or
        "continuous" (linear in from d_in, linear out to d_out) for control signals.
    n_layers: decoder layers; n_enc_layers: encoder layers (encoder-decoder only, else 0).
    max_len: longest sequence the positional table and KV cache are sized for (with a window: the
        training sequence length; the stream itself is unbounded).
    window: None (every self-attention layer sees all earlier positions) or W, 1 <= W <= max_len:
        sliding-window attention, each position attends to the last W positions (itself
        included), with a learned relative-position bias per layer and head instead of the
        sinusoidal table (docs/streaming.md). Decoder-only.
    block: the sequence mixer of every decoder layer: "attention" (the paper's) or "ssm" (the
        selective diagonal state-space mixer of model/ssm.py, decoder-only, no positional
        encoding).
    d_state: states per channel of the SSM mixer (N); 0 for attention.
    """

    arch: Arch = "decoder"
    inputs: InputKind = "continuous"
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 2
    n_enc_layers: int = 0
    vocab_size: int = 0
    d_in: int = 0
    d_out: int = 0
    max_len: int = 256
    dropout: float = 0.1
    ln_eps: float = 1e-5
    window: int | None = None
    block: Block = "attention"
    d_state: int = 0

    def __post_init__(self) -> None:
        def fail(msg: str) -> None:
            raise ConfigError(msg)

        if self.arch not in ARCHS:
            fail(f"arch {self.arch!r} is not one of {ARCHS}")
        if self.inputs not in INPUT_KINDS:
            fail(f"inputs {self.inputs!r} is not one of {INPUT_KINDS}")
        for name in ("d_model", "n_heads", "d_ff", "n_layers", "max_len"):
            validation.positive_int(getattr(self, name), name)
        if self.d_model % self.n_heads:
            fail(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"pick n_heads among the divisors of d_model"
            )
        if self.arch == "encoder-decoder":
            validation.positive_int(
                self.n_enc_layers, "n_enc_layers", hint="an encoder-decoder needs >= 1 encoder layer"
            )
            if self.inputs != "tokens":
                fail("encoder-decoder models take tokens; use arch='decoder' for continuous inputs")
        elif self.n_enc_layers != 0:
            fail(f"n_enc_layers={self.n_enc_layers} given for a decoder-only model; set it to 0")
        if self.inputs == "tokens":
            validation.integer(
                self.vocab_size, "vocab_size", min_value=2, hint="token models need at least two tokens"
            )
            if not all(validation.is_int(v) and v == 0 for v in (self.d_in, self.d_out)):  # [] is falsy too
                fail("d_in/d_out are for continuous inputs; leave them 0 for a token model")
        else:
            for name in ("d_in", "d_out"):
                validation.positive_int(
                    getattr(self, name), name, hint="continuous models need d_in >= 1 and d_out >= 1"
                )
            if not (validation.is_int(self.vocab_size) and self.vocab_size == 0):  # [] or "" are falsy too
                fail("vocab_size is for token models; leave it 0 for continuous inputs")
        if self.block not in BLOCKS:
            fail(f"block {self.block!r} is not one of {BLOCKS}")
        if self.block == "ssm":
            if self.arch != "decoder":
                fail("block 'ssm' is for decoder-only models; use arch='decoder' (or block='attention')")
            validation.integer(
                self.d_state,
                "d_state",
                min_value=1,
                max_value=MAX_D_STATE,
                hint=f"an SSM block needs 1..{MAX_D_STATE} states per channel, e.g. {DEFAULT_D_STATE}",
            )
            if self.window is not None:
                fail(
                    "window is for attention blocks; an ssm block's state is fixed already: leave window unset"
                )
        elif self.d_state != 0:
            fail(f"d_state={self.d_state} given for an attention block; set it to 0 (or block='ssm')")
        validation.real(self.dropout, "dropout", min_value=0.0, max_value=1.0, exclude_max=True)
        validation.positive_real(self.ln_eps, "ln_eps")
        if self.window is not None:
            validation.integer(
                self.window,
                "window",
                min_value=1,
                max_value=self.max_len,
                hint=f"a window of 1..max_len positions (max_len {self.max_len} is the training sequence "
                f"length, which must hold a full window), e.g. window={min(32, self.max_len)}",
            )
            if self.arch != "decoder":
                fail(
                    "window is for decoder-only models (unbounded streams); an encoder-decoder decodes "
                    "bounded sequences: leave window unset"
                )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def windowed(self) -> bool:
        return self.window is not None

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict; `window` only when set and `block`/`d_state` only for an ssm
        block, so a model without them is written exactly as before they existed (and a reader
        that predates them refuses such a model, at its unknown field, instead of running it as
        something else)."""
        out = dataclasses.asdict(self)
        if self.window is None:
            del out["window"]
        for name, default in _OPTIONAL_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Config":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config fields {unknown}; known fields are {sorted(known)}")
        return cls(**data)


def _read_presets(path: Path) -> dict[str, Config]:
    """The named configurations of `path` (a TOML table per preset), each a validated Config."""
    with path.open("rb") as f:
        tables = tomllib.load(f)
    return {name: Config.from_dict(fields) for name, fields in tables.items()}


# Data, not code: model/presets.toml (read once, at import).
PRESETS: dict[str, Config] = _read_presets(Path(__file__).with_name("presets.toml"))


def preset(name: str) -> Config:
    """Return the named preset; the error lists the names that exist."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}") from None


def parameter_count(config: Config) -> int:
    """Number of trainable scalars, counted from the architecture (tied embedding counted once).

    An SSM block counts its mixer in place of the self-attention (model/ssm.py, ssm_shapes).
    Paper-base gives 63,082,496 and paper-big 214,245,376 (the paper's Table 3 rounds to 65M/213M).
    """
    d, f = config.d_model, config.d_ff
    attention = 4 * (d * d + d)  # W^Q, W^K, W^V, W^O with biases
    if config.block == "ssm":
        n = config.d_state
        # W_delta, b_delta, W_B, b_B, W_C, b_C, a_log, d_skip, W_o, b_o (model/ssm.py)
        attention = (d * d + d) + 2 * (d * n + n) + d * n + d + (d * d + d)
    ffn = d * f + f + f * d + d
    norm = 2 * d
    total = 0
    if config.inputs == "tokens":
        total += config.vocab_size * d  # shared embedding, tied to the output projection
    else:
        total += config.d_in * d + d + d * config.d_out + config.d_out
    total += config.n_enc_layers * (attention + ffn + 2 * norm)
    cross = config.arch == "encoder-decoder"
    total += config.n_layers * (attention * (2 if cross else 1) + ffn + norm * (3 if cross else 2))
    if config.window is not None:
        total += config.n_layers * config.n_heads * config.window  # relative-position bias tables
    return total
