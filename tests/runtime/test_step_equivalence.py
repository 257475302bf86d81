"""Step-by-step decoding equals the full pass, on every CPU backend, at every position.

Tolerance: the artifact's stated fp32 tolerance (export/bounds.py: |a - b| <= atol + rtol |b|,
atol = rtol = max(1e-5, 8 S sqrt(n) 2^-24)); the step and the full pass do the same float32
arithmetic in different orders (a cached row-at-a-time product vs a blocked matrix product).
Reset-with-stale-cache results must be *bitwise* equal to a fresh session: stale rows get weight
exactly 0 by selection, and 0 * v = 0 for any finite v, so not a single bit may change.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tickformer import runtime
from tickformer.model import forward

STATIC = [("numpy", {}), ("ort", {"binding": "run"}), ("ort", {"binding": "iobinding"})]
ALL = STATIC + [("numpy-growing", {})]
IDS = ["numpy", "ort-run", "ort-iobinding", "numpy-growing"]


def assert_within(got, want, tol, what):
    diff = np.abs(got.astype(np.float64) - want)
    allowed = tol["atol"] + tol["rtol"] * np.abs(want)
    assert np.all(diff <= allowed), (
        f"{what}: max abs error {diff.max():.3g} exceeds the stated fp32 tolerance ({tol['reason']})"
    )


def step_all(session, seq):
    """Every position of seq through session.step; returns [B, T, out] (copies of the buffer)."""
    outs = []
    for t in range(seq.shape[1]):
        outs.append(session.step(np.ascontiguousarray(seq[:, t : t + 1])).copy())
    return np.concatenate(outs, axis=1)


@pytest.mark.parametrize("art_name", ["tiny_art", "tokens_art"])
@pytest.mark.parametrize(("backend", "opts"), ALL, ids=IDS)
def test_step_equals_full_pass_at_every_position(request, art_name, backend, opts, seq_for):
    path, params = request.getfixturevalue(art_name)
    session = runtime.load(path, backend=backend, **opts)
    cfg, n = session.config, session.max_len
    seq = seq_for(cfg, session.batch, n, seed=11)
    stepped = step_all(session, seq)  # [B, N, out]
    tol = session.artifact.tolerance
    ref = forward(params, cfg, seq)  # numpy model, full pass
    onnx_full = ort.InferenceSession(str(path / "model.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {session.backend.artifact.graph_spec("model")["inputs"][0]["name"]: seq}
    )[0]
    for t in range(n):  # every position 1..max_len
        assert_within(stepped[:, t], ref[:, t], tol, f"{backend} step vs numpy full pass at position {t + 1}")
        assert_within(
            stepped[:, t], onnx_full[:, t], tol, f"{backend} step vs model.onnx (ORT) at position {t + 1}"
        )
    assert session.position == n
    # session.run is the full pass of the same backend
    assert_within(session.run(seq), ref, tol, f"{backend} run() vs numpy")


@pytest.mark.parametrize(("backend", "opts"), ALL, ids=IDS)
def test_reset_ignores_huge_stale_cache_bitwise(tiny_art, backend, opts, seq_for):
    path, _ = tiny_art
    fresh = runtime.load(path, backend=backend, **opts)
    used = runtime.load(path, backend=backend, **opts)
    cfg, n = fresh.config, fresh.max_len
    a, b = seq_for(cfg, 1, n, seed=1), seq_for(cfg, 1, n - 3, seed=2)
    step_all(used, a)
    k, v = used.backend.cache()
    rng = np.random.default_rng(0)
    k[...] = rng.choice([-3e38, 3e38, 1e30], size=k.shape)  # huge finite values in every row
    v[...] = rng.choice([-3e38, 3e38, 1e30], size=v.shape)
    used.reset()
    assert used.position == 0
    want = step_all(fresh, b)
    with np.errstate(over="ignore", invalid="ignore"):  # scores of stale rows overflow; they are selected out
        got = step_all(used, b)
    assert np.array_equal(got, want), "stale cache rows leaked into a new sequence after reset()"
    assert np.all(np.isfinite(got))


@pytest.mark.parametrize(("backend", "opts"), ALL, ids=IDS)
def test_step_returns_the_same_preallocated_buffer(tiny_art, backend, opts, seq_for):
    path, _ = tiny_art
    session = runtime.load(path, backend=backend, **opts)
    seq = seq_for(session.config, 1, 3, seed=5)
    y0 = session.step(seq[:, 0:1].copy())
    first = y0.copy()
    y1 = session.step(seq[:, 1:2].copy())
    assert y1 is y0, "step must return the same preallocated array every call"
    assert not np.array_equal(y1, first), "the buffer is overwritten by the next step"
    assert y1.shape == (1, 1, session.config.d_out) and y1.dtype == np.float32


def test_backends_agree_within_tolerance(tiny_art, seq_for):
    path, _ = tiny_art
    outs = {}
    for backend, opts in ALL:
        session = runtime.load(path, backend=backend, **opts)
        outs[f"{backend}{opts}"] = step_all(session, seq_for(session.config, 1, session.max_len, seed=9))
    tol = session.artifact.tolerance
    base = outs.pop("numpy{}")
    for name, got in outs.items():
        assert_within(got, base, tol, f"{name} vs numpy")


def _greedy_reference(params, cfg, src, bos, max_new):
    """Greedy decoding by full recompute with the numpy model (no cache at all)."""
    tgt = np.full((src.shape[0], 1), bos, dtype=np.int64)
    out = []
    for _ in range(max_new):
        logits = forward(params, cfg, tgt, src=src)  # [B, T, V]
        nxt = np.argmax(logits[:, -1], axis=-1)  # [B]
        out.append(nxt)
        tgt = np.concatenate([tgt, nxt[:, None]], axis=1)
    return np.stack(out, axis=1), logits


@pytest.mark.parametrize(("backend", "opts"), STATIC, ids=IDS[:3])
def test_seq2seq_generate_matches_full_recompute(seq2seq_art, backend, opts):
    path, params = seq2seq_art
    session = runtime.load(path, backend=backend, **opts)
    cfg = session.config
    rng = np.random.default_rng(4)
    for s in (1, 5, cfg.max_len):  # short (mostly padding), medium, full source
        src = rng.integers(0, cfg.vocab_size, size=(1, s), dtype=np.int64)
        got = session.generate(src, cfg.max_len, bos=1)
        want, _ = _greedy_reference(params, cfg, src, 1, cfg.max_len)
        assert np.array_equal(got, want)


@pytest.mark.parametrize(("backend", "opts"), STATIC, ids=IDS[:3])
def test_seq2seq_steps_equal_teacher_forced_full_pass(seq2seq_art, backend, opts):
    path, params = seq2seq_art
    session = runtime.load(path, backend=backend, **opts)
    cfg = session.config
    rng = np.random.default_rng(6)
    src = rng.integers(0, cfg.vocab_size, size=(1, 7), dtype=np.int64)
    tgt = rng.integers(0, cfg.vocab_size, size=(1, cfg.max_len), dtype=np.int64)
    session.set_source(src)
    got = step_all(session, tgt)
    want = forward(params, cfg, tgt, src=src)
    for t in range(cfg.max_len):
        assert_within(
            got[:, t], want[:, t], session.artifact.tolerance, f"{backend} seq2seq step at position {t + 1}"
        )


def test_generate_takes_bos_and_eos_from_the_checkpoint_meta(tmp_path):
    from tickformer.export.writer import export_artifact
    from tickformer.model import init_params, preset
    from tickformer.model.checkpoint import save_checkpoint

    cfg = preset("tiny-seq2seq")
    params = init_params(cfg, 8)
    ckpt = save_checkpoint(tmp_path / "ckpt", cfg, params, {"tokens": {"bos": 5, "eos": 6, "pad": 0}})
    session = runtime.load(export_artifact(ckpt, tmp_path / "art", lengths=[1, 4]), backend="ort")
    src = np.array([[1, 2, 3]], dtype=np.int64)
    got = session.generate(src, 8)
    want = session.generate(src, 8, bos=5, eos=6)
    assert np.array_equal(got, want)
    reference, _ = _greedy_reference(params, cfg, src, 5, 8)
    n = got.shape[1]
    assert np.array_equal(got, reference[:, :n]) and (n == 8 or got[0, -1] == 6)
