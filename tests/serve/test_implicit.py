"""The onnxruntime form (serve/implicit.py): its config.pbtxt is a valid ModelConfig by Triton's
schema and agrees with model.onnx (every state entry an input/output pair of the graph with its
dims, plus the batch dimension Triton adds); fed the way the sequence batcher with implicit state
feeds it (per-stream state, zeros at START, streams at different positions in one batch), each
stream equals its runtime Session. Triton's onnxruntime backend itself is not installed here
(NVIDIA's container): the graph runs on onnxruntime in-process."""

from __future__ import annotations

import numpy as np
import pytest
from serve_kinds import KINDS, inputs

pytest.importorskip(
    "tritonclient.grpc", reason="tritonclient is the `serve` extra (requirements.lock has it)"
)
import onnx  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from tritonclient.grpc import model_config_pb2 as mc  # noqa: E402

from tickformer import runtime  # noqa: E402
from tickformer.artifact.reader import open_artifact  # noqa: E402
from tickformer.errors import ConfigError  # noqa: E402
from tickformer.serve.implicit import TritonLike, build_model  # noqa: E402
from tickformer.serve.repository import ServeConfig, write_repository  # noqa: E402

STARTS = [0, 1, 3, 5, 0, 2, 7, 4]
ONNX_TYPES = {
    mc.TYPE_FP32: onnx.TensorProto.FLOAT,
    mc.TYPE_INT64: onnx.TensorProto.INT64,
    mc.TYPE_BOOL: onnx.TensorProto.BOOL,
}


def mismatches(config: mc.ModelConfig, model: onnx.ModelProto) -> list[str]:
    """What Triton's onnxruntime backend would refuse at load: a config input, output or state
    that the graph lacks, or whose type or dims (the batch dimension first) differ."""

    def io(values):
        return {
            v.name: (
                v.type.tensor_type.elem_type,
                [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim],
            )
            for v in values
        }

    ins, outs = io(model.graph.input), io(model.graph.output)

    def dims(t):
        return t.reshape.shape if t.HasField("reshape") else t.dims

    wanted = [(ins, t.name, t.data_type, dims(t)) for t in config.input] + [
        (outs, t.name, t.data_type, t.dims) for t in config.output
    ]
    for s in config.sequence_batching.state:
        wanted += [(ins, s.input_name, s.data_type, s.dims), (outs, s.output_name, s.data_type, s.dims)]
    bad = []
    for table, name, dtype, dims in wanted:
        have = table.get(name)
        if (
            have is None
            or have[0] != ONNX_TYPES[dtype]
            or have[1][1:] != list(dims)
            or isinstance(have[1][0], int)
        ):
            bad.append(f"{name}: config {mc.DataType.Name(dtype)} {list(dims)}, graph {have}")
    return bad


@pytest.mark.parametrize("kind", list(KINDS))
def test_config_is_valid_and_matches_the_graph(arts, tmp_path, kind):
    model_dir = write_repository(
        arts[kind], tmp_path / "repo", ServeConfig(slots=16, idle_s=5.0, form="onnxruntime")
    )
    config = text_format.Parse((model_dir / "config.pbtxt").read_text(), mc.ModelConfig())
    model = onnx.load(model_dir / "1" / "model.onnx")
    onnx.checker.check_model(model)
    assert config.backend == "onnxruntime" and config.max_batch_size == 16
    seq = config.sequence_batching
    assert seq.WhichOneof("strategy_choice") == "oldest" and seq.max_sequence_idle_microseconds == 5_000_000
    assert all(s.initial_state[0].zero_data for s in seq.state) and len(seq.state) == (
        1 if kind == "ssm" else 5
    )
    assert mismatches(config, model) == []
    config.sequence_batching.state[0].dims[0] += 1  # the check can fail: a state of another shape
    config.output[0].name = "z"
    assert len(mismatches(config, model)) == 3


@pytest.mark.parametrize("kind", list(KINDS))
def test_fed_like_triton_each_stream_equals_its_session(arts, kind):
    art = open_artifact(arts[kind])
    triton = TritonLike(build_model(art), art)
    length = 16 if kind == "static" else 26
    xs = inputs(KINDS[kind], 8, length + 1, seed=11)
    sessions = [runtime.load(arts[kind], backend="ort") for _ in STARTS]
    compared = full = 0
    for t in range(length + 1 + max(STARTS)):
        live = {i: xs[i, t - s] for i, s in enumerate(STARTS) if s <= t < s + length + 1}
        out = triton.step(live, start={i for i, s in enumerate(STARTS) if s == t})
        for i, (y, is_full) in out.items():
            if t - STARTS[i] == length and kind == "static":  # position max_len: the stream is full
                assert is_full
                full += 1
                continue
            want = sessions[i].step(xs[i : i + 1, t - STARTS[i]][:, None]).reshape(-1)
            assert not is_full and np.allclose(y, want, rtol=0, atol=art.tolerance["atol"]), (kind, i, t)
            compared += 1
    assert full == (8 if kind == "static" else 0) and compared == 8 * (length + (kind != "static"))


def test_the_form_needs_a_batch_1_artifact(tmp_path):
    from tickformer.export.writer import export_params
    from tickformer.model import init_params

    export_params(KINDS["ssm"], init_params(KINDS["ssm"], 0), tmp_path / "b2", batch=2)
    with pytest.raises(ConfigError, match="export with --batch 1"):
        build_model(open_artifact(tmp_path / "b2"))
