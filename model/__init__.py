"""The numpy reference Transformer (Vaswani et al. 2017): config, the one attention operator,
layers, and the decoder-only / encoder-decoder stacks. Numpy only."""

from .attention import SoftmaxState, attention, attention_weights, causal_mask, merge
from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from .config import PRESETS, Config, parameter_count, preset
from .transformer import decode, encode, forward, init_params, parameter_shapes

__all__ = [
    "attention",
    "attention_weights",
    "causal_mask",
    "merge",
    "SoftmaxState",
    "Checkpoint",
    "load_checkpoint",
    "save_checkpoint",
    "Config",
    "PRESETS",
    "parameter_count",
    "preset",
    "decode",
    "encode",
    "forward",
    "init_params",
    "parameter_shapes",
]
