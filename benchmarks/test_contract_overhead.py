"""Overhead of the run-time contract modes: `off` vs `monitor` vs `check`.

Two levels, both single-threaded (benchmarks/conftest.py pins threads):
  * the monitor alone: ContractMonitor.check_step on a control-sized step (x [1, 1, 3],
    y [1, 1, 2]) in each mode, and validate_input (the always-on input check of Session.step);
  * a whole Session.step of the `control` artifact on the ORT CPU backend with contracts
    off / monitor / check (a step at position 0 after reset, so every sample does the same work).
No target is asserted (speed lives in the benchmark report); each benchmark asserts only that the
thing measured ran without a violation. Compare the `mean`/`median` columns across modes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.contracts.input_domain import validate_input
from tickformer.runtime.monitor import ContractMonitor

X = np.zeros((1, 1, 3), np.float32)  # [B, 1, d_in]
Y = np.zeros((1, 1, 2), np.float32)  # [B, 1, d_out]


@pytest.mark.parametrize("mode", ["off", "monitor", "check"])
def test_monitor_check_step(benchmark, mode):
    mon = ContractMonitor(mode, input_domain=(-10.0, 10.0), output_bound=100.0, budget_ns=1_000_000)
    benchmark.group = "contract monitor alone"
    benchmark(mon.check_step, X, Y, 1000)
    assert all(c["violations"] == 0 for c in mon.summary()["contracts"].values())


def test_validate_input(benchmark):
    benchmark.group = "contract monitor alone"
    benchmark(validate_input, X, -10.0, 10.0)


@pytest.mark.parametrize("mode", ["off", "monitor", "check"])
def test_session_step_contract_modes(benchmark, artifact_for, control, mode):
    from tickformer import runtime

    config, _ = control
    path = artifact_for(config)[0]
    session = runtime.load(
        path, backend="ort", contracts=mode, budget_ns=1_000_000_000
    )  # 1 s: measure the overhead, not the noisy shared machine
    x = np.full((1, 1, config.d_in), 0.5, np.float32)  # [B, 1, d_in]

    def one_step():
        session.reset()
        return session.step(x)

    for _ in range(50):  # warm-up
        one_step()
    benchmark.group = "Session.step (ort, control) by contract mode"
    benchmark.pedantic(one_step, rounds=2000, iterations=1, warmup_rounds=10)
    if session.monitor is not None:
        assert all(c["violations"] == 0 for c in session.monitor.summary()["contracts"].values())
    session.close()
