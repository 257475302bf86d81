"""Reference trajectories for the tracking controllers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tickformer import validation


@dataclass(frozen=True)
class SineReference:
    """theta_ref(t) = A sin(2 pi t / T) and its derivative."""

    amplitude: float
    period_s: float

    def __post_init__(self) -> None:
        validation.real(self.amplitude, "amplitude")
        validation.positive_real(self.period_s, "period_s")

    def __call__(self, t: float) -> tuple[float, float]:
        w = 2.0 * math.pi / self.period_s
        return self.amplitude * math.sin(w * t), self.amplitude * w * math.cos(w * t)
