"""The emitted kernels against numpy, compiled and called through ctypes.

Claims checked: the sums follow numpy's pairwise summation bit for bit, so a LayerNorm of the
same input gives the same bits as model/layers.py layer_norm; the products are bitwise
independent of the unrolling (UNROLL rows per pass is the same rounding as one at a time);
the value half of the attention never lets a row through that the selection (static: j < pos;
ring: contracts.ring_buffer.slot_read at every ring position) does not read, whatever it holds.
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
    for shape in ((5, 19, True), (64, 192, True)):
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


def _values_lib(tmp_path, c_compiler, rows, heads, dh, live, setup, tables=""):
    src = tmp_path / "v.c"
    src.write_text(
        "\n".join(
            [HEAD, kernels.and_bits_c(), tables, kernels.values_c(rows, heads, dh, live, setup)]
        ).replace("static void tf_values", "void tf_values")
    )
    lib = src.with_suffix(".so")
    subprocess.run(
        [c_compiler, "-std=c99", "-O2", "-march=native", "-ffp-contract=off", "-Wall", "-Werror"]
        + ["-Wno-unused-const-variable", "-fPIC", "-shared"]
        + [str(src), "-o", str(lib)],
        check=True,
    )
    return ctypes.CDLL(str(lib))


def _check_values(lib, rows, heads, dh, pos, live):
    """tf_values at `pos`: rows `live` selects contribute p v in order, every other row holds
    inf/NaN/1e38 (and p > 0 there, so a leak would show) and must add exactly +0."""
    rng = np.random.default_rng(pos)
    p = rng.uniform(0, 1, (heads, rows)).astype(np.float32)  # [H, N]
    v = rng.standard_normal((rows, heads, dh)).astype(np.float32)  # [N, H, dh]
    junk = np.array([np.inf, -np.inf, np.nan, 1e38], np.float32)
    for j in range(rows):
        if not live[j]:
            v[j] = junk[np.arange(heads * dh).reshape(heads, dh) % 4]
    acc = np.zeros((heads, dh), np.float32)
    lib.tf_values(ptr(p), ptr(v), ctypes.c_int32(pos), ptr(acc))
    want = np.zeros((heads, dh), np.float32)
    for j in range(rows):
        if live[j]:
            want = want + p[:, j : j + 1] * v[j]  # float32, rows in order
    assert np.isfinite(acc).all()
    assert acc.tobytes() == (want + np.float32(0.0)).tobytes(), pos


def test_static_values_select_rows_below_pos(tmp_path, c_compiler):
    lib = _values_lib(tmp_path, c_compiler, 7, 2, 4, kernels.static_live, "")
    for pos in range(8):
        _check_values(lib, 7, 2, 4, pos, [j < pos for j in range(7)])


@pytest.mark.parametrize("window", [1, 4, 5, 9])
def test_ring_values_read_exactly_the_slots_of_the_contract(tmp_path, c_compiler, window):
    """Every ring position r in [0, 3W): the compiled selection reads the slots
    contracts.ring_buffer.slot_read(r, j, W) says, and nothing from the others."""
    from tickformer.codegen import caches
    from tickformer.contracts.ring_buffer import slot_read

    tables = caches.ring_tables_c(caches.ring_tables(window))
    lib = _values_lib(tmp_path, c_compiler, window, 3, 4, kernels.ring_live, kernels.RING_SETUP, tables)
    for r in range(3 * window):
        _check_values(lib, window, 3, 4, r, [bool(slot_read(r, j, window)) for j in range(window)])
