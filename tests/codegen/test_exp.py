"""tf_expneg, the step's own exp: error < 1 ULP on [-86.5, 0], exact at the values the softmax
relies on (0 -> 1, -inf -> 0), NaN -> NaN, 0 below the domain.

The bound is proven by the exhaustive check over all 1,118,633,985 float32 of [-86.5, 0]
(`tf_expcheck 1`, test_exhaustive_exp_check, marked slow; it also checks every
other float32: 0 below -86.5 and for -inf, 1 above 0, NaN for NaN); the cheap tests here sample
it (every 997th float32, and a million random ones against float64 exp from Python).
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from tickformer.codegen import generate, kernels

DRIVER = """#include <stdint.h>
typedef union { float f; uint32_t u; } tf_bits;
%s
void tf_exp_array(const float *x, float *y, int n) { int i; for (i = 0; i < n; i++) { y[i] = tf_expneg(x[i]); } }
"""


@pytest.fixture(scope="module")
def expv(tmp_path_factory, c_compiler):
    src = tmp_path_factory.mktemp("exp") / "e.c"
    src.write_text(DRIVER % kernels.exp_c())
    lib = src.with_suffix(".so")
    subprocess.run(
        [
            c_compiler,
            "-std=c99",
            "-O2",
            "-march=native",
            "-ffp-contract=off",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fPIC",
            "-shared",
            str(src),
            "-o",
            str(lib),
        ],
        check=True,
    )
    fn = ctypes.CDLL(str(lib)).tf_exp_array

    def call(x):
        x = np.ascontiguousarray(x, np.float32)
        y = np.empty_like(x)
        fn(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(x.size))
        return y

    return call


def ulp_error(y, x):
    e = np.exp(x.astype(np.float64))
    _, ex = np.frexp(e)
    return np.abs(y.astype(np.float64) - e) / np.ldexp(1.0, ex - 24)


def test_random_arguments_within_one_ulp(expv):
    x = -np.random.default_rng(0).uniform(0, 86.5, 1_000_000).astype(np.float32)
    err = ulp_error(expv(x), x)
    assert err.max() < 1.0
    assert err.max() <= kernels.EXP_MAX_ULP + 1e-6  # the documented maximum is the exhaustive one


def test_special_values(expv):
    below = np.nextafter(np.float32(-86.5), np.float32(-np.inf))  # the largest float32 under the domain
    x = np.array([0.0, -0.0, -np.inf, np.nan, below, -87.0, -100.0, -3.4e38, -1e-45], np.float32)
    y = expv(x)
    assert y[0] == 1.0 and y[1] == 1.0  # the running max's own weight: exactly 1
    assert y[2] == 0.0 and not np.signbit(y[2])  # a stale row: exactly +0
    assert np.isnan(y[3])  # NaN reaches the output check
    assert (y[4:8] == 0.0).all()  # below the domain: 0 (true value < 2.7e-38)
    assert y[8] == 1.0
    assert expv(np.array([-86.5], np.float32))[0] > 0  # the domain's edge itself is computed


def test_monotone_on_a_dense_grid(expv):
    x = np.linspace(-86.5, 0, 2_000_001, dtype=np.float32)
    y = expv(x)
    assert (np.diff(y) >= 0).all() and y[0] > 0


def test_sampled_exp_check_program(tmp_path, arts, c_compiler, make_tool):
    """The shipped check program, every 997th float32 (what `make test` runs)."""
    from _cgutil import run_make

    for name, data in generate(arts["tiny"]).items():
        (tmp_path / name).write_bytes(data)
    done = run_make(tmp_path, "expcheck-sampled", make_tool, c_compiler)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "special values exact" in done.stdout


@pytest.mark.slow
def test_exhaustive_exp_check(tmp_path, arts, c_compiler, make_tool):
    """Every one of the 2^32 float32: the proof of the documented bound and of the ACSL contract."""
    from _cgutil import run_make

    for name, data in generate(arts["tiny"]).items():
        (tmp_path / name).write_bytes(data)
    done = run_make(tmp_path, "expcheck", make_tool, c_compiler)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1118633986 values" in done.stdout and f"max error {kernels.EXP_MAX_ULP:.4f}"[:15] in done.stdout
