"""Artifacts and servers shared by the serving tests: tiny decoder-only artifacts of every servable
kind (exported once per session, well under a second each), and the Triton server's venv, whose
absence skips the server tests with the command that builds it. serve_kinds.py (the kinds, the
inputs) is importable by the test modules beside it (pytest runs with --import-mode=importlib)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from serve_kinds import KINDS, ROOT  # noqa: E402

from tickformer.export.writer import export_params  # noqa: E402
from tickformer.model import init_params  # noqa: E402


@pytest.fixture(scope="session")
def arts(tmp_path_factory):
    """{kind: artifact path} for KINDS, batch 1."""
    root = tmp_path_factory.mktemp("serve-arts")
    out = {}
    for seed, (kind, config) in enumerate(KINDS.items()):
        out[kind] = root / kind
        export_params(config, init_params(config, seed + 1), out[kind], batch=1)
    return out


@pytest.fixture(scope="session")
def server_env():
    """The server venv (.venv-serve, or $TICKFORMER_SERVE_ENV), or a skip naming how to build it."""
    from tickformer.serve.server import ServerError
    from tickformer.serve.server import server_env as find

    try:
        return find(os.environ.get("TICKFORMER_SERVE_ENV") or ROOT / ".venv-serve")
    except ServerError as exc:
        pytest.skip(f"no Triton server venv: {exc}")
