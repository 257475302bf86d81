"""The hidden pendulum: the control demo's plant, its episode draws, and the decision rule's cost.

Dynamics (angle theta from the downward vertical; command c in [-1, 1], zero-order hold over
each tick, issued at tick t and applied over [t + d, t + d + 1)):

    theta'' = -(g / L) sin(theta) - b / (m L^2) theta' + k / (m L^2) c(t - d dt)

integrated with RK4 (`substeps` per tick). Measured: y_t = theta_t + N(0, noise^2).

    HiddenPendulum, NOMINAL, draw_hidden   one episode's constants; the nominal plant; a draw
                                           from the training or the held-out bands
    hidden_step, hidden_rollout            the dynamics, vectorised
    hidden_episodes, loop_episodes         episodes for training and evaluation: random commands,
                                           and closed-loop ones under the demo's decision rule
    tracking_cost                          that rule's cost (DelayedMPC decides with it too)
    rk4_scalar, HiddenStepper              one state in Python floats (controllers, filters)

Not real-time code, except `rk4_scalar` / `HiddenStepper` (floats only, bounded work).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError

# Only a noisy angle y_t = theta_t + N(0, noise^2) is measured; the velocity, the four physical
# constants and the commands still in flight must be inferred from the stream of (y, c).
# `HiddenPendulum` is the nominal plant (every constant at its range's midpoint); an episode
# draws its constants per `PARAM_RANGES`, each range cut into 6 equal bands: `split="train"`
# draws every coordinate from bands 0, 2, 4 and `split="held_out"` from bands 1, 3, 5, so a
# held-out episode has constants no training episode had (each coordinate in a band the training
# draws never enter) spread over the whole range.

GRAVITY = 9.81
PARAM_RANGES: dict[str, tuple[float, float]] = {
    "mass": (0.7, 1.3),  # kg
    "length": (0.7, 1.3),  # m
    "damping": (0.1, 0.7),  # N m s
    "gain": (1.5, 4.5),  # N m per unit command
}
SPLITS = ("train", "held_out")
BANDS = 6  # each range cut into 6 equal bands: training draws bands 0, 2, 4; held-out 1, 3, 5
START_THETA = 2.0  # rad: episodes start with theta uniform in [-2, 2] (strongly nonlinear swings)
START_OMEGA = 1.0  # rad/s: and omega uniform in [-1, 1]
# Episode kinds and their shares: "held" (random levels held 1..max_hold ticks) and "tick" (a new
# random command every tick: the most excitation, so the command's effect is identifiable from the
# stream; more of them made the closed loop track better, docs/control.md)
EPISODE_MIX: tuple[tuple[str, float], ...] = (("held", 0.3), ("tick", 0.7))
# Closed-loop episodes: LOOP_SHARE of the episodes are drawn in the regime the demo's controller
# works in -- the decision rule of control.DelayedMPC (`tracking_cost` over LOOP_CANDIDATES
# commands, LOOP_KP, LOOP_W_OMEGA) on the true state and constants, tracking a sine of random
# amplitude, period and phase from near rest on it, a random candidate at a LOOP_EXPLORE share of
# ticks. Random-command episodes show the constants in large swings; the loop asks the model about
# windows of a small, slow, tracked motion, where they show differently (the damping barely: a
# phase of a few degrees), and a model that never saw such windows identified the constants there
# poorly (docs/control.md, "Training in the loop's regime"). The rest follow EPISODE_MIX.
LOOP_SHARE = 0.6
LOOP_AMPLITUDE = (0.1, 0.5)  # rad: the sine's amplitude, uniform (the demo's: 0.25)
LOOP_PERIOD_S = (2.0, 8.0)  # s: its period, uniform (the demo's: 4)
LOOP_EXPLORE = 0.1  # share of ticks whose command is a random candidate instead of the rule's
LOOP_CANDIDATES, LOOP_KP, LOOP_W_OMEGA = 17, 2.0, 0.05  # the demo's rule: control.demo.DemoConfig's defaults


@dataclass(frozen=True)
class HiddenPendulum:
    """One episode's constants; defaults are the nominal plant (the midpoint of every range)."""

    mass: float = 1.0
    length: float = 1.0
    damping: float = 0.4
    gain: float = 3.0
    delay: int = 2  # ticks between issuing a command and its reaching the joint
    noise: float = 0.02  # rad, standard deviation of the angle measurement
    dt: float = 0.1
    substeps: int = 4

    def __post_init__(self) -> None:
        for name in ("mass", "length", "gain", "dt"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"hidden pendulum {name}={getattr(self, name)!r} must be > 0")
        for name in ("damping", "noise"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"hidden pendulum {name}={getattr(self, name)!r} must be >= 0")
        validation.nonneg_int(
            self.delay, "hidden pendulum delay", hint="ticks between a command and the joint"
        )
        validation.positive_int(self.substeps, "hidden pendulum substeps", hint="RK4 steps per tick")

    @property
    def coefficients(self) -> tuple[float, float, float]:
        """(g / L, b / (m L^2), k / (m L^2)): the three numbers the dynamics depend on."""
        inertia = self.mass * self.length**2
        return GRAVITY / self.length, self.damping / inertia, self.gain / inertia

    def to_dict(self) -> dict[str, float | int]:
        return {
            "mass": self.mass,
            "length": self.length,
            "damping": self.damping,
            "gain": self.gain,
            "delay": self.delay,
            "noise": self.noise,
            "dt": self.dt,
            "substeps": self.substeps,
        }


NOMINAL = HiddenPendulum()


def draw_hidden(rng: np.random.Generator, split: str, base: HiddenPendulum = NOMINAL) -> HiddenPendulum:
    """One episode's constants: each coordinate uniform over the even bands ("train") or the odd
    bands ("held_out") of its range cut into BANDS equal bands; delay, noise and sampling as in
    `base`. The bands interleave, so held-out constants span the whole range (the nominal
    midpoint is as wrong for them as for training episodes) without one value in common."""
    if split not in SPLITS:
        raise ConfigError(f"split {split!r} is not one of {SPLITS}")
    values = {}
    first = 0 if split == "train" else 1
    for name, (lo, hi) in PARAM_RANGES.items():
        width = (hi - lo) / BANDS
        band = first + 2 * int(rng.integers(0, BANDS // 2))
        values[name] = float(lo + width * (band + rng.uniform(0.0, 1.0)))
    return HiddenPendulum(**values, delay=base.delay, noise=base.noise, dt=base.dt, substeps=base.substeps)


def _rk4(
    x: np.ndarray, a: np.ndarray | float, b: np.ndarray | float, u: np.ndarray, h: float, n: int
) -> np.ndarray:
    """n RK4 substeps of h of theta'' = -a sin(theta) - b theta' + u on states x [..., 2]
    (a, b, u broadcast against x[..., 0]). Returns a new array."""

    def f(s: np.ndarray) -> np.ndarray:
        return np.stack([s[..., 1], -a * np.sin(s[..., 0]) - b * s[..., 1] + u], axis=-1)

    for _ in range(n):
        k1 = f(x)
        k2 = f(x + 0.5 * h * k1)
        k3 = f(x + 0.5 * h * k2)
        k4 = f(x + h * k3)
        x = x + (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def hidden_step(state: np.ndarray, torque_cmd: np.ndarray | float, p: HiddenPendulum) -> np.ndarray:
    """Advance [..., 2] states one tick under the command reaching the joint now (already
    delayed; clipped to [-1, 1]), RK4 with p.substeps substeps. Pure; returns a new array."""
    a, b, c = p.coefficients
    u = c * np.clip(np.asarray(torque_cmd, dtype=np.float64), -1.0, 1.0)  # [...] angular acceleration
    return _rk4(np.asarray(state, dtype=np.float64), a, b, u, p.dt / p.substeps, p.substeps)


def hidden_rollout(
    state0: np.ndarray, commands: np.ndarray, p: HiddenPendulum, in_flight: np.ndarray | None = None
) -> np.ndarray:
    """True states [T + 1, 2] from state0 [2] under commands [T] issued at ticks 0..T-1; the
    command reaching the joint at tick t is commands[t - delay], or in_flight[t] ([delay], the
    commands issued before tick 0, oldest first) for t < delay (zeros if None)."""
    d = p.delay
    early = np.zeros(d) if in_flight is None else np.asarray(in_flight, dtype=np.float64)
    applied = np.concatenate([early, commands])[: commands.shape[0]]  # [T]
    states = np.empty((commands.shape[0] + 1, 2))
    states[0] = state0
    for t in range(commands.shape[0]):
        states[t + 1] = hidden_step(states[t], applied[t], p)
    return states


def hidden_episodes(
    rng: np.random.Generator,
    n: int,
    steps: int,
    split: str,
    base: HiddenPendulum = NOMINAL,
    *,
    max_hold: int = 8,
    omega: bool = False,
) -> tuple[Any, ...]:
    """n episodes of `steps` ticks, each with its own constants (`draw_hidden`): LOOP_SHARE of
    them closed-loop episodes (`loop_episodes`), the others with a random start (theta uniform in
    [-START_THETA, START_THETA] rad, omega in [-START_OMEGA, START_OMEGA] rad/s) and random
    commands, levels uniform in [-1, 1]: per EPISODE_MIX a new level every tick ("tick") or each
    held 1..max_hold ticks ("held"); shuffled together. Vectorised over episodes. Episodes that go
    over the top (|theta| >= pi at any tick) are redrawn, so angles stay continuous without
    wrapping.

    Returns (theta [n, steps + 1] true angles, y [n, steps + 1] measured angles, commands
    [n, steps] issued at each tick, constants per episode), and with `omega=True` the true
    angular velocities [n, steps + 1] last (the identification targets; the same draws either way)."""
    if n < 1 or steps < 1:
        raise ConfigError(f"need n >= 1 episodes of steps >= 1 (got n={n}, steps={steps})")
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, list[HiddenPendulum], np.ndarray]] = []
    have = 0
    for _ in range(100):
        theta, y, cmds, plants, om = _draw_episodes(
            rng, max(8, int((n - have) * 1.3)), steps, split, base, max_hold
        )
        ok = np.all(np.abs(theta) < np.pi, axis=-1)  # [draw]
        keep = np.flatnonzero(ok)[: n - have]
        parts.append((theta[keep], y[keep], cmds[keep], [plants[i] for i in keep], om[keep]))
        have += keep.size
        if have >= n:
            break
    else:  # pragma: no cover - only with absurd parameters
        raise ConfigError("could not draw episodes that stay below the top; narrow PARAM_RANGES")
    episodes = (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        [q for p in parts for q in p[3]],
    )
    return episodes + (np.concatenate([p[4] for p in parts]),) if omega else episodes


def tracking_cost(th0: Any, th1: Any, r: Any, r_dot: Any, dt: float, kp: float, w_omega: float) -> Any:
    """The tracking controllers' cost of a candidate command (control.delayed module docstring):
    (theta_{t+d+1} - r)^2 + w_omega (omega_hat - omega_des)^2, omega_hat = (th1 - th0) / dt,
    omega_des = r_dot + kp (r - th1), for th0 = theta_{t+d}, th1 = theta_{t+d+1} under the
    candidate. Floats or arrays (broadcast). One home: DelayedMPC decides with it, and the
    closed-loop training episodes (`loop_episodes`) are drawn with it."""
    om_des = r_dot + kp * (r - th1)
    om = (th1 - th0) / dt
    return (th1 - r) ** 2 + w_omega * (om - om_des) ** 2


def loop_episodes(
    rng: np.random.Generator,
    n: int,
    steps: int,
    split: str,
    base: HiddenPendulum = NOMINAL,
    *,
    explore: float = LOOP_EXPLORE,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[HiddenPendulum], np.ndarray]:
    """n closed-loop episodes (LOOP_SHARE's comment): per episode its constants (`draw_hidden`),
    a reference r(t) = A sin(2 pi t / T + phi) (A, T uniform over LOOP_AMPLITUDE, LOOP_PERIOD_S;
    phi uniform), a start near it (theta_0 = r(0) + N(0, 0.05^2), omega_0 = r'(0) + N(0, 0.2^2)),
    and at every tick t the command among LOOP_CANDIDATES in [-1, 1] minimising `tracking_cost`
    against r(t + d + 1) on the true state carried through the commands in flight (an oracle
    with the true state), or, with probability `explore`, a uniformly random candidate.
    Vectorised over episodes. Returns (theta [n, steps + 1], y, commands [n, steps], constants,
    omega [n, steps + 1]) as `hidden_episodes(omega=True)`."""
    plants = [draw_hidden(rng, split, base) for _ in range(n)]
    coef = np.array([p.coefficients for p in plants])  # [n, 3]
    a, b, c = coef[:, 0], coef[:, 1], coef[:, 2]
    amp = rng.uniform(*LOOP_AMPLITUDE, n)  # [n]
    rate = 2.0 * np.pi / rng.uniform(*LOOP_PERIOD_S, n)  # [n] rad/s
    phase = rng.uniform(0.0, 2.0 * np.pi, n)  # [n]
    x = np.stack(
        [
            amp * np.sin(phase) + rng.normal(0.0, 0.05, n),
            amp * rate * np.cos(phase) + rng.normal(0.0, 0.2, n),
        ],
        axis=-1,
    )  # [n, 2]
    cand = np.linspace(-1.0, 1.0, LOOP_CANDIDATES)  # [K]
    d, dt, h, sub = base.delay, base.dt, base.dt / base.substeps, base.substeps
    applied = np.zeros((n, steps + d))  # [n, steps + d] the command reaching the joint over t..t+1
    cmds = np.empty((n, steps))
    theta, omega = np.empty((n, steps + 1)), np.empty((n, steps + 1))
    theta[:, 0], omega[:, 0] = x[:, 0], x[:, 1]
    for t in range(steps):
        z = x
        for j in range(d):  # the true state at t + d, through the commands in flight
            z = _rk4(z, a, b, c * applied[:, t + j], h, sub)
        ahead = np.repeat(z[:, None, :], cand.size, axis=1)  # [n, K, 2]
        th1 = _rk4(ahead, a[:, None], b[:, None], c[:, None] * cand[None, :], h, sub)[..., 0]  # [n, K]
        when = (t + d + 1) * dt
        r = amp * np.sin(rate * when + phase)  # [n]
        r_dot = amp * rate * np.cos(rate * when + phase)  # [n]
        cost = tracking_cost(z[:, None, 0], th1, r[:, None], r_dot[:, None], dt, LOOP_KP, LOOP_W_OMEGA)
        pick = np.argmin(cost, axis=1)  # [n]
        explored = rng.random(n) < explore  # [n]
        pick = np.where(explored, rng.integers(0, cand.size, n), pick)
        cmds[:, t] = cand[pick]
        applied[:, t + d] = cmds[:, t]
        x = _rk4(x, a, b, c * applied[:, t], h, sub)
        theta[:, t + 1], omega[:, t + 1] = x[:, 0], x[:, 1]
    y = theta + rng.normal(0.0, base.noise, size=theta.shape)
    return theta, y, cmds, plants, omega


def _draw_episodes(
    rng: np.random.Generator, n: int, steps: int, split: str, base: HiddenPendulum, max_hold: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[HiddenPendulum], np.ndarray]:
    """LOOP_SHARE of n (rounded) closed-loop episodes (`loop_episodes`), the rest random-command
    episodes (`_open_episodes`), shuffled together; with LOOP_SHARE 0 exactly the draws of the
    recipe before it (no extra random number consumed)."""
    loop = int(round(n * LOOP_SHARE))
    parts = [_open_episodes(rng, n - loop, steps, split, base, max_hold)] if n > loop else []
    if not loop:
        return parts[0]
    parts.append(loop_episodes(rng, loop, steps, split, base))
    order = rng.permutation(n)
    theta, y, cmds, om = (np.concatenate([p[i] for p in parts])[order] for i in (0, 1, 2, 4))
    plants = [q for p in parts for q in p[3]]
    return theta, y, cmds, [plants[i] for i in order], om


def _open_episodes(
    rng: np.random.Generator, n: int, steps: int, split: str, base: HiddenPendulum, max_hold: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[HiddenPendulum], np.ndarray]:
    plants = [draw_hidden(rng, split, base) for _ in range(n)]
    coef = np.array([p.coefficients for p in plants])  # [n, 3]
    a, b, c = coef[:, 0], coef[:, 1], coef[:, 2]
    names = [name for name, _ in EPISODE_MIX]
    kinds = rng.choice(len(names), size=n, p=[share for _, share in EPISODE_MIX])  # [n]
    cmds = np.empty((n, steps))
    for i in range(n):
        t = 0
        limit = 1 if names[kinds[i]] == "tick" else max_hold  # per-tick commands, or held
        while t < steps:
            hold = int(rng.integers(1, limit + 1))
            cmds[i, t : t + hold] = rng.uniform(-1.0, 1.0)
            t += hold
    d = base.delay
    applied = np.concatenate([np.zeros((n, d)), cmds], axis=1)[:, :steps]  # [n, steps]
    x = np.stack(
        [rng.uniform(-START_THETA, START_THETA, n), rng.uniform(-START_OMEGA, START_OMEGA, n)], axis=-1
    )
    theta, omega = np.empty((n, steps + 1)), np.empty((n, steps + 1))
    theta[:, 0], omega[:, 0] = x[:, 0], x[:, 1]
    h = base.dt / base.substeps
    for t in range(steps):
        x = _rk4(x, a, b, c * applied[:, t], h, base.substeps)  # [n, 2]
        theta[:, t + 1], omega[:, t + 1] = x[:, 0], x[:, 1]
    y = theta + rng.normal(0.0, base.noise, size=theta.shape)
    return theta, y, cmds, plants, omega


def rk4_scalar(
    theta: float, omega: float, a: float, b: float, u: float, h: float, n: int
) -> tuple[float, float]:
    """`_rk4` on one state in Python floats (no numpy: ~50x faster for one state, allocates only
    floats): n substeps of h of theta'' = -a sin(theta) - b theta' + u."""
    sin = math.sin
    for _ in range(n):
        k1t, k1w = omega, -a * sin(theta) - b * omega + u
        t2, w2 = theta + 0.5 * h * k1t, omega + 0.5 * h * k1w
        k2t, k2w = w2, -a * sin(t2) - b * w2 + u
        t3, w3 = theta + 0.5 * h * k2t, omega + 0.5 * h * k2w
        k3t, k3w = w3, -a * sin(t3) - b * w3 + u
        t4, w4 = theta + h * k3t, omega + h * k3w
        k4t, k4w = w4, -a * sin(t4) - b * w4 + u
        theta = theta + (h / 6.0) * (k1t + 2 * k2t + 2 * k3t + k4t)
        omega = omega + (h / 6.0) * (k1w + 2 * k2w + 2 * k3w + k4w)
    return theta, omega


class HiddenStepper:
    """hidden_step for one state in Python floats, constants unpacked once: `step(theta, omega,
    command) -> (theta, omega)`, the command clipped to [-1, 1] (tests: equal to hidden_step)."""

    def __init__(self, plant: HiddenPendulum) -> None:
        self.a, self.b, self.c = plant.coefficients
        self.h, self.n = plant.dt / plant.substeps, plant.substeps

    def step(self, theta: float, omega: float, command: float) -> tuple[float, float]:
        u = self.c * min(1.0, max(-1.0, command))
        return rk4_scalar(theta, omega, self.a, self.b, u, self.h, self.n)
