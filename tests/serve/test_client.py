"""The client's stated shard hash and its one-line errors (serve/client.py), without a server."""

from __future__ import annotations

import hashlib

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
