"""Issue 38: trust covers every byte that runs -- the `c` backend's compiled library.

The attacker can write the codegen cache folder, or the folder of a prebuilt `library=`, but not
the signed artifact and not the trust key. Their library embeds the artifact's hash string, the
right state layout and a correct step -- and a constructor that runs at dlopen and writes a
marker file (what a real payload would do instead: anything). Before the fix, a library swapped
into the cache with its build.json left (or rewritten), and an edited `library=`, both loaded
under trust= -- the marker was written while the signature check reported success.

What must hold: the bytes hashed are the bytes run; under trust= a library runs only if this
process compiled it from the verified artifact or a build record signed by the trusted key names
its SHA-256; a FIFO, /dev/zero or a directory as the library is refused in one line (not "no such
library"). Every case is recorded under "attack: ..." (docs/reliability_report.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _relutil as ru
import numpy as np
import pytest

from tickformer import runtime, signing
from tickformer.artifact.reader import open_artifact
from tickformer.codegen.plan import plan_for
from tickformer.codegen.source import model_sources
from tickformer.codegen.toolchain import (
    BUILD_RECORD,
    LIBRARY,
    build_library,
    compile_flags,
    find_compiler,
    sign_library,
)
from tickformer.errors import ArtifactError, ConfigError
from tickformer.runtime.backends import c as c_backend

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler"
)

CACHE_SWAP = "attack: c backend's cached library replaced, build.json kept or rewritten (trust=)"
PREBUILT = "attack: prebuilt library= edited, with the artifact's hash string kept (trust=)"
NOT_A_FILE = "attack: library= is a FIFO, /dev/zero or a directory"
KEY_MODE = "attack: private key readable by others (mode 0644/0666) used to sign"

EVIL = """
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void tf_evil_at_load(void) {
    const char *mark = getenv("TICKFORMER_EVIL_MARK");
    if (mark) { FILE *f = fopen(mark, "w"); if (f) { fputs("ran", f); fclose(f); } }
}
"""


@pytest.fixture(scope="module")
def signed(art_src, tmp_path_factory):
    """(artifact path, public key, private key) of a signed copy of the reliability artifact."""
    root = tmp_path_factory.mktemp("libtrust")
    private, public = signing.generate_key(root / "key")
    art = ru.fresh_copy(art_src[0], root / "art")
    from tickformer.artifact.signer import sign_artifact

    sign_artifact(art, private)
    return art, public, private


def _evil_library(art: Path, out: Path) -> Path:
    """The generated step of `art` with a load-time constructor appended, compiled as the cache
    compiles it: the artifact's hash string, layout and outputs are all right."""
    plan = plan_for(open_artifact(art))
    compiler = find_compiler()
    out.mkdir(parents=True, exist_ok=True)
    for name, data in model_sources(plan).items():
        (out / name).write_bytes(data + (EVIL.encode() if name == "tf_model.c" else b""))
    flags = compile_flags(compiler)
    subprocess.run(
        [compiler.path, *flags, "tf_model.c", "-o", LIBRARY], cwd=out, check=True, capture_output=True
    )
    return out / LIBRARY


@pytest.fixture()
def marker(tmp_path, monkeypatch):
    path = tmp_path / "evil-ran"
    monkeypatch.setenv("TICKFORMER_EVIL_MARK", str(path))
    return path


@pytest.fixture()
def new_process(monkeypatch):
    """What this process compiled is forgotten, as in a fresh process on the device."""
    monkeypatch.setattr(c_backend, "_BUILT_HERE", set())


def _swap_into_cache(art: Path, cache: Path, evil: Path, *, rewrite_record: bool) -> Path:
    """Replace the cached library by `evil`; keep build.json, or rewrite it with evil's hash."""
    (entry,) = [p for p in cache.iterdir() if (p / LIBRARY).is_file()]
    shutil.copyfile(evil, entry / LIBRARY)
    if rewrite_record:
        record = json.loads((entry / BUILD_RECORD).read_text())
        record["library_sha256"] = hashlib.sha256(evil.read_bytes()).hexdigest()
        (entry / BUILD_RECORD).write_text(json.dumps(record))
    return entry / LIBRARY


@pytest.mark.parametrize("rewrite_record", [False, True], ids=["record-kept", "record-rewritten"])
def test_a_library_swapped_into_the_cache_never_runs_under_trust(
    signed, tmp_path, marker, new_process, outcomes, rewrite_record
):
    art, public, _ = signed
    cache = tmp_path / "cache"
    x = np.full((1, 1, 3), 0.25, np.float32)
    with runtime.load(art, backend="c", trust=public, cache_dir=cache) as s:
        good = s.step(x).copy()
    c_backend._BUILT_HERE.clear()  # the next boot: a fresh process
    evil = _evil_library(art, tmp_path / "evil")
    cached = _swap_into_cache(art, cache, evil, rewrite_record=rewrite_record)
    outcomes.describe(CACHE_SWAP, "the cache's library replaced by one with a load-time payload")
    start = time.perf_counter()
    runtime.load(art, backend="c", trust=public, cache_dir=cache).close()  # rebuilt: no error
    ran = marker.exists()
    outcomes.record(
        CACHE_SWAP,
        "payload RAN" if ran else "rebuilt from the artifact, payload never ran",
        time.perf_counter() - start,
    )
    assert not ran, "the attacker's library ran under trust="
    with runtime.load(art, backend="c", trust=public, cache_dir=cache) as s:
        np.testing.assert_array_equal(s.step(x), good)
    assert cached.read_bytes() != evil.read_bytes()  # the rebuild replaced it in the cache too
    assert not marker.exists()


def test_a_corrupted_cache_entry_is_rebuilt_without_trust(signed, tmp_path, marker):
    """Without trust= the record still catches a library changed after its build (a mix-up or
    corruption): the entry is rebuilt. A rewritten record is not caught here -- that is trust='s job."""
    art, _, _ = signed
    cache = tmp_path / "cache"
    runtime.load(art, backend="c", cache_dir=cache).close()
    _swap_into_cache(art, cache, _evil_library(art, tmp_path / "evil"), rewrite_record=False)
    runtime.load(art, backend="c", cache_dir=cache).close()
    assert not marker.exists()


def test_an_edited_prebuilt_library_is_refused_under_trust(signed, tmp_path, marker, new_process, outcomes):
    art, public, private = signed
    evil = _evil_library(art, tmp_path / "evil")
    outcomes.describe(PREBUILT, "library= with a load-time payload; unsigned, or signed for other bytes")
    message = ru_one_line(
        outcomes, PREBUILT, lambda: runtime.load(art, backend="c", library=evil, trust=public)
    )
    assert "under --trust a library runs only if this process built it" in message
    assert not marker.exists()

    genuine = build_library(plan_for(open_artifact(art)), cache_dir=tmp_path / "publisher")
    c_backend._BUILT_HERE.clear()
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copyfile(genuine, shipped / LIBRARY)
    sign_library(art, shipped / LIBRARY, private)  # the publisher signs the build it ships
    with runtime.load(art, backend="c", library=shipped / LIBRARY, trust=public) as s:
        assert s.position == 0
    shutil.copyfile(evil, shipped / LIBRARY)  # the attacker edits the shipped library, not its record
    message = ru_one_line(
        outcomes, PREBUILT, lambda: runtime.load(art, backend="c", library=shipped / LIBRARY, trust=public)
    )
    assert "changed after it was built" in message
    record = json.loads((shipped / BUILD_RECORD).read_text())  # ... or rewrites the record too
    record["library_sha256"] = hashlib.sha256(evil.read_bytes()).hexdigest()
    (shipped / BUILD_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    ru_one_line(
        outcomes, PREBUILT, lambda: runtime.load(art, backend="c", library=shipped / LIBRARY, trust=public)
    )
    other_private, other_public = signing.generate_key(tmp_path / "other")
    sign_library(art, shipped / LIBRARY, other_private)  # ... or signs it with their own key
    ru_one_line(
        outcomes, PREBUILT, lambda: runtime.load(art, backend="c", library=shipped / LIBRARY, trust=public)
    )
    assert not marker.exists(), "the attacker's library ran under trust="


def ru_one_line(outcomes, kind, case) -> str:
    with pytest.raises(ArtifactError) as info:
        outcomes.run(kind, case, reraise=True)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_the_cli_runs_the_genuine_step_after_a_cache_swap(signed, tmp_path, marker):
    """`tickformer run --backend c --trust KEY` in a fresh process, the cache already poisoned."""
    art, public, _ = signed
    cache = tmp_path / "cache"
    runtime.load(art, backend="c", cache_dir=cache).close()
    _swap_into_cache(art, cache, _evil_library(art, tmp_path / "evil"), rewrite_record=True)
    env = {**os.environ, "TICKFORMER_CODEGEN_CACHE": str(cache)}
    np.save(tmp_path / "x.npy", np.full((1, 4, 3), 0.25, np.float32))
    run = ["run", str(art), "--backend", "c", "--trust", str(public), "--input", str(tmp_path / "x.npy")]
    done = subprocess.run(
        [sys.executable, "-m", "tickformer.cli", *run],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), "the attacker's library ran under --trust"


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory"])
def test_a_library_that_is_not_a_file_is_refused_in_one_line(signed, tmp_path, outcomes, kind):
    art, _, _ = signed
    if kind == "fifo":
        target = tmp_path / "lib.so"
        os.mkfifo(target)
    elif kind == "directory":
        target = tmp_path
    else:
        target = Path(kind)
    outcomes.describe(NOT_A_FILE, "read non-blocking and checked with fstat before anything is read")
    message = ru_one_line(outcomes, NOT_A_FILE, lambda: runtime.load(art, backend="c", library=target))
    assert "not a library file" in message and "no such library" not in message


@pytest.mark.parametrize("mode", [0o644, 0o666])
def test_a_private_key_others_can_read_is_refused(art_src, tmp_path, outcomes, mode, capsys):
    from tickformer.cli import main

    private, public = signing.generate_key(tmp_path / "key")
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    os.chmod(private, mode)
    outcomes.describe(KEY_MODE, "sign refuses a key with group/other bits, one line with the chmod")
    with pytest.raises(ConfigError) as info:
        outcomes.run(KEY_MODE, lambda: signing.load_private_key(private), reraise=True)
    assert f"mode {mode:04o}" in str(info.value) and f"chmod 600 {private}" in str(info.value)
    assert main(["sign", str(art), "--key", str(private)]) != 0
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    os.chmod(private, 0o600)
    public.unlink()  # the success message names only files that exist
    assert main(["sign", str(art), "--key", str(private)]) == 0
    out = capsys.readouterr().out
    assert f"--trust {public}" not in out and "is not there" in out


def test_an_untrusted_load_still_names_the_artifact_a_library_was_built_for(tokens_src, signed, tmp_path):
    art, _, _ = signed
    other = build_library(plan_for(open_artifact(tokens_src[0])), cache_dir=tmp_path)
    with pytest.raises(ArtifactError, match="was generated for artifact"):
        runtime.load(art, backend="c", library=other)
