"""The one protocol for "something that steps": what the control loop and the latency campaign
need from a session. `tickformer.runtime.Session` implements it; tests pass fakes.

Real-time contract of an implementation: `step` is the hot path (no allocation, bounded work,
state unchanged when it raises); `reset` is constant time; `position` is the number of positions
committed in the current sequence.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Steppable(Protocol):
    position: int

    def step(self, x: np.ndarray) -> np.ndarray: ...

    def reset(self) -> None: ...
