"""The emitted kernels against numpy, compiled and called through ctypes.

Claims checked: the sums follow numpy's pairwise summation bit for bit, so a LayerNorm of the
same input gives the same bits as model/layers.py layer_norm; the products are bitwise
independent of the unrolling (UNROLL rows per pass is the same rounding as one at a time);
the masked product never lets a row >= pos through, whatever it holds.
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from tickformer.codegen import kernels
from tickformer.model.layers import layer_norm

HEAD = """#include <math.h>
#include <stdint.h>
typedef union { float f; uint32_t u; } tf_bits;
#define TF_NEG_INF_BITS 0xFF800000u
"""


@pytest.fixture(scope="module")
def kernel_lib(tmp_path_factory, c_compiler):
    sums = [1, 3, 7, 8, 13, 64, 100, 128, 129, 256, 300, 1000]
    parts, leaves = [HEAD, kernels.and_bits_c()], set()
    texts = []
    for n in sums:
        text, used = kernels.sum_c(n)
        texts.append(text.replace(f"static float tf_sum_{n}", f"float tf_sum_{n}"))
        leaves |= used
    parts += [kernels.pairwise_leaf_c(n) for n in sorted(leaves)] + texts
    parts.append(
        kernels.layer_norm_c(64, 1e-5)
        .replace("static void tf_layer_norm_64", "void tf_layer_norm_64")
        .replace("tf_sum_64", "tf_sum_64_ln")
    )
    text, _ = kernels.sum_c(64)
    parts.insert(-1, text.replace("tf_sum_64", "tf_sum_64_ln"))
    for shape in ((5, 19, True, False), (64, 192, True, False), (7, 16, False, True)):
        parts.append(kernels.matvec_c(*shape).replace("static void", "void"))
    src = tmp_path_factory.mktemp("kernels") / "k.c"
    src.write_text("\n".join(parts))
    lib = src.with_suffix(".so")
    subprocess.run(
        [
            c_compiler,
            "-std=c99",
            "-O2",
            "-march=native",
            "-ffp-contract=off",
            "-fno-math-errno",
            "-Wall",
            "-Werror",
            "-fPIC",
            "-shared",
            str(src),
            "-o",
            str(lib),
            "-lm",
        ],
        check=True,
    )
    handle = ctypes.CDLL(str(lib))
    for n in sums:
        getattr(handle, f"tf_sum_{n}").restype = ctypes.c_float
    return handle, sums


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def test_sums_equal_numpy_bitwise(kernel_lib):
    lib, sums = kernel_lib
    rng = np.random.default_rng(0)
    for n in sums:
        for trial in range(20):
            a = (rng.standard_normal(n) * rng.uniform(1e-3, 1e3)).astype(np.float32)
            got = np.float32(getattr(lib, f"tf_sum_{n}")(ptr(a)))
            want = a.reshape(1, 1, n).sum(axis=-1)[0, 0]  # a reduction over a contiguous last axis
            assert got.tobytes() == want.tobytes(), (n, trial, got, want)


def test_layer_norm_equals_the_reference_bitwise(kernel_lib):
    lib, _ = kernel_lib
    rng = np.random.default_rng(1)
    for trial in range(50):
        x = (rng.standard_normal(64) * rng.uniform(0.01, 100) + rng.uniform(-5, 5)).astype(np.float32)
        g = rng.uniform(0.5, 1.5, 64).astype(np.float32)
        b = rng.standard_normal(64).astype(np.float32)
        y, sq = np.zeros(64, np.float32), np.zeros(64, np.float32)
        lib.tf_layer_norm_64(ptr(x), ptr(g), ptr(b), ptr(y), ptr(sq))
        want = layer_norm(x.reshape(1, 1, 64), g=g, b=b, eps=1e-5)[0, 0]
        assert y.tobytes() == want.tobytes(), trial


def test_matvec_is_sequential_in_the_input_index(kernel_lib):
    """UNROLL rows per pass round exactly like one row at a time (the order i = 0, 1, ...)."""
    lib, _ = kernel_lib
    rng = np.random.default_rng(2)
    for n_in, n_out in ((5, 19), (64, 192)):
        x = rng.standard_normal(n_in).astype(np.float32)
        w = rng.standard_normal((n_in, n_out)).astype(np.float32)
        b = rng.standard_normal(n_out).astype(np.float32)
        y = np.zeros(n_out, np.float32)
        getattr(lib, f"tf_mv_{n_in}x{n_out}")(ptr(x), ptr(w), ptr(b), ptr(y))
        want = x[0] * w[0]
        for i in range(1, n_in):
            want = want + x[i] * w[i]  # float32 throughout
        assert y.tobytes() == (want + b).tobytes()


@pytest.mark.parametrize("pos", [0, 1, 3, 6, 7])
def test_masked_matvec_selects_rows_below_pos(kernel_lib, pos):
    lib, _ = kernel_lib
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, 7).astype(np.float32)
    x[pos:] = 0.0  # the softmax weights of stale rows are exactly 0 ...
    w = rng.standard_normal((7, 16)).astype(np.float32)
    w[pos:] = np.array([np.inf, -np.inf, np.nan, 1e38], np.float32)[
        np.arange(16) % 4
    ]  # ... their values anything
    y = np.zeros(16, np.float32)
    lib.tf_mv_7x16_nb_live(ptr(x), ptr(w), ctypes.c_int32(pos), ptr(y))
    want = np.zeros(16, np.float32)
    for i in range(pos):
        want = want + x[i] * w[i]
    assert np.isfinite(y).all()
    np.testing.assert_array_equal(y, want)
