"""`tickformer serve ART --repo DIR` writes a Triton model repository whose config.pbtxt is a
valid ModelConfig by Triton's own schema (model_config.proto, as tritonclient ships it: parsed
with protobuf's text_format, which refuses unknown fields, enum values and types), with the
sequence batcher the streams need, and the artifact's files verified."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip(
    "tritonclient.grpc", reason="tritonclient is the `serve` extra (requirements.lock has it)"
)
from google.protobuf import text_format  # noqa: E402
from tritonclient.grpc import model_config_pb2 as mc  # noqa: E402

from tickformer.artifact.reader import open_artifact  # noqa: E402
from tickformer.errors import ArtifactError, ConfigError  # noqa: E402
from tickformer.serve.pbtxt import Enum, render  # noqa: E402
from tickformer.serve.repository import ServeConfig, write_repository  # noqa: E402


def parse(path) -> mc.ModelConfig:
    return text_format.Parse(path.read_text(), mc.ModelConfig())


@pytest.mark.parametrize("kind", ["static", "windowed", "ssm", "tokens"])
def test_python_form_config_is_a_valid_model_config_with_the_sequence_batcher(arts, tmp_path, kind):
    model = write_repository(arts[kind], tmp_path / "repo", ServeConfig(slots=32, idle_s=2.5))
    config = parse(model / "config.pbtxt")
    assert config.name == "tickformer" and config.backend == "python" and config.max_batch_size == 32
    seq = config.sequence_batching
    assert seq.WhichOneof("strategy_choice") == "oldest" and seq.oldest.max_candidate_sequences == 32
    assert seq.max_sequence_idle_microseconds == 2_500_000
    kinds = {c.name: c.control[0].kind for c in seq.control_input}
    K = mc.ModelSequenceBatching.Control
    assert kinds == {
        "START": K.CONTROL_SEQUENCE_START,
        "END": K.CONTROL_SEQUENCE_END,
        "READY": K.CONTROL_SEQUENCE_READY,
        "CORRID": K.CONTROL_SEQUENCE_CORRID,
    }
    assert [g.count for g in config.instance_group] == [1]  # one slot pool
    art = open_artifact(arts[kind])
    (x,), (y,) = config.input, config.output
    if kind == "tokens":
        assert (x.name, x.data_type, list(x.dims)) == ("tokens", mc.TYPE_INT64, [-1])
        assert (y.name, list(y.dims)) == ("logits", [-1, 11])
    else:
        assert (x.name, x.data_type, list(x.dims)) == ("x", mc.TYPE_FP32, [-1, 3])
        assert (y.name, y.data_type, list(y.dims)) == ("y", mc.TYPE_FP32, [-1, 2])
    assert {k: v.string_value for k, v in config.parameters.items()} == {"slots": "32", "idle_s": "2.5"}
    copied = open_artifact(model / "1" / "artifact")  # verified: hashes, manifest self-hash
    assert copied.manifest == art.manifest and (model / "1" / "model.py").read_text().count(
        "TritonPythonModel"
    )


def test_refuse_mode_lets_more_sequences_in_than_slots(arts, tmp_path):
    model = write_repository(arts["ssm"], tmp_path / "r", ServeConfig(slots=8, when_full="refuse"))
    assert parse(model / "config.pbtxt").sequence_batching.oldest.max_candidate_sequences == 16


def test_the_schema_check_can_fail():
    """A misspelt field, a wrong enum, a string for an int: each refused by Triton's schema."""
    for bad in (
        {"name": "m", "max_batch_sise": 4},
        {"name": "m", "input": [{"name": "x", "data_type": Enum("TYPE_FLOAT32"), "dims": [-1]}]},
        {"name": "m", "max_batch_size": "4"},
    ):
        with pytest.raises(text_format.ParseError):
            text_format.Parse(render(bad), mc.ModelConfig())


def test_rewriting_replaces_the_model_and_keeps_other_models(arts, tmp_path):
    repo = tmp_path / "repo"
    (repo / "other").mkdir(parents=True)
    write_repository(arts["static"], repo, ServeConfig(slots=4))
    model = write_repository(arts["windowed"], repo, ServeConfig(slots=6))
    assert parse(model / "config.pbtxt").max_batch_size == 6 and (repo / "other").is_dir()
    assert sorted(p.name for p in repo.iterdir()) == ["other", "tickformer"]


def test_bad_inputs_are_refused_in_one_line(arts, tmp_path):
    with pytest.raises(ConfigError, match="--slots"):
        ServeConfig(slots=0)
    with pytest.raises(ConfigError, match="--idle"):
        ServeConfig(idle_s=0)
    with pytest.raises(ConfigError, match="--name"):
        ServeConfig(name="a/b")
    with pytest.raises(ArtifactError):
        write_repository(tmp_path / "nowhere", tmp_path / "repo", ServeConfig())
    assert not (tmp_path / "repo").exists()


def test_an_encoder_decoder_is_not_servable(tmp_path):
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    cfg = preset("tiny-seq2seq")
    export_params(cfg, init_params(cfg, 0), tmp_path / "s2s", batch=1)
    with pytest.raises(ConfigError, match="decoder-only"):
        write_repository(tmp_path / "s2s", tmp_path / "repo", ServeConfig())


def test_the_model_runs_the_copied_artifact(arts, tmp_path, monkeypatch):
    """triton_model.TritonPythonModel against a stand-in of Triton's utils module: the config it
    reads is the file written, the requests' controls reach the table."""
    import json
    import sys
    import types

    model = write_repository(arts["windowed"], tmp_path / "repo", ServeConfig(slots=2, idle_s=3.0))
    from google.protobuf import json_format

    config = json_format.MessageToDict(parse(model / "config.pbtxt"), preserving_proto_field_name=True)

    class T:
        def __init__(self, name, a):
            self.n, self.a = name, a

        def as_numpy(self):
            return self.a

    class Req:
        def __init__(self, **t):
            self.t = t

    pb = types.SimpleNamespace(
        get_input_tensor_by_name=lambda r, n: T(n, r.t[n]) if n in r.t else None,
        Tensor=T,
        InferenceResponse=lambda output_tensors, error=None: (output_tensors, error),
        TritonError=str,
    )
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    from tickformer.serve.triton_model import TritonPythonModel

    m = TritonPythonModel()
    m.initialize({"model_config": json.dumps(config), "model_repository": str(model), "model_version": "1"})
    one = np.ones((1, 1), np.int32)
    xs = np.zeros((1, 1, 3), np.float32)
    req = Req(x=xs, START=one, END=0 * one, READY=one, CORRID=np.array([[5]], np.uint64))
    (outs, err), (_, err2) = m.execute(
        [req, Req(x=xs, START=0 * one, READY=one, CORRID=np.array([[6]], np.uint64))]
    )
    assert err is None and outs[0].n == "y" and outs[0].a.shape == (1, 1, 2)
    assert "unknown to this server" in err2 and m.table.idle_s == 3.0 and m.table.pool.slots == 2
