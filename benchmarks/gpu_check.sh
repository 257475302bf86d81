#!/usr/bin/env bash
# One-command hardware check for the GPU paths (TensorRT engines, ORT CUDA/TensorRT providers).
#
#   benchmarks/gpu_check.sh [OUT_DIR] [PRESET] [STEPS]
#
# On a machine with an NVIDIA GPU, TensorRT (10.x or 11.x), cuda-python and onnxruntime-gpu:
#   1. exports a seeded model of PRESET (default: control) to OUT_DIR/art (fp32 graphs),
#   2. lints the graphs offline for the installed TensorRT major (`tickformer check`),
#   3. builds fp32 and fp16 engines (`tickformer build`, timing cache in the artifact),
#   4. steps every backend through all max_len positions and compares with the numpy
#      reference (max abs / normwise errors; fp32 tolerance from the manifest, fp16 bound
#      from export/fp16.py:error_bound),
#   5. measures per-step latency (perf_counter_ns around Session.step, after warm-up;
#      STEPS steps, default 20000, reset at max_len) -> min/p50/p99/p99.9/max,
#   6. runs the GPU-marked pytest tests.
# Results: OUT_DIR/gpu_check.json (+ the pytest log). Nothing here runs without a GPU: the
# script stops at the first missing piece with one line saying what it is.
set -euo pipefail

OUT="${1:-gpu_check_out}"
PRESET="${2:-control}"
STEPS="${3:-20000}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"; elif [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

say() { printf '[gpu_check] %s\n' "$*"; }

"$PY" - <<'PYEOF'
import sys
missing = []
try:
    import tensorrt as trt
    if getattr(trt, "__file__", None) is None:
        missing.append("tensorrt (only type stubs are installed)")
except ImportError:
    missing.append("tensorrt")
try:
    from cuda.bindings import runtime as cudart  # noqa: F401
except ImportError:
    try:
        from cuda import cudart  # noqa: F401
    except ImportError:
        missing.append("cuda-python")
try:
    import onnxruntime as ort
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        missing.append("onnxruntime-gpu (CUDAExecutionProvider)")
except ImportError:
    missing.append("onnxruntime-gpu")
if missing:
    print("[gpu_check] missing: " + ", ".join(missing) + " -- install 'tickformer[gpu,tensorrt]' on a GPU machine", file=sys.stderr)
    sys.exit(2)
PYEOF

ART="$OUT/art"
say "export $PRESET -> $ART"
"$PY" - "$PRESET" "$ART" <<'PYEOF'
import sys
from tickformer.export.writer import export_artifact
from tickformer.model.checkpoint import Checkpoint
from tickformer.model.config import preset
from tickformer.model.transformer import init_params
cfg = preset(sys.argv[1])
export_artifact(Checkpoint(config=cfg, params=init_params(cfg, seed=0), meta={"note": "seeded, untrained"}), sys.argv[2])
PYEOF

MAJOR="$("$PY" -c 'import tensorrt as t; print(t.__version__.split(".")[0])')"
TARGET="trt-10"; [ "$MAJOR" -ge 11 ] && TARGET="trt-11"
say "lint for $TARGET"
"$PY" -m tickformer check "$ART" --target "$TARGET" | tee "$OUT/check.txt"

say "build fp32 and fp16 engines"
"$PY" -m tickformer build "$ART" --backend tensorrt --precision fp32 | tee "$OUT/build.txt"
"$PY" -m tickformer build "$ART" --backend tensorrt --precision fp16 --convert | tee -a "$OUT/build.txt"

say "equivalence and latency ($STEPS steps per backend)"
"$PY" - "$ART" "$STEPS" "$OUT/gpu_check.json" <<'PYEOF'
import json, sys, time, warnings
import numpy as np
import tickformer.runtime as rt
from tickformer.export.fp16 import error_bound

art, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
artifact = rt.open_artifact(art)
cfg, n = artifact.config, artifact.max_len
x = np.random.default_rng(0).uniform(-10, 10, (artifact.batch, n, cfg.d_in)).astype(np.float32)

def step_all(session):
    session.reset()
    return np.stack([session.step(x[:, t:t + 1]).copy() for t in range(n)], axis=1)[:, :, 0]

ref = step_all(rt.load(art, backend="numpy"))
tol = artifact.tolerance
report = {"artifact": art, "preset_config": cfg.to_dict(), "steps": steps, "backends": {}}
cases = [("tensorrt", {"precision": "fp32"}, "fp32"), ("tensorrt", {"precision": "fp16"}, "fp16"),
         ("ort-cuda", {}, "fp32"), ("ort-trt", {}, "fp32")]
for name, opts, prec in cases:
    key = f"{name}:{prec}"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session = rt.load(art, backend=name, **opts)
    except Exception as exc:
        report["backends"][key] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"[gpu_check] {key}: {type(exc).__name__}: {exc}")
        continue
    y = step_all(session)
    err_abs = float(np.abs(y - ref).max())
    err_rel = float(err_abs / np.abs(ref).max())
    # fp16, and ort-trt (TensorRT EP may use TF32, unit roundoff 2^-11): the recorded fp16 bound.
    loose = prec == "fp16" or name == "ort-trt"
    bound = error_bound(n_layers=cfg.n_layers) if loose else None
    ok = err_rel <= bound if loose else bool(np.all(np.abs(y - ref) <= tol["atol"] * 10 + tol["rtol"] * 10 * np.abs(ref)))
    session.reset()
    xs = x[:, :1]
    for _ in range(200):  # warm-up
        session.step(xs)
        if session.position >= n:
            session.reset()
    lat = np.empty(steps, dtype=np.int64)
    for i in range(steps):
        if session.position >= n:
            session.reset()
        t0 = time.perf_counter_ns()
        session.step(xs)
        lat[i] = time.perf_counter_ns() - t0
    be = session.backend
    report["backends"][key] = {
        "max_abs_err": err_abs, "normwise_err": err_rel, "fp16_bound": bound, "within_tolerance": ok,
        "cuda_graph": getattr(be, "cuda_graph", None), "cuda_graph_reason": getattr(be, "cuda_graph_reason", None),
        "warnings": [str(w.message) for w in caught],
        "latency_ns": {"min": int(lat.min()), "p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)),
                       "p99.9": float(np.percentile(lat, 99.9)), "max": int(lat.max()), "mean": float(lat.mean())},
    }
    print(f"[gpu_check] {key}: err {err_rel:.2e} ok={ok} p50 {np.percentile(lat, 50) / 1e3:.1f} us "
          f"p99.9 {np.percentile(lat, 99.9) / 1e3:.1f} us max {lat.max() / 1e3:.1f} us cuda_graph={report['backends'][key]['cuda_graph']}")
    session.close()
import tensorrt as trt
report["tensorrt"] = trt.__version__
report["engines"] = rt.open_artifact(art).manifest.get("engines", {})
with open(out, "w") as f:
    json.dump(report, f, indent=2)
bad = [k for k, v in report["backends"].items() if not v.get("within_tolerance")]
sys.exit(1 if bad else 0)
PYEOF

say "pytest -m gpu"
(cd "$ROOT" && "$PY" -m pytest -m gpu tests/runtime/test_gpu_backends.py -q -rs) 2>&1 | tee "$OUT/pytest_gpu.txt"
say "done: $OUT/gpu_check.json"
