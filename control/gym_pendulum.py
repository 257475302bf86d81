"""The project's own hidden pendulum (control/plant.py, the demo's plant) behind the gymnasium Env
API: one plant among any others for control/gym_plant.py (`tickformer log
gym:tickformer/HiddenPendulum-v0`).

    pendulum_env_class   the gymnasium.Env class (made on first use: gymnasium is optional)
    register             registers it as ENV_ID (max EPISODE_TICKS ticks per episode); idempotent

The env: per episode, constants drawn by control.plant.draw_hidden from the `split`'s bands
(default held-out) and told to no one (`info["params"]` carries them for tests and plots), or
given as `reset(options={"params": HiddenPendulum(...)})`; a start theta uniform in
[-START_THETA, START_THETA], omega in [-START_OMEGA, START_OMEGA]. Action [1]: the command in
[-1, 1] (clipped), reaching the joint `delay` ticks after it is issued. Observation [1]: the
measured angle (noise of the plant's std). Reward: -(theta - r(t))^2 against the demo's
reference r (a sine of 0.25 rad, period 4 s; `info["reference"]`). Terminated when the pendulum
goes over the top (|theta| >= pi). Its noise and starts come from the env's own `np_random`, so
`reset(seed=s)` repeats an episode (gymnasium's `check_env` passes). Not real-time code.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .demo import DemoConfig, reference
from .plant import START_OMEGA, START_THETA, HiddenPendulum, HiddenStepper, draw_hidden

ENV_ID = "tickformer/HiddenPendulum-v0"
EPISODE_TICKS = 400  # 40 s at the plant's 0.1 s period
REFERENCE = reference(DemoConfig())  # the demo's reference, from its own settings
_CLASS: list[type] = []


def pendulum_env_class() -> type:
    """The gymnasium.Env class of the hidden pendulum (module docstring), made once."""
    if _CLASS:
        return _CLASS[0]
    import gymnasium as gym

    class HiddenPendulumEnv(gym.Env):
        metadata = {"render_modes": []}

        def __init__(self, split: str = "held_out") -> None:
            from .plant import SPLITS

            if split not in SPLITS:
                from tickformer.errors import ConfigError

                raise ConfigError(f"split {split!r} is not one of {SPLITS}")
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
            self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
            self.split = split
            self.params: HiddenPendulum | None = None

        @property
        def dt(self) -> float:
            return (self.params or HiddenPendulum()).dt

        def _measure(self) -> np.ndarray:
            return np.array([self.theta + self.np_random.normal(0.0, self.params.noise)])  # [1]

        def reset(self, *, seed: int | None = None, options: dict | None = None):  # type: ignore[override]
            super().reset(seed=seed)
            options = options or {}
            params = options.get("params")
            self.params = params if params is not None else draw_hidden(self.np_random, self.split)
            self.stepper = HiddenStepper(self.params)
            self.theta = float(self.np_random.uniform(-START_THETA, START_THETA))
            self.omega = float(self.np_random.uniform(-START_OMEGA, START_OMEGA))
            self.queue = [0.0] * self.params.delay
            self.t = 0
            return self._measure(), {"params": self.params.to_dict()}

        def step(self, action: Any):  # type: ignore[override]
            if self.params is None:
                from tickformer.errors import ConfigError

                raise ConfigError("call reset() before step()")
            c = float(np.asarray(action, np.float64).reshape(-1)[0])
            self.queue.append(min(1.0, max(-1.0, c)) if math.isfinite(c) else 0.0)
            applied = self.queue.pop(0)
            self.theta, self.omega = self.stepper.step(self.theta, self.omega, applied)
            self.t += 1
            ref, _ = REFERENCE(self.t * self.params.dt)
            reward = -((self.theta - ref) ** 2)
            terminated = abs(self.theta) >= math.pi
            info = {"reference": ref, "state": (self.theta, self.omega)}
            return self._measure(), float(reward), terminated, False, info

    _CLASS.append(HiddenPendulumEnv)
    return HiddenPendulumEnv


def _make(**kwargs: Any) -> Any:
    return pendulum_env_class()(**kwargs)


def register() -> None:
    """Register ENV_ID with gymnasium (once; gymnasium.make(ENV_ID) then builds it)."""
    import gymnasium as gym

    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=_make, max_episode_steps=EPISODE_TICKS)
