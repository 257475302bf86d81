"""The client of served streams (tritonclient gRPC): open / step / close a stream, a tick-batched
call for a group of streams, and streams sharded over several servers.

    client = StreamClient(["127.0.0.1:8001", "127.0.0.1:8002"])   # one or more servers
    client.open(7)                       # local: the next step carries START
    y = client.step(7, x)                # x [d_in] float32 (tokens: an int) -> y [d_out]
    client.close(7)                      # END: the server frees the stream's slot

    client.open(9, rows=256)             # a tick-batched group: 256 streams stepping together
    ys = client.step(9, xs)              # xs [256, d_in] -> ys [256, d_out], ONE request

A stream id is an int in [1, 2^63) (Triton's correlation id; 0 means "no sequence"). Sharding:
stream id s goes to server `shard_of(s, n)` = the first 8 bytes of BLAKE2b(s as 8 big-endian
bytes), big-endian, mod n -- the stated hash, the same in every client and every language, so
any client finds a stream's server from its id alone. A server holds its streams' state in its
memory only: when it goes away, its streams are gone (docs/serving.md).

Errors are one line each (tickformer.errors), naming what to do:

    StreamForgotten   the server does not know the stream (idle timeout, restart, it ended):
                      restart the stream (open it again, feed it from its first input)
    ServerFull        no free slot for a new stream (the repository's --when-full refuse)
    ServerUnreachable the server did not answer (down, wrong address)
    InputError        the server refused the input (shape, dtype, domain)

`AsyncStreamClient` is the same over tritonclient.grpc.aio, for many streams from one process
(the load test, the benchmark). Not real-time (network round trips).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from tickformer.errors import ConfigError, InputError, TickformerError

from .streams import FORGOTTEN, FULL, REFUSED

TRITON_FORGOTTEN = "must specify the START flag on the first request of the sequence"  # Triton's own words
MAX_ID = 2**63


class StreamForgotten(TickformerError):
    """The server has no state for the stream: it must be restarted from its first input."""


class ServerFull(TickformerError):
    """The server refused a new stream: all its slots are held."""


class ServerUnreachable(TickformerError):
    """The server did not answer."""


def shard_of(stream_id: int, n: int) -> int:
    """The server index in [0, n) of `stream_id`: BLAKE2b-64 of its 8 big-endian bytes, mod n."""
    digest = hashlib.blake2b(int(stream_id).to_bytes(8, "big"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def _check_id(stream_id: int) -> int:
    if not isinstance(stream_id, (int, np.integer)) or not 1 <= int(stream_id) < MAX_ID:
        raise ConfigError(f"stream id {stream_id!r}: use an int in [1, 2^63) (0 means no stream in Triton)")
    return int(stream_id)


def _urls(urls: str | Sequence[str]) -> list[str]:
    out = [urls] if isinstance(urls, str) else list(urls)
    if not out:
        raise ConfigError("no server address: pass one or more host:port, e.g. 127.0.0.1:8001")
    return out


def translate(exc: Exception, stream_id: int, url: str) -> TickformerError:
    """The one-line error a user sees for a failed request of `stream_id` on `url`."""
    text = str(exc.message() if hasattr(exc, "message") and callable(exc.message) else exc)
    text = text.splitlines()[0] if text else type(exc).__name__
    if TRITON_FORGOTTEN in text or FORGOTTEN in text:
        return StreamForgotten(
            f"stream {stream_id} is gone from the server at {url} (idle timeout, server restart, or it ended): "
            f"restart the stream -- open({stream_id}) and feed it again from its first input"
        )
    if FULL in text:
        return ServerFull(f"server at {url}: {text}")
    status = str(exc.status() if hasattr(exc, "status") and callable(exc.status) else "")
    if "UNAVAILABLE" in status or "DEADLINE" in status or "failed to connect" in text.lower():
        return ServerUnreachable(
            f"server at {url} did not answer ({text}); start it (tickformer serve ART --run) -- its streams' "
            "state is gone if it stopped: restart them"
        )
    if REFUSED in text:
        return InputError(f"server at {url}: {text}")
    return TickformerError(f"stream {stream_id} on {url}: {text}")


class _Base:
    """What both clients share: addresses, the server clients, the model's I/O (read from the
    server), the streams opened here and not yet stepped (their first step carries START), and
    every step of a request but the call itself (`_step_call` / `_stepped` / `_step_failed`,
    `_close_call` / `_close_failed`): the two clients differ only in awaiting it."""

    def __init__(self, urls: str | Sequence[str], model: str, module: Any, timeout_s: float | None) -> None:
        self.urls = _urls(urls)
        self.model = model
        self.timeout_s = timeout_s
        self._grpc = module  # tritonclient.grpc or tritonclient.grpc.aio
        self._clients = {url: module.InferenceServerClient(url) for url in self.urls}
        self._starting: dict[int, int] = {}  # id -> rows: opened, first step not yet sent
        self._rows: dict[int, int] = {}  # id -> rows of every open stream
        self._io: tuple[str, str, str] | None = None  # input name, its Triton datatype, output name

    def url_of(self, stream_id: int) -> str:
        return self.urls[shard_of(stream_id, len(self.urls))]

    def _learn_io(self, metadata: Any, config: Any) -> None:
        x, y = metadata.inputs, metadata.outputs
        data = [t for t in x if t.name not in ("START", "END", "READY", "CORRID")]
        self._io = (data[0].name, data[0].datatype, y[0].name)
        self._width = int(config.input[0].dims[-1]) if len(config.input[0].dims) > 1 else 0

    def open(self, stream_id: int, rows: int = 1) -> None:
        """Start stream `stream_id` (a group of `rows` streams stepping together when rows > 1)
        with its next step. Local: nothing is sent until then."""
        sid = _check_id(stream_id)
        if rows < 1:
            raise ConfigError(f"rows={rows}: a stream has 1 row, a tick-batched group 2 or more")
        self._starting[sid] = rows
        self._rows[sid] = rows

    def _request(self, stream_id: int, x: Any) -> tuple[int, np.ndarray, bool]:
        """(id, the request's x [1, S, d_in] | [1, S], whether it starts the stream)."""
        sid = _check_id(stream_id)
        rows = self._rows.get(sid)
        if rows is None:
            raise ConfigError(f"stream {sid} is not open here: open({sid}) first")
        assert self._io is not None
        tokens = self._io[1] == "INT64"
        arr = np.asarray(x, dtype=np.int64 if tokens else np.float32)
        single = rows == 1 and arr.ndim == (0 if tokens else 1)
        arr = arr[None] if single else arr
        if arr.shape[0] != rows:
            raise InputError(f"stream {sid} has {rows} row(s), got input of shape {list(np.shape(x))}")
        return sid, arr[None], sid in self._starting

    def _inputs(self, x: np.ndarray) -> list[Any]:
        assert self._io is not None
        item = self._grpc.InferInput(self._io[0], list(x.shape), self._io[1])
        item.set_data_from_numpy(x)
        return [item]

    def _empty(self, stream_id: int) -> np.ndarray:
        assert self._io is not None
        tokens = self._io[1] == "INT64"
        shape = [1, 0] if tokens else [1, 0, self._width]
        return np.zeros(shape, np.int64 if tokens else np.float32)

    def _output(self, stream_id: int, result: Any) -> np.ndarray:
        assert self._io is not None
        y = result.as_numpy(self._io[2])[0]  # [S, out]
        self._starting.pop(stream_id, None)
        return y[0] if self._rows[stream_id] == 1 else y

    def _forget(self, sid: int) -> None:
        self._rows.pop(sid, None)
        self._starting.pop(sid, None)

    def _step_call(self, stream_id: int, x: Any, end: bool) -> tuple[int, str, dict[str, Any]]:
        """(id, its server, the keywords of its infer call) of one step."""
        sid, arr, start = self._request(stream_id, x)
        call = {
            "inputs": self._inputs(arr),
            "sequence_id": sid,
            "sequence_start": start,
            "sequence_end": end,
            "client_timeout": self.timeout_s,
        }
        return sid, self.url_of(sid), call

    def _stepped(self, sid: int, result: Any, end: bool) -> np.ndarray:
        """The step's y, a copy; a last step (`end`) forgets the stream here."""
        y = self._output(sid, result).copy()
        if end:
            self._forget(sid)
        return y

    def _step_failed(self, exc: Exception, sid: int, url: str, end: bool) -> TickformerError:
        """The error to raise for a failed step; a failed last step forgets the stream too."""
        if end:
            self._forget(sid)
        return translate(exc, sid, url)

    def _close_call(self, stream_id: int) -> tuple[int, str, dict[str, Any]] | None:
        """Forget the stream here; (id, its server, the keywords of the END request of no rows),
        or None where there is nothing to send (not open here, or never stepped)."""
        sid = _check_id(stream_id)
        if sid not in self._rows:
            return None
        started = sid not in self._starting
        self._forget(sid)
        if not started:
            return None
        call = {
            "inputs": self._inputs(self._empty(sid)),
            "sequence_id": sid,
            "sequence_end": True,
            "client_timeout": self.timeout_s,
        }
        return sid, self.url_of(sid), call

    @staticmethod
    def _close_failed(exc: Exception, sid: int, url: str) -> None:
        """Raise the error of a failed close, unless the server had forgotten the stream already."""
        err = translate(exc, sid, url)
        if not isinstance(err, StreamForgotten):
            raise err from None


class StreamClient(_Base):
    """Blocking client (module docstring)."""

    def __init__(
        self, urls: str | Sequence[str], model: str = "tickformer", *, timeout_s: float | None = None
    ):
        import tritonclient.grpc as grpcclient  # the `serve` extra

        super().__init__(urls, model, grpcclient, timeout_s)
        try:
            first = self._clients[self.urls[0]]
            self._learn_io(first.get_model_metadata(model), first.get_model_config(model).config)
        except Exception as exc:  # noqa: BLE001 -- one line, whatever the transport said
            raise translate(exc, 0, self.urls[0]) from None

    def step(self, stream_id: int, x: Any, *, end: bool = False) -> np.ndarray:
        """One tick of the stream (or of every stream of a group): y [d_out] (group: [S, d_out]),
        a copy. end=True closes it after this step."""
        sid, url, call = self._step_call(stream_id, x, end)
        try:
            result = self._clients[url].infer(self.model, **call)
        except Exception as exc:  # noqa: BLE001
            raise self._step_failed(exc, sid, url, end) from None
        return self._stepped(sid, result, end)

    def close(self, stream_id: int) -> None:
        """End the stream: the server frees its slot(s) now (a request of no rows with END).
        Closing a stream that never stepped, or one the server forgot, sends nothing / is fine."""
        request = self._close_call(stream_id)
        if request is None:
            return
        sid, url, call = request
        try:
            self._clients[url].infer(self.model, **call)
        except Exception as exc:  # noqa: BLE001
            self._close_failed(exc, sid, url)

    def close_all(self) -> None:
        for url in self.urls:
            self._clients[url].close()

    def __enter__(self) -> StreamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()


class AsyncStreamClient(_Base):
    """The same over asyncio (tritonclient.grpc.aio): many streams in flight from one process.
    Create it inside the running event loop, then `await connect()`."""

    def __init__(
        self, urls: str | Sequence[str], model: str = "tickformer", *, timeout_s: float | None = None
    ):
        import tritonclient.grpc.aio as aioclient  # the `serve` extra

        super().__init__(urls, model, aioclient, timeout_s)

    async def connect(self) -> AsyncStreamClient:
        first = self._clients[self.urls[0]]
        try:
            self._learn_io(
                await first.get_model_metadata(self.model), (await first.get_model_config(self.model)).config
            )
        except Exception as exc:  # noqa: BLE001
            raise translate(exc, 0, self.urls[0]) from None
        return self

    async def step(self, stream_id: int, x: Any, *, end: bool = False) -> np.ndarray:
        """StreamClient.step, awaited."""
        sid, url, call = self._step_call(stream_id, x, end)
        try:
            result = await self._clients[url].infer(self.model, **call)
        except Exception as exc:  # noqa: BLE001
            raise self._step_failed(exc, sid, url, end) from None
        return self._stepped(sid, result, end)

    async def close(self, stream_id: int) -> None:
        """StreamClient.close, awaited."""
        request = self._close_call(stream_id)
        if request is None:
            return
        sid, url, call = request
        try:
            await self._clients[url].infer(self.model, **call)
        except Exception as exc:  # noqa: BLE001
            self._close_failed(exc, sid, url)

    async def close_all(self) -> None:
        for url in self.urls:
            await self._clients[url].close()
