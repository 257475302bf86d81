"""The PyTorch comparator: the same decoder-only Transformer, with OUR weights, in idiomatic torch.

Benchmark-only. torch is never a dependency of the package; `make bench` installs the CPU wheel
(`pip install torch==2.13.0`) and every benchmark that needs it skips with the reason when the
import fails.

What a torch user would write instead of tickformer: `nn.Linear` layers, `F.layer_norm`,
`F.scaled_dot_product_attention` (causal for the full pass), post-LN residual blocks
(Vaswani et al. 2017, sections 3.1-3.5), sinusoidal positions, and for generation a KV cache
preallocated to max_len (the HF `StaticCache` layout) whose step attends over the pos+1 keys
written so far. Weights come from tickformer's flat numpy parameter dict (names as in
`tickformer.model.transformer`), so outputs equal `tickformer.model.forward` within fp32
rounding; `benchmarks/test_torch_reference.py` checks that before any number is reported.

Training: the same module, MSE loss, `torch.optim.Adam(betas=(0.9, 0.98), eps=1e-9)`, gradient
clipping by global norm, as the numpy trainer does.

Decoder-only, continuous inputs only (the `control` preset and its scaled variants).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from harness import fp32_tolerance  # noqa: F401  (re-exported: the bound the checks use)
from torch import nn

from tickformer.model import Config
from tickformer.model.layers import positional_encoding


def _linear_from(w: np.ndarray, b: np.ndarray) -> nn.Linear:
    """nn.Linear holding our (w [n_in, n_out], b [n_out]); torch stores weight as [n_out, n_in]."""
    layer = nn.Linear(w.shape[0], w.shape[1])
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))  # [n_out, n_in]
        layer.bias.copy_(torch.from_numpy(b))
    return layer


def _norm_from(g: np.ndarray, b: np.ndarray, eps: float) -> nn.LayerNorm:
    norm = nn.LayerNorm(g.shape[0], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(torch.from_numpy(g))
        norm.bias.copy_(torch.from_numpy(b))
    return norm


class DecoderLayer(nn.Module):
    """x = LN1(x + SelfAttn(x)); x = LN2(x + FFN(x)) (post-LN, as in the paper)."""

    def __init__(self, params: dict[str, np.ndarray], prefix: str, config: Config) -> None:
        super().__init__()
        a = f"{prefix}.self_attn"
        self.n_heads = config.n_heads
        self.q = _linear_from(params[f"{a}.w_q"], params[f"{a}.b_q"])
        self.k = _linear_from(params[f"{a}.w_k"], params[f"{a}.b_k"])
        self.v = _linear_from(params[f"{a}.w_v"], params[f"{a}.b_v"])
        self.o = _linear_from(params[f"{a}.w_o"], params[f"{a}.b_o"])
        self.ln1 = _norm_from(params[f"{prefix}.ln1.g"], params[f"{prefix}.ln1.b"], config.ln_eps)
        self.ff1 = _linear_from(params[f"{prefix}.ffn.w1"], params[f"{prefix}.ffn.b1"])
        self.ff2 = _linear_from(params[f"{prefix}.ffn.w2"], params[f"{prefix}.ffn.b2"])
        self.ln2 = _norm_from(params[f"{prefix}.ln2.g"], params[f"{prefix}.ln2.b"], config.ln_eps)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)  # [B, T, D] -> [B, H, T, dh]

    def finish(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        b, h, t, dh = att.shape
        att = att.transpose(1, 2).reshape(b, t, h * dh)  # [B, H, T, dh] -> [B, T, D]
        x = self.ln1(x + self.o(att))  # [B, T, D]
        return self.ln2(x + self.ff2(F.relu(self.ff1(x))))  # [B, T, D]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Full causal pass: x [B, T, D] -> [B, T, D]."""
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))  # [B, H, T, dh]
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, T, dh]
        return self.finish(x, att)

    def step(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: int) -> torch.Tensor:
        """One position: x [B, 1, D]; caches [B, H, max_len, dh] written in place at `pos`;
        attends over keys 0..pos (no mask needed: every written key is in the past)."""
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))  # [B, H, 1, dh]
        k_cache[:, :, pos : pos + 1] = k
        v_cache[:, :, pos : pos + 1] = v
        att = F.scaled_dot_product_attention(
            q, k_cache[:, :, : pos + 1], v_cache[:, :, : pos + 1]
        )  # [B, H, 1, dh]
        return self.finish(x, att)


class TorchDecoder(nn.Module):
    """Decoder-only, continuous-input Transformer built from tickformer's numpy parameters."""

    def __init__(self, params: dict[str, np.ndarray], config: Config) -> None:
        super().__init__()
        if config.arch != "decoder" or config.inputs != "continuous":
            raise ValueError(
                f"the torch comparator covers decoder-only continuous models; got arch={config.arch!r}, "
                f"inputs={config.inputs!r}"
            )
        self.config = config
        self.in_proj = _linear_from(params["in_proj.w"], params["in_proj.b"])
        self.out_proj = _linear_from(params["out_proj.w"], params["out_proj.b"])
        self.layers = nn.ModuleList(DecoderLayer(params, f"dec.{i}", config) for i in range(config.n_layers))
        self.register_buffer("pe", torch.from_numpy(positional_encoding(config.max_len, config.d_model)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Full pass: x [B, T, d_in] -> y [B, T, d_out]."""
        t = x.shape[1]
        h = self.in_proj(x) + self.pe[:t]  # [B, T, D]
        for layer in self.layers:
            h = layer(h)
        return self.out_proj(h)  # [B, T, d_out]

    def new_cache(self, batch: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """One (k, v) pair per layer, [B, H, max_len, dh], allocated once."""
        c = self.config
        shape = (batch, c.n_heads, c.max_len, c.d_head)
        return [(torch.zeros(shape), torch.zeros(shape)) for _ in range(c.n_layers)]

    def step(self, x: torch.Tensor, cache: list[tuple[torch.Tensor, torch.Tensor]], pos: int) -> torch.Tensor:
        """One position pos (0-based): x [B, 1, d_in] -> y [B, 1, d_out]; writes the cache at pos."""
        h = self.in_proj(x) + self.pe[pos : pos + 1]  # [B, 1, D]
        for layer, (k_cache, v_cache) in zip(self.layers, cache):
            h = layer.step(h, k_cache, v_cache, pos)
        return self.out_proj(h)  # [B, 1, d_out]


def build(params: dict[str, np.ndarray], config: Config) -> TorchDecoder:
    """The comparator in eval mode (dropout is absent: the control preset has dropout 0)."""
    return TorchDecoder(params, config).eval()


def adam(model: nn.Module, lr: float = 1e-3) -> torch.optim.Adam:
    """The paper's Adam (beta1 0.9, beta2 0.98, eps 1e-9); `foreach` lets torch pick its fast path."""
    return torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)


def train_step(
    model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, clip: float = 1.0
) -> float:
    """One optimisation step: MSE loss, backward, clip the global gradient norm, Adam update."""
    opt.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return float(loss.detach())
