"""A plant nobody here wrote: MuJoCo's inverted pendulum (gymnasium's InvertedPendulum-v5) with
hidden per-episode physics, positions-only noisy measurement and a command delay; the physics
baselines a control engineer runs on it (LQR with a Kalman filter, MPC with MuJoCo as predictor).

    HiddenCartPole   a gymnasium.Env: the cart-pole of InvertedPendulum-v5, its pole mass, hinge
                     damping and actuator gear drawn per episode (training or held-out bands) and
                     told to no controller; observation (x, theta) with noise; the command reaches
                     the cart `delay` ticks late; a fall (|theta| > FALL_RAD) is counted and the
                     pole set upright again where the cart is (the loop goes on)
    CartPoleParams   one episode's physics; NOMINAL the model file's
    linearise        the discrete-time (A, B) of one control period at the upright rest, by
                     central differences of MuJoCo's own step
    LQG              the nominal LQR with a steady-state Kalman filter of the positions (both from
                     scipy's Riccati solver), predicted through the commands in flight
    PhysicsMPC       K candidate commands, each simulated by MuJoCo from a state (the Kalman
                     estimate with the nominal physics, or the true state with the true physics:
                     the oracle), scored by the nominal LQR's cost-to-go at tick t + delay + 1
    log_runs         runs under an LQG (the rig's own, designed on its true physics, or the
                     nominal one) plus a random perturbation: the logs `tickformer train --data`
                     learns from (control/cartpole_loop.py relogs under the learned controller)

Every controller decides with `cost_to_go` (the nominal LQR's value function on the state at the
first tick the candidate acts on, plus the command's cost), so they differ only in what they know
of the plant. The reference: the cart tracks a slow sine (REF_AMPLITUDE, REF_PERIOD_S) while the
pole balances. Not real-time code, except the controllers' `step` (bounded work per tick).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError

ENV_ID = "InvertedPendulum-v5"
FRAME_SKIP = 2  # MuJoCo steps of 0.02 s per control period (the env's own): 0.04 s, 25 Hz
FALL_RAD = 0.2  # the env's own termination angle: a fall
REF_AMPLITUDE, REF_PERIOD_S = 0.3, 8.0  # m, s: the cart's reference
BANDS = 6  # each range cut into 6 bands: training 0, 2, 4; held out 1, 3, 5 (as the hidden pendulum)
RANGES: dict[str, tuple[float, float]] = {
    "pole_mass": (2.5, 9.0),  # kg (the model file's: 5.02)
    "hinge_damping": (0.2, 3.0),  # N m s / rad (1.0)
    "gear": (55.0, 145.0),  # N per unit command (100)
}
SPLITS = ("train", "held_out")
COMMAND_LIMIT = 3.0  # the env's action space: [-3, 3] units of command
CANDIDATES = 17
Q_DIAG, R_COST = (1.0, 10.0, 0.1, 0.1), 0.1  # the nominal LQR's weights on (x - ref, theta, x', theta'), u


@dataclass(frozen=True)
class CartPoleParams:
    pole_mass: float = 5.0185916
    hinge_damping: float = 1.0
    gear: float = 100.0
    noise: float = 0.01  # m and rad, the positions' measurement noise (std)
    delay: int = 2  # ticks from a command to the cart

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


NOMINAL = CartPoleParams()


def draw_params(rng: np.random.Generator, split: str, base: CartPoleParams = NOMINAL) -> CartPoleParams:
    """Each constant from its range's training bands (0, 2, 4) or held-out bands (1, 3, 5)."""
    validation.one_of(split, "split", SPLITS)
    first = 0 if split == "train" else 1
    values = {}
    for name, (lo, hi) in RANGES.items():
        band = first + 2 * int(rng.integers(0, BANDS // 2))
        width = (hi - lo) / BANDS
        values[name] = float(lo + width * (band + rng.uniform()))
    return dataclasses.replace(base, **values)


def _model(params: CartPoleParams) -> Any:
    """A MuJoCo model of the env's file with `params` set on it (the pole's inertia scaled with its mass)."""
    import gymnasium as gym
    import mujoco

    path = gym.make(ENV_ID).unwrapped.fullpath
    m = mujoco.MjModel.from_xml_path(path)
    scale = params.pole_mass / m.body_mass[2]
    m.body_mass[2] = params.pole_mass
    m.body_inertia[2] *= scale
    m.dof_damping[1] = params.hinge_damping
    m.actuator_gear[0, 0] = params.gear
    return m


class Simulator:
    """MuJoCo with given physics: `advance(state, command) -> state` over one control period,
    state (x, theta, x', theta') in floats."""

    def __init__(self, params: CartPoleParams) -> None:
        import mujoco

        self._mj = mujoco
        self.model = _model(params)
        self.data = mujoco.MjData(self.model)
        self.dt = self.model.opt.timestep * FRAME_SKIP

    def advance(self, state: np.ndarray, command: float) -> np.ndarray:
        d = self.data
        d.qpos[:] = state[:2]
        d.qvel[:] = state[2:]
        d.ctrl[0] = min(COMMAND_LIMIT, max(-COMMAND_LIMIT, command))
        for _ in range(FRAME_SKIP):
            self._mj.mj_step(self.model, d)
        return np.concatenate([d.qpos, d.qvel])


def linearise(params: CartPoleParams, eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """(A [4, 4], B [4, 1]) of one control period at the upright rest, central differences."""
    sim = Simulator(params)
    a, b = np.zeros((4, 4)), np.zeros((4, 1))
    zero = np.zeros(4)
    for i in range(4):
        e = np.zeros(4)
        e[i] = eps
        a[:, i] = (sim.advance(zero + e, 0.0) - sim.advance(zero - e, 0.0)) / (2 * eps)
    b[:, 0] = (sim.advance(zero, eps) - sim.advance(zero, -eps)) / (2 * eps)
    return a, b


@dataclass(frozen=True)
class NominalDesign:
    """The nominal plant's linearisation, LQR gain and cost-to-go, Kalman gain."""

    a: np.ndarray
    b: np.ndarray
    k: np.ndarray  # [1, 4] u = -k (state - ref)
    s: np.ndarray  # [4, 4] the LQR's cost-to-go (DARE solution)
    l: np.ndarray  # [4, 2] Kalman gain of the positions

    @classmethod
    def make(cls, params: CartPoleParams = NOMINAL) -> "NominalDesign":
        """Both gains from scipy's discrete algebraic Riccati solver (python-control's dlqr and
        dlqe compute the same; its import name `control` is this repository's folder when Python
        runs from the repository root, so it is not used)."""
        from scipy.linalg import solve_discrete_are

        a, b = linearise(params)
        c = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
        q, r = np.diag(Q_DIAG), np.array([[R_COST]])
        s = solve_discrete_are(a, b, q, r)
        k = np.linalg.solve(r + b.T @ s @ b, b.T @ s @ a)  # [1, 4]
        w, v = np.diag([1e-6, 1e-6, 1e-4, 1e-4]), np.diag([params.noise**2] * 2)
        p = solve_discrete_are(a.T, c.T, w, v)  # the prior covariance of the steady-state filter
        l = p @ c.T @ np.linalg.inv(c @ p @ c.T + v)  # [4, 2]
        return cls(a, b, k, s, l)


def reference(t_s: float) -> tuple[float, float]:
    """The cart's reference position and velocity at time t_s."""
    w = 2 * math.pi / REF_PERIOD_S
    return REF_AMPLITUDE * math.sin(w * t_s), REF_AMPLITUDE * w * math.cos(w * t_s)


def cost_to_go(s: np.ndarray, state: np.ndarray, ref: tuple[float, float], command: float) -> float:
    """The nominal LQR's value of `state` against the reference, plus the command's cost."""
    z = np.array([state[0] - ref[0], state[1], state[2] - ref[1], state[3]])
    return float(z @ s @ z) + R_COST * command * command


class HiddenCartPole:
    """The plant behind the gymnasium Env API (a gymnasium.Env subclass is made on first use:
    `HiddenCartPole.env_class()`); this class is its engine: `reset(seed, params)`,
    `step(command) -> (measured (x, theta), fell)`, the true state in `state`."""

    def __init__(self, params: CartPoleParams, seed: int = 0) -> None:
        import mujoco

        self._mj = mujoco
        self.params = params
        self.model = _model(params)
        self.data = mujoco.MjData(self.model)
        self.dt = self.model.opt.timestep * FRAME_SKIP
        self.rng = np.random.default_rng(seed)
        self.queue = [0.0] * params.delay
        self.t = 0
        self.falls = 0
        self.saturations = 0
        self.track_cost = 0.0
        self.ticks = 0

    @property
    def state(self) -> np.ndarray:
        return np.concatenate([self.data.qpos, self.data.qvel])

    def measure(self) -> np.ndarray:
        return self.data.qpos + self.rng.normal(0.0, self.params.noise, 2)

    def step(self, command: float) -> tuple[np.ndarray, bool]:
        """Issue `command` now; the one issued `delay` ticks ago reaches the cart over this tick."""
        c = float(command)
        if abs(c) >= COMMAND_LIMIT:
            self.saturations += 1
        self.queue.append(min(COMMAND_LIMIT, max(-COMMAND_LIMIT, c)))
        applied = self.queue.pop(0)
        d = self.data
        d.ctrl[0] = applied
        for _ in range(FRAME_SKIP):
            self._mj.mj_step(self.model, d)
        self.t += 1
        self.ticks += 1
        ref, _ = reference(self.t * self.dt)
        self.track_cost += (d.qpos[0] - ref) ** 2 + d.qpos[1] ** 2
        fell = abs(d.qpos[1]) > FALL_RAD
        if fell:  # counted; the pole upright again where the cart is, at rest
            self.falls += 1
            d.qpos[1] = 0.0
            d.qvel[:] = 0.0
            self._mj.mj_forward(self.model, d)
        return self.measure(), fell

    def in_flight(self) -> list[float]:
        return list(self.queue)

    def summary(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "cost": self.track_cost / max(1, self.ticks),
            "falls": self.falls,
            "saturations": self.saturations,
            "params": self.params.to_dict(),
        }

    @staticmethod
    def env_class() -> type:
        """A gymnasium.Env over this engine: observation (x, theta) measured, action the command,
        reset(seed, options={"split": ..., "params": ...}). Built on use (gymnasium is optional)."""
        import gymnasium as gym

        class HiddenCartPoleEnv(gym.Env):
            metadata = {"render_modes": []}

            def __init__(self, split: str = "held_out") -> None:
                self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
                self.action_space = gym.spaces.Box(-COMMAND_LIMIT, COMMAND_LIMIT, (1,), np.float32)
                self.split = split
                self.plant: HiddenCartPole | None = None

            def reset(self, *, seed: int | None = None, options: dict | None = None):  # type: ignore[override]
                super().reset(seed=seed)
                options = options or {}
                params = options.get("params") or draw_params(
                    self.np_random, options.get("split", self.split)
                )
                self.plant = HiddenCartPole(params, seed=int(self.np_random.integers(2**31)))
                return self.plant.measure(), {"params": params.to_dict()}

            def step(self, action):  # type: ignore[override]
                if self.plant is None:
                    raise ConfigError("call reset() before step()")
                obs, fell = self.plant.step(float(np.asarray(action).reshape(-1)[0]))
                ref, _ = reference(self.plant.t * self.plant.dt)
                reward = -((self.plant.data.qpos[0] - ref) ** 2 + self.plant.data.qpos[1] ** 2)
                return obs, float(reward), False, False, {"fell": fell, "state": self.plant.state}

        return HiddenCartPoleEnv


class _Delayed:
    """What every cart-pole controller shares: the commands it issued that are still in flight."""

    def __init__(self, delay: int) -> None:
        self.issued = [0.0] * delay
        self.t = 0

    def _issue(self, command: float) -> float:
        self.issued.append(command)
        self.issued.pop(0)
        self.t += 1
        return command


class LQG(_Delayed):
    """The nominal LQR on the Kalman filter's estimate, predicted through the commands in flight."""

    def __init__(self, design: NominalDesign, dt: float, delay: int = NOMINAL.delay) -> None:
        super().__init__(delay)
        self.design, self.dt = design, dt
        self.xhat = np.zeros(4)
        self.c = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])

    def estimate(self, y: np.ndarray) -> np.ndarray:
        """Measurement update, then the prediction through the commands in flight (the state when
        a command issued now acts)."""
        d = self.design
        self.xhat = self.xhat + d.l @ (y - self.c @ self.xhat)
        z = self.xhat.copy()
        for u in self.issued:
            z = d.a @ z + d.b[:, 0] * u
        return z

    def _advance(self, command: float) -> None:
        applied = self.issued[0]  # what reaches the cart over this tick
        self.xhat = self.design.a @ self.xhat + self.design.b[:, 0] * applied
        self._issue(command)

    def step(self, y: np.ndarray) -> float:
        z = self.estimate(y)
        ref, ref_dot = reference((self.t + len(self.issued)) * self.dt)
        u = float(-(self.design.k @ (z - np.array([ref, 0.0, ref_dot, 0.0])))[0])
        u = min(COMMAND_LIMIT, max(-COMMAND_LIMIT, u))
        self._advance(u)
        return u


class PhysicsMPC(LQG):
    """K candidates simulated by MuJoCo with `params` from a state, each scored by `cost_to_go` at
    t + delay + 1. `oracle=True` reads the plant's true state (and should get its true params)."""

    def __init__(
        self,
        design: NominalDesign,
        params: CartPoleParams,
        dt: float,
        *,
        plant: HiddenCartPole | None = None,
        candidates: int = CANDIDATES,
    ) -> None:
        super().__init__(design, dt, params.delay)
        self.sim = Simulator(params)
        self.cand = np.linspace(-COMMAND_LIMIT, COMMAND_LIMIT, candidates)
        self.plant = plant

    def step(self, y: np.ndarray) -> float:
        if self.plant is not None:  # the oracle: the true state through the commands in flight
            z = self.plant.state
            for u in self.plant.in_flight():
                z = self.sim.advance(z, u)
            self.estimate(y)  # keeps the filter running (unused)
        else:
            self.estimate(y)
            z = self.xhat.copy()
            for u in self.issued:
                z = self.sim.advance(z, u)
        ref = reference((self.t + len(self.issued) + 1) * self.dt)
        costs = [cost_to_go(self.design.s, self.sim.advance(z, c), ref, c) for c in self.cand]
        u = float(self.cand[int(np.argmin(costs))])
        self._advance(u)
        return u


LOG_POLICIES = ("tuned", "nominal")
MIN_SEGMENT = 100  # rows: a logged segment between falls shorter than this is left out


def log_runs(
    *,
    runs: int,
    rows: int,
    seed: int,
    split: str = "train",
    perturb: float = 0.8,
    hold_max: int = 1,
    policy: str = "tuned",
) -> dict[str, np.ndarray]:
    """`runs` runs of `rows` ticks, each on its own physics drawn from `split`'s bands, under an
    LQG plus a random perturbation held 1..`hold_max` ticks (std `perturb`): the rig's own LQG,
    designed on its true physics (`policy="tuned"`, what a rig's logs come from), or the nominal
    one (`"nominal"`: it falls over and over on the low-gear band). A fall ends a segment: the
    `run` column counts segments, so no training window spans the pole's reset, and a segment
    shorter than MIN_SEGMENT rows is left out. Columns time [s], run, command [-3..3], x [m],
    theta [rad] (measured)."""
    validation.positive_int(runs, "--runs")
    validation.positive_int(rows, "--rows")
    validation.one_of(policy, "policy", LOG_POLICIES)
    rng = np.random.default_rng(seed)
    nominal = NominalDesign.make() if policy == "nominal" else None
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("time [s]", "run", "command", "x [m]", "theta [rad]")}
    segment = 0
    for _ in range(runs):
        params = draw_params(rng, split)
        plant = HiddenCartPole(params, seed=int(rng.integers(2**31)))
        ctl = LQG(nominal or NominalDesign.make(params), plant.dt)
        cmds, xs, ths, seg = np.empty(rows), np.empty(rows), np.empty(rows), np.empty(rows)
        y = plant.measure()
        push, hold = 0.0, 0
        for t in range(rows):
            if hold == 0:
                push, hold = float(rng.normal(0.0, perturb)), int(rng.integers(1, hold_max + 1))
            hold -= 1
            u = ctl.step(y)
            c = min(COMMAND_LIMIT, max(-COMMAND_LIMIT, u + push))
            ctl.issued[-1] = c  # what was really issued
            xs[t], ths[t], cmds[t], seg[t] = y[0], y[1], c, segment
            y, fell = plant.step(c)
            segment += int(fell)
        segment += 1
        ids, counts = np.unique(seg, return_counts=True)
        keep = np.isin(seg, ids[counts >= MIN_SEGMENT])
        out["time [s]"].append((np.arange(rows) * plant.dt)[keep])
        out["run"].append(seg[keep])
        out["command"].append(cmds[keep])
        out["x [m]"].append(xs[keep])
        out["theta [rad]"].append(ths[keep])
    return _concatenated(out)


def _concatenated(out: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
    """The logged columns, refused when every segment was shorter than MIN_SEGMENT."""
    cols = {k: np.concatenate(v) for k, v in out.items()}
    if not cols["run"].size:
        raise ConfigError(
            f"every run fell within {MIN_SEGMENT} ticks of its start or of its last fall: nothing to log; "
            "give more or longer runs, or use the tuned policy"
        )
    return cols
