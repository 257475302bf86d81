"""tickformer.codegen: the step of an artifact as dependency-free C99 (docs/codegen.md).

    from tickformer.codegen import generate
    files = generate("ART")                  # {name: bytes}: tf_model.h, tf_model.c, ...
    write("ART", "OUT")                      # the same, written as the directory OUT, atomically

What is generated (codegen/source.py, codegen/testprog.py): one translation unit `tf_model.c`
with its header -- the weights as `static const` arrays, the step, commit and reset over a
caller-placed `tf_state` of compile-time size, the input-domain and output checks -- and,
beside it, golden vectors from the numpy reference (`tf_golden.h`), a standalone test program
(`tf_test.c`), the exhaustive exp check (`tf_expcheck.c`), the Frama-C entry point
(`tf_eva.c`) and a Makefile (library, test program, sanitizer run, cppcheck, stack report).

Supported: decoder-only attention artifacts, full (static cache) or windowed (ring cache),
continuous or token inputs, any batch. Refused with an ArtifactError naming the reason:
encoder-decoder artifacts (later), unknown config fields or manifest keys (codegen/plan.py).
Generation is a pure function of the artifact and the generator's own source: the same artifact
always gives byte-identical files. Importing this package registers `toolchain.build_for` as
backend "c"'s library builder (the runtime imports nothing of codegen).

Not real-time code.
"""

from __future__ import annotations

import os
from pathlib import Path

from tickformer.artifact import Artifact, open_artifact
from tickformer.durable import replace_dir
from tickformer.errors import ArtifactError
from tickformer.runtime.backends.c import register_library_builder

from . import evatarget, golden, ssm_kernels, testprog, timing, toolchain
from .plan import Plan, plan_for
from .source import _weights, generator_id, model_sources
from .weights import QUANTISED, stored_bytes

# The runtime's `c` backend reaches the generator only through this builder (runtime/backends/c.py).
register_library_builder(toolchain.build_for)

__all__ = ["FILES", "Plan", "generate", "generator_id", "plan_for", "weight_bytes", "write"]

FILES = (
    "tf_model.h",
    "tf_model.c",
    "tf_golden.h",
    "tf_test.c",
    "tf_expcheck.c",
    "tf_eva.c",
    "tf_timing.c",
    "tf_count.cpp",
    "tf_memcount.c",
    "Makefile",
    "README",
)
MODEL_FILES = ("tf_model.h", "tf_model.c")
SSM_FILES = ("tf_ssmcheck.c",)  # beside FILES for ssm artifacts


def _artifact(art: "str | os.PathLike[str] | Artifact") -> Artifact:
    return art if isinstance(art, Artifact) else open_artifact(art)


def generate(
    art: "str | os.PathLike[str] | Artifact", *, plan: Plan | None = None, weights: str = "fp32"
) -> dict[str, bytes]:
    """Every generated file of `art` as {name: bytes} (FILES). `plan` overrides the plan read
    from the artifact (tests use it to tighten a bound). `weights`: the layer matrices' storage,
    fp32|fp16|bf16|int8 (codegen/weights.py; the arithmetic stays float32). Runs the numpy
    reference once for the golden vectors (seconds). Raises ArtifactError for an unsupported
    artifact or format."""
    artifact = _artifact(art)
    plan = plan_for(artifact, weights) if plan is None else plan
    files = model_sources(plan)
    ref = golden.compute(plan, str(artifact.root))
    files["tf_golden.h"] = golden.header(ref, plan).encode()
    files["tf_test.c"] = testprog.test_c(plan).encode()
    files["tf_expcheck.c"] = testprog.expcheck_c().encode()
    files["tf_eva.c"] = evatarget.eva_c(plan).encode()
    files["tf_timing.c"] = timing.timing_c().encode()
    files["tf_count.cpp"] = timing.count_cpp().encode()
    files["tf_memcount.c"] = timing.memcount_c().encode()
    if plan.block_kind == "ssm":
        from tickformer.model.ssm import ELEMENTARY_ERROR_U

        files["tf_ssmcheck.c"] = ssm_kernels.ssmcheck_c(ELEMENTARY_ERROR_U).encode()
    files["Makefile"] = testprog.makefile(plan).encode()
    files["README"] = _readme(plan, artifact).encode()
    return files


def write(
    art: "str | os.PathLike[str] | Artifact",
    out: "str | os.PathLike[str]",
    *,
    force: bool = False,
    weights: str = "fp32",
) -> Path:
    """generate(art) written as the directory `out`, all or nothing (durable.replace_dir).
    An existing `out` is replaced only if it holds a previous codegen output (its README names
    the generator) or is empty, or with force=True."""
    out = Path(out)
    if out.exists() and not force:
        if not out.is_dir():
            raise ArtifactError(f"{out} exists and is not a directory; choose another --out")
        entries = set(os.listdir(out))
        readme = out / "README"
        ours = readme.is_file() and readme.read_text(errors="replace").startswith(README_HEAD)
        if entries and not ours:
            raise ArtifactError(
                f"{out} is not empty and not a tickformer codegen output; choose another --out (or pass --force)"
            )
    return replace_dir(out, generate(art, weights=weights), last="README")


def weight_bytes(plan: Plan, fmt: str) -> dict[str, int]:
    """Bytes of the emitted weights a step reads: the layer matrices in `fmt` ("layer", int8 with
    its scales; codegen/weights.py) and every other array, float32 ("other"; the positional table
    counted whole, though a step reads one row of it)."""
    layer = other = 0
    for w in _weights(plan):
        if w.name in QUANTISED:
            layer += stored_bytes(w.values, fmt)
        else:
            other += 4 * int(w.values.size)
    return {"layer": layer, "other": other, "total": layer + other}


README_HEAD = "C step generated by tickformer codegen"


def _readme(plan: Plan, artifact: Artifact) -> str:
    cfg = plan.config
    kind = "token ids -> logits" if plan.tokens else f"{cfg.d_in} inputs -> {cfg.d_out} outputs"
    window = (
        "" if plan.window is None else f", window {plan.window} (ring cache: tf_step slides, never fills)"
    )
    return f"""\
{README_HEAD} (generator {generator_id()}).
Artifact: {artifact.root} (manifest_sha256 {plan.artifact_sha256}).
Model: decoder-only{window}, {kind}, d_model {cfg.d_model}, {cfg.n_heads} heads, {cfg.n_layers} layers, d_ff {cfg.d_ff},
max_len {cfg.max_len}, batch {plan.batch}; input domain {list(plan.domain)}.
Weights: the layer matrices stored as {plan.weight_format} (TF_WEIGHT_FORMAT), arithmetic float32.

  make        libtf_model.a and tf_test        make test      every check (see the Makefile)
  make shared libtf_model.so                   make expcheck  the exhaustive exp check
  make timing tf_timing: the step timed in its own process (flags: OPT, ARCH; see tf_timing.c)
  make count  floating-point operations and memory accesses of one step, counted from the code

Timing on the target (an ARM64 board, say): copy this directory there and run
  make timing OPT=-O3 ARCH=-mcpu=native && ./tf_timing --samples 100000 --cpu 3 --realtime 80 --out s.bin
or cross-compile on the host: make timing CC=aarch64-linux-gnu-gcc ARCH=-mcpu=cortex-a72, then copy
tf_timing. s.bin holds the durations (int64 ns) then the positions; `tickformer certify --backend c
--native` runs the same program on this machine and certifies its samples (docs/certify.md).

API: tf_model.h. Use: `static tf_state s; tf_reset(&s);` then once per tick
`status = tf_step(&s, x, y);` (TF_OK: y holds the output; any other status: state unchanged).
Contract, bounds and measurements: docs/codegen.md in the tickformer repository.
"""
