"""ONNX Runtime sessions: the one place their options are chosen.

Every ONNX Runtime session in the package (the ORT runtime backends, ORT sessions over a bare
model (`runtime/foreign.py`), export's equivalence and fp16 checks, which import it from here: the
runtime sits below export) is made with `session_options`, so the choices below hold everywhere:
    - one intra-op thread by default (no thread-pool wake-ups; results independent of
      scheduling), one inter-op thread, sequential execution;
    - full graph optimisation by default (constant folding, LayerNorm and MatMul+Add fusions);
      `optimization="disable"` turns every graph rewrite off (verify compares the two);
    - memory arena and memory patterns on (static shapes: the allocation plan is reused);
    - deterministic compute; log errors only.
Source: ONNX Runtime Python API (onnxruntime.ai/docs/api/python/api_summary.html), threading
(onnxruntime.ai/docs/performance/tune-performance/threading.html).

Not real-time code.
"""

from __future__ import annotations

from typing import Any, Sequence

from tickformer import validation

OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")


def session_options(threads: int = 1, *, optimization: str = "all") -> Any:
    """An `onnxruntime.SessionOptions` with the choices of the module docstring."""
    import onnxruntime as ort

    validation.positive_int(threads, "threads", hint="1 = deterministic, lowest jitter")
    validation.one_of(optimization, "optimization", OPTIMIZATION_LEVELS)
    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = levels[optimization]
    opts.enable_cpu_mem_arena = True
    opts.enable_mem_pattern = True
    opts.use_deterministic_compute = True
    opts.log_severity_level = 3  # errors only
    return opts


def make_session(
    model: Any,
    *,
    threads: int = 1,
    optimization: str = "all",
    providers: Sequence[Any] = ("CPUExecutionProvider",),
    options: Any = None,
) -> Any:
    """An `onnxruntime.InferenceSession` over `model`: an `onnx.ModelProto`, serialized bytes, or
    a path. `options` overrides the SessionOptions built from threads/optimization."""
    import onnxruntime as ort

    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    opts = session_options(threads, optimization=optimization) if options is None else options
    return ort.InferenceSession(
        model if isinstance(model, bytes) else str(model), sess_options=opts, providers=list(providers)
    )
