"""Compiling the generated step into a shared library, once per artifact, compiler and flags.

    path = build_library(plan)              # cached: ~/.cache/tickformer/codegen/<key>/libtf_model.so
    path = build_for(artifact)              # the same from an opened artifact: backend "c"'s builder

The runtime's `c` backend imports nothing of the generator: `tickformer.codegen` registers
`build_for` with it on import (runtime/backends/c.py `register_library_builder`), and the backend
loads the library it returns only if the library reports the artifact's hash and state layout.

Compiler: the `cc=` argument, else $CC, else the first of cc, gcc, clang on PATH; none is a
BackendUnavailable naming the package to install. Flags (DEFAULT_FLAGS): -O3 (faster than -O2
on the machine of docs/codegen.md "Speed"; an earlier AMD machine preferred -O2, and `cflags=`
selects it), -march=native (the library is built on the machine that runs it), -ffp-contract=off
(no fused multiply-add: the reference rounds every product), -fno-math-errno (sqrtf becomes one
instruction; its argument var + eps is > 0), and with GCC -fno-tree-loop-distribute-patterns
(no memset/memmove calls) and -mprefer-vector-width=512 (GCC otherwise keeps to 256-bit vectors
on AVX-512 machines; the weights and the state are 64-byte aligned for it; a no-op without
AVX-512). The outputs are the same bits at every level and width (docs/codegen.md). Never
-ffast-math: it breaks the -inf selection and the NaN checks.

Cache: the key is the SHA-256 of every field of the plan (`cache_key`: the artifact's hash and
values, the weight format, the bounds a caller may replace), the generator's id (a digest of
codegen/*.py), the compiler's path and `--version` line, and the flags. A build happens in
a temporary directory; the sources, the library and `build.json` (written last) reach the
cache directory through durable.replace_dir, so a crash mid-build never leaves a directory
that holds a library without its build.json, and a library is only loaded from a directory
whose build.json names the same key.

Trust: loading a shared library runs its code. build.json is the backend's build record
(runtime/backends/c.py `build_record`): the artifact, the library's SHA-256, the generator, the
compiler and the flags. A cache entry is used only if its record names the same key and the
library's bytes hash to the recorded SHA-256 (else it is rebuilt), and the backend checks the
record again on the bytes it loads. That detects corruption and mix-ups; anyone who can write the
cache can rewrite the record too, so under trust= the backend asks for a rebuild (rebuild=True)
of any library this process did not compile: `build_library` registers the hash of every
library it compiles (`register_built_library`), taken from the compiler's output in a private
directory before it reaches the cache. The cache directory is the user's own
(TICKFORMER_CODEGEN_CACHE or cache_dir= to move it). Not real-time code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tickformer.artifact import Artifact
from tickformer.durable import replace_dir
from tickformer.errors import BackendError, BackendUnavailable, ConfigError
from tickformer.runtime.backends.c import BUILD_RECORD, build_record, register_built_library

from .plan import Plan, plan_for
from .source import generator_id, model_sources

LIBRARY = "libtf_model.so"
DEFAULT_FLAGS = ("-std=c99", "-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno")
GCC_FLAGS = ("-fno-tree-loop-distribute-patterns", "-mprefer-vector-width=512")
SHARED_FLAGS = ("-fPIC", "-shared")
CANDIDATES = ("cc", "gcc", "clang")
COMPILE_TIMEOUT_S = 600
INSTALL_HINT = (
    "install one (Debian/Ubuntu: apt-get install gcc), or name one with $CC, cc= (Python) or --cc (CLI)"
)


@dataclass(frozen=True)
class Compiler:
    path: str
    version: str  # first line of `--version`
    kind: str  # "gcc", "clang" or "other"


def find_compiler(cc: str | None = None) -> Compiler:
    """The compiler to use (module docstring). Raises BackendUnavailable when there is none."""
    if cc is not None and (not isinstance(cc, str) or not cc):
        raise ConfigError(f"cc={cc!r} must be the name or path of a C compiler, e.g. cc='gcc'")
    names = [cc] if cc is not None else ([os.environ["CC"]] if os.environ.get("CC") else list(CANDIDATES))
    for name in names:
        path = shutil.which(name)
        if path is None:
            continue
        try:
            out = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=30, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        first = out.splitlines()[0].strip() if out.strip() else name
        text = out.lower()
        kind = (
            "clang"
            if "clang" in text
            else ("gcc" if ("gcc" in text or "free software foundation" in text) else "other")
        )
        return Compiler(path=path, version=first, kind=kind)
    tried = ", ".join(names) if cc is not None or os.environ.get("CC") else "$CC, " + ", ".join(CANDIDATES)
    raise BackendUnavailable(f"backend 'c' needs a C compiler and found none (tried {tried}): {INSTALL_HINT}")


def compile_flags(compiler: Compiler, cflags: Sequence[str] | None = None) -> tuple[str, ...]:
    """DEFAULT_FLAGS (plus GCC's own) or the caller's `cflags`, then -fPIC -shared."""
    return deployment_flags(compiler, cflags) + SHARED_FLAGS


def deployment_flags(compiler: Compiler, cflags: Sequence[str] | None = None) -> tuple[str, ...]:
    """The flags the step is built with: DEFAULT_FLAGS (plus GCC's own) or the caller's `cflags`
    (fast math refused). The library adds -fPIC -shared (`compile_flags`); the native timing
    program (codegen/native.py) builds the step's object with exactly these."""
    if cflags is None:
        base = DEFAULT_FLAGS + (GCC_FLAGS if compiler.kind == "gcc" else ())
    else:
        if isinstance(cflags, str) or not all(isinstance(f, str) for f in cflags):
            raise ConfigError(f"cflags={cflags!r} must be a list of strings, e.g. ['-O2', '-march=native']")
        base = tuple(cflags)
    if any(f in ("-ffast-math", "-Ofast", "-ffinite-math-only") for f in base):
        raise ConfigError(
            f"cflags {list(base)} enable fast math, which breaks the -inf selection and the NaN checks "
            "of the step; remove it"
        )
    return base


def cache_root(cache_dir: "str | os.PathLike[str] | None" = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("TICKFORMER_CODEGEN_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tickformer" / "codegen"


def cache_key(plan: Plan, generator: str, compiler: Compiler, flags: Sequence[str]) -> str:
    """The cache entry of `plan`'s library: every field of the plan (plan.py: everything the
    emitted C depends on -- the artifact's values and what a caller may replace: the weight
    format, the bounds, the domain), the generator, the compiler and its flags."""
    record = {
        "plan": _plan_record(plan),
        "generator": generator,
        "compiler": [compiler.path, compiler.version],
        "flags": list(flags),
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:32]


def _plan_record(plan: Plan) -> dict[str, str]:
    """Each field of `plan` as text: its repr, the weights (params) as one SHA-256 over their
    names, dtypes, shapes and bytes (a field added to Plan is keyed without a change here)."""
    record = {}
    for f in fields(plan):
        value = getattr(plan, f.name)
        if f.name == "params":
            digest = hashlib.sha256()
            for name in sorted(value):
                array = np.ascontiguousarray(value[name])
                digest.update(f"{name} {array.dtype.str} {array.shape}".encode())
                digest.update(memoryview(array).cast("B"))
            record[f.name] = digest.hexdigest()
        else:
            record[f.name] = repr(value)
    return record


def build_for(artifact: Artifact, *, weights: str = "fp32", **options: Any) -> Path:
    """Backend "c"'s library builder (runtime/backends/c.py `LibraryBuilder`): the compiled
    library for `artifact` with its layer matrices stored in `weights` (options: build_library's
    cc, cflags, cache_dir, rebuild), after `plan_for` refused what the generator does not support."""
    return build_library(plan_for(artifact, weights), **options)


def build_library(
    plan: Plan,
    *,
    cc: str | None = None,
    cflags: Sequence[str] | None = None,
    cache_dir: "str | os.PathLike[str] | None" = None,
    rebuild: bool = False,
) -> Path:
    """The path of the compiled library for `plan`, building it on a cache miss (or always with
    rebuild=True: the backend under trust=, module docstring)."""
    compiler = find_compiler(cc)
    flags = compile_flags(compiler, cflags)
    gen = generator_id()
    key = cache_key(plan, gen, compiler, flags)
    target = cache_root(cache_dir) / key
    if not rebuild and _cached(target, key):
        return target / LIBRARY
    sources = model_sources(plan)
    with tempfile.TemporaryDirectory(prefix="tickformer-codegen-") as tmp:
        work = Path(tmp)
        for name, data in sources.items():
            (work / name).write_bytes(data)
        cmd = [compiler.path, *flags, "tf_model.c", "-o", LIBRARY]
        try:
            done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BackendError(
                f"{compiler.path} did not finish compiling the generated step within {COMPILE_TIMEOUT_S} s"
            ) from None
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise BackendError(
                f"{compiler.path} failed to compile the generated step ({' '.join(cmd[1:])}): "
                f"{detail[0] if detail else 'no output'}"
            )
        library = (work / LIBRARY).read_bytes()
    digest = hashlib.sha256(library).hexdigest()
    register_built_library(plan.artifact_sha256, digest)  # hashed before it reaches the cache
    record = build_record(
        plan.artifact_sha256,
        digest,
        key=key,
        library=LIBRARY,
        generator=gen,
        compiler=compiler.path,
        compiler_version=compiler.version,
        flags=list(flags),
    )
    replace_dir(target, {**sources, LIBRARY: library, BUILD_RECORD: record}, last=BUILD_RECORD)
    return target / LIBRARY


def _cached(target: Path, key: str) -> bool:
    """The cache entry `target` holds a library whose bytes are the ones its record names."""
    try:
        record = json.loads((target / BUILD_RECORD).read_text())
        library = (target / LIBRARY).read_bytes() if (target / LIBRARY).is_file() else b""
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("key") == key
        and bool(library)
        and record.get("library_sha256") == hashlib.sha256(library).hexdigest()
    )


def sign_library(
    art: "str | os.PathLike[str]", library: "str | os.PathLike[str]", key: "str | os.PathLike[str]"
) -> str:
    """Sign the build of `library` for the artifact at `art` with the private key file `key`:
    build.json (the backend's build record: the artifact, the library's SHA-256) and build.sig
    beside the library, each written atomically, the signature last (a crash between the two
    leaves a record whose signature does not verify: refused, never trusted). A device that loads
    the artifact with the matching trust= runs that library and no other (runtime/backends/c.py,
    "Trust"). The library must embed the artifact's manifest_sha256 (what `tickformer codegen`
    generates); it is not loaded here. Returns the key id. Raises ArtifactError or ConfigError."""
    from tickformer import signing
    from tickformer.artifact import open_artifact
    from tickformer.durable import atomic_write
    from tickformer.errors import ArtifactError
    from tickformer.runtime.backends.c import BUILD_SIGNATURE, read_library

    private = signing.load_private_key(key)  # before anything is read: a bad key fails fast
    artifact = open_artifact(art)
    want = str(artifact.manifest["manifest_sha256"])
    path = Path(library)
    data = read_library(path)
    if want.encode() not in data:
        raise ArtifactError(
            f"{path} does not embed artifact {want[:12]}...'s hash: it was not generated for {art}; "
            "regenerate it with `tickformer codegen` and `make shared`"
        )
    record = build_record(want, hashlib.sha256(data).hexdigest(), library=path.name)
    atomic_write(path.parent / BUILD_RECORD, record)
    atomic_write(path.parent / BUILD_SIGNATURE, signing.signature_document(record, private))
    return signing.key_id(private.public_key())
