"""Issue 38 (attack suite): `verify` and `certify` on a bare model with unbounded control flow
nested in a subgraph -- a Loop of 2^62 trips inside an If -- hung silently. Each now stops at its
wall-clock budget with one line naming the node, exit 2, in a child process with a hard timeout
(a hang fails the test instead of hanging the suite). The model is issue 37's
(tests/verify/test_user_model_limits.py `loop_in_if`); the budget is tickformer.runtime.budget.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

KIND = "attack: verify / certify a bare model with a Loop of 2^62 trips inside an If"


def _loop_in_if(path: Path) -> Path:
    where = Path(__file__).parents[1] / "verify"
    sys.path.insert(0, str(where))  # foreign_models, which the limits module imports
    try:
        spec = importlib.util.spec_from_file_location(
            "_user_model_limits", where / "test_user_model_limits.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(where))
    return module.loop_in_if(path)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("command", ["verify", "certify"])
def test_unbounded_control_flow_in_a_subgraph_stops_at_the_budget(tmp_path, outcomes, command):
    model = _loop_in_if(tmp_path / "loop.onnx")
    argv = [command, str(model), "--domain", "-1:1", "--time-budget", "2", "--out", str(tmp_path / "out")]
    if command == "certify":
        argv += ["--budget-us", "1000"]
    outcomes.describe(KIND, "stopped at --time-budget, one line naming the node, exit 2 (child process)")
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tickformer.cli", *argv], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        outcomes.record(KIND, "UNEXPECTED HANG")
        pytest.fail(f"tickformer {command} hung on a Loop of 2^62 trips (killed after 120 s)")
    took = time.monotonic() - start
    lines = done.stderr.strip().splitlines()
    ok = done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr
    outcomes.record(KIND, "stopped, one line, exit 2" if ok else f"UNEXPECTED exit {done.returncode}")
    assert ok, (done.returncode, done.stderr[-2000:])
    assert "Loop node 'spin'" in lines[0] and "wall-clock budget" in lines[0], lines[0]
    assert took < 90, took
