"""A session with the runtime's shape for the campaign's tests (tests/certify), and inputs for it."""

from __future__ import annotations

import numpy as np

from tickformer.certify.measurement import make_inputs


class FakeSession:
    """A session with the runtime's shape: step(x) -> preallocated y, reset(), position, max_len."""

    def __init__(self, max_len: int = 16, d: int = 8, growing: bool = False) -> None:
        self.max_len = max_len
        self.w = np.random.default_rng(0).normal(size=(d, d)).astype(np.float32)
        self.y = np.zeros((1, 1, d), np.float32)
        self._position = 0
        self.growing = growing
        self.visited: list[int] = []
        self.resets = 0

    @property
    def position(self) -> int:
        return self._position

    def step(self, x: np.ndarray) -> np.ndarray:
        if self._position >= self.max_len:
            raise AssertionError("stepped past max_len: the campaign must reset first")
        reps = 1 + (self._position if self.growing else 0)
        for _ in range(reps):
            np.dot(x[0], self.w, out=self.y[0])
        self.visited.append(self._position)
        self._position += 1
        return self.y

    def reset(self) -> None:
        self._position = 0
        self.resets += 1


def inputs(n: int = 4, d: int = 8) -> np.ndarray:
    return make_inputs((1, 1, d), np.float32, (-1.0, 1.0), n, seed=0)
