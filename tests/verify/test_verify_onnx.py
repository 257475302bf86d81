"""`tickformer verify` on bare ONNX graphs built with onnx.helper (checked by onnx.checker, run by
onnxruntime): a causal well-behaved model passes (no false alarms); a non-causal model and a
model that makes NaN fail, with shrunk counterexamples saved as .npz and a non-zero exit."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tickformer.cli import main
from tickformer.verify.properties import verify_model
from tickformer.verify.properties.models import OnnxModel

F, G = 3, 2


def save_model(path, nodes, inits, *, t="T", extra_inits=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", t, F])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", t, G])
    w = numpy_helper.from_array(np.linspace(-1, 1, F * G, dtype=np.float32).reshape(F, G), "w")
    graph = helper.make_graph(nodes, "g", [x], [y], [w, *inits, *extra_inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def causal_model(path):
    """y = tanh(cumsum_t(x) W): row t depends on inputs 0..t only."""
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    nodes = [
        helper.make_node("CumSum", ["x", "axis"], ["c"]),
        helper.make_node("MatMul", ["c", "w"], ["h"]),
        helper.make_node("Tanh", ["h"], ["y"]),
    ]
    return save_model(path, nodes, [axis])


def noncausal_model(path):
    """y = (x - mean_t(x)) W: every row sees the whole sequence."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["c"]),
        helper.make_node("MatMul", ["c", "w"], ["y"]),
    ]
    return save_model(path, nodes, [])


def nan_model(path):
    """y = log(x) W: NaN for negative inputs, -inf at 0."""
    nodes = [helper.make_node("Log", ["x"], ["l"]), helper.make_node("MatMul", ["l", "w"], ["y"])]
    return save_model(path, nodes, [])


def test_well_behaved_model_passes(tmp_path, capsys):
    path = causal_model(tmp_path / "causal.onnx")
    rc = main(["verify", str(path), "--domain=-2:2", "--examples", "40", "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "verify.json").read_text())
    assert rc == 0 and report["ok"]
    assert {p["name"]: p["status"] for p in report["properties"]} == {
        "finite_outputs": "pass",
        "causality": "pass",
    }
    assert all(p["examples"] >= 40 for p in report["properties"])
    assert not list((tmp_path / "out").glob("*.npz"))
    assert "OK" in capsys.readouterr().out


def test_noncausal_model_is_caught_with_shrunk_counterexample(tmp_path, capsys):
    path = noncausal_model(tmp_path / "leak.onnx")
    rc = main(["verify", str(path), "--domain=-1:1", "--examples", "40", "--out", str(tmp_path / "out")])
    assert rc == 1
    report = json.loads((tmp_path / "out" / "verify.json").read_text())
    causal = next(p for p in report["properties"] if p["name"] == "causality")
    assert causal["status"] == "fail" and "changed" in causal["message"]
    data = np.load(causal["counterexample"])
    assert data["x"].shape[1] == 2  # shrunk to the shortest sequence that shows the leak
    assert int(data["cut"]) == 0
    assert not np.array_equal(data["y"][:, :1], data["y_changed"][:, :1])
    out = capsys.readouterr().out
    assert "causality violated" in out and "VIOLATED" in out


def test_nan_model_is_caught(tmp_path):
    path = nan_model(tmp_path / "nan.onnx")
    rc = main(["verify", str(path), "--domain=-1:1", "--examples", "30", "--out", str(tmp_path / "out")])
    assert rc == 1
    report = json.loads((tmp_path / "out" / "verify.json").read_text())
    finite = next(p for p in report["properties"] if p["name"] == "finite_outputs")
    assert finite["status"] == "fail" and "non-finite" in finite["message"]
    data = np.load(finite["counterexample"])
    assert data["x"].shape[1] == 1 and not np.isfinite(data["y"]).all()  # shrunk to one position


def test_domain_edges_reach_a_bug_only_at_the_edge(tmp_path):
    """log(x) on [0, 1] is finite except at the edge x = 0: the edge strategy must find it."""
    path = nan_model(tmp_path / "nan.onnx")
    results = verify_model(OnnxModel(path), examples=30, seed_value=1, domain=(0.0, 1.0), out_dir=tmp_path)
    finite = results[0]
    assert finite.status == "fail"
    assert np.load(finite.counterexample)["x"].min() == 0.0


def test_static_length_one_graph_skips_causality(tmp_path):
    path = causal_model(tmp_path / "static.onnx")
    m = onnx.load(path)
    for vi in (m.graph.input[0], m.graph.output[0]):
        vi.type.tensor_type.shape.dim[1].dim_value = 1
    onnx.save(m, path)
    results = verify_model(OnnxModel(path), examples=5, seed_value=0, domain=(-1.0, 1.0))
    assert [r.status for r in results] == ["pass", "skip"]


def test_bad_paths_and_signatures_are_one_line_errors(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "missing.onnx"), "--domain", "0:1"]) == 1
    assert "does not exist" in capsys.readouterr().err
    two = tmp_path / "two.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 2, 3])
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["x"], ["z"])],
        "g",
        [x],
        [y, z],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), two)
    assert main(["verify", str(two), "--domain", "0:1"]) == 1
    assert "exactly one input" in capsys.readouterr().err
    path = causal_model(tmp_path / "c.onnx")
    assert main(["verify", str(path)]) == 1
    assert "--domain" in capsys.readouterr().err
    assert main(["verify", str(path), "--domain", "1:0"]) == 1
    with pytest.raises(SystemExit):
        main(["verify"])
