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

Recurrent models, as issue 37's user made them (make_torch_fixtures.py writes them to fixtures/):

    export_gru(folder, bug)    a GRU exported as two graphs: model.onnx x [B, T, F] -> y (no h_n:
                               an empty prefill) and step.onnx (x [B, 1, F], h [1, B, H]) -> (y,
                               h_n), TorchScript exporter
        "learned_h0"           the full graph starts from a learned initial state, the step from
                               the zeros a reset gives: state_reset fails
    export_lstm(path, bug)     an LSTM exported as one graph with its state: (x, h0, c0) -> (y,
                               h_n, c_n), dynamic batch and time: the model is its own step graph
        "swapped"              h_n and c_n handed on in each other's place: step_equals_full fails
    export_ssm_step(path, a)   a linear state-space step (state [B, S] -> state_out), one step
                               only, torch's dynamo exporter (weights in MODEL.onnx.data): a = 0.9
                               keeps |state| <= 10 for |x| <= 1; a = 1.05 grows: state_bounded
                               fails at a declared bound
    export_gpt_cache(folder, bug, dynamo)  TinyGPT with a KV cache whose full graph outputs only
                               the logits (an empty prefill), past_key_values.0.key ->
                               present.0.key; "off_by_one" as above
    export_gru_dynamo(path)    the GRU's full graph by the dynamo exporter with its defaults: batch
                               fixed at 1 and length at 5, weights in MODEL.onnx.data

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


# ----------------------------------------------------------------------------- recurrent models (issue 37)

H, G = 16, 2


class GruFull(torch.nn.Module):
    def __init__(self, bug: str | None = None) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.rnn = torch.nn.GRU(F, H, batch_first=True)
        self.out = torch.nn.Linear(H, G)
        for p in self.parameters():
            torch.nn.init.uniform_(p, -0.5, 0.5, generator=g)
        self.h0 = torch.nn.Parameter(torch.full((1, 1, H), 0.5)) if bug == "learned_h0" else None

    def forward(self, x):
        if self.h0 is not None:
            y, _ = self.rnn(x, self.h0.expand(1, x.shape[0], H).contiguous())
        else:
            y, _ = self.rnn(x)
        return self.out(y)


class GruStep(torch.nn.Module):
    def __init__(self, full: GruFull) -> None:
        super().__init__()
        self.full = full

    def forward(self, x, h):
        y, h_n = self.full.rnn(x, h)
        return self.full.out(y), h_n


def export_gru(folder: Path, bug: str | None = None) -> tuple[Path, Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    full = GruFull(bug).eval()
    model = _export(
        full,
        (torch.zeros(2, 5, F),),
        folder / "model.onnx",
        ["x"],
        ["y"],
        {"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}},
    )
    step = _export(
        GruStep(full),
        (torch.zeros(2, 1, F), torch.zeros(1, 2, H)),
        folder / "step.onnx",
        ["x", "h"],
        ["y", "h_n"],
        {"x": {0: "batch"}, "h": {1: "batch"}, "y": {0: "batch"}, "h_n": {1: "batch"}},
    )
    return model, step


class Lstm(torch.nn.Module):
    def __init__(self, bug: str | None = None) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(2)
        self.bug = bug
        self.rnn = torch.nn.LSTM(F, H, batch_first=True)
        self.out = torch.nn.Linear(H, G)
        for p in self.parameters():
            torch.nn.init.uniform_(p, -0.5, 0.5, generator=g)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return (self.out(y), c, h) if self.bug == "swapped" else (self.out(y), h, c)


def export_lstm(path: Path, bug: str | None = None) -> Path:
    axes = {n: {1: "batch"} for n in ("h0", "c0", "h_n", "c_n")}
    axes.update({"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}})
    state = torch.zeros(1, 2, H)
    return _export(
        Lstm(bug).eval(),
        (torch.zeros(2, 5, F), state, state),
        Path(path),
        ["x", "h0", "c0"],
        ["y", "h_n", "c_n"],
        axes,
    )


class SsmStep(torch.nn.Module):
    """state_out = a state + x W_in, y = state_out W_out (one step; |state| <= |x W_in| / (1 - a))."""

    def __init__(self, a: float) -> None:
        super().__init__()
        self.a = a
        self.w_in = torch.nn.Parameter(torch.full((F, 4), 1.0 / F))  # |x W_in| <= 1 for |x| <= 1
        self.w_out = torch.nn.Parameter(torch.linspace(-1, 1, 4 * G).reshape(4, G))

    def forward(self, x, state):
        state_out = self.a * state + x[:, 0, :] @ self.w_in  # [B, S]
        return (state_out @ self.w_out).unsqueeze(1), state_out


def export_ssm_step(path: Path, a: float = 0.9) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batch = torch.export.Dim("batch", min=1, max=64)
        torch.onnx.export(
            SsmStep(a).eval(),
            (torch.zeros(2, 1, F), torch.zeros(2, 4)),
            str(path),
            input_names=["x", "state"],
            output_names=["y", "state_out"],
            dynamic_shapes={"x": {0: batch}, "state": {0: batch}},
            dynamo=True,
            external_data=True,
            verbose=False,
        )
    return Path(path)


class GptLogits(torch.nn.Module):
    """TinyGPT's full pass with the logits only (the presents are not outputs: an empty prefill)."""

    def __init__(self, gpt: TinyGPT) -> None:
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids, attention_mask):
        return self.gpt(input_ids, attention_mask)[0]


def export_gpt_cache(folder: Path, bug: str | None = None, *, dynamo: bool = False) -> tuple[Path, Path]:
    """bug "off_by_one" (the step's position, as export_gpt); with dynamo, "aliased_example": the
    step exported with one example tensor passed as both past_key and past_value, which
    torch.export takes for one input used twice (the graph reads past_key_values.0.key for the
    values too): step_equals_full fails."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)  # the Linear biases
    gpt = TinyGPT(bug if bug == "off_by_one" else None).eval()
    ids, mask = torch.randint(0, V, (2, 5)), torch.ones(2, 5, dtype=torch.int64)
    names_in = ["input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"]
    names_out = ["logits", "present.0.key", "present.0.value"]
    past_k = torch.zeros(2, 1, 4, D)
    past_v = past_k if bug == "aliased_example" or not dynamo else torch.zeros(2, 1, 4, D)
    step_args = (ids[:, :1], torch.ones(2, 5, dtype=torch.int64), past_k, past_v)
    if dynamo:
        b = torch.export.Dim("batch", min=1, max=8)
        t = torch.export.Dim("sequence", min=1, max=32)
        p = torch.export.Dim("past", min=0, max=31)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                GptLogits(gpt),
                (ids, mask),
                str(folder / "model.onnx"),
                input_names=names_in[:2],
                output_names=["logits"],
                dynamic_shapes={"input_ids": {0: b, 1: t}, "attention_mask": {0: b, 1: t}},
                dynamo=True,
                verbose=False,
            )
            torch.onnx.export(
                Step(gpt),
                step_args,
                str(folder / "step.onnx"),
                input_names=names_in,
                output_names=names_out,
                dynamic_shapes={
                    "input_ids": {0: b},
                    "attention_mask": {0: b, 1: p + 1},
                    "past_key": {0: b, 2: p},
                    "past_value": {0: b, 2: p},
                },
                dynamo=True,
                verbose=False,
            )
        return folder / "model.onnx", folder / "step.onnx"
    full = _export(
        GptLogits(gpt),
        (ids, mask),
        folder / "model.onnx",
        names_in[:2],
        ["logits"],
        {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask", "logits")},
    )
    step = _export(
        Step(gpt),
        step_args,
        folder / "step.onnx",
        names_in,
        names_out,
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


def export_gru_dynamo(path: Path) -> Path:
    """The GRU's full graph by the dynamo exporter with its defaults (static shapes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            GruFull().eval(),
            (torch.zeros(1, 5, F),),
            str(path),
            input_names=["x"],
            output_names=["y"],
            dynamo=True,
            external_data=True,
            verbose=False,
        )
    return Path(path)
