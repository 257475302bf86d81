"""Output contract on the numpy reference model (contracts/output_bound.py): over a declared
domain, including its edges and fp16 inputs, every output is finite and within the analytic
output bound the exporter records (export/bounds.py). Also the model-level face of
decode equivalence: the runtime's KV-cache step agrees with the model within decode_tolerance."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tickformer.contracts.decode_equivalence import decode_tolerance, equivalence_excess
from tickformer.contracts.output_bound import output_excess
from tickformer.export.bounds import output_bound
from tickformer.model.config import preset
from tickformer.model.transformer import forward, init_params

CFG = preset("control")
PARAMS = init_params(CFG, seed=0)
DOMAIN = 1e4


def bound() -> float:
    return output_bound(PARAMS, CFG)


@settings(max_examples=30)
@given(st.integers(1, 12), st.sampled_from([np.float32, np.float16]), st.data())
def test_outputs_finite_and_bounded_over_domain_edges(t, dtype, data):
    edge = float(np.asarray(DOMAIN if dtype is np.float32 else 6e4, dtype))
    elems = st.one_of(
        st.sampled_from([-edge, edge, 0.0]), st.floats(-edge, edge, width=32 if dtype is np.float32 else 16)
    )
    x = data.draw(hnp.arrays(dtype, (1, t, CFG.d_in), elements=elems))  # [B, T, d_in]
    y = forward(PARAMS, CFG, x)  # [B, T, d_out], float32
    assert output_excess(y, bound()) == 0.0


def test_runtime_step_agrees_with_model_within_decode_tolerance(tmp_path):
    from tickformer import runtime
    from tickformer.export import writer as export
    from tickformer.model.checkpoint import Checkpoint

    cfg = preset("tiny")
    params = init_params(cfg, seed=4)
    art = export.export_artifact(
        Checkpoint(cfg, params, {}), tmp_path / "art", domain=(-2.0, 2.0), lengths=[1, 2]
    )
    x = np.random.default_rng(0).uniform(-2, 2, (1, cfg.max_len, cfg.d_in)).astype(np.float32)  # [B, N, d_in]
    want = forward(params, cfg, x)  # [B, N, d_out]
    rtol, atol = decode_tolerance(cfg)
    for backend in ("numpy", "ort"):
        with runtime.load(art, backend=backend) as session:
            got = np.concatenate(
                [session.step(x[:, t : t + 1]).copy() for t in range(cfg.max_len)], axis=1
            )  # [B, N, d_out]
        assert equivalence_excess(got, want, rtol, atol) <= 0.0, backend
