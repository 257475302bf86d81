"""Frama-C EVA over the generated step (`make frama-c`): no alarm -- no undefined behaviour,
no NaN anywhere -- for every input in the declared domain, every position (a ring cache:
every int32 value of the stored ring position) and every cache content a sequence can reach,
with one stated assumption (the LayerNorm bound, tf_ln_bound).

EVA analyses the TF_FRAMA_C build, where the three bitwise selections are written as `?:`
(codegen/kernels.py and_bits_c); the test below checks that build gives bitwise the outputs of
the one that runs. Skipped, naming the package, where frama-c is not installed (the
repository's make test installs frama-c-base with apt-get where it can). Tiny models only:
the control preset's analysis is measured in docs/codegen.md.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from _cgutil import run_make, sequence

from tickformer import runtime
from tickformer.codegen import plan_for, write
from tickformer.codegen.toolchain import build_library
from tickformer.runtime import open_artifact


@pytest.mark.slow  # Frama-C EVA on four artifacts
@pytest.mark.parametrize("name", ["tiny", "tokens", "win4", "ssm"])
def test_eva_raises_no_alarm(arts, name, tmp_path, c_compiler, make_tool):
    if shutil.which("frama-c") is None:
        pytest.skip(
            "frama-c is not installed: apt-get install frama-c-base (the repository's make test "
            "installs it where apt-get works)"
        )
    out = write(arts[name], tmp_path / "c")
    done = run_make(out, "frama-c", make_tool, c_compiler)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "EVA raised no alarm (one assumption: tf_ln_bound)" in done.stdout
    assert " 0 alarms generated" in done.stdout


def test_eva_build_computes_the_same_bits(arts, tmp_path, c_compiler):
    art = open_artifact(arts["odd"])
    plan = plan_for(art)
    xs = sequence(art.config, art.batch, art.max_len, art.input_domain, seed=9)
    outs = []
    for extra in ([], ["-DTF_FRAMA_C"]):
        lib = build_library(
            plan,
            cflags=["-std=c99", "-O2", "-ffp-contract=off", "-fno-math-errno", *extra],
            cache_dir=tmp_path,
        )
        with runtime.load(arts["odd"], backend="c", library=lib) as session:
            outs.append(np.stack([session.step(x).copy() for x in xs]))
    assert outs[0].tobytes() == outs[1].tobytes()
