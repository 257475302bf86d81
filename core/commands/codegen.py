"""`tickformer codegen ART --out DIR`: the artifact's step as dependency-free C99.

Writes DIR/ (atomically): tf_model.h, tf_model.c (the step, commit and reset; weights as
static const arrays), tf_golden.h + tf_test.c (the numpy reference's outputs, checked without
Python), tf_expcheck.c, tf_eva.c, tf_timing.c (the step timed in its own process), tf_count.cpp
and tf_memcount.c (its operations and memory accesses) and a Makefile (`make`, `make shared`,
`make test`, `make timing`, `make count`).
`--test` runs `make -C DIR test` afterwards and fails if it does. See docs/codegen.md.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess

from tickformer.commands import args as shared
from tickformer.errors import BackendError, BackendUnavailable

HELP = "generate the artifact's step as dependency-free C99 (library, test program, Makefile)"
DESCRIPTION = (
    "Generate the step of a decoder-only artifact as a C99 translation unit with static "
    "weights and caller-placed state, golden vectors from the numpy reference, a standalone test program "
    "and a Makefile (docs/codegen.md)."
)


def arguments(p: argparse.ArgumentParser) -> None:
    shared.artifact(p)
    shared.trust(p)
    shared.out(p, help="output directory (replaced atomically if it holds a previous codegen output)")
    p.add_argument(
        "--force", action="store_true", help="replace --out even if it is not a previous codegen output"
    )
    p.add_argument(
        "--test", action="store_true", help="run `make -C OUT test` afterwards (needs make and a C compiler)"
    )
    p.add_argument("--cc", default=None, help="C compiler for --test (default: $CC or cc)")
    p.add_argument(
        "--weights",
        default="fp32",
        help="storage of the layer matrices: fp32 (default), fp16, bf16 or int8 (per-channel scales); "
        "the arithmetic stays float32 (docs/codegen.md, 'Weights in fewer bytes')",
    )


def run(args: argparse.Namespace) -> int:
    from tickformer.artifact import open_artifact
    from tickformer.codegen import write

    # Opened (hashes, and the signature with --trust) once here; codegen works from these bytes.
    out = write(
        open_artifact(args.artifact, trust=args.trust), args.out, force=args.force, weights=args.weights
    )
    print(
        f"wrote {out}: tf_model.h tf_model.c (the step), tf_test.c tf_golden.h (checks), tf_timing.c (the step "
        f"timed in its own process), tf_count.cpp tf_memcount.c (its work), Makefile; run `make -C {out} test`, "
        f"`make -C {out} timing`"
    )
    if not args.test:
        return 0
    make = shutil.which("make")
    if make is None:
        raise BackendUnavailable("--test needs `make`: apt-get install make")
    from tickformer.codegen.toolchain import find_compiler

    cc = find_compiler(args.cc)  # BackendUnavailable naming the package when there is none
    done = subprocess.run([make, "-C", str(out), "test", f"CC={cc.path}"], capture_output=True, text=True)
    print(done.stdout, end="")
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise BackendError(f"make test failed in {out}: {lines[-1] if lines else 'no output'}")
    return 0
