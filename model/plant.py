"""A damped, driven nonlinear pendulum: the plant of the `pendulum` task (fully observed).

The hidden pendulum of the control demo (noisy angle only, unknown constants, actuator delay) is
`tickformer.control.plant`.

Dynamics (angle theta from the downward vertical, rad; angular velocity omega, rad/s; control
u an angular acceleration, rad/s^2, saturated to [-u_max, u_max]):

    theta'' = -(g / L) sin(theta) - b theta' + u

integrated with classical fourth-order Runge-Kutta (RK4), `substeps` steps of dt/substeps per
control period dt, u held constant over the period (zero-order hold). The local RK4 error is
O((dt/substeps)^5); with the defaults (dt 0.4 s, 8 substeps of 50 ms) the one-period error is
~1e-6 (tests/model/test_plant.py measures it), far below the prediction errors studied.

The control period is deliberately coarse (2.5 Hz against a ~2 s natural period): at fine
sampling (dt = 0.05 s) the pendulum is so smooth that a linear autoregressive model over a few
past samples predicts one step to ~6e-5 (standardised units) by extrapolating the acceleration,
and the one-step task stops measuring whether a model captures the nonlinearity.

`pendulum_step(state, u)` is pure (no hidden state, no randomness) and works on a single state
[2] or a batch [..., 2]; for a single state it does a fixed amount of work (4 * substeps
derivative evaluations), but it allocates small numpy temporaries, so it is not allocation-free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError


@dataclass(frozen=True)
class PendulumParams:
    """Physical and sampling constants. g_over_l 9.81 s^-2 is a 1 m pendulum on Earth."""

    g_over_l: float = 9.81
    damping: float = 0.3
    u_max: float = 4.0
    dt: float = 0.4
    substeps: int = 8

    def __post_init__(self) -> None:
        for name in ("g_over_l", "u_max", "dt"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"pendulum {name}={getattr(self, name)!r} must be > 0")
        if not self.damping >= 0:
            raise ConfigError(f"pendulum damping={self.damping!r} must be >= 0")
        validation.positive_int(self.substeps, "pendulum substeps")

    def to_dict(self) -> dict[str, float | int]:
        return {
            "g_over_l": self.g_over_l,
            "damping": self.damping,
            "u_max": self.u_max,
            "dt": self.dt,
            "substeps": self.substeps,
        }


DEFAULT = PendulumParams()


def derivative(state: np.ndarray, u: np.ndarray | float, params: PendulumParams = DEFAULT) -> np.ndarray:
    """d/dt [theta, omega] = [omega, -(g/L) sin(theta) - b omega + u]. state [..., 2]."""
    theta, omega = state[..., 0], state[..., 1]  # [...]
    domega = -params.g_over_l * np.sin(theta) - params.damping * omega + u  # [...]
    return np.stack([omega, domega], axis=-1)  # [..., 2]


def pendulum_step(state: np.ndarray, u: np.ndarray | float, params: PendulumParams = DEFAULT) -> np.ndarray:
    """Advance [..., 2] states by one control period dt under u (clipped to +-u_max), RK4.

    Pure: same inputs, same output. Returns a new float64 array [..., 2].
    """
    x = np.asarray(state, dtype=np.float64)  # [..., 2]
    if x.shape[-1:] != (2,):
        raise ValueError(f"pendulum state must have shape [..., 2] (theta, omega); got {x.shape}")
    u = np.clip(np.asarray(u, dtype=np.float64), -params.u_max, params.u_max)  # [...]
    h = params.dt / params.substeps
    for _ in range(params.substeps):
        k1 = derivative(x, u, params)
        k2 = derivative(x + 0.5 * h * k1, u, params)
        k3 = derivative(x + 0.5 * h * k2, u, params)
        k4 = derivative(x + h * k3, u, params)
        x = x + (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def simulate(state0: np.ndarray, controls: np.ndarray, params: PendulumParams = DEFAULT) -> np.ndarray:
    """Roll out controls [..., T] from state0 [..., 2]: returns states [..., T + 1, 2]."""
    states = [np.asarray(state0, dtype=np.float64)]
    for t in range(controls.shape[-1]):
        states.append(pendulum_step(states[-1], controls[..., t], params))
    return np.stack(states, axis=-2)  # [..., T + 1, 2]


def random_controls(
    rng: np.random.Generator, n: int, steps: int, params: PendulumParams = DEFAULT, *, max_hold: int = 10
) -> np.ndarray:
    """Piecewise-constant random torques: each level uniform in [-u_max, u_max], held for a
    uniformly random 1..max_hold periods. Returns [n, steps]."""
    out = np.empty((n, steps))
    for i in range(n):
        t = 0
        while t < steps:
            hold = int(rng.integers(1, max_hold + 1))
            out[i, t : t + hold] = rng.uniform(-params.u_max, params.u_max)
            t += hold
    return out


def random_initial_states(rng: np.random.Generator, n: int) -> np.ndarray:
    """theta uniform in [-2.5, 2.5] rad (large, strongly nonlinear swings), omega in [-2, 2] rad/s."""
    return np.stack([rng.uniform(-2.5, 2.5, size=n), rng.uniform(-2.0, 2.0, size=n)], axis=-1)  # [n, 2]


def generate_trajectories(
    rng: np.random.Generator, n: int, steps: int, params: PendulumParams = DEFAULT
) -> tuple[np.ndarray, np.ndarray]:
    """n trajectories of `steps` control periods under random controls.

    Returns (states [n, steps + 1, 2], controls [n, steps]). Trajectories that go over the top
    (|theta| >= pi at any time) are discarded and redrawn, so theta stays in (-pi, pi) and is
    continuous without wrapping.
    """
    if n < 1 or steps < 1:
        raise ConfigError(f"need n >= 1 trajectories of steps >= 1 (got n={n}, steps={steps})")
    kept_states: list[np.ndarray] = []
    kept_controls: list[np.ndarray] = []
    have = 0
    for _ in range(100):
        want = n - have
        draw = max(8, int(want * 1.3))
        controls = random_controls(rng, draw, steps, params)  # [draw, steps]
        states = simulate(random_initial_states(rng, draw), controls, params)  # [draw, steps + 1, 2]
        ok = np.all(np.abs(states[..., 0]) < np.pi, axis=-1)  # [draw]
        kept_states.append(states[ok][:want])
        kept_controls.append(controls[ok][:want])
        have += int(min(ok.sum(), want))
        if have >= n:
            break
    else:  # pragma: no cover - only with absurd parameters
        raise ConfigError("could not draw trajectories that stay below the top; lower u_max or raise damping")
    return np.concatenate(kept_states)[:n], np.concatenate(kept_controls)[:n]
