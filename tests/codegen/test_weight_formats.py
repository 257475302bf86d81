"""Weights in fewer bytes (codegen/weights.py, issue 40): `codegen --weights fp32|fp16|bf16|int8`.

For each format F the C step must equal numpy computing with the weights as F stores them
(weights.rounded_params) under the fp32 contract (the artifact's tolerance per element and
NORMWISE_U u normwise), on a static and a ring cache, over the golden inputs and a sequence
alternating the domain's edges; and stay within the stated bound of the fp32 model
(weights.fp32_bound: a measured bound, docs/codegen.md "Weights in fewer bytes"). The rounding
itself is checked at the formats' edges (ties, the fp16 subnormals and overflow, a zero int8
column), and the planted fp16 subnormals must reach the output.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tickformer import runtime
from tickformer.artifact import open_artifact
from tickformer.codegen import generate, golden, plan_for, weight_bytes, write
from tickformer.codegen import weights as W
from tickformer.codegen.golden import NORMWISE_U, UNIT_ROUNDOFF
from tickformer.errors import ArtifactError

FORMATS = ("fp16", "bf16", "int8")


# --- the rounding, at the edges --------------------------------------------------------------
def test_fp16_rounds_to_nearest_even_and_keeps_subnormals():
    tiny = np.float32(2.0**-24)  # the smallest fp16 subnormal
    w = np.array(
        [[1 + 2.0**-11, 1 + 3 * 2.0**-11, 65504.0, 2.0**-14, 3 * tiny, 5.5 * tiny, -6.0e-5, 2.0**-26]],
        np.float32,
    )
    q = W.rounded(w, "fp16")
    expected = [1.0, 1 + 4 * 2.0**-11, 65504.0, 2.0**-14, 3 * tiny, 6 * tiny, float(np.float16(-6.0e-5)), 0.0]
    assert q.ravel().tolist() == [float(np.float32(v)) for v in expected]  # ties to even; subnormals kept
    normal = np.abs(w) >= 2.0**-14
    err = np.abs(w.astype(np.float64) - q)
    assert (err[normal] <= W.eps("fp16") * np.abs(w[normal])).all()
    assert (err[~normal] <= 2.0**-25).all()


def test_fp16_overflow_is_refused():
    with pytest.raises(ArtifactError, match="beyond fp16's range"):
        W.quantise(np.array([[70000.0]], np.float32), "fp16", "dec.0.ffn.w1")


def test_bf16_rounds_to_nearest_even():
    w = np.array([[1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-8 + 2.0**-20, -(1 + 2.0**-9)]], np.float32)
    q = W.rounded(w, "bf16")
    assert q.ravel().tolist() == [1.0, 1 + 4 * 2.0**-8, 1 + 2.0**-7, -1.0]
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 32)) * 10.0 ** rng.integers(-30, 30, (64, 32))).astype(np.float32)
    err = np.abs(w.astype(np.float64) - W.rounded(w, "bf16"))
    assert (err <= W.eps("bf16") * np.abs(w)).all()


def test_int8_scales_are_per_output_channel():
    w = np.array([[1.0, 100.0, 0.0], [-0.5, 3.0, 0.0], [0.25, -100.0, 0.0]], np.float32)  # [n_in 3, n_out 3]
    codes, scales = W.quantise(w, "int8")
    assert scales.tolist() == [float(np.float32(1 / 127)), float(np.float32(100 / 127)), 0.0]
    assert codes[:, 0].tolist() == [127, -64, 32] and codes[:, 1].tolist() == [127, 4, -127]
    q = W.rounded(w, "int8")
    assert (np.abs(w - q) <= scales / 2 * (1 + 2.0**-22)).all()  # s/2, and the one rounding of q * s
    assert (q[:, 2] == 0).all()  # an all-zero channel stays zero


def test_unknown_format_and_ssm_are_refused(arts):
    with pytest.raises(ArtifactError, match="unknown weight format 'fp8'"):
        plan_for(open_artifact(arts["tiny"]), "fp8")
    with pytest.raises(ArtifactError, match="ssm block's C step stores fp32 only"):
        plan_for(open_artifact(arts["ssm"]), "fp16")


# --- the compiled step against the references ------------------------------------------------
def _reference(art, params):
    """A numpy-backend session computing with `params` (the rounded weights)."""
    ref = runtime.load(art, backend="numpy")
    b = ref.backend
    b.params = params
    b._layers = [b._layer_weights(i) for i in range(b.config.n_layers)]
    return ref


def _run(session, xs):
    session.reset()
    return np.stack([session.step(np.ascontiguousarray(x)).copy() for x in xs]).astype(np.float64)


def _inputs(art):
    """The golden inputs (the domain's edges at positions 0 and 1, then uniform) and a sequence
    alternating the two edges every three steps."""
    xs, first = golden.reference_inputs(plan_for(open_artifact(art)))
    seq = [x for x in xs[:first]]
    edges = [xs[1] if (i // 3) % 2 else xs[0] for i in range(len(seq))]
    return seq, edges


def _library(art, out, fmt, make, cc, files=None):
    out = write(art, out, weights=fmt) if files is None else _write(files, out)
    subprocess.run([make, "-s", "-C", str(out), "shared", f"CC={cc}"], check=True, capture_output=True)
    return out / "libtf_model.so"


def _write(files, out):
    out.mkdir(parents=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out


def _within_contract(y, r, tol):
    assert (np.abs(y - r) <= tol["atol"] + tol["rtol"] * np.abs(r)).all()
    assert np.abs(y - r).max() <= NORMWISE_U * UNIT_ROUNDOFF * np.abs(r).max()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["tiny", "win4", "tokens"])
def test_step_equals_the_rounded_weights_reference(arts, name, fmt, tmp_path, c_compiler, make_tool):
    art = arts[name]
    a = open_artifact(art)
    lib = _library(art, tmp_path / "c", fmt, make_tool, c_compiler)
    assert f'#define TF_WEIGHT_FORMAT "{fmt}"' in (tmp_path / "c" / "tf_model.h").read_text()
    assert f"stored as {fmt}" in (tmp_path / "c" / "README").read_text()
    c = runtime.load(art, backend="c", library=lib)
    ref, ref32 = (
        _reference(art, W.rounded_params(a.params(), a.config, fmt)),
        runtime.load(art, backend="numpy"),
    )
    for xs in _inputs(art):
        y, r, r32 = _run(c, xs), _run(ref, xs), _run(ref32, xs)
        _within_contract(y, r, a.tolerance)
        assert np.abs(y - r32).max() <= W.fp32_bound(fmt) * np.abs(r32).max()  # the stated bound vs fp32
        assert np.abs(y - r32).max() > NORMWISE_U * UNIT_ROUNDOFF * np.abs(r32).max()  # the format is in use


@pytest.mark.parametrize("fmt", FORMATS)
def test_make_test_passes(arts, fmt, tmp_path, c_compiler, make_tool):
    """tf_test (`make check`): the golden vectors (numpy with the rounded weights) within the
    artifact's tolerance, and the fp32 model's outputs within the stated bound."""
    out = write(arts["tiny"], tmp_path / "c", weights=fmt)
    done = subprocess.run(
        [make_tool, "-C", str(out), "check", f"CC={c_compiler}"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"weights {fmt}: normwise error against the fp32 model" in done.stdout


def test_make_check_fails_outside_the_stated_bound(arts, tmp_path, c_compiler, make_tool, monkeypatch):
    """With the stated bound tightened far below the measured error, `make check` fails and names it."""
    monkeypatch.setattr(W, "BOUND_K", 0.01)
    out = write(arts["tiny"], tmp_path / "c", weights="int8")
    done = subprocess.run(
        [make_tool, "-C", str(out), "check", f"CC={c_compiler}"], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "outside the stated bound against the fp32 model" in done.stdout + done.stderr


def test_fp16_subnormal_weights_reach_the_output(arts, tmp_path, c_compiler, make_tool):
    """A column of W_1 planted with fp16 subnormals: the C step keeps them (a flushed conversion
    would differ from the rounded reference by more than the contract allows)."""
    art = arts["tiny"]
    a = open_artifact(art)
    plan = plan_for(a, "fp16")
    params = dict(plan.params)
    name = W.matrix_names(a.config)[4]  # dec.0.ffn.w1
    w1 = params[name].copy()
    w1[:, :] = np.float32(5.9e-5) * np.sign(w1)  # below 2^-14: fp16 subnormals
    params[name] = w1
    import dataclasses

    planted = dataclasses.replace(plan, params=params)
    files = generate(art, plan=planted)
    lib = _library(art, tmp_path / "c", "fp16", make_tool, c_compiler, files=files)
    c = runtime.load(art, backend="c", library=lib)
    rounded = W.rounded_params(params, a.config, "fp16")
    flushed = dict(rounded, **{name: np.zeros_like(w1)})
    xs = _inputs(art)[0]
    y, r, f = _run(c, xs), _run(_reference(art, rounded), xs), _run(_reference(art, flushed), xs)
    _within_contract(y, r, a.tolerance)
    assert np.abs(f - r).max() > 4 * NORMWISE_U * UNIT_ROUNDOFF * np.abs(r).max()  # flushing would be seen


def test_the_fp32_bound_is_the_normwise_part_of_the_c_steps_contract():
    """weights.fp32_bound("fp32") (BOUND_K u) and the golden check's normwise bound (NORMWISE_U u)
    are one number: verify --weights fp32 holds the step to the contract tf_test does."""
    assert W.fp32_bound("fp32") == NORMWISE_U * UNIT_ROUNDOFF


def test_fp32_default_is_the_float_step(arts):
    files = generate(arts["tiny"])
    assert b'#define TF_WEIGHT_FORMAT "fp32"' in files["tf_model.h"]
    assert b"uint16_t *restrict w" not in files["tf_model.c"] and b"tf_w1_s" not in files["tf_model.c"]


def test_weight_bytes_counts_the_artifacts_matrices(arts):
    """weight_bytes' "layer" (the emitted, stacked arrays) equals a count from the artifact's own
    parameters: every matrix of matrix_names at the format's bytes, plus int8's one float32 scale
    per output column; "other" does not depend on the format."""
    art = open_artifact(arts["tiny"])
    plan, params = plan_for(art), art.params()
    matrices = [params[name] for name in W.matrix_names(art.config)]
    for fmt in W.FORMATS:
        want = sum(m.size * W.BYTES[fmt] + (4 * m.shape[-1] if fmt == "int8" else 0) for m in matrices)
        got = weight_bytes(plan, fmt)
        assert got["layer"] == want, fmt
        assert got["other"] == weight_bytes(plan, "fp32")["other"] and got["total"] == want + got["other"]


CONVERT_C = r"""
#include <stdint.h>
#include <stdio.h>
#if defined(TF_DAZ)
#include <xmmintrin.h>
#endif
typedef union { float f; uint32_t u; } tf_bits;
%s
int main(int argc, char **argv) {
    static float out[2][65536];
    uint32_t h;
    FILE *f;
#if defined(TF_DAZ)
    _mm_setcsr(_mm_getcsr() | 0x8040); /* flush-to-zero and denormals-are-zero */
#endif
    for (h = 0; h < 65536; h++) { out[0][h] = tf_from_f16((uint16_t)h); out[1][h] = tf_from_bf16((uint16_t)h); }
    f = fopen(argv[1], "wb"); fwrite(out, sizeof out, 1, f); fclose(f);
    return 0;
}
"""


@pytest.mark.parametrize("daz", [False, True])
def test_conversions_are_exact_for_every_16_bit_pattern(tmp_path, c_compiler, daz):
    """tf_from_f16 and tf_from_bf16 over all 65536 bit patterns against numpy (finite values;
    fp16 subnormals included), also with flush-to-zero and denormals-are-zero set (x86)."""
    import platform

    if daz and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("MXCSR flags are x86's")
    (tmp_path / "conv.c").write_text(CONVERT_C % (W.converters_c("fp16") + W.converters_c("bf16")))
    flags = ["-std=c99", "-O2", "-Wall", "-Werror"] + (["-DTF_DAZ"] if daz else [])
    subprocess.run([c_compiler, *flags, "conv.c", "-o", "conv"], cwd=tmp_path, check=True)
    subprocess.run([str(tmp_path / "conv"), str(tmp_path / "out.bin")], check=True)
    got = np.fromfile(tmp_path / "out.bin", dtype=np.float32).reshape(2, 65536)
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    half = bits.view(np.float16).astype(np.float32)
    finite = np.isfinite(half)
    assert got[0][finite].view(np.uint32).tolist() == half[finite].view(np.uint32).tolist()
    bf = (bits.astype(np.uint32) << 16).view(np.float32)
    finite = np.isfinite(bf) & ((np.abs(bf) >= np.float32(2.0**-126)) | (bf == 0) | (not daz))
    assert got[1][finite].view(np.uint32).tolist() == bf[finite].view(np.uint32).tolist()


@pytest.fixture(scope="module")
def peek_arts(tmp_path_factory):
    """Batch-3 artifacts (3 candidates over one history): a static and a ring cache (W = 4)."""
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    out = {}
    for name, config in (("static", preset("tiny")), ("ring", preset("tiny").replace(window=4))):
        out[name] = tmp_path_factory.mktemp(f"peek-{name}") / "art"
        export_params(config, init_params(config, 9), out[name], batch=3)
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cache", ["static", "ring"])
def test_peek_commit_equals_a_plain_step(peek_arts, cache, fmt, tmp_path, c_compiler, make_tool):
    """tf_peek of format F (the candidate-inner products read the same stored matrices): each
    tick's chosen candidate equals, bit for bit, a plain step of every row set to it."""
    art = peek_arts[cache]
    lib = _library(art, tmp_path / "c", fmt, make_tool, c_compiler)
    a = runtime.load(art, backend="c", library=lib)
    b = runtime.load(art, backend="c", library=lib)
    rng = np.random.default_rng(4)
    for t in range(2 * a.max_len):
        x = rng.uniform(-1, 1, size=(3, 1, a.config.d_in)).astype(np.float32)  # [K, 1, d_in]
        if cache == "static" and t >= a.max_len:
            break
        ya = a.peek(x).copy()
        choice = t % 3
        a.commit(choice)
        yb = b.step(np.ascontiguousarray(np.broadcast_to(x[choice], x.shape)))
        assert ya[choice].tobytes() == yb[choice].tobytes()
