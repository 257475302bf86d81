"""Loading is reading (runtime/__init__.py `load`): the runtime verifies hashes, the signature and
the format's rules, and reaches neither the exporter nor the generator -- not even lazily. The
`c` backend gets its library through the narrow builder interface (runtime/backends/c.py):
registered by tickformer.codegen when that is imported, passed in as builder=, or prebuilt as
library=; without any of them it says so in one line.

Checked in fresh processes, since a test session has imported everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tickformer import runtime

PROBE = """
import json, sys
from tickformer import runtime
from tickformer.errors import TickformerError
out = {}
for backend, options in json.loads(sys.argv[2]):
    try:
        runtime.load(sys.argv[1], backend=backend, **options).close()
        out[backend] = "loaded"
    except TickformerError as exc:
        out[backend] = f"{type(exc).__name__}: {exc}"
out["imported"] = sorted(m for m in sys.modules if m.startswith(("tickformer.export", "tickformer.codegen")))
print(json.dumps(out))
"""


def _probe(art, loads):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(art), json.dumps(loads)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_loading_imports_neither_the_exporter_nor_the_generator(tiny_art, compiler, tmp_path):
    """numpy, ort and c (a prebuilt library) load in a fresh process with no module of
    tickformer.export or tickformer.codegen imported. Before: load imported export.consistency
    (which rebuilt every graph), ort imported export.ort_session, c imported codegen."""
    from tickformer.codegen.toolchain import build_for

    library = str(build_for(runtime.open_artifact(tiny_art[0]), cache_dir=tmp_path))
    out = _probe(tiny_art[0], [["numpy", {}], ["ort", {}], ["c", {"library": library}]])
    assert out == {"numpy": "loaded", "ort": "loaded", "c": "loaded", "imported": []}


def test_the_c_backend_without_a_builder_says_how_to_get_one(tiny_art):
    out = _probe(tiny_art[0], [["c", {}]])
    message = out["c"]
    assert message.startswith("BackendUnavailable: backend 'c' builds its library with tickformer.codegen")
    assert "import tickformer.codegen" in message and "library=" in message and "\n" not in message
    assert out["imported"] == []


def test_a_builder_passed_in_is_asked_for_the_library(tiny_art, compiler, tmp_path, seq_for):
    """builder=: the backend asks it, with the artifact and the build options, and loads what it
    returns only after checking the library's artifact hash."""
    from tickformer.codegen.toolchain import build_for

    calls = []

    def builder(artifact, **options):
        calls.append((artifact.root, options))
        return build_for(artifact, **options)

    session = runtime.load(tiny_art[0], backend="c", builder=builder, cache_dir=tmp_path)
    assert calls == [(tiny_art[0], {"cc": None, "cflags": None, "cache_dir": tmp_path})]
    x = seq_for(session.config, 1, 1, seed=0)
    reference = runtime.load(tiny_art[0], backend="numpy")
    np.testing.assert_allclose(session.step(x), reference.step(x), atol=1e-5, rtol=1e-5)


def test_a_library_of_another_artifact_is_refused_by_its_hash(tiny_art, tokens_art, compiler, tmp_path):
    from tickformer.codegen.toolchain import build_for
    from tickformer.errors import ArtifactError

    other = build_for(runtime.open_artifact(tokens_art[0]), cache_dir=tmp_path)
    with pytest.raises(ArtifactError, match="was generated for artifact .*, not this one"):
        runtime.load(tiny_art[0], backend="c", builder=lambda artifact, **_: other)
