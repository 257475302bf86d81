"""The client's stated shard hash and its one-line errors (serve/client.py), without a server."""

from __future__ import annotations

import asyncio
import hashlib
from types import SimpleNamespace as NS

import numpy as np
import pytest

from tickformer.errors import ConfigError, InputError
from tickformer.serve.client import (
    ServerFull,
    ServerUnreachable,
    StreamForgotten,
    _check_id,
    shard_of,
    translate,
)


def test_shard_is_blake2b_64_of_the_id_mod_n():
    for sid in (1, 2, 255, 2**40 + 7, 2**63 - 1):
        digest = hashlib.blake2b(sid.to_bytes(8, "big"), digest_size=8).digest()
        assert shard_of(sid, 3) == int.from_bytes(digest, "big") % 3
    assert [shard_of(i, 2) for i in range(1, 6)] == [0, 1, 0, 1, 1]  # pinned: every client agrees


def test_shards_spread_evenly():
    counts = [0] * 4
    for sid in range(1, 4001):
        counts[shard_of(sid, 4)] += 1
    assert all(900 < c < 1100 for c in counts), counts


def test_stream_ids_are_triton_correlation_ids():
    for bad in (0, -1, 2**63, "7", 1.0):
        with pytest.raises(ConfigError, match=r"\[1, 2\^63\)"):
            _check_id(bad)


class FakeTritonError(Exception):
    def __init__(self, msg: str, status: str = "StatusCode.INVALID_ARGUMENT") -> None:
        super().__init__(msg)
        self._msg, self._status = msg, status

    def message(self) -> str:
        return self._msg

    def status(self) -> str:
        return self._status


@pytest.mark.parametrize(
    "msg, status, cls, words",
    [
        (
            "inference request for sequence 7 to model 'tickformer' must specify the START flag on the first "
            "request of the sequence",
            "StatusCode.INVALID_ARGUMENT",
            StreamForgotten,
            "restart the stream",
        ),
        (
            "stream 7 is unknown to this server (ended, ...)",
            "StatusCode.INTERNAL",
            StreamForgotten,
            "open(7)",
        ),
        (
            "server full: 1 stream slot(s) wanted, 0 of 4 free; ...",
            "StatusCode.INTERNAL",
            ServerFull,
            "server full",
        ),
        ("failed to connect to all addresses", "StatusCode.UNAVAILABLE", ServerUnreachable, "state is gone"),
        ("stream 7: input refused: x must be float32", "StatusCode.INTERNAL", InputError, "input refused"),
    ],
)
def test_errors_are_one_line_and_say_what_to_do(msg, status, cls, words):
    err = translate(FakeTritonError(msg + "\nmore", status), 7, "127.0.0.1:8001")
    assert type(err) is cls and words in str(err) and "\n" not in str(err)


class _FakeServer:
    """A stand-in for tritonclient's InferenceServerClient (sync, or async with `aio`): one
    continuous stream model of d_in 3, d_out 2; records every infer call; `fail` makes the next
    one raise it."""

    calls: list[dict] = []
    fail: Exception | None = None

    def __init__(self, url: str) -> None:
        self.url = url

    def _metadata(self):
        inputs = [NS(name="START", datatype="BOOL"), NS(name="x", datatype="FP32")]
        return NS(inputs=inputs, outputs=[NS(name="y", datatype="FP32")])

    def _config(self):
        return NS(config=NS(input=[NS(dims=[-1, 3])]))

    def _infer(self, model, inputs, **kw):
        x = inputs[0]
        _FakeServer.calls.append({"url": self.url, "shape": x.shape(), **kw})
        if _FakeServer.fail is not None:
            exc, _FakeServer.fail = _FakeServer.fail, None
            raise exc
        rows = x.shape()[1]
        return NS(as_numpy=lambda name: np.full((1, rows, 2), 0.5, np.float32))

    def get_model_metadata(self, model):
        return self._metadata()

    def get_model_config(self, model):
        return self._config()

    def infer(self, model, inputs, **kw):
        return self._infer(model, inputs, **kw)

    def close(self):
        _FakeServer.calls.append({"url": self.url, "closed": True})


class _FakeAioServer(_FakeServer):
    async def get_model_metadata(self, model):
        return self._metadata()

    async def get_model_config(self, model):
        return self._config()

    async def infer(self, model, inputs, **kw):
        return self._infer(model, inputs, **kw)

    async def close(self):
        _FakeServer.calls.append({"url": self.url, "closed": True})


@pytest.fixture(params=["sync", "async"])
def client(request, monkeypatch):
    """A StreamClient, or an AsyncStreamClient behind a blocking facade, on fake servers."""
    import tritonclient.grpc
    import tritonclient.grpc.aio

    from tickformer.serve.client import AsyncStreamClient, StreamClient

    monkeypatch.setattr(tritonclient.grpc, "InferenceServerClient", _FakeServer)
    monkeypatch.setattr(tritonclient.grpc.aio, "InferenceServerClient", _FakeAioServer)
    _FakeServer.calls, _FakeServer.fail = [], None
    urls = ["a:1", "b:2"]
    if request.param == "sync":
        yield StreamClient(urls, timeout_s=3.0)
        return
    loop = asyncio.new_event_loop()

    class Blocking:
        def __init__(self) -> None:
            self.inner = loop.run_until_complete(self._make())

        @staticmethod
        async def _make():
            return await AsyncStreamClient(urls, timeout_s=3.0).connect()

        def __getattr__(self, name):
            attr = getattr(self.inner, name)
            if not asyncio.iscoroutinefunction(attr):
                return attr
            return lambda *a, **k: loop.run_until_complete(attr(*a, **k))

    yield Blocking()
    loop.close()


def test_both_clients_step_close_and_end_alike(client):
    client.open(7)
    y = client.step(7, np.zeros(3, np.float32))
    assert y.shape == (2,) and np.all(y == 0.5)
    client.step(7, np.zeros(3, np.float32))
    first, second = _FakeServer.calls
    assert first["sequence_start"] and not second["sequence_start"] and first["url"] == client.url_of(7)
    assert first["client_timeout"] == 3.0 and first["shape"] == [1, 1, 3]
    client.close(7)
    end = _FakeServer.calls[-1]
    assert end["sequence_end"] and end["sequence_id"] == 7 and end["shape"] == [1, 0, 3]
    with pytest.raises(ConfigError, match="open"):
        client.step(7, np.zeros(3, np.float32))
    n = len(_FakeServer.calls)
    client.open(8)
    client.close(8)  # never stepped: nothing sent
    assert len(_FakeServer.calls) == n
    client.open(9, rows=4)
    ys = client.step(9, np.zeros((4, 3), np.float32), end=True)
    assert ys.shape == (4, 2) and _FakeServer.calls[-1]["sequence_end"]
    with pytest.raises(ConfigError, match="open"):
        client.step(9, np.zeros((4, 3), np.float32))
    client.close_all()
    assert sum(1 for c in _FakeServer.calls if c.get("closed")) == 2


def test_both_clients_forget_a_stream_whose_last_step_or_close_failed(client):
    client.open(7)
    client.step(7, np.zeros(3, np.float32))
    _FakeServer.fail = FakeTritonError(
        "stream 7 is unknown to this server (ended, ...)", "StatusCode.INTERNAL"
    )
    client.close(7)  # the server forgot it already: closing is fine
    client.open(5)
    _FakeServer.fail = FakeTritonError("failed to connect to all addresses", "StatusCode.UNAVAILABLE")
    with pytest.raises(ServerUnreachable):
        client.step(5, np.zeros(3, np.float32), end=True)
    with pytest.raises(ConfigError, match="open"):  # end=True: forgotten here even though the step failed
        client.step(5, np.zeros(3, np.float32))
    client.open(6)
    client.step(6, np.zeros(3, np.float32))
    _FakeServer.fail = FakeTritonError("failed to connect to all addresses", "StatusCode.UNAVAILABLE")
    with pytest.raises(ServerUnreachable):
        client.close(6)
    with pytest.raises(ConfigError, match="open"):
        client.step(6, np.zeros(3, np.float32))
