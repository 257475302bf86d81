"""Foreign models exported by torch.onnx (the TorchScript exporter, `dynamo=False`: the dynamo
exporter needs onnxscript), as users bring them: dynamic batch and time axes, int64 token ids, an
attention mask, a KV-cache pair with past_key_values.N.key / present.N.key (the HF convention).

    export_gpt(folder, bug)    a one-layer GPT: model.onnx (input_ids, attention_mask -> logits,
                               present.0.key/value) and step.onnx (input_ids [B, 1], attention_mask
                               [B, P+1], past_key_values.0.key/value [B, 1, P, D] -> the same)
        bug=None               correct
        "off_by_one"           the step graph's position is P + 1, not P
    export_baked(path)         x [B, T, F] -> y, declared dynamic in T, but the forward reads the
                               length with int(x.shape[1]): the trace length (8) is baked into a
                               Reshape, the bug of the issue
    export_signal(path)        x [B, T, F] -> tanh(cumsum_t(x) W), correct

Importing this module needs torch (tests importorskip it first).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

V, D, ROWS, F = 13, 8, 40, 3


class TinyGPT(torch.nn.Module):
    def __init__(self, bug: str | None = None) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.bug = bug
        self.tok = torch.nn.Parameter(torch.randn(V, D, generator=g))
        self.pos = torch.nn.Parameter(torch.randn(ROWS, D, generator=g))
        self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D) for _ in range(4))
        self.out = torch.nn.Linear(D, V)
        for m in (self.q, self.k, self.v, self.o, self.out):
            torch.nn.init.normal_(m.weight, 0, D**-0.5, generator=g)

    def forward(self, input_ids, attention_mask, past_key=None, past_value=None):
        t = input_ids.shape[1]
        p = 0 if past_key is None else past_key.shape[2]
        offset = p + 1 if (self.bug == "off_by_one" and past_key is not None) else p
        positions = torch.arange(t) + offset  # [T]
        h = self.tok[input_ids] + self.pos[positions]  # [B, T, D]
        q, k, v = self.q(h), self.k(h).unsqueeze(1), self.v(h).unsqueeze(1)  # [B, T, D], [B, 1, T, D]
        if past_key is not None:
            k = torch.cat([past_key, k], dim=2)  # [B, 1, P+T, D]
            v = torch.cat([past_value, v], dim=2)
        s = q.unsqueeze(1) @ k.transpose(-1, -2) * D**-0.5  # [B, 1, T, P+T]
        keys = k.shape[2]
        causal = torch.ones(t, keys, dtype=torch.bool).tril(diagonal=keys - t)  # [T, P+T]
        allowed = causal & attention_mask.bool()[:, None, None, :]  # [B, 1, T, P+T]
        s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
        a = (s.softmax(-1) @ v).squeeze(1)  # [B, T, D]
        logits = self.out(h + self.o(a))  # [B, T, V]
        return logits, k, v


class Step(torch.nn.Module):
    def __init__(self, gpt: TinyGPT) -> None:
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids, attention_mask, past_key, past_value):
        return self.gpt(input_ids, attention_mask, past_key, past_value)


def _export(module, args, path: Path, inputs, outputs, axes) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            dynamo=False,
            opset_version=17,
        )
    return path


def export_gpt(folder: Path, bug: str | None = None) -> tuple[Path, Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    gpt = TinyGPT(bug).eval()
    ids, mask = torch.randint(0, V, (2, 5)), torch.ones(2, 5, dtype=torch.int64)
    full = _export(
        gpt,
        (ids, mask),
        folder / "model.onnx",
        ["input_ids", "attention_mask"],
        ["logits", "present.0.key", "present.0.value"],
        {
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            "logits": {0: "batch", 1: "sequence"},
            "present.0.key": {0: "batch", 2: "sequence"},
            "present.0.value": {0: "batch", 2: "sequence"},
        },
    )
    past = torch.zeros(2, 1, 4, D)
    step = _export(
        Step(gpt),
        (ids[:, :1], torch.ones(2, 5, dtype=torch.int64), past, past),
        folder / "step.onnx",
        ["input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"],
        ["logits", "present.0.key", "present.0.value"],
        {
            "input_ids": {0: "batch"},
            "attention_mask": {0: "batch", 1: "total"},
            "past_key_values.0.key": {0: "batch", 2: "past"},
            "past_key_values.0.value": {0: "batch", 2: "past"},
            "logits": {0: "batch"},
            "present.0.key": {0: "batch", 2: "total"},
            "present.0.value": {0: "batch", 2: "total"},
        },
    )
    return full, step


class Baked(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, F * 2).reshape(F, 2))

    def forward(self, x):
        b, t = x.shape[0], int(x.shape[1])  # int(): the tracer records the trace length as a constant
        h = x.reshape(b, t * F).reshape(b, t, F)
        return torch.tanh(h.cumsum(1) @ self.w)


class Signal(Baked):
    def forward(self, x):
        return torch.tanh(x.cumsum(1) @ self.w)


def export_baked(path: Path) -> Path:
    axes = {"x": {0: "B", 1: "T"}, "y": {0: "B", 1: "T"}}
    return _export(Baked().eval(), (torch.zeros(1, 8, F),), Path(path), ["x"], ["y"], axes)


def export_signal(path: Path) -> Path:
    axes = {"x": {0: "B", 1: "T"}, "y": {0: "B", 1: "T"}}
    return _export(Signal().eval(), (torch.zeros(1, 8, F),), Path(path), ["x"], ["y"], axes)
