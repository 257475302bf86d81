"""Driving many streams against served models from one process: the load test's and the
benchmark's traffic (tests/serve/test_load.py, benchmarks/serving.py).

    outputs, seconds = asyncio.run(drive(urls, xs, starts))

steps stream i (id `first_id + i`) through its inputs xs[i] ([N, T, d_in] float32, tokens
[N, T] int64), starting at tick starts[i]; every tick sends one request per live stream, all in
flight at once (per-stream mode), or one request carrying every live row of a tick-batched group
(`grouped`: the streams must start together). Returns the outputs [N, T, out] and each tick's
wall time. Traffic goes to the given addresses only (loopback in the tests).

`reference(art, xs)` steps the same inputs through in-process runtime Sessions: what each served
stream must equal.

Not real-time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tickformer import runtime

from .client import AsyncStreamClient


async def drive(
    urls: str | Sequence[str],
    xs: np.ndarray,
    starts: Sequence[int] | None = None,
    *,
    first_id: int = 1,
    grouped: bool = False,
    close: str = "all",
    model: str = "tickformer",
) -> tuple[np.ndarray, list[float]]:
    """See the module docstring. close: "all" (END every stream at the end), "half" (END the
    even ones, abandon the odd ones: the server frees them at its idle timeout), "none"."""
    n, length = xs.shape[:2]
    starts = [0] * n if starts is None else list(starts)
    if grouped and any(starts):
        raise ValueError("a tick-batched group starts together: starts must be all 0")
    client = await AsyncStreamClient(urls, model).connect()
    outputs: list[list[np.ndarray | None]] = [[None] * length for _ in range(n)]
    ticks: list[float] = []
    try:
        if grouped:
            client.open(first_id, rows=n)
        else:
            for i in range(n):
                client.open(first_id + i)
        for t in range(length + max(starts)):
            live = [i for i in range(n) if starts[i] <= t < starts[i] + length]
            t0 = time.perf_counter()
            if grouped:
                ys = await client.step(first_id, xs[:, t])
                for i in range(n):
                    outputs[i][t] = ys[i]
            else:
                ys = await asyncio.gather(*(client.step(first_id + i, xs[i, t - starts[i]]) for i in live))
                for i, y in zip(live, ys):
                    outputs[i][t - starts[i]] = y
            ticks.append(time.perf_counter() - t0)
        if close != "none":
            ids = [first_id] if grouped else [first_id + i for i in range(n) if close == "all" or i % 2 == 0]
            await asyncio.gather(*(client.close(i) for i in ids))
    finally:
        await client.close_all()
    return np.array(outputs, dtype=np.float32), ticks


def reference(art: str | Path, xs: np.ndarray, backend: str = "numpy") -> np.ndarray:
    """Each stream's outputs [N, T, out] from in-process runtime Sessions fed the same inputs:
    one Session of batch N stepping every stream as a row when `art` was exported with batch N
    (a stream's outputs depend on its own inputs only, not on when it started), else one batch-1
    Session per stream."""
    session = runtime.load(art, backend=backend)
    n, length = xs.shape[:2]
    if session.artifact.batch == n:
        return np.stack([session.step(xs[:, t][:, None]).copy() for t in range(length)], axis=1)[:, :, 0]
    out = []
    for stream in xs:
        session = runtime.load(art, backend=backend)
        out.append([session.step(x[None, None]).reshape(-1).copy() for x in stream])
    return np.array(out, dtype=np.float32)


def within(a: np.ndarray, b: np.ndarray, tolerance: dict) -> np.ndarray:
    """[N] bool: stream i's outputs all within the artifact's tolerance (|a - b| <= atol + rtol |b|)."""
    ok = np.abs(a - b) <= tolerance["atol"] + tolerance["rtol"] * np.abs(b)
    return ok.reshape(len(a), -1).all(axis=1)
