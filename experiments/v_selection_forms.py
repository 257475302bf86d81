"""What the step graph's V-row selection costs in ONNX Runtime, form by form (docs/export_runtime.md,
"Regression found on 2026-12-04"): P @ V for one layer of the `control` preset's shapes
(H 4, N 256, dh 16, batch 1), alone and behind each way of zeroing the stale V rows:

    python experiments/v_selection_forms.py

- MatMul alone (no selection: a stale row holding inf or NaN leaks through 0 * inf = NaN);
- Where with an [N, 1] condition (the form of e937cfc, broadcast over the V cache);
- Where with a full-shape condition (no broadcasting: Where's own floor);
- Concat(V, a zero row) + Gather(axis 2) (the form built since: stale rows name the zero row);
- Gather(axis 2) from a V cache that stores its zero row (N + 1 rows, the last never written):
  what an artifact format change would buy (issue 40) -- the same selection without the
  per-layer copy of the cache that Concat makes.

    python experiments/v_selection_forms.py [--json experiments/results/v_selection_forms.json]

One intra-op thread; 3 rounds of 3000 calls after 300 warm-up calls, the median of the per-round
medians. Not part of the package or the test suite.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tickformer.runtime.ort_session import make_session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # harness.py
import harness  # noqa: E402

H, N, DH = 4, 256, 16


def session(nodes, inputs, inits=()):
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, H, 1, DH])
    graph = helper.make_graph(nodes, "g", inputs, [out], initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return make_session(model)  # the runtime's options: one thread, all graph optimizations


def main() -> None:
    v = helper.make_tensor_value_info("V", TensorProto.FLOAT, [1, H, N, DH])
    p = helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, H, 1, N])
    zero = numpy_helper.from_array(np.array(0, np.float32), "z")
    zero_row = numpy_helper.from_array(np.zeros((1, H, 1, DH), np.float32), "zrow")
    matmul = helper.make_node("MatMul", ["p", "w"], ["y"])
    rng = np.random.default_rng(0)
    base = {
        "V": rng.standard_normal((1, H, N, DH)).astype(np.float32),
        "p": rng.random((1, H, 1, N)).astype(np.float32),
    }
    forms = {
        "MatMul alone": (
            session([helper.make_node("MatMul", ["p", "V"], ["y"])], [p, v]),
            {},
        ),
        "Where [N, 1] + MatMul": (
            session(
                [helper.make_node("Where", ["c", "V", "z"], ["w"]), matmul],
                [p, v, helper.make_tensor_value_info("c", TensorProto.BOOL, [N, 1])],
                [zero],
            ),
            {"c": np.ones((N, 1), bool)},
        ),
        "Where full shape + MatMul": (
            session(
                [helper.make_node("Where", ["c", "V", "z"], ["w"]), matmul],
                [p, v, helper.make_tensor_value_info("c", TensorProto.BOOL, [1, H, N, DH])],
                [zero],
            ),
            {"c": np.ones((1, H, N, DH), bool)},
        ),
        "stored zero row: Gather + MatMul": (
            session(
                [helper.make_node("Gather", ["V1", "i"], ["w"], axis=2), matmul],
                [
                    p,
                    helper.make_tensor_value_info("V1", TensorProto.FLOAT, [1, H, N + 1, DH]),
                    helper.make_tensor_value_info("i", TensorProto.INT64, [N]),
                ],
            ),
            {
                "V1": np.concatenate([base["V"], np.zeros((1, H, 1, DH), np.float32)], axis=2),
                "i": np.arange(N, dtype=np.int64),
            },
        ),
        "Concat + Gather + MatMul": (
            session(
                [
                    helper.make_node("Concat", ["V", "zrow"], ["vp"], axis=2),
                    helper.make_node("Gather", ["vp", "i"], ["w"], axis=2),
                    matmul,
                ],
                [p, v, helper.make_tensor_value_info("i", TensorProto.INT64, [N])],
                [zero_row],
            ),
            {"i": np.arange(N, dtype=np.int64)},
        ),
    }
    medians: dict[str, list[float]] = {name: [] for name in forms}
    warm, times = np.zeros(300, np.int64), np.zeros(3000, np.int64)
    for _ in range(3):
        for name, (sess, extra) in forms.items():
            feeds = {**base, **extra}
            feeds = {i.name: feeds[i.name] for i in sess.get_inputs()}

            def call(sess=sess, feeds=feeds) -> None:
                sess.run(None, feeds)

            harness.timed_calls(call, warm)
            harness.timed_calls(call, times)
            medians[name].append(float(np.median(times)) / 1e3)
    result = {name: float(np.median(values)) for name, values in medians.items()}
    for name, value in result.items():
        print(f"{name:34s} {value:7.1f} us")
    if len(sys.argv) == 3 and sys.argv[1] == "--json":
        meta = {
            "shapes": {"H": H, "N": N, "dh": DH},
            "rounds": 3,
            "calls": 3000,
            "utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        Path(sys.argv[2]).write_text(json.dumps({**meta, "p50_us": result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
