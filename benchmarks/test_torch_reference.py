"""The torch comparator computes what tickformer computes: same weights, same outputs.

Benchmark-side validity check (not a speed test): without it a torch number could be the speed
of a different model. Bound: torch_reference.fp32_tolerance (derivation in its docstring).
"""

from __future__ import annotations

import harness
import numpy as np


def test_full_pass_matches_numpy_reference(control, torch_mod):
    import torch_reference as tr

    from tickformer.model import forward

    config, params = control
    x = (
        np.random.default_rng(1).standard_normal((2, config.max_len, config.d_in)).astype(np.float32)
    )  # [B, N, d_in]
    expected = forward(params, config, x)  # [B, N, d_out]
    with torch_mod.inference_mode():
        got = tr.build(params, config)(torch_mod.from_numpy(x)).numpy()
    err = np.abs(got - expected).max()
    assert err <= tr.fp32_tolerance(config, config.max_len), f"torch full pass differs by {err:.3g}"


def test_cached_step_matches_numpy_reference(control, torch_mod):
    import torch_reference as tr

    from tickformer.model import forward

    config, params = control
    x = (
        np.random.default_rng(2).standard_normal((1, config.max_len, config.d_in)).astype(np.float32)
    )  # [1, N, d_in]
    expected = forward(params, config, x)  # [1, N, d_out]
    model = tr.build(params, config)
    cache = model.new_cache(1)
    with torch_mod.inference_mode():
        rows = [
            model.step(torch_mod.from_numpy(x[:, t : t + 1]), cache, t).numpy() for t in range(config.max_len)
        ]
    err = np.abs(np.concatenate(rows, axis=1) - expected).max()  # over every position up to max_len
    assert err <= tr.fp32_tolerance(config, config.max_len), f"torch cached step differs by {err:.3g}"


def test_growing_onnx_step_matches_numpy_reference(control):
    import growing_step as gs
    import onnxruntime as ort

    from tickformer.model import forward

    config, params = control
    x = np.random.default_rng(3).standard_normal((1, config.max_len, config.d_in)).astype(np.float32)
    expected = forward(params, config, x)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = gs.GrowingSession(gs.build_growing_step(params, config), config, options)
    rows = [session.step(x[:, t : t + 1]).copy() for t in range(config.max_len)]
    err = np.abs(np.concatenate(rows, axis=1) - expected).max()
    assert err <= harness.fp32_tolerance(config, config.max_len), f"growing ONNX step differs by {err:.3g}"
