"""Write the torch-made models of issue 37 to tests/verify/fixtures/ (committed: CI verifies them
without torch, test_torch_fixtures.py). Run where torch and onnxscript are installed (the dynamo
exporter needs onnxscript):

    python3 -m venv /tmp/vtorch && /tmp/vtorch/bin/pip install torch==2.13.0 onnx onnxscript
    /tmp/vtorch/bin/python tests/verify/make_torch_fixtures.py [OUT]

Each correct model beside its mutant (torch_models.py says what each mutant breaks):

    gru/{model,step}.onnx, gru_learned_h0/...      TorchScript exporter, a GRU as two graphs
    lstm.onnx, lstm_swapped.onnx                   TorchScript exporter, one graph with its state
    ssm_step.onnx, ssm_step_unstable.onnx          dynamo exporter, one step (+ .onnx.data)
    gpt_cache/{model,step}.onnx, gpt_cache_off_by_one/...   TorchScript, a KV cache, no presents
                                                   out of the full graph (an empty prefill)
    gpt_cache_dynamo/..., gpt_cache_dynamo_aliased/...      the same by the dynamo exporter; the
                                                   mutant passes one example tensor as both pasts
    gru_dynamo.onnx                                dynamo exporter defaults: batch and length fixed
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import torch_models as tm  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def make(out: Path = FIXTURES) -> list[Path]:
    """Every fixture of the module docstring, written under `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    made = [*tm.export_gru(out / "gru"), *tm.export_gru(out / "gru_learned_h0", "learned_h0")]
    made += [tm.export_lstm(out / "lstm.onnx"), tm.export_lstm(out / "lstm_swapped.onnx", "swapped")]
    made += [
        tm.export_ssm_step(out / "ssm_step.onnx", 0.9),
        tm.export_ssm_step(out / "ssm_step_unstable.onnx", 1.05),
    ]
    made += [
        *tm.export_gpt_cache(out / "gpt_cache"),
        *tm.export_gpt_cache(out / "gpt_cache_off_by_one", "off_by_one"),
        *tm.export_gpt_cache(out / "gpt_cache_dynamo", dynamo=True),
        *tm.export_gpt_cache(out / "gpt_cache_dynamo_aliased", "aliased_example", dynamo=True),
    ]
    made.append(tm.export_gru_dynamo(out / "gru_dynamo.onnx"))
    data = [p.with_name(p.name + ".data") for p in made]
    for d in data:
        if d.exists() and not d.stat().st_size:
            d.unlink()  # the dynamo exporter leaves an empty one when every tensor is small
    return [*made, *(d for d in data if d.exists())]


if __name__ == "__main__":
    for path in make(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES):
        print(path, path.stat().st_size)
