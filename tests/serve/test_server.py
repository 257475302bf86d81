"""The repository on the tritonserver nvidia-pytriton ships (loopback only): a stream equal to
its in-process Session, a tick-batched group in one request, the one-line errors (forgotten after
the idle timeout, after a restart; server full), a stream beyond capacity queued until a slot
frees, `tickformer serve --run` stopping cleanly on SIGTERM, and streams sharded over two servers
by the client's stated hash. Skipped without the server venv (`make .venv-serve/.installed`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from serve_kinds import KINDS, ROOT, inputs

pytest.importorskip(
    "tritonclient.grpc", reason="tritonclient is the `serve` extra (requirements.lock has it)"
)

from tickformer import runtime  # noqa: E402
from tickformer.artifact.reader import open_artifact  # noqa: E402
from tickformer.serve.client import (  # noqa: E402
    ServerFull,
    ServerUnreachable,
    StreamClient,
    StreamForgotten,
    shard_of,
)
from tickformer.serve.load import within  # noqa: E402
from tickformer.serve.repository import ServeConfig, write_repository  # noqa: E402
from tickformer.serve.server import Server, free_port  # noqa: E402

pytestmark = pytest.mark.slow  # each starts a tritonserver (about 3 s) and talks to it over gRPC


@pytest.fixture(scope="module")
def served(arts, server_env, tmp_path_factory):
    """The windowed artifact served with 4 slots, a 1.5 s idle timeout, refusing beyond capacity."""
    repo = tmp_path_factory.mktemp("repo") / "repo"
    write_repository(arts["windowed"], repo, ServeConfig(slots=4, idle_s=1.5, when_full="refuse"))
    with Server(repo, grpc_port=free_port(), env=server_env) as server:
        yield server


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_served_equals_its_session(arts, server_env, tmp_path, kind):
    write_repository(arts[kind], tmp_path / "repo", ServeConfig(slots=2))
    xs = inputs(KINDS[kind], 2, 14, seed=9)
    with Server(tmp_path / "repo", grpc_port=free_port(), env=server_env) as server:
        with StreamClient(server.url) as client:
            client.open(1)
            client.open(2, rows=1)
            tol = open_artifact(arts[kind]).tolerance
            sessions = [runtime.load(arts[kind], backend="ort") for _ in range(2)]
            for t in range(14):
                for i in (0, 1):
                    y = client.step(i + 1, xs[i, t])
                    want = sessions[i].step(xs[i : i + 1, t][:, None]).reshape(-1)
                    assert within(y[None, None], want[None, None], tol).all(), (kind, i, t)


def test_a_tick_batched_group_is_one_request_and_equals_its_sessions(arts, served):
    xs = inputs(KINDS["windowed"], 3, 10, seed=4)
    with StreamClient(served.url) as client:
        client.open(77, rows=3)
        ys = np.stack([client.step(77, xs[:, t]) for t in range(10)], axis=1)  # [3, 10, 2]
        client.close(77)
    tol = open_artifact(arts["windowed"]).tolerance
    for i in range(3):
        session = runtime.load(arts["windowed"], backend="ort")
        want = np.stack([session.step(xs[i : i + 1, t][:, None]).reshape(-1).copy() for t in range(10)])
        assert within(ys[i][None], want[None], tol).all()


def test_forgotten_streams_and_a_full_server_are_one_line_errors(served):
    x = np.zeros(3, np.float32)
    with StreamClient(served.url) as client:
        client.open(5, rows=3)
        client.step(5, np.zeros((3, 3), np.float32))
        client.open(6, rows=2)
        with pytest.raises(ServerFull, match="server full: 2 stream slot"):
            client.step(6, np.zeros((2, 3), np.float32))
        client.close(6)
        client.open(7)
        client.step(7, x)
        time.sleep(2.0)  # past the 1.5 s idle timeout: both streams abandoned
        with pytest.raises(StreamForgotten, match=r"^stream 7 is gone .* restart the stream") as err:
            client.step(7, x)
        assert "\n" not in str(err.value)
        client.close(5)
        client.open(8, rows=4)  # every slot is free again: the abandoned streams freed theirs
        assert client.step(8, np.zeros((4, 3), np.float32)).shape == (4, 2)
        client.close(8)


def test_a_stream_beyond_capacity_waits_in_the_queue_until_a_slot_frees(arts, server_env, tmp_path):
    write_repository(arts["ssm"], tmp_path / "repo", ServeConfig(slots=1, idle_s=30.0, when_full="queue"))
    x = np.zeros(3, np.float32)
    with Server(tmp_path / "repo", grpc_port=free_port(), env=server_env) as server:
        first, second = StreamClient(server.url), StreamClient(server.url)
        first.open(1)
        first.step(1, x)
        second.open(2)
        done = []
        waiter = threading.Thread(target=lambda: done.append(second.step(2, x)))
        waiter.start()
        waiter.join(1.5)
        assert waiter.is_alive() and not done  # queued: no slot
        first.close(1)
        waiter.join(10)
        assert len(done) == 1 and done[0].shape == (2,)
        second.close(2)


def test_a_restarted_server_forgets_its_streams(arts, server_env, tmp_path):
    write_repository(arts["static"], tmp_path / "repo", ServeConfig(slots=2))
    port = free_port()
    x = np.zeros(3, np.float32)
    with Server(tmp_path / "repo", grpc_port=port, env=server_env) as server:
        client = StreamClient(server.url)
        client.open(3)
        client.step(3, x)
    with pytest.raises(ServerUnreachable, match="did not answer"):
        client.step(3, x)
    with Server(tmp_path / "repo", grpc_port=port, env=server_env):
        with pytest.raises(StreamForgotten, match="restart the stream"):
            client.step(3, x)


def test_serve_run_starts_and_stops_cleanly_on_sigterm(arts, server_env, tmp_path):
    port = free_port()
    cmd = [sys.executable, "-m", "tickformer", "serve", str(arts["windowed"]), "--repo", str(tmp_path / "r")]
    env = dict(os.environ, TICKFORMER_SERVE_ENV=str(server_env))
    proc = subprocess.Popen(
        [*cmd, "--slots", "2", "--grpc-port", str(port), "--run"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert "serving" in lines[1] and f"127.0.0.1:{port}" in lines[1], lines
        with StreamClient(f"127.0.0.1:{port}") as client:
            client.open(1)
            assert client.step(1, np.zeros(3, np.float32)).shape == (2,)
            client.close(1)  # an open stream would hold the server for its 5 s exit timeout (then exit 1)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "stopped (signal SIGTERM; tritonserver exit 0)" in out


def test_streams_sharded_over_two_servers_by_the_stated_hash(arts, server_env, tmp_path):
    repos = [tmp_path / "a", tmp_path / "b"]
    for repo in repos:
        write_repository(arts["ssm"], repo, ServeConfig(slots=16, idle_s=30.0))
    ids = list(range(1, 17))
    xs = inputs(KINDS["ssm"], 16, 6, seed=2)
    tol = open_artifact(arts["ssm"]).tolerance
    with (
        Server(repos[0], grpc_port=free_port(), env=server_env) as a,
        Server(repos[1], grpc_port=free_port(), env=server_env) as b,
    ):
        client = StreamClient([a.url, b.url])
        on_a = [i for i in ids if shard_of(i, 2) == 0]
        assert 0 < len(on_a) < 16 and all(client.url_of(i) == (a.url if i in on_a else b.url) for i in ids)
        for i in ids:
            client.open(i)
        ys = np.stack([[client.step(i, xs[i - 1, t]) for t in range(6)] for i in ids])  # [16, 6, 2]
        for i in ids:
            session = runtime.load(arts["ssm"], backend="ort")
            want = np.stack([session.step(xs[i - 1 : i, t][:, None]).reshape(-1).copy() for t in range(6)])
            assert within(ys[i - 1][None], want[None], tol).all()
        a.stop()  # server a goes away: its streams are gone, b's go on
        for i in ids:
            if i in on_a:
                with pytest.raises(ServerUnreachable):
                    client.step(i, xs[i - 1, 0])
            else:
                assert client.step(i, xs[i - 1, 0]).shape == (2,)
