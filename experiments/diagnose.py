"""Reproduce the profiling behind benchmarks/ANALYSIS.md, one section per finding. Prints plain
text; about a minute on 2 cores. Not part of `make bench`.

    python experiments/diagnose.py [nodes|scaling|exp|allocs|train|all]

nodes    step.onnx's operators after ONNX Runtime's optimiser, its bare `run` p50 and the
         per-node cost that implies (at d_model 64 ORT's per-node dispatch, not arithmetic,
         sets the step time), next to ORT's floor (an Identity graph).
scaling  the bare step at max_len 8 .. 2048: the fixed per-node part vs the O(N d) part.
exp      ORT's Exp/Softmax on -inf and other subnormal-producing inputs vs ordinary ones, with and
         without flush-to-zero in the calling thread (runtime/denormals.py, as ControlLoop and
         certify run), and the bare step at positions 1 / N/2 / N. One child process per setting.
allocs   tracemalloc bytes allocated within one call of each piece of Session.step (ORT).
train    the numpy training step (loss, gradients, clip, Adam) at B16xT64 and B4xT256.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import harness  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import subjects  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from tickformer.artifact.format import cache_shape, step_feeds  # noqa: E402
from tickformer.export.graphs import build_step  # noqa: E402
from tickformer.model import init_params, preset  # noqa: E402


def p50_us(fn, n: int = 1500, warmup: int = 100) -> float:
    for _ in range(warmup):
        fn()
    out = np.zeros(n, dtype=np.int64)
    harness.timed_calls(fn, out)
    return float(np.median(out)) / 1e3


def optimized(model: onnx.ModelProto) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as tmp:
        options = subjects.ort_options()
        options.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        return onnx.load(options.optimized_model_filepath)


def bare(model: onnx.ModelProto):
    return ort.InferenceSession(
        model.SerializeToString(), sess_options=subjects.ort_options(), providers=["CPUExecutionProvider"]
    )


def feeds_at(config, pos: int) -> dict:
    """step.onnx feeds at `pos` with random finite caches (batch 1)."""
    rng = np.random.default_rng(0)
    k = rng.standard_normal(cache_shape(config, 1)).astype(np.float32)  # [L, 1, H, N, dh]
    v = rng.standard_normal(cache_shape(config, 1)).astype(np.float32)
    return step_feeds(config, rng.standard_normal((1, 1, config.d_in)).astype(np.float32), pos, k, v)


def identity_floor_us() -> float:
    floor = bare(
        helper.make_model(
            helper.make_graph(
                [helper.make_node("Identity", ["x"], ["y"])],
                "f",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
            ),
            opset_imports=[helper.make_opsetid("", 17)],
            ir_version=8,
        )
    )
    x = np.zeros((1, 3), np.float32)
    return p50_us(lambda: floor.run(None, {"x": x}))


def nodes() -> None:
    config = preset("control")
    model = build_step(init_params(config, 0), config, 1, 17)
    opt = optimized(model)
    ops = Counter(n.op_type for n in opt.graph.node)
    floor_us = identity_floor_us()
    sess = bare(model)
    feeds = feeds_at(config, config.max_len - 1)
    us = p50_us(lambda: sess.run(None, feeds))
    n = len(opt.graph.node)
    print(f"ORT Identity floor (bare run): {floor_us:.1f} us")
    print(
        f"step.onnx: {len(model.graph.node)} nodes exported, {n} after ORT optimisation; bare run p50 {us:.1f} us "
        f"-> {(us - floor_us) / n:.2f} us per node"
    )
    print("  after optimisation: " + ", ".join(f"{op} {c}" for op, c in ops.most_common()))


def scaling() -> None:
    for n in (8, 64, 256, 1024, 2048):
        config = preset("control").replace(max_len=n)
        sess = bare(build_step(init_params(config, 0), config, 1, 17))
        feeds = feeds_at(config, n - 1)
        print(f"max_len {n:5d}: bare step p50 {p50_us(lambda: sess.run(None, feeds), n=800):.1f} us")


def _exp_child(ftz: bool) -> None:
    from tickformer.runtime.denormals import set_flush_to_zero

    options = subjects.ort_options()
    sessions = []
    for op, attrs in (("Exp", {}), ("Softmax", {"axis": -1})):
        model = helper.make_model(
            helper.make_graph(
                [helper.make_node(op, ["x"], ["y"], **attrs)],
                "g",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4096])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4096])],
            ),
            opset_imports=[helper.make_opsetid("", 17)],
            ir_version=8,
        )
        sessions.append(
            (
                op,
                ort.InferenceSession(
                    model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
                ),
            )
        )
    config = preset("control")
    step = ort.InferenceSession(
        build_step(init_params(config, 0), config, 1, 17).SerializeToString(),
        sess_options=options,
        providers=["CPUExecutionProvider"],
    )
    # After the sessions exist: onnxruntime's first session clears flush-to-zero in this thread.
    if ftz and not set_flush_to_zero(True):
        print("  (no flush-to-zero on this platform)")
    for op, sess in sessions:
        row = []
        for label, value in (("0", 0.0), ("-87", -87.0), ("-90", -90.0), ("-1e30", -1e30), ("-inf", -np.inf)):
            x = np.full((8, 4096), value, np.float32)
            x[:, 0] = 0.0
            row.append(f"{label}: {p50_us(lambda: sess.run(None, {'x': x}), n=300, warmup=20):.0f} us")
        print(f"  ORT {op} over 32768 values, " + ", ".join(row))
    cells = []
    for pos in (1, config.max_len // 2, config.max_len - 1):
        feeds = feeds_at(config, pos)
        cells.append(f"pos {pos}: {p50_us(lambda: step.run(None, feeds)):.1f} us")
    print("  bare step.onnx: " + ", ".join(cells))


def exp() -> None:
    import subprocess

    for ftz in (False, True):
        print(f"flush-to-zero {'on' if ftz else 'off'}:", flush=True)
        subprocess.run([sys.executable, __file__, "_exp_child", "1" if ftz else "0"], check=True)


def allocs() -> None:
    from tickformer.contracts.input_domain import validate_input

    config = preset("control")
    params = init_params(config, 0)
    with tempfile.TemporaryDirectory() as tmp:
        art = subjects.export_artifact(config, params, Path(tmp), lengths=[1, 2])
        x = np.zeros((1, 1, config.d_in), np.float32)
        for kind in ("ort", "ort-run"):
            sess = subjects.open_session(art, kind)
            be = sess.backend
            sess.step(x)
            pieces = {
                "Session.step (whole, incl. commit)": lambda: (sess.reset(), sess.step(x)),
                "validate_input(x, lo, hi)": lambda: validate_input(x, -10.0, 10.0),
                "backend.step(x, 5)": lambda: be.step(x, 5),
                "backend.commit(5)": lambda: be.commit(5),
            }
            if getattr(be, "_io", None) is not None:
                pieces["InferenceSession.run_with_iobinding alone (ORT's binding)"] = lambda: (
                    be._step.run_with_iobinding(be._io)
                )
            for name, fn in pieces.items():
                r = harness.python_allocations(fn, calls=500, warmup=20)
                print(
                    f"{kind:8s} {name:58s} max {r['peak_bytes_per_call']:5d} B in one call, "
                    f"{r['calls_with_alloc']}/500 calls allocate, net {r['net_blocks']} blocks"
                )
            sess.close()


def train() -> None:
    from train_step import SHAPES, train_step_ms

    for batch, t in SHAPES:
        ms = train_step_ms(batch, t)
        print(f"numpy train step B{batch}xT{t}: {ms:.1f} ms -> {batch * t / ms * 1e3:.0f} tokens/s")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what == "_exp_child":
        _exp_child(sys.argv[2] == "1")
        sys.exit(0)
    for name, fn in (
        ("nodes", nodes),
        ("scaling", scaling),
        ("exp", exp),
        ("allocs", allocs),
        ("train", train),
    ):
        if what in (name, "all"):
            print(f"== {name}")
            fn()
