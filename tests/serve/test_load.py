"""Correctness under load (loopback): 64, 256 and 1,024 concurrent streams on one server, started
at staggered ticks, each stream's outputs equal to an in-process Session fed the same inputs
(within the artifact's tolerance); the same streams as one tick-batched group; half the streams
closed and half abandoned, after which every slot is free again (the idle timeout) and a stream
beyond capacity is refused. Skipped without the server venv."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from serve_kinds import KINDS, inputs

pytest.importorskip(
    "tritonclient.grpc", reason="tritonclient is the `serve` extra (requirements.lock has it)"
)

from tickformer.artifact.reader import open_artifact  # noqa: E402
from tickformer.export.writer import export_params  # noqa: E402
from tickformer.model import init_params  # noqa: E402
from tickformer.serve.client import ServerFull  # noqa: E402
from tickformer.serve.load import drive, reference, within  # noqa: E402
from tickformer.serve.repository import ServeConfig, write_repository  # noqa: E402
from tickformer.serve.server import Server, free_port  # noqa: E402

pytestmark = pytest.mark.slow  # a tritonserver and 1,024 concurrent gRPC streams: about a minute on 2 cores
CAPACITY, IDLE_S, TICKS = 1024, 2.0, 12
CONFIG = KINDS["windowed"]  # W = 4: 12 ticks wrap the ring twice


@pytest.fixture(scope="module")
def load_server(server_env, tmp_path_factory):
    root = tmp_path_factory.mktemp("load")
    params = init_params(CONFIG, 5)
    export_params(CONFIG, params, root / "art", batch=1)
    write_repository(
        root / "art", root / "repo", ServeConfig(slots=CAPACITY, idle_s=IDLE_S, when_full="refuse")
    )
    with Server(root / "repo", grpc_port=free_port(), env=server_env) as server:
        yield server, root, params


def test_concurrent_streams_each_equal_their_session(load_server, capsys):
    server, root, params = load_server
    tolerance = open_artifact(root / "art").tolerance
    rows = []
    for n in (64, 256, 1024):
        export_params(
            CONFIG, params, root / f"art{n}", batch=n
        )  # the in-process reference: one batch-n Session
        xs = inputs(CONFIG, n, TICKS, seed=n)
        xs[1] = xs[0]  # two streams with the same inputs, started at different ticks: the same outputs
        starts = [i % 4 for i in range(n)]
        out, ticks = asyncio.run(drive(server.url, xs, starts, first_id=1_000_000 * n))
        want = reference(root / f"art{n}", xs, backend="ort")
        ok = within(out, want, tolerance)
        grouped, gticks = asyncio.run(drive(server.url, xs, first_id=1_000_000 * n + 999_999, grouped=True))
        gok = within(grouped, want, tolerance)
        rows.append((n, int(ok.sum()), int(gok.sum()), np.median(ticks), np.median(gticks)))
        assert ok.all() and gok.all(), (n, np.flatnonzero(~ok)[:8], np.flatnonzero(~gok)[:8])
        assert np.array_equal(out[0], out[1])
    with capsys.disabled():
        print("\nstreams  equal(per-stream)  equal(tick-batched)  tick p50 per-stream  tick p50 tick-batched")
        for n, a, b, t1, t2 in rows:
            print(
                f"{n:7d}  {a:6d}/{n:<6d}     {b:6d}/{n:<6d}       {t1 * 1e3:9.1f} ms       {t2 * 1e3:9.2f} ms"
            )


def test_abandoned_streams_free_their_slots_and_capacity_is_enforced(load_server):
    server, root, _ = load_server
    xs = inputs(CONFIG, CAPACITY, 2, seed=1)
    asyncio.run(drive(server.url, xs, first_id=50_000_000, close="half"))  # 512 streams abandoned
    time.sleep(IDLE_S + 0.5)
    out, _ = asyncio.run(drive(server.url, xs, first_id=60_000_000, close="none"))  # all 1,024 slots again
    assert out.shape == (CAPACITY, 2, 2)
    with pytest.raises(ServerFull, match=f"0 of {CAPACITY} free"):
        asyncio.run(drive(server.url, xs[:1], first_id=70_000_000))
