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

import hashlib
import importlib
import os
from pathlib import Path

from tickformer.artifact import Artifact, open_artifact
from tickformer.durable import replace_dir
from tickformer.errors import ArtifactError
from tickformer.runtime.backends.c import register_library_builder

from . import evatarget, golden, source, ssm_kernels, testprog, toolchain
from .plan import Plan, plan_for

# The runtime's `c` backend reaches the generator only through this builder (runtime/backends/c.py).
register_library_builder(toolchain.build_for)

__all__ = ["FILES", "Plan", "generate", "generator_id", "plan_for", "write"]

FILES = (
    "tf_model.h",
    "tf_model.c",
    "tf_golden.h",
    "tf_test.c",
    "tf_expcheck.c",
    "tf_eva.c",
    "Makefile",
    "README",
)
MODEL_FILES = ("tf_model.h", "tf_model.c")
SSM_FILES = ("tf_ssmcheck.c",)  # beside FILES for ssm artifacts


# Modules outside codegen/ whose code decides the generated text (not only the artifact's
# numbers): the positional table, the parameter names, the ring-slot arithmetic.
TEXT_DEPENDENCIES = ("tickformer.model.layers", "tickformer.model.names", "tickformer.contracts.ring_buffer")


def generator_id() -> str:
    """A digest of this package's own source files and of TEXT_DEPENDENCIES: changes whenever
    the generator or what its text is computed from does, so a build cache keyed by it never
    serves code from an older generator."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    for name in TEXT_DEPENDENCIES:
        module = importlib.import_module(name)
        digest.update(name.encode())
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


def _artifact(art: "str | os.PathLike[str] | Artifact") -> Artifact:
    return art if isinstance(art, Artifact) else open_artifact(art)


def model_sources(plan: Plan) -> dict[str, bytes]:
    """tf_model.h and tf_model.c only (what the `c` backend compiles)."""
    gen = generator_id()
    return {"tf_model.h": source.header(plan, gen).encode(), "tf_model.c": source.source(plan, gen).encode()}


def generate(art: "str | os.PathLike[str] | Artifact", *, plan: Plan | None = None) -> dict[str, bytes]:
    """Every generated file of `art` as {name: bytes} (FILES). `plan` overrides the plan read
    from the artifact (tests use it to tighten a bound). Runs the numpy reference once for the
    golden vectors (seconds). Raises ArtifactError for an unsupported artifact."""
    artifact = _artifact(art)
    plan = plan_for(artifact) if plan is None else plan
    files = model_sources(plan)
    ref = golden.compute(plan, str(artifact.root))
    files["tf_golden.h"] = golden.header(ref, plan).encode()
    files["tf_test.c"] = testprog.test_c(plan).encode()
    files["tf_expcheck.c"] = testprog.expcheck_c().encode()
    files["tf_eva.c"] = evatarget.eva_c(plan).encode()
    if plan.block_kind == "ssm":
        from tickformer.model.ssm import ELEMENTARY_ERROR_U

        files["tf_ssmcheck.c"] = ssm_kernels.ssmcheck_c(ELEMENTARY_ERROR_U).encode()
    files["Makefile"] = testprog.makefile(plan).encode()
    files["README"] = _readme(plan, artifact).encode()
    return files


def write(
    art: "str | os.PathLike[str] | Artifact", out: "str | os.PathLike[str]", *, force: bool = False
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
    return replace_dir(out, generate(art), last="README")


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

  make        libtf_model.a and tf_test        make test      every check (see the Makefile)
  make shared libtf_model.so                   make expcheck  the exhaustive exp check

API: tf_model.h. Use: `static tf_state s; tf_reset(&s);` then once per tick
`status = tf_step(&s, x, y);` (TF_OK: y holds the output; any other status: state unchanged).
Contract, bounds and measurements: docs/codegen.md in the tickformer repository.
"""
