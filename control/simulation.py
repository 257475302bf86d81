"""A simulated plant in the loop: advanced one period per control tick, zero-order hold.

`observe(k)` first advances the plant through any skipped ticks with the held action (the plant
does not stop when the controller is late), then returns the observation the controller sees;
`actuate(u)` holds u and advances one period. The wall-clock period of the loop is independent
of the plant's dt: the demo runs faster than real time.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tickformer.model.plant import PendulumParams, pendulum_step

Reference = Callable[[float], tuple[float, float]]


class SimulatedPlant:
    """The pendulum of model/plant.py under a tracking reference; observation [4] =
    (theta, omega, theta_ref(t + dt), omega_ref(t + dt))."""

    def __init__(self, plant_params: PendulumParams, reference: Reference, n_ticks_max: int) -> None:
        self.params, self.reference = plant_params, reference
        self.state = np.zeros(2)
        self.k = 0
        self.u = 0.0
        self.obs = np.zeros(4)  # [theta, omega, theta_ref', omega_ref']
        self.theta = np.full(n_ticks_max + 1, np.nan)  # [n] theta at each plant tick
        self.theta[0] = 0.0

    def _advance(self) -> None:
        self.state = pendulum_step(self.state, self.u, self.params)
        self.k += 1
        if self.k < self.theta.size:
            self.theta[self.k] = self.state[0]

    def observe(self, k: int) -> np.ndarray:
        while self.k < k:  # skipped periods: the plant kept moving under the held torque
            self._advance()
        th_r, om_r = self.reference((k + 1) * self.params.dt)
        self.obs[0], self.obs[1], self.obs[2], self.obs[3] = self.state[0], self.state[1], th_r, om_r
        return self.obs

    def actuate(self, u: np.ndarray) -> None:
        self.u = float(u[0])
        self._advance()

    def tracking(self) -> dict[str, float]:
        """RMS and max |theta - theta_ref| over the plant ticks run so far."""
        n = min(self.k, self.theta.size - 1)
        t = np.arange(1, n + 1) * self.params.dt  # [n]
        ref = np.array([self.reference(float(ti))[0] for ti in t])  # [n]
        err = self.theta[1 : n + 1] - ref  # [n]
        return {
            "rms_rad": float(np.sqrt(np.mean(err**2))),
            "max_abs_rad": float(np.max(np.abs(err))),
            "plant_ticks": int(n),
        }
