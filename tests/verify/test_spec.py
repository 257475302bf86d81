"""The signature of a bare ONNX model (tickformer.artifact.foreign): what is inferred from the
graph, what a spec file (TOML or JSON) declares, how flags fill in, and the errors a wrong spec
gets (one line naming the key and the fix). The schema published in docs/verify.md is the one
the code checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from foreign_models import lm_pair, masked_model, signal_model
from onnx import TensorProto, helper, numpy_helper

from tickformer.artifact.foreign.inference import open_signature
from tickformer.artifact.foreign.spec import SPEC_SCHEMA, Flags, check_spec, load_spec
from tickformer.errors import ArtifactError, ConfigError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "verify.md"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_roles_axes_and_vocabulary_are_inferred(tmp_path):
    full, step = lm_pair(tmp_path / "lm")
    sig, _, _ = open_signature(full, flags=Flags(step=step))
    ids, mask = sig.input("input_ids"), sig.input("attention_mask")
    assert (ids.role, ids.vocab, ids.batch_axis, ids.time_axis) == ("ids", (0, 10), 0, 1)
    assert (mask.role, mask.valid, mask.time_group) == ("mask", 1, "seq")
    assert sig.ranges == {"batch": (1, 2), "seq": (1, 16)} and sig.dynamic == {"batch", "seq"}
    assert sig.causal_group == "seq"
    logits = next(o for o in sig.outputs if o.name == "logits")
    key = next(o for o in sig.outputs if o.name == "present.0.key")
    assert (logits.time_axis, key.time_axis, key.cache) == (1, 2, True)
    assert sig.cache.prefill == "full" and sig.cache.time_axis["past_key_values.0.key"] == 2
    assert {i.name: i.span for i in sig.cache.inputs} == {"input_ids": "current", "attention_mask": "total"}
    assert any("embedding table" in n for n in sig.notes)


def test_padding_named_mask_means_nonzero_is_pad(tmp_path):
    path = masked_model(tmp_path / "m.onnx")
    m = onnx.load(path)
    m.graph.input[1].name = "key_padding_mask"
    for node in m.graph.node:
        node.input[:] = ["key_padding_mask" if n == "attention_mask" else n for n in node.input]
    onnx.save(m, path)
    sig, _, _ = open_signature(path, flags=Flags(domain=(-1.0, 1.0)))
    assert sig.input("key_padding_mask").valid == 0


def test_flags_fill_in_what_the_spec_leaves_out(tmp_path):
    path = signal_model(tmp_path / "s.onnx")
    spec = write(tmp_path, "s.toml", "version = 1\n[outputs.y]\nbound = 3.0\n")
    sig, _, _ = open_signature(path, spec=spec, flags=Flags(domain=(-2.0, 2.0), output_bound=9.0, max_t=5))
    x = sig.input("x")
    assert (x.lo, x.hi) == ((-2.0,), (2.0,))  # the flag, where the spec says nothing
    assert sig.outputs[0].bound == 3.0  # the spec wins over --output-bound
    assert sig.ranges["T"] == (1, 5)


def test_box_domain_per_feature(tmp_path):
    path = signal_model(tmp_path / "s.onnx")
    spec = write(
        tmp_path, "s.json", json.dumps({"version": 1, "inputs": {"x": {"domain": [[0, 1], [-5, 5], [2, 3]]}}})
    )
    sig, _, _ = open_signature(path, spec=spec)
    assert sig.input("x").lo == (0.0, -5.0, 2.0) and sig.input("x").hi == (1.0, 5.0, 3.0)
    bad = write(tmp_path, "b.json", json.dumps({"version": 1, "inputs": {"x": {"domain": [[0, 1], [2, 3]]}}}))
    with pytest.raises(ConfigError, match="2 intervals given for 3 features"):
        open_signature(path, spec=bad)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("version = 2\n", "set version = 1"),
        ("[inputs.x]\nrole = 'signal'\n", "version"),
        ("version = 1\nexamples = 5\n", "unknown key 'examples'"),
        ("version = 1\n[inputs.x]\nrange = [0, 1]\n", "inputs.x: unknown key 'range'; use one of"),
        ("version = 1\n[inputs.x]\ndomain = [1, -1]\n", "swap the bounds"),
        ("version = 1\n[inputs.x]\ndomain = [0, nan]\n", "finite"),
        ("version = 1\n[inputs.x]\nrole = 'audio'\n", "is not one of"),
        ("version = 1\n[inputs.x]\ntime_axis = 'one'\n", "axis index"),
        ("version = 1\n[axes]\nT = [4, 2]\n", "axes.T"),
        ("version = 1\n[cache]\nprefill = 'half'\n", "cache.prefill"),
        ("version = 1\n[outputs.y]\nbound = -3\n", "positive"),
        ("version = 1\nskip = 'causality'\n", "list of property names"),
        ("version = 1\n[inputs.x\n", "not valid TOML"),
    ],
)
def test_spec_errors_name_the_key_and_the_fix(tmp_path, text, words):
    spec = write(tmp_path, "bad.toml", text)
    with pytest.raises(ConfigError, match=None) as info:
        load_spec(spec)
    assert words in str(info.value) and "bad.toml" in str(info.value)


# One table for check_spec and the published schema (issue 17 audit: they disagreed). Each document
# is refused by check_spec with the words given; `schema` says whether JSON Schema refuses it too
# ("rejects") or the rule is one of SCHEMA_CANNOT_EXPRESS (its index), documented in docs/verify.md.
SPEC_CASES = [
    ({"version": 2}, "set version = 1", "rejects"),
    ({"version": True}, "set version = 1", "rejects"),
    ({"version": 1.0}, "set version = 1", 5),
    ({"inputs": {"x": {"role": "signal"}}}, "version", "rejects"),
    ({"version": 1, "examples": 5}, "unknown key 'examples'", "rejects"),
    ({"version": 1, "inputs": {"x": {"range": [0, 1]}}}, "inputs.x: unknown key 'range'", "rejects"),
    ({"version": 1, "inputs": {"x": {"span": "total"}}}, "inputs.x: unknown key 'span'", "rejects"),
    ({"version": 1, "inputs": {"x": {"domain": [1, -1]}}}, "swap the bounds", 0),
    ({"version": 1, "inputs": {"x": {"domain": [0, float("nan")]}}}, "finite", 1),
    ({"version": 1, "domain": [0, True]}, "must be [LO, HI]", "rejects"),
    ({"version": 1, "inputs": {"x": {"role": "audio"}}}, "is not one of", "rejects"),
    ({"version": 1, "inputs": {"x": {"time_axis": "one"}}}, "axis index", "rejects"),
    ({"version": 1, "inputs": {"x": {"time_axis": True}}}, "axis index", "rejects"),
    ({"version": 1, "inputs": {"x": {"vocab": [-1, 2]}}}, "0 <= LO <= HI", "rejects"),
    ({"version": 1, "inputs": {"x": {"vocab": [5, 2]}}}, "0 <= LO <= HI", 0),
    ({"version": 1, "inputs": {"x": {"vocab": [0, 2.0]}}}, "0 <= LO <= HI", 5),
    ({"version": 1, "inputs": {"m": {"valid": 2}}}, "must be 1, 0, true or false", "rejects"),
    ({"version": 1, "inputs": {"m": {"valid": "yes"}}}, "must be 1, 0, true or false", "rejects"),
    ({"version": 1, "axes": {"T": [4, 2]}}, "axes.T", 0),
    ({"version": 1, "axes": {"T": [1, True]}}, "axes.T", "rejects"),
    ({"version": 1, "axes": [1, 2]}, "table of NAME", "rejects"),
    ({"version": 1, "cache": {"prefill": "half"}}, "cache.prefill", "rejects"),
    ({"version": 1, "cache": {"step": ""}}, "cache.step", "rejects"),
    ({"version": 1, "cache": {"time_axis": False}}, "cache.time_axis", "rejects"),
    ({"version": 1, "cache": {"pairs": {"p": 1}}}, "cache.pairs", "rejects"),
    ({"version": 1, "cache": {"inputs": []}}, "cache.inputs: must be a table", "rejects"),
    ({"version": 1, "cache": {"inputs": {"m": {"span": "all"}}}}, "cache.inputs.m.span", "rejects"),
    ({"version": 1, "outputs": {"y": {"bound": -3}}}, "positive", "rejects"),
    ({"version": 1, "outputs": {"y": {"bound": float("inf")}}}, "positive finite", 1),
    ({"version": 1, "outputs": {"y": 3}}, "must be a table", "rejects"),
    ({"version": 1, "tolerance_factor": 1e400}, "positive finite", 1),
    ({"version": 1, "tolerance_factor": 0}, "positive finite", "rejects"),
    ({"version": 1, "causal": 1}, "true, false or the name", "rejects"),
    ({"version": 1, "skip": "causality"}, "list of property names", "rejects"),
    ({"version": 1, "skip": ["causalty"]}, "'causalty' is not a property of a bare model", "rejects"),
    ({"version": 1, "skip": ["stale_cache_isolation"]}, "is not a property of a bare model", "rejects"),
    ({"version": 1, "cache": {"kind": "ring"}}, "cache.kind", "rejects"),
    ({"version": 1, "cache": {"batch_axis": "one"}}, "cache.batch_axis", "rejects"),
    ({"version": 1, "cache": {"state_bound": -1}}, "cache.state_bound", "rejects"),
    ({"version": 1, "cache": {"state_bound": float("inf")}}, "cache.state_bound", 1),
]
VALID_SPECS = [
    {"version": 1},
    {"version": 1, "skip": ["onnx_reference", "padding_mask", "padding_mask[attention_mask]"]},
    {"version": 1, "inputs": {"m": {"valid": True, "pattern": "left"}, "n": {"valid": 0}}},
    {"version": 1, "inputs": {"x": {"vocab": [0, 0], "batch_axis": False, "time_axis": -1}}},
    {"version": 1, "axes": {"T": [0, 0]}, "domain": [[-1, 1], [2.5, 2.5]], "causal": False},
    {"version": 1, "cache": {"step": "s.onnx", "inputs": {"m": {"span": "current", "valid": 1}}}},
    {"version": 1, "inputs": {"h0": {"role": "state"}}, "skip": ["state_bounded", "state_reset"]},
    {"version": 1, "cache": {"kind": "state", "batch_axis": 1, "state_bound": 10.0, "pairs": {"h": "h_n"}}},
]


@pytest.mark.parametrize(("doc", "words", "schema"), SPEC_CASES)
def test_check_spec_refuses(doc, words, schema):
    with pytest.raises(ConfigError) as info:
        check_spec(doc, "s.json")
    assert words in str(info.value) and str(info.value).startswith("s.json: "), str(info.value)


@pytest.mark.parametrize("doc", VALID_SPECS)
def test_check_spec_accepts(doc):
    assert check_spec(doc) is doc


def test_the_schema_agrees_with_check_spec():
    """The published schema refuses what check_spec refuses except the rules it cannot express
    (SCHEMA_CANNOT_EXPRESS, each listed in docs/verify.md), and accepts what check_spec accepts."""
    jsonschema = pytest.importorskip("jsonschema")  # a test dependency ([test] extra)
    from tickformer.artifact.foreign.spec import SCHEMA_CANNOT_EXPRESS

    validator = jsonschema.Draft202012Validator(SPEC_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(SPEC_SCHEMA)
    for doc, _, schema in SPEC_CASES:
        assert validator.is_valid(doc) == (schema != "rejects"), (doc, schema)
    for doc in VALID_SPECS:
        assert validator.is_valid(doc), (doc, [e.message for e in validator.iter_errors(doc)])
    docs = " ".join(DOCS.read_text().split())
    for rule in SCHEMA_CANNOT_EXPRESS:
        assert rule in docs, f"docs/verify.md must list the rule the schema cannot express: {rule}"
    used = {schema for _, _, schema in SPEC_CASES if schema != "rejects"}
    assert used <= set(range(len(SCHEMA_CANNOT_EXPRESS)))


def test_skip_per_mask_must_name_a_mask_input(tmp_path):
    from tickformer.verify.properties import verify_model
    from tickformer.verify.properties.models import ForeignModel

    path = masked_model(tmp_path / "m.onnx")
    spec = write(tmp_path, "s.toml", "version = 1\nskip = ['padding_mask[x]']\n")
    model = ForeignModel(path, spec=spec, flags=Flags(domain=(-1.0, 1.0)))
    with pytest.raises(
        ConfigError, match=r"padding_mask\[x\]: no such property.*padding_mask\[attention_mask\]"
    ):
        verify_model(model, examples=2)


def test_spec_names_must_exist_in_the_graph(tmp_path):
    path = signal_model(tmp_path / "s.onnx")
    for text, words in [
        ("version = 1\n[inputs.z]\nrole = 'signal'\n", "inputs.z is not a graph input; use one of ['x']"),
        ("version = 1\n[outputs.z]\nbound = 1.0\n", "outputs.z is not a graph output"),
        ("version = 1\n[axes]\nN = [1, 4]\n", "axes.N is not a dynamic dimension"),
        ("version = 1\ncausal = 'N'\n[inputs.x]\ndomain = [0, 1]\n", "causal = 'N' is not a time axis"),
        ("version = 1\n[cache]\nprefill = 'empty'\n", "no step graph"),
    ]:
        with pytest.raises(ConfigError) as info:
            open_signature(path, spec=write(tmp_path, "s.toml", text), flags=Flags(domain=(0.0, 1.0)))
        assert words in str(info.value), str(info.value)


def test_json_spec_is_read_strictly(tmp_path):
    spec = write(tmp_path, "s.json", '{"version": 1, "version": 1}')
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_spec(spec)
    with pytest.raises(ConfigError, match=r"use a \.toml or \.json spec file"):
        load_spec(write(tmp_path, "s.yaml", "version: 1"))
    fifo = tmp_path / "fifo.toml"
    import os

    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="FIFO"):  # the one safe loader: a FIFO never blocks
        load_spec(fifo)


def test_an_unnamed_dynamic_feature_axis_needs_a_range(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", None])
    p = tmp_path / "u.onnx"
    onnx.save(
        helper.make_model(
            helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "g", [x], [y]),
            opset_imports=[helper.make_opsetid("", 17)],
        ),
        p,
    )
    with pytest.raises(ConfigError, match=r"no size range; declare one in a spec file \(\[axes\] \"x\[2\]\""):
        open_signature(p, flags=Flags(domain=(0.0, 1.0)))
    spec = write(tmp_path, "u.toml", 'version = 1\n[axes]\n"x[2]" = [3, 3]\n')
    sig, _, _ = open_signature(p, spec=spec, flags=Flags(domain=(0.0, 1.0)))
    assert sig.ranges["x[2]"] == (3, 3)


def _external(tmp_path, location="weights.bin"):
    """signal_model with its weights moved to an external file named `location` (as torch's
    dynamo exporter writes MODEL.onnx.data); returns (path, embedded bytes)."""
    path = signal_model(tmp_path / "s.onnx")
    m = onnx.load(path)
    embedded = m.SerializeToString()
    onnx.external_data_helper.convert_model_to_external_data(m, location="weights.bin", size_threshold=0)
    onnx.save(m, tmp_path / "ext.onnx")
    if location != "weights.bin":
        m = onnx.load(tmp_path / "ext.onnx", load_external_data=False)
        for t in m.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    e.value = location
        onnx.save(m, tmp_path / "ext.onnx")
    return tmp_path / "ext.onnx", embedded


def test_external_data_in_the_models_folder_is_read(tmp_path):
    """Tensors kept in a file beside the model (torch's .onnx.data) are read from that folder,
    once, and put into the model: the same graph as the embedded one."""
    path, embedded = _external(tmp_path)
    files: dict = {}
    sig, data, _ = open_signature(path, flags=Flags(domain=(0.0, 1.0)), files=files)
    assert set(files) == {"ext.onnx", "weights.bin"}
    loaded = onnx.load_model_from_string(data)
    want = onnx.load_model_from_string(embedded)
    assert [numpy_helper.to_array(t).tolist() for t in loaded.graph.initializer] == [
        numpy_helper.to_array(t).tolist() for t in want.graph.initializer
    ]
    assert sig.input("x").role == "signal"


@pytest.mark.parametrize(
    ("location", "words"),
    [
        ("../weights.bin", "not a file in the model's own folder"),
        ("/etc/passwd", "not a file in the model's own folder"),
        ("sub/weights.bin", "not a file in the model's own folder"),
        ("missing.bin", "missing"),
    ],
)
def test_external_data_outside_the_folder_is_refused(tmp_path, location, words):
    """Traversal is refused before anything is read, as the artifact reader refuses it: only a
    plain file name in the model's folder."""
    path, _ = _external(tmp_path, location)
    with pytest.raises(ArtifactError, match=words):
        open_signature(path, flags=Flags(domain=(0.0, 1.0)))


def test_external_data_through_a_link_is_refused(tmp_path):
    path, _ = _external(tmp_path)
    (tmp_path / "weights.bin").rename(tmp_path / "elsewhere.bin")
    (tmp_path / "weights.bin").symlink_to(tmp_path / "elsewhere.bin")
    with pytest.raises(ArtifactError, match="symbolic link"):
        open_signature(path, flags=Flags(domain=(0.0, 1.0)))


def test_ids_without_an_embedding_need_a_vocabulary(tmp_path):
    ids = helper.make_tensor_value_info("tokens", TensorProto.INT64, ["B", "T"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T"])
    p = tmp_path / "i.onnx"
    graph = helper.make_graph(
        [helper.make_node("Cast", ["tokens"], ["y"], to=TensorProto.FLOAT)], "g", [ids], [y]
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), p)
    with pytest.raises(ConfigError, match="--vocab LO:HI"):
        open_signature(p)
    sig, _, _ = open_signature(p, flags=Flags(vocab=(0, 99)))
    assert sig.input("tokens").vocab == (0, 99)


def test_schema_accepts_the_signature_spec_and_matches_the_docs():
    full_doc = {
        "version": 1,
        "causal": "T",
        "domain": [-1, 1],
        "output_bound": 5,
        "skip": ["onnx_reference"],
        "tolerance_factor": 2,
        "axes": {"T": [1, 8]},
        "inputs": {"x": {"role": "signal", "domain": [[0, 1]], "batch_axis": 0, "time_axis": 1}},
        "outputs": {"y": {"bound": 2, "time_axis": False}},
        "cache": {
            "step": "s.onnx",
            "prefill": "full",
            "time_axis": 2,
            "pairs": {"p": "q"},
            "inputs": {"m": {"span": "total"}},
        },
    }
    assert check_spec(full_doc) is full_doc
    text = DOCS.read_text()
    assert json.dumps(SPEC_SCHEMA, indent=2) in text, "docs/verify.md must publish SPEC_SCHEMA verbatim"


def test_position_inputs_are_filled_not_drawn(tmp_path):
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "T"])
    pos = helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["B", "T"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", 4])
    emb = numpy_helper.from_array(np.ones((6, 4), np.float32), "E")
    pe = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(16, 4), "P")
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["a"]),
        helper.make_node("Gather", ["P", "position_ids"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    p = tmp_path / "p.onnx"
    onnx.save(
        helper.make_model(
            helper.make_graph(nodes, "g", [ids, pos], [y], [emb, pe]),
            opset_imports=[helper.make_opsetid("", 17)],
        ),
        p,
    )
    sig, _, _ = open_signature(p)
    assert sig.input("position_ids").role == "position" and sig.input("input_ids").vocab == (0, 5)
    from tickformer.verify.properties import verify_model
    from tickformer.verify.properties.models import ForeignModel

    results = {r.name: r.status for r in verify_model(ForeignModel(p), examples=10)}
    assert results["runs_in_domain"] == "pass" and results["causality"] == "pass"


def test_a_cache_section_without_a_step_graph_needs_pairs_of_the_model_itself(tmp_path):
    """[cache] without a step graph: the model is its own step graph, so its pairs must be its own
    inputs and outputs; a model with none is refused naming the fixes."""
    path = signal_model(tmp_path / "s.onnx")
    spec = write(tmp_path, "c.toml", 'version = 1\n[cache]\nprefill = "empty"\n')
    with pytest.raises(ConfigError, match="pair by no convention.*set cache.step, pass --step"):
        open_signature(path, spec=spec, flags=Flags(domain=(0.0, 1.0)))
