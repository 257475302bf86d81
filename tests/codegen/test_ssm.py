"""The state-space block kind: the elementary functions it adds (softplus, tanh, keep = 1 - e^-s)
against float64 and within model/ssm.py's ELEMENTARY_ERROR_U, exhaustively in `make ssmcheck`
(the evidence run; the tests run every 997th and, marked slow, every 31st float32); the
generated step's shape (no positional table, both state buffers, the state check); and the
golden check of `make check` failing for the mistakes an ssm step invites.
"""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest
from _cgutil import run_make

from tickformer.codegen import generate, kernels, ssm_kernels, write
from tickformer.model.ssm import ELEMENTARY_ERROR_U, one_minus_exp_neg, softplus

U = 2.0**-24
DRIVER = """#include <math.h>
#include <stdint.h>
typedef union { float f; uint32_t u; } tf_bits;
#define TF_NEG_INF_BITS 0xFF800000u
%s
void tf_softplus_array(const float *x, float *y, int n) { int i; for (i = 0; i < n; i++) { y[i] = tf_softplus(x[i]); } }
void tf_tanh_array(const float *x, float *y, int n) { int i; for (i = 0; i < n; i++) { y[i] = tf_tanh_pos(x[i]); } }
"""


@pytest.fixture(scope="module")
def fns(tmp_path_factory, c_compiler):
    src = tmp_path_factory.mktemp("ssmk") / "k.c"
    src.write_text(DRIVER % (kernels.and_bits_c() + kernels.exp_c() + ssm_kernels.elementary_c()))
    lib = src.with_suffix(".so")
    flags = ["-std=c99", "-O2", "-march=native", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror"]
    subprocess.run([c_compiler, *flags, "-fPIC", "-shared", str(src), "-o", str(lib)], check=True)
    handle = ctypes.CDLL(str(lib))

    def wrap(fn):
        def call(x):
            x = np.ascontiguousarray(x, np.float32)
            y = np.empty_like(x)
            fn(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(x.size))
            return y

        return call

    return wrap(handle.tf_softplus_array), wrap(handle.tf_tanh_array)


def rel_u(y, exact):
    return np.abs(y.astype(np.float64) - exact) / np.abs(exact) / U


def test_softplus_against_float64_and_numpy(fns):
    softplus_c, _ = fns
    z = np.random.default_rng(0).uniform(-86.5, 88.0, 1_000_000).astype(np.float32)
    z64 = z.astype(np.float64)
    exact = np.where(z64 > 0, z64 + np.log1p(np.exp(-z64)), np.log1p(np.exp(z64)))
    y = softplus_c(z)
    normal = exact >= 2.0**-126
    assert rel_u(y[normal], exact[normal]).max() <= ELEMENTARY_ERROR_U
    assert rel_u(softplus(z)[normal], exact[normal]).max() <= ELEMENTARY_ERROR_U  # numpy, for scale
    special = softplus_c(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -100.0, 3e38], np.float32))
    assert abs(special[0] - np.log(2)) < 1e-7 and special[0] == special[1]
    assert special[2] == np.inf and special[3] == 0.0 and np.isnan(special[4]) and special[5] == 0.0
    assert special[6] == np.float32(3e38)


def test_tanh_and_keep_against_float64(fns):
    _, tanh_c = fns
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [np.exp(rng.uniform(np.log(1e-30), np.log(20.0), 1_000_000)), [0.0, 0.625, 9.0, 1e30]]
    ).astype(np.float32)
    t = tanh_c(x)
    exact = np.tanh(x.astype(np.float64))
    ok = exact >= 2.0**-126
    assert rel_u(t[ok], exact[ok]).max() <= ELEMENTARY_ERROR_U
    assert ((t >= 0) & (t <= 1)).all() and t[-1] == 1.0 and t[-4] == 0.0
    s = x
    th = tanh_c(s * np.float32(0.5))
    keep = (th + th) / (np.float32(1) + th)  # the step's arithmetic, float32
    exact_keep = -np.expm1(-s.astype(np.float64))
    ok = exact_keep >= 2.0**-126
    assert rel_u(keep[ok], exact_keep[ok]).max() <= ELEMENTARY_ERROR_U
    assert rel_u(one_minus_exp_neg(s)[ok], exact_keep[ok]).max() <= ELEMENTARY_ERROR_U  # numpy's, for scale
    assert np.isnan(tanh_c(np.array([np.nan], np.float32)))[0]


def test_the_ssm_step_has_no_positions_and_two_state_buffers(arts):
    files = generate(arts["ssm"])
    src, head = files["tf_model.c"].decode(), files["tf_model.h"].decode()
    code = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    assert "tf_pe" not in code and "tf_attention" not in code
    assert "float state[2][TF_BATCH][TF_LAYERS][TF_D_MODEL][TF_D_STATE];" in head
    assert "#define TF_SSM 1" in head and "TF_E_STATE = 7" in head
    assert "tf_check_state" in code and "tf_ssmcheck.c" in files


@pytest.mark.parametrize("stride", ["997"])
def test_sampled_ssm_check_program(arts, tmp_path, c_compiler, make_tool, stride):
    out = write(arts["ssm"], tmp_path / "c")
    done = run_make(out, "ssmcheck-sampled", make_tool, c_compiler)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "contracts: 0 broken" in done.stdout


def test_ssm_check_program_can_fail(arts, tmp_path, c_compiler, make_tool):
    """A tanh whose polynomial range is stretched (0.625 -> 2) breaks the bound: the check says so."""
    out = write(arts["ssm"], tmp_path / "c")
    src = (out / "tf_model.c").read_text()
    (out / "tf_model.c").write_text(
        src.replace("return x < 0x1.4p-1f ? small : large;", "return x < 2.0f ? small : large;")
    )
    done = run_make(out, "ssmcheck-sampled", make_tool, c_compiler)
    assert done.returncode != 0, done.stdout


MUTANTS = {
    "reads the buffer it writes": (r"&s->state\[rd\]\[b\]\[l\]\[0\]\[0\],", "&s->state[1 - rd][b][l][0][0],"),
    "skip term dropped": (r"\+ d_skip\[d\] \* x\[d\];", "+ 0.0f * d_skip[d] * x[d];"),
    "softplus replaced by relu": (r"delta\[d\] = tf_softplus\(zbc\[d\]\);", "delta[d] = tf_relu1(zbc[d]);"),
    "lam and keep swapped": (
        r"lam \* hr\[d \* (\d+) \+ n\] \+ keep \* u",
        r"keep * hr[d * \1 + n] + lam * u",
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_golden_check_catches_ssm_mutants(arts, mutant, tmp_path, c_compiler, make_tool):
    out = write(arts["ssm"], tmp_path / "c")
    pattern, replacement = MUTANTS[mutant]
    src = (out / "tf_model.c").read_text()
    mutated, count = re.subn(pattern, replacement, src)
    assert count >= 1, mutant
    (out / "tf_model.c").write_text(mutated)
    done = run_make(out, "check", make_tool, c_compiler, "STRICT=-std=c99")
    assert done.returncode != 0, (mutant, done.stdout[-2000:])
    assert "FAIL golden" in done.stdout or "FAIL stale rows" in done.stdout, done.stdout[-2000:]


@pytest.mark.slow
def test_dense_ssm_check(arts, tmp_path, c_compiler, make_tool):
    """Every 31st float32 argument of softplus, tanh_pos and keep (about 10 s): the bound and the
    contracts. The exhaustive run (`make ssmcheck`, every float32, ~4 min on this machine) is the
    evidence run, claims/codegen_evidence.py --subject ssm --expcheck (docs/codegen.md)."""
    out = write(arts["ssm"], tmp_path / "c")
    run_make(out, "tf_ssmcheck", make_tool, c_compiler)
    done = subprocess.run([str(out / "tf_ssmcheck"), "31"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stride 31," in done.stdout and "contracts: 0 broken" in done.stdout
