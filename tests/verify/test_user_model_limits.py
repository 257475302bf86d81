"""No crash, no hang, whatever the bare model (issue 37): the models that made `verify` and
`certify` hang or print a traceback, each now one line on stderr and exit 2 -- a Loop of 2^62
trips inside an If (stopped at the wall-clock budget, naming the node; `inspect` and `check` warn
before anything runs), a declared [1, 2^20, 2^16] input (refused before allocating), an axis
declared of size 0 (the declaration named), a graph that allocates past the memory budget, a bug
inside verify's own plan (an internal error, its traceback in the report only) -- and the budget
itself (tickformer.runtime.budget) on its own."""

from __future__ import annotations

import json
import time

import numpy as np
import onnx
import pytest
from foreign_models import signal_model
from onnx import TensorProto, helper, numpy_helper

from tickformer.cli import main
from tickformer.runtime.budget import Budget, BudgetExceeded, OverBudget


def _save(path, nodes, inputs, outputs, inits=()):
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    onnx.save(model, path)
    return path


def loop_in_if(path, trips=2**62):
    """y = If(sum(x) > -1e30) then Loop(trips){identity} of x else x: always the Loop."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["co"]), helper.make_node("Identity", ["a"], ["ao"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("co", TensorProto.BOOL, []),
            helper.make_tensor_value_info("ao", TensorProto.FLOAT, None),
        ],
    )
    then = helper.make_graph(
        [
            helper.make_node("Constant", [], ["m"], value=numpy_helper.from_array(np.array(trips, np.int64))),
            helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(np.array(True))),
            helper.make_node("Loop", ["m", "t", "x"], ["lo"], body=body, name="spin"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("lo", TensorProto.FLOAT, None)],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["eo"])],
        "else",
        [],
        [helper.make_tensor_value_info("eo", TensorProto.FLOAT, None)],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Constant", [], ["low"], value=numpy_helper.from_array(np.array(-1e30, np.float32))),
        helper.make_node("Greater", ["s", "low"], ["cond"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="branch"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", 3])
    return _save(path, nodes, [x], [y])


def one_error_line(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_a_loop_of_2_62_trips_stops_at_the_time_budget_naming_the_node(tmp_path, capsys):
    path = loop_in_if(tmp_path / "loop.onnx")
    out = tmp_path / "out"
    start = time.monotonic()
    rc = main(["verify", str(path), "--domain", "-1:1", "--time-budget", "1.5", "--out", str(out)])
    took = time.monotonic() - start
    line = one_error_line(capsys)
    assert rc == 2 and took < 30, (rc, took)
    # verify stops one engine run at a tenth of the budget (certify at the budget: its timed loop
    # must see no watchdog wake-ups)
    assert "at the Loop node 'spin': one run of the model took more than 0.15 s" in line, line
    assert "a tenth of the wall-clock budget of 1.5 s" in line, line
    assert "Loop 'spin': a Loop of 2^62 trips" in line and "--time-budget" in line, line
    report = json.loads((out / "verify.json").read_text())
    assert report["verdict"] == "INCOMPLETE" and "wall-clock budget" in report["stopped"]
    assert {p["status"] for p in report["properties"]} == {"skip"}


def test_one_run_is_stopped_at_a_tenth_of_the_budget(tmp_path, capsys):
    """With the default budget (1800 s) the loop would run 30 minutes; verify stops the one run
    at a tenth of the budget: here 20 s -> 2 s."""
    path = loop_in_if(tmp_path / "loop.onnx")
    start = time.monotonic()
    rc = main(["verify", str(path), "--domain", "-1:1", "--time-budget", "20", "--out", str(tmp_path / "o")])
    took = time.monotonic() - start
    line = one_error_line(capsys)
    assert rc == 2 and took < 10, (rc, took)
    assert "one run of the model took more than 2 s, a tenth of the wall-clock budget of 20 s" in line


def test_inspect_and_check_warn_about_the_unbounded_loop(tmp_path, capsys):
    path = loop_in_if(tmp_path / "loop.onnx")
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning   loop.onnx: If 'branch' then_branch > Loop 'spin': a Loop of 2^62 trips" in out
    assert main(["check", str(path), "--target", "trt-10"]) == 0
    out = capsys.readouterr().out
    assert "[unbounded-loop] If 'branch' then_branch > Loop 'spin': a Loop of 2^62 trips" in out
    bounded = loop_in_if(tmp_path / "bounded.onnx", trips=8)
    assert main(["check", str(bounded), "--target", "trt-10", "--notes"]) == 0
    out = capsys.readouterr().out
    assert "unbounded-loop" not in out and "a Loop of at most 8 trips" in out


def test_a_declared_shape_over_the_memory_budget_is_refused_before_allocating(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2**20, 2**16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2**20, 2**16])
    path = _save(tmp_path / "huge.onnx", [helper.make_node("Tanh", ["x"], ["y"])], [x], [y])
    assert main(["verify", str(path), "--domain", "-1:1", "--out", str(tmp_path / "o")]) == 2
    line = one_error_line(capsys)
    assert (
        "input x float32[1, 1048576, 65536] is 256 GiB at the sizes tried" in line
        and "--memory-budget" in line
    )
    assert main(["inspect", str(path)]) == 0  # inspect allocates nothing: a warning
    assert "is 256 GiB at the sizes tried" in capsys.readouterr().out


def test_an_axis_declared_of_size_0_names_the_declaration(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 0, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", 3])
    path = _save(tmp_path / "zero.onnx", [helper.make_node("Tanh", ["x"], ["y"])], [x], [y])
    assert main(["verify", str(path), "--domain", "-1:1", "--out", str(tmp_path / "o")]) == 2
    line = one_error_line(capsys)
    assert "input x declares axis 1 of size 0 (float32[B, 0, 3])" in line and "re-export" in line, line
    assert "dynamic_axes" not in line


def test_a_graph_that_allocates_past_the_memory_budget_is_stopped(tmp_path, capsys):
    """Expand to [2^16, 2^15] floats (8 GiB) from a one-element input: no declared shape says it;
    the address-space limit makes ORT's allocation fail, reported as the memory budget."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    shape = numpy_helper.from_array(np.array([1 << 16, 1 << 15], np.int64), "shape")
    nodes = [
        helper.make_node("Expand", ["x", "shape"], ["e"], name="grow"),
        helper.make_node("ReduceSum", ["e"], ["y"], keepdims=0),
    ]
    path = _save(tmp_path / "grow.onnx", nodes, [x], [y], [shape])
    rc = main(["verify", str(path), "--domain", "-1:1", "--memory-budget", "1", "--out", str(tmp_path / "o")])
    line = one_error_line(capsys)
    assert rc == 2 and "ran out of the memory budget of 1 GiB" in line and "--memory-budget" in line, line


def test_a_bug_in_the_plan_is_one_line_and_the_report_keeps_the_traceback(tmp_path, capsys, monkeypatch):
    """An exception of verify's own code outside any property (here: the tolerance's) used to
    escape as a traceback with exit 1: now the property it prepared is an internal error."""
    from tickformer.verify.properties import plans

    def broken(model):
        raise KeyError("present.0.key")

    monkeypatch.setattr(plans, "tolerances", broken)
    path = signal_model(tmp_path / "c.onnx", "causal")
    out = tmp_path / "out"
    rc = main(["verify", str(path), "--domain", "-1:1", "--examples", "5", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 2 and "Traceback" not in captured.err + captured.out
    report = json.loads((out / "verify.json").read_text())
    bad = [p for p in report["properties"] if p["status"] == "error"]
    assert len(bad) == 1 and "KeyError" in bad[0]["message"] and bad[0]["details"]["traceback"]
    assert report["verdict"] == "INCOMPLETE"


def test_a_bug_in_inspect_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    from tickformer.commands import inspect

    def broken(*args, **kwargs):
        raise KeyError("h")

    monkeypatch.setattr(inspect, "foreign_summary", broken)
    path = signal_model(tmp_path / "c.onnx", "causal")
    assert main(["inspect", str(path)]) == 2
    line = one_error_line(capsys)
    assert "internal error in tickformer inspect (a bug in tickformer" in line and "KeyError" in line


def test_the_budget_stops_python_code_and_is_restored():
    """SIGALRM stops a Python loop (onnx.reference's Loop is one); the limits are lifted after."""
    import resource

    before = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(OverBudget) as info:
        with Budget(0.3, 1 << 30) as budget:
            assert budget.memory_enforced
            while True:
                pass
    assert isinstance(info.value.error, BudgetExceeded) and "0.3 s" in str(info.value.error)
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    with Budget(5.0, None):  # a run inside its budget is untouched
        time.sleep(0.01)


@pytest.mark.parametrize(
    "flag", [["--time-budget", "0"], ["--time-budget", "nan"], ["--memory-budget", "-1"]]
)
def test_budget_flags_are_checked(tmp_path, capsys, flag):
    path = signal_model(tmp_path / "c.onnx", "causal")
    assert main(["verify", str(path), "--domain", "-1:1", *flag, "--out", str(tmp_path / "o")]) == 2
    assert flag[0] in one_error_line(capsys)
