"""Offline TensorRT-parser lint (`tickformer.export.trt_support`, `tickformer check`).

Small graphs built with onnx.helper, one per rule: each bad graph must be flagged with the
rule's code, and a clean graph must pass every target.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from tickformer.cli import main
from tickformer.export import trt_support as ts

TARGETS = ("trt-10.3", "trt-10", "trt-11")


def model(nodes, inputs, outputs, *, opset=17, initializers=(), domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=ops)


def vi(name, shape, elem=T.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def codes(findings, severity="error"):
    return {f.code for f in findings if f.severity == severity}


def clean_block():
    """x [1, 4] -> LayerNorm-free MLP with a causal-style Where mask and Softmax: all supported."""
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    allowed = numpy_helper.from_array(np.tril(np.ones((4, 4), dtype=bool)), "allowed")
    ninf = numpy_helper.from_array(np.array(-np.inf, dtype=np.float32), "ninf")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["s0"]),  # [1, 4]
        helper.make_node("Unsqueeze", ["s0", "ax"], ["s1"]),
        helper.make_node("Expand", ["s1", "shape44"], ["s"]),  # [4, 4]... broadcast from [1,1,4]
        helper.make_node("Where", ["allowed", "s", "ninf"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["y"], axis=-1),
    ]
    ax = numpy_helper.from_array(np.array([0], dtype=np.int64), "ax")
    shape44 = numpy_helper.from_array(np.array([1, 4, 4], dtype=np.int64), "shape44")
    return model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4, 4])], initializers=[w, allowed, ninf, ax, shape44])


def test_clean_graph_passes_every_target():
    m = clean_block()
    onnx.checker.check_model(m, full_check=True)
    for name in TARGETS:
        findings = ts.check_model(m, ts.target(name), role="step")
        assert codes(findings) == set(), [f.line() for f in findings]
        assert codes(findings, "warning") == set(), [f.line() for f in findings]


@pytest.mark.parametrize("op", ["Unique", "BitShift", "MatMulInteger"])
def test_documented_unsupported_op_is_an_error(op):
    if op == "BitShift":
        ins, node = (
            [vi("a", [4], T.UINT32), vi("b", [4], T.UINT32)],
            helper.make_node(op, ["a", "b"], ["y"], direction="LEFT"),
        )
        outs = [vi("y", [4], T.UINT32)]
    elif op == "Unique":
        ins, node, outs = [vi("a", [4])], helper.make_node(op, ["a"], ["y"]), [vi("y", [None])]
    else:
        ins = [vi("a", [2, 2], T.UINT8), vi("b", [2, 2], T.UINT8)]
        node, outs = helper.make_node(op, ["a", "b"], ["y"]), [vi("y", [2, 2], T.INT32)]
    m = model([node], ins, outs)
    for name in TARGETS:
        f = ts.check_model(m, ts.target(name))
        assert "op-unsupported" in codes(f)
        assert any(op in x.where for x in f if x.code == "op-unsupported")


def test_double_dtype_is_an_error_on_every_target():
    m = model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, 4], T.DOUBLE)], [vi("y", [1, 4], T.DOUBLE)]
    )
    for name in TARGETS:
        f = ts.check_model(m, ts.target(name), role="step")
        assert "dtype-double" in codes(f)


def test_cast_to_double_inside_graph_is_flagged():
    nodes = [
        helper.make_node("Cast", ["x"], ["d"], to=T.DOUBLE),
        helper.make_node("Cast", ["d"], ["y"], to=T.FLOAT),
    ]
    m = model(nodes, [vi("x", [2])], [vi("y", [2])])
    f = ts.check_model(m, ts.target("trt-10"))
    assert {"dtype-double", "dtype-cast"} <= codes(f)


def test_int64_is_native_and_bf16_warns():
    nodes = [
        helper.make_node("Cast", ["x"], ["b"], to=T.BFLOAT16),
        helper.make_node("Cast", ["b"], ["y"], to=T.FLOAT),
        helper.make_node("Shape", ["x"], ["s"]),
    ]
    m = model(nodes, [vi("x", [2])], [vi("y", [2]), vi("s", [1], T.INT64)])
    f = ts.check_model(m, ts.target("trt-10"))
    assert codes(f) == set()
    assert "dtype-bf16" in codes(f, "warning")


def test_opset_out_of_range():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1])], [vi("y", [1])], opset=8)
    assert "opset" in codes(ts.check_model(m, ts.target("trt-10")))
    m24 = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1])], [vi("y", [1])], opset=24)
    assert "opset" in codes(ts.check_model(m24, ts.target("trt-10.3")))  # 10.3 parses up to 20
    assert "opset" not in codes(ts.check_model(m24, ts.target("trt-10")))


def attention_model(with_past: bool):
    q, k, v = vi("q", [1, 2, 1, 4]), vi("k", [1, 2, 3, 4]), vi("v", [1, 2, 3, 4])
    inputs = ["q", "k", "v"] + (["", "pk", "pv"] if with_past else [])
    outputs = ["y"] + (["pk_out", "pv_out"] if with_past else [])
    extra_in = [vi("pk", [1, 2, 5, 4]), vi("pv", [1, 2, 5, 4])] if with_past else []
    extra_out = [vi("pk_out", [1, 2, 8, 4]), vi("pv_out", [1, 2, 8, 4])] if with_past else []
    node = helper.make_node("Attention", inputs, outputs)
    return model([node], [q, k, v] + extra_in, [vi("y", [1, 2, 1, 4])] + extra_out, opset=23)


def test_attention_op_with_past_kv_is_flagged():
    m = attention_model(with_past=True)
    assert "attention-kv" in codes(ts.check_model(m, ts.target("trt-10")))
    assert "attention-kv" in codes(ts.check_model(m, ts.target("trt-11")))
    plain = attention_model(with_past=False)
    assert codes(ts.check_model(plain, ts.target("trt-11"))) == set()
    # TensorRT 10.3 predates the op (first defined at opset 23) and its opset ceiling is 20.
    assert {"op-unsupported", "opset"} <= codes(ts.check_model(plain, ts.target("trt-10.3")))


def test_step_graph_must_be_static_full_graph_is_pinned():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, "T", 3])], [vi("y", [1, "T", 3])])
    step = ts.check_model(m, ts.target("trt-10"), role="step")
    assert "static-shape" in codes(step)
    full = ts.check_model(m, ts.target("trt-10"), role="full")
    assert codes(full) == set()
    assert "pinned-shape" in codes(full, "note")


def test_reduce_axes_must_be_initializer_and_unsqueeze_axes_constant():
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["m"]),
        helper.make_node("Unsqueeze", ["m", "axes"], ["y"]),
    ]
    m = model(nodes, [vi("x", [2, 3]), vi("axes", [1], T.INT64)], [vi("y", None)], opset=18)
    f = ts.check_model(m, ts.target("trt-10"))
    assert {"reduce-axes", "axes-const"} <= codes(f)


def test_data_dependent_shape_is_an_error_in_the_step_graph_only():
    m = model([helper.make_node("NonZero", ["x"], ["y"])], [vi("x", [4])], [vi("y", [1, None], T.INT64)])
    assert "data-dependent-shape" in codes(ts.check_model(m, ts.target("trt-10"), role="step"))
    assert "data-dependent-shape" in codes(ts.check_model(m, ts.target("trt-10"), role="full"), "warning")


def test_custom_domain_needs_plugin():
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft")
    m = model([node], [vi("a", [2, 2]), vi("b", [2, 2])], [vi("y", [2, 2])], domains=["com.microsoft"])
    assert "domain" in codes(ts.check_model(m, ts.target("trt-10")))


def test_unsupported_op_inside_if_branch_is_found():
    then_g = helper.make_graph([helper.make_node("Unique", ["x"], ["u"])], "then", [], [vi("u", [None])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", [4])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    m = model([node], [vi("c", [], T.BOOL), vi("x", [4])], [vi("y", None)])
    f = ts.check_model(m, ts.target("trt-10"))
    assert any(x.code == "op-unsupported" and "Unique" in x.where and "then_branch" in x.where for x in f)


def test_fp16_overflowing_mask_constant_warns():
    big = numpy_helper.from_array(np.array([-1e9], dtype=np.float32), "neg_big")
    m = model(
        [helper.make_node("Add", ["x", "neg_big"], ["y"])], [vi("x", [1])], [vi("y", [1])], initializers=[big]
    )
    assert "fp16-overflow" in codes(ts.check_model(m, ts.target("trt-10")), "warning")


def test_unknown_target_names_the_choices():
    from tickformer.errors import ConfigError

    with pytest.raises(ConfigError, match="trt-10.3"):
        ts.target("trt-9")


def test_cli_exit_codes_and_one_line_per_finding(tmp_path, capsys):
    good = tmp_path / "good.onnx"
    onnx.save(clean_block(), good)
    assert main(["check", str(good), "--target", "trt-10.3"]) == 0
    assert "ok: 0 error(s)" in capsys.readouterr().out

    bad = tmp_path / "step.onnx"  # the step role: dynamic dims are errors
    m = model(
        [helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, "T"], T.DOUBLE)], [vi("y", [1, "T"], T.DOUBLE)]
    )
    onnx.save(m, bad)
    assert main(["check", str(bad), "--target", "trt-11"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert any("[dtype-double]" in line for line in out)
    assert any("[static-shape]" in line for line in out)
    assert out[-1].startswith("check trt-11: FAIL")

    art = (
        tmp_path / "art"
    )  # .onnx files without a manifest: not an artifact (check reads only through the loader)
    art.mkdir()
    onnx.save(clean_block(), art / "model.onnx")
    onnx.save(m, art / "step.onnx")
    assert main(["check", str(art), "--target", "trt-10"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no manifest.json" in err[0]


def test_cli_missing_path_is_one_line_error(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope"), "--target", "trt-10"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


def test_corrupt_onnx_is_a_finding_not_a_crash(tmp_path, capsys):
    p = tmp_path / "model.onnx"
    p.write_bytes(b"not a protobuf at all")
    assert main(["check", str(p), "--target", "trt-10"]) == 1
    assert "[onnx-invalid]" in capsys.readouterr().out


def test_inf_constant_is_fine_in_where_but_not_in_add():
    ninf = numpy_helper.from_array(np.array(-np.inf, dtype=np.float32), "ninf")
    m = model(
        [helper.make_node("Add", ["x", "ninf"], ["y"])], [vi("x", [1])], [vi("y", [1])], initializers=[ninf]
    )
    assert "nonfinite-weight" in codes(ts.check_model(m, ts.target("trt-10")), "warning")


@pytest.mark.parametrize("preset_name", ["tiny", "tiny-seq2seq"])
def test_exported_graphs_are_clean_for_every_target(preset_name):
    """The project's own exporter output (fp32 and fp16) lints clean: no errors, no warnings."""
    from tickformer.export.fp16 import to_fp16
    from tickformer.export.graphs import build_graphs
    from tickformer.model.config import preset
    from tickformer.model.transformer import init_params

    cfg = preset(preset_name)
    graphs = build_graphs(init_params(cfg, seed=0), cfg, batch=1, opset=17)
    for name, graph in graphs.items():
        for variant in (graph, to_fp16(graph)):
            for target in TARGETS:
                role = "step" if name == "step" else ("encoder" if name == "encoder" else "full")
                findings = ts.check_model(variant, ts.target(target), role=role, graph=f"{name}.onnx")
                assert [f.line() for f in findings if f.severity != "note"] == []


def test_check_of_an_artifact_lints_each_listed_graph_from_its_verified_bytes(exported, tmp_path, capsys):
    """`check ART` reads the graphs through the artifact loader (every hash first), one finding
    list per graph the manifest lists; an unlisted .onnx beside them is refused, not linted."""
    import shutil

    art = exported["tiny"][0]
    assert main(["check", str(art), "--target", "trt-10.3"]) == 0
    assert "ok: 0 error(s)" in capsys.readouterr().out
    copy = tmp_path / "art"
    shutil.copytree(art, copy)
    onnx.save(clean_block(), copy / "extra.onnx")
    assert main(["check", str(copy), "--target", "trt-10.3"]) == 1
    assert "unlisted files ['extra.onnx']" in capsys.readouterr().err
