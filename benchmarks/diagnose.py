"""Reproduce the profiling behind benchmarks/ANALYSIS.md (why targets are missed), one section
per finding. Prints plain text; takes about a minute on 2 cores. Not part of `make bench`.

    python benchmarks/diagnose.py [nodes|cache|exp|allocs|train|all]

nodes   ONNX Runtime node counts of step.onnx after ORT's optimiser vs the what-if lean graph,
        and the per-node cost that implies (ORT dispatches every node; at d_model 64 the
        arithmetic is small, so the node count sets the step time).
cache   the what-if lean step at max_len 256 and 2048 with the stacked cache (each layer's
        cache copied out every step) vs one cache input per layer (read in place).
exp     ORT's Exp/Softmax on -inf (masked) inputs vs finite ones (the cause of a step that
        was slower at early positions, fixed in export/blocks.py attend_cached), the bare
        step.onnx at positions 1/128/255, and model.onnx with and without -inf reaching Exp.
allocs  tracemalloc bytes allocated by each piece of Session.step (ORT, iobinding and run),
        and an allocation-free input check for comparison.
train   the numpy training step as it is vs with two in-place rewrites (monkeypatched here
        only, not in model/): interleaved A/B medians. The py-spy profile is a command, see
        ANALYSIS.md.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import harness  # noqa: E402
import subjects  # noqa: E402
from tickformer.model import init_params, preset  # noqa: E402


def p50_us(fn, n: int = 1500, warmup: int = 100) -> float:
    for _ in range(warmup):
        fn()
    out = np.zeros(n, dtype=np.int64)
    harness.timed_calls(fn, out)
    return float(np.median(out)) / 1e3


def optimized_nodes(model: onnx.ModelProto) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        options = subjects.ort_options()
        options.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])
        return len(onnx.load(options.optimized_model_filepath).graph.node)


def step_feeds(config, pos: int) -> dict:
    rng = np.random.default_rng(0)
    shape = (config.n_layers, 1, config.n_heads, config.max_len, config.d_head)
    return {
        "x": rng.standard_normal((1, 1, config.d_in)).astype(np.float32),
        "pos": np.array([pos], dtype=np.int64),
        "k_cache": rng.standard_normal(shape).astype(np.float32),
        "v_cache": rng.standard_normal(shape).astype(np.float32),
    }


def bare(model: onnx.ModelProto):
    return ort.InferenceSession(model.SerializeToString(), sess_options=subjects.ort_options(), providers=["CPUExecutionProvider"])


def nodes() -> None:
    from tickformer.export.graphs import build_step

    import whatif_step

    config = preset("control")
    params = init_params(config, 0)
    floor = bare(helper.make_model(
        helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "f",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    x = np.zeros((1, 1, 3), np.float32)
    floor_us = p50_us(lambda: floor.run(None, {"x": x}))
    feeds = step_feeds(config, config.max_len - 1)
    print(f"ORT Identity floor (bare run): {floor_us:.1f} us")
    for name, model in (("step.onnx (export/graphs.py)", build_step(params, config, 1, 17)), ("what-if lean step", whatif_step.build_lean_step(params, config))):
        sess = bare(model)
        us = p50_us(lambda: sess.run(None, feeds))
        n = optimized_nodes(model)
        print(f"{name}: {len(model.graph.node)} nodes exported, {n} after ORT optimisation; bare run p50 {us:.1f} us "
              f"-> {(us - floor_us) / n:.2f} us per node")


def cache() -> None:
    """Bare step cost vs max_len with the stacked cache (a per-step copy of each layer's cache)
    and with one cache input per layer (read in place): the what-if lean graph both ways."""
    import whatif_step

    for n in (256, 2048):
        config = preset("control").replace(max_len=n)
        params = init_params(config, 0)
        stacked = step_feeds(config, n - 1)
        per_layer = {"x": stacked["x"], "pos": stacked["pos"]}
        for i in range(config.n_layers):
            per_layer[f"k_cache.{i}"] = np.ascontiguousarray(stacked["k_cache"][i, 0])  # [H, N, dh]
            per_layer[f"v_cache.{i}"] = np.ascontiguousarray(stacked["v_cache"][i, 0])
        a = bare(whatif_step.build_lean_step(params, config))
        b = bare(whatif_step.build_lean_step(params, config, per_layer_cache=True))
        ta = p50_us(lambda: a.run(None, stacked), n=800)
        tb = p50_us(lambda: b.run(None, per_layer), n=800)
        print(f"max_len {n}: lean step, stacked cache + GatherND {ta:.1f} us; one cache input per layer {tb:.1f} us")


def exp() -> None:
    from tickformer.export import blocks
    from tickformer.export.graphs import build_step

    cases: tuple[tuple[str, dict[str, Any]], ...] = (("Exp", {}), ("Softmax", {"axis": -1}))
    for op, attrs in cases:
        model = helper.make_model(
            helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4096])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4096])]),
            opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        sess = bare(model)
        row = []
        for label, value in (("-inf", -np.inf), ("0", 0.0), ("-95 (denormal result)", -95.0)):
            x = np.full((8, 4096), value, np.float32)
            x[:, 0] = 0.0
            row.append(f"{label}: {p50_us(lambda: sess.run(None, {'x': x}), n=300, warmup=20):.0f} us")
        print(f"ORT {op} over 32768 values, " + ", ".join(row))
    config = preset("control")
    params = init_params(config, 0)
    sess = bare(build_step(params, config, 1, 17))
    cells = []
    for pos in (1, 128, 255):
        feeds = step_feeds(config, pos)
        cells.append(f"pos {pos}: {p50_us(lambda: sess.run(None, feeds)):.1f} us")
    print("bare step.onnx as exported: " + ", ".join(cells))
    original = blocks.chunk_state

    def chunk_state_no_inf_exp(g, s, v):
        """Same math; the masked (-inf) entries are replaced by 0 before Exp and selected to 0 after."""
        m = g.reduce("ReduceMax", s, [-1])
        masked = g.op("Equal", s, g.scalar(-np.inf))
        e = g.op("Exp", g.op("Where", masked, g.scalar(0.0), g.op("Sub", s, blocks.safe_max(g, m))))
        p = g.op("Where", masked, g.scalar(0.0), e)
        return blocks.Piece(m, g.reduce("ReduceSum", p, [-1]), g.op("MatMul", p, v))

    from tickformer.export.graphs import build_model

    x = np.random.default_rng(1).uniform(-1, 1, (1, config.max_len, config.d_in)).astype(np.float32)
    for label, fn in (("as exported (causal -inf into Exp)", original), ("-inf kept out of Exp", chunk_state_no_inf_exp)):
        blocks.chunk_state = fn
        try:
            full = bare(build_model(params, config, 1, 17))
        finally:
            blocks.chunk_state = original
        print(f"bare model.onnx at T={config.max_len}, {label}: {p50_us(lambda: full.run(None, {'x': x}), n=60, warmup=5):.0f} us")


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
                "time.perf_counter_ns() (Session.step start stamp)": time.perf_counter_ns,
                "validate_input(x, lo, hi) (x.min(), x.max())": lambda: validate_input(x, -10.0, 10.0),
                "backend.step(x, 5)": lambda: be.step(x, 5),
                "backend.commit(5) (two sliced views)": lambda: be.commit(5),
            }
            if getattr(be, "_io", None) is not None:
                pieces["InferenceSession.run_with_iobinding alone (ORT's binding)"] = lambda: be._step.run_with_iobinding(be._io)
            for name, fn in pieces.items():
                r = harness.python_allocations(fn, calls=500, warmup=20)
                print(f"{kind:14s} {name:52s} max {r['peak_bytes_per_call']:5d} B in one call, {r['calls_with_alloc']}/500 calls allocate")
            k_cache, _ = be.cache()
            rows = [k_cache[:, :, :, p] for p in range(config.max_len)]  # views made once, at load
            new_row = np.zeros_like(rows[0])
            if kind == "ort-run":
                r = harness.python_allocations(lambda: np.copyto(rows[5], new_row), calls=500, warmup=20)
                print(f"{'alternative':14s} {'commit via precomputed row views + np.copyto':52s} max {r['peak_bytes_per_call']:5d} B in one call, {r['calls_with_alloc']}/500 calls allocate")
            sess.close()
    n = x.size

    def items_check() -> bool:
        i = 0
        while i < n:
            v = x.item(i)  # a Python float from the float freelist: no traced allocation
            if not (-10.0 <= v <= 10.0):  # NaN fails
                return False
            i += 1
        return True

    r = harness.python_allocations(items_check, calls=500, warmup=20)
    print(f"{'alternative':14s} {'x.item(i) loop (finite and in domain)':52s} max {r['peak_bytes_per_call']:5d} B in one call, {r['calls_with_alloc']}/500 calls allocate")


def train() -> None:
    """Interleaved A/B of the numpy training step as it is vs with two in-place rewrites
    (monkeypatched here only): relu' by multiplication, softmax weights computed in place."""
    import importlib

    from tickformer.model import grad, optim

    attn = importlib.import_module("tickformer.model.attention")
    config = preset("control")

    def ffn_backward_inplace(dy, cache):
        c1, active, c2 = cache
        dr, dw2, db2 = grad.linear_backward(dy, c2)  # [..., F]
        np.multiply(dr, active, out=dr)  # relu': one pass, no new array (was np.where(active, dr, 0))
        dx, dw1, db1 = grad.linear_backward(dr, c1)
        return dx, {"w1": dw1, "b1": db1, "w2": dw2, "b2": db2}

    def attention_weights_inplace(q, k, *, mask=None):
        s = attn.scaled_scores(q, k)  # [..., Tq, Tk], a new array we own
        if mask is not None:
            np.copyto(s, -np.inf, where=~np.broadcast_to(mask, s.shape))  # selection, in place
        m = s.max(axis=-1, keepdims=True)  # [..., Tq, 1]
        m[m == -np.inf] = 0
        s -= m
        np.exp(s, out=s)
        l = s.sum(axis=-1, keepdims=True)  # [..., Tq, 1]
        if l.min() > 0:  # every row has a key (always, for causal self-attention)
            s /= l
            return s
        return np.where(l > 0, s / np.where(l > 0, l, 1), 0)  # fully masked rows: zeros

    def step_ms(batch: int, t: int, n: int = 12) -> float:
        params = init_params(config, 0)
        rng = np.random.default_rng(0)
        b = grad.Batch(x=rng.standard_normal((batch, t, config.d_in)).astype(np.float32), target=rng.standard_normal((batch, t, config.d_out)).astype(np.float32))
        opt = optim.Adam(beta1=0.9, beta2=0.98, eps=1e-9)
        times = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            _, g = grad.loss_and_grads(params, config, b)
            g, _ = optim.clip_by_global_norm(g, 1.0)
            opt.step(params, g, 1e-3)
            times.append(time.perf_counter_ns() - t0)
        return float(np.median(times[2:])) / 1e6

    variants = {"as is": (grad.ffn_backward, grad.attention_weights), "in place": (ffn_backward_inplace, attention_weights_inplace)}
    results: dict = {}
    try:
        for _ in range(5):  # interleaved: the machine's load drifts
            for label, (ffn_b, weights) in variants.items():
                grad.ffn_backward, grad.attention_weights = ffn_b, weights
                for shape in ((16, 64), (4, 256)):
                    results.setdefault((label, shape), []).append(step_ms(*shape))
    finally:
        grad.ffn_backward, grad.attention_weights = variants["as is"]
    for shape in ((16, 64), (4, 256)):
        a, b = np.median(results[("as is", shape)]), np.median(results[("in place", shape)])
        print(f"numpy train step B{shape[0]}xT{shape[1]}: as is {a:.1f} ms, in place {b:.1f} ms -> {a / b:.2f}x faster")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    for name, fn in (("nodes", nodes), ("cache", cache), ("exp", exp), ("allocs", allocs), ("train", train)):
        if what in (name, "all"):
            print(f"== {name}")
            fn()
