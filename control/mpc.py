"""One-step model-predictive control among K candidate actions.

Each tick the controller predicts the next state (theta', omega') for every candidate torque
and picks the one minimizing (theta' - theta_ref')^2 + w (omega' - omega_des)^2 with
omega_des = omega_ref' + kp (theta_ref' - theta'). The prediction comes from a learned model on
a runtime session (`ModelMPC`) or from the true plant equations (`TrueMPC`).

`step(obs)` takes obs [4] = (theta, omega, theta_ref(t + dt), omega_ref(t + dt)) and returns the
controller's action buffer [1]; a prediction that cannot be trusted gives a non-finite action,
which `tickformer.runtime.ControlLoop` counts as a contract violation and replaces by its
fallback. Real-time: after construction a step allocates no arrays (buffers made once).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tickformer import validation
from tickformer.contracts.output_bound import output_excess
from tickformer.model.plant import PendulumParams, pendulum_step


class OneStepMPC:
    """The decision rule; subclasses fill `self.pred` [K, 2] in `predict(obs)`."""

    def __init__(self, candidates: int, u_max: float, *, kp: float = 2.0, w_omega: float = 0.01) -> None:
        k = validation.integer(candidates, "candidates", min_value=2, hint="a choice needs alternatives")
        validation.positive_real(u_max, "u_max")
        self.cand = np.linspace(-u_max, u_max, k)  # [K] candidate torques
        self.pred = np.zeros((k, 2))  # [K, 2] predicted next states
        self.cost = np.zeros(k)  # [K]
        self.out = np.zeros(1, dtype=np.float32)  # [1]
        self.kp, self.w = kp, w_omega

    def predict(self, obs: np.ndarray) -> bool:
        """Fill self.pred; False = the prediction is unusable this tick."""
        raise NotImplementedError

    def step(self, obs: np.ndarray) -> np.ndarray:
        if not self.predict(obs):
            self.out[0] = np.nan  # a broken prediction -> non-finite action -> loop's fallback
            return self.out
        th_r, om_r = obs[2], obs[3]
        p = self.pred
        for j in range(self.cand.size):
            om_des = om_r + self.kp * (th_r - p[j, 0])
            self.cost[j] = (p[j, 0] - th_r) ** 2 + self.w * (p[j, 1] - om_des) ** 2
        self.out[0] = self.cand[int(np.argmin(self.cost))]
        return self.out


class ModelMPC(OneStepMPC):
    """The learned model on a runtime session: per candidate, reset() + one step at position 0
    (the pendulum task is Markov and a session has one cache). Model outputs are checked with
    the output-bound contract; a violation, or a state outside the model's declared input domain,
    makes the action non-finite."""

    def __init__(
        self,
        candidates: int,
        u_max: float,
        session: Any,
        norm: dict[str, Any],
        output_bound: float | None,
        **weights: float,
    ) -> None:
        super().__init__(candidates, u_max, **weights)
        self.session = session
        self.bound = output_bound
        self.x = np.zeros(session.input_shape, dtype=np.float32)  # [1, 1, 3]
        self.xm, self.xs = np.asarray(norm["x_mean"]), np.asarray(norm["x_std"])  # [3], [3]
        self.dm, self.ds = np.asarray(norm["dy_mean"]), np.asarray(norm["dy_std"])  # [2], [2]
        self.lo, self.hi = session.domain

    def predict(self, obs: np.ndarray) -> bool:
        s, x = self.session, self.x
        th = (obs[0] - self.xm[0]) / self.xs[0]
        om = (obs[1] - self.xm[1]) / self.xs[1]
        if not (self.lo <= th <= self.hi and self.lo <= om <= self.hi):
            return False  # state outside the model's declared input domain
        for j in range(self.cand.size):
            s.reset()
            x[0, 0, 0] = th
            x[0, 0, 1] = om
            x[0, 0, 2] = (self.cand[j] - self.xm[2]) / self.xs[2]
            y = s.step(x)  # [1, 1, 2] standardized state change
            if output_excess(y, self.bound) > 0.0:
                return False
            self.pred[j, 0] = obs[0] + self.dm[0] + self.ds[0] * y[0, 0, 0]
            self.pred[j, 1] = obs[1] + self.dm[1] + self.ds[1] * y[0, 0, 1]
        return True


class TrueMPC(OneStepMPC):
    """The same controller with the true plant model (model.plant.pendulum_step)."""

    def __init__(self, candidates: int, plant_params: PendulumParams, **weights: float) -> None:
        super().__init__(candidates, plant_params.u_max, **weights)
        self.params = plant_params
        self.states = np.zeros((self.cand.size, 2))  # [K, 2]

    def predict(self, obs: np.ndarray) -> bool:
        self.states[:, 0] = obs[0]
        self.states[:, 1] = obs[1]
        self.pred[:] = pendulum_step(self.states, self.cand, self.params)  # [K, 2]
        return True
