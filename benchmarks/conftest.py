"""Benchmark-suite settings: one thread everywhere, the demo-sized model, machine description.

Run: `python -m pytest benchmarks -q --benchmark-json=benchmarks/results/raw.json`, then
`python benchmarks/report.py` (make bench does both). Targets are reported as pass/fail by
report.py, never asserted here: a benchmark fails only when the thing measured is broken.

Thread pinning must happen before numpy / onnxruntime / torch are imported: this file sets
OMP/OPENBLAS/MKL thread counts to 1 at import time (pytest imports it before any test module);
torch.set_num_threads(1) and ORT intra_op_num_threads=1 are set where those are created.
"""

from __future__ import annotations

import os
import sys

THREAD_ENV = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
_NUMPY_WAS_IMPORTED = "numpy" in sys.modules
for _var in THREAD_ENV:
    os.environ[_var] = "1"

sys.path.insert(
    0, os.path.dirname(os.path.abspath(__file__))
)  # sibling helper modules (--import-mode=importlib)

import datetime  # noqa: E402
import platform  # noqa: E402

import harness  # noqa: E402
import pytest  # noqa: E402


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def governor() -> str | None:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("numpy", "onnx", "onnxruntime", "torch", "pytest_benchmark"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "__version__", "?")
        except ImportError:
            out[name] = "not installed"
    return out


_START = {
    "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "load_average_start": load_average(),
}


def pytest_benchmark_update_machine_info(config, machine_info):
    """Our machine description goes into pytest-benchmark's JSON (machine_info["tickformer"]),
    so the report's machine table always belongs to the same run as its numbers."""
    machine_info["tickformer"] = {
        **_START,
        "command": " ".join(["python -m pytest"] + sys.argv[1:]),
        "cpu_model": cpu_model(),
        "cores_online": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "governor": governor(),
        "platform": platform.platform(),
        "load_average_end": load_average(),
        "thread_env": {v: os.environ.get(v) for v in THREAD_ENV},
        "numpy_imported_before_thread_pinning": _NUMPY_WAS_IMPORTED,
        "versions": versions(),
    }


def _settle_onnxruntime_fp_state() -> None:
    """onnxruntime applies its `session.set_denormal_as_zero` option (default off) to the thread
    that creates the process's first session, once: that would silently clear the flush-to-zero
    the fixture below sets if a test's subject happened to create the first session. Create it
    here, before any fixture runs."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "settle",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


_settle_onnxruntime_fp_state()


@pytest.fixture(autouse=True)
def flush_to_zero(request):
    """Every measurement runs with flush-to-zero in the measuring thread, as tickformer's
    ControlLoop and certify run the step (runtime/denormals.py): a real-time deployment's
    configuration, applied to every subject alike (torch and numpy too). The subject
    `ort-no-ftz` (test_step_latency.py) measures the default thread state side by side."""
    from tickformer.runtime.denormals import flushed_denormals

    with flushed_denormals(True) as on:
        request.node.user_properties.append(("flush_to_zero", on))
        yield on


@pytest.fixture(scope="session")
def torch_mod():
    """torch, single-threaded, or a skip naming how to install it (benchmark-only comparator)."""
    torch = pytest.importorskip(
        "torch", reason="torch comparator not installed: pip install torch==2.13.0 (make bench does)"
    )
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set once in this process
    return torch


@pytest.fixture(scope="session")
def control():
    """The demo-sized model of the targets: preset `control` (d_model 64, 2 layers, 4 heads,
    d_ff 256, max_len 256, d_in 3, d_out 2) with seeded weights."""
    from tickformer.model import init_params, preset

    config = preset("control")
    return config, init_params(config, seed=0)


@pytest.fixture(scope="session")
def artifact(control, artifact_for):
    """The control model's exported artifact (artifact_for's, shared by the suites that time it)."""
    config, _ = control
    return artifact_for(config)[0]


@pytest.fixture(scope="session")
def memory_results():
    """Allocation and resident-memory results, written to results/memory.json at session end."""
    store: dict = {"allocations": {}, "rss": [], "date_utc": _START["date_utc"]}
    yield store
    if store["allocations"] or store["rss"]:
        harness.write_json("memory", store)


@pytest.fixture(scope="session")
def artifact_for(control, tmp_path_factory):
    """artifact_for(config) -> exported artifact directory for that config (cached per config;
    seeded weights; export-time equivalence on lengths 1 and 2 only except for the control model)."""
    import subjects

    from tickformer.model import init_params

    base_config, base_params = control
    cache: dict = {}

    def get(config):
        if config not in cache:
            params = base_params if config == base_config else init_params(config, seed=0)
            lengths = None if config == base_config else [1, 2]
            out = tmp_path_factory.mktemp(f"art_d{config.d_model}_n{config.max_len}")
            cache[config] = (subjects.export_artifact(config, params, out, lengths=lengths), params)
        return cache[config]

    return get


@pytest.fixture(scope="module")
def compiler():
    """The C compiler the c backend finds (codegen/toolchain.py), or a skip naming how to install one."""
    from tickformer.codegen.toolchain import find_compiler
    from tickformer.errors import BackendUnavailable

    try:
        return find_compiler()
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
