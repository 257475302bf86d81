"""Loading recorded engines (`tickformer.runtime.backends.tensorrt_engine`): the compatibility
rules checked from the manifest alone, before an engine's bytes are read. Runs without TensorRT
or a GPU; the build side and its bookkeeping: tests/export/test_engines.py."""

from __future__ import annotations

import pytest

from tickformer.errors import ConfigError
from tickformer.runtime.backends.cuda import DeviceInfo
from tickformer.runtime.backends.tensorrt_engine import compatibility_problem, parse_version


def entry(**over):
    base = {
        "tensorrt": "10.3.0.30",
        "gpu": "Orin",
        "compute_capability": "8.7",
        "version_compatible": False,
        "hardware_compat": "same",
    }
    base.update(over)
    return base


def test_compatibility_rules():
    orin_103 = DeviceInfo("10.3.0.30", "Orin", (8, 7))
    assert compatibility_problem(entry(), orin_103) is None
    assert "TensorRT 10.3.0.30 cannot run on TensorRT 10.4.0" in compatibility_problem(
        entry(), DeviceInfo("10.4.0", "Orin", (8, 7))
    )
    assert "rebuild it on this GPU" in compatibility_problem(
        entry(), DeviceInfo("10.3.0.30", "NVIDIA H100", (9, 0))
    )
    # version-compatible: same major, same or newer.
    vc = entry(version_compatible=True)
    assert compatibility_problem(vc, DeviceInfo("10.7.0", "Orin", (8, 7))) is None
    assert compatibility_problem(vc, DeviceInfo("10.2.0", "Orin", (8, 7))) is not None
    assert compatibility_problem(vc, DeviceInfo("11.4.1", "Orin", (8, 7))) is not None
    # ampere+: any GPU of compute capability >= 8.0, not Turing.
    hc = entry(hardware_compat="ampere+")
    assert compatibility_problem(hc, DeviceInfo("10.3.0.30", "NVIDIA A100", (8, 0))) is None
    assert "8.0" in compatibility_problem(hc, DeviceInfo("10.3.0.30", "Tesla T4", (7, 5)))


def test_parse_version():
    assert parse_version("10.3.0.30") == (10, 3, 0, 30)
    with pytest.raises(ConfigError):
        parse_version("ten")
