"""Any plant behind the gymnasium Env API (`reset`, `step`, Box action and observation spaces):
logged for `tickformer train --data`, and run in a closed loop with a learned controller.

    make_env        a gymnasium id (`gym:Pendulum-v1`, `Pendulum-v1`, the project's own
                    `tickformer/HiddenPendulum-v0`) or an Env instance (your simulator wrapped in
                    the API) -> the Env, its spaces checked (`spaces`)
    spaces          the action and observation spaces as flat bounds: continuous Box spaces of one
                    dimension only, the action's bounds finite; anything else refused with one line
                    naming the problem and the fix
    log_episodes    `runs` episodes of `rows` ticks under an exploration policy (uniform random
                    actions within the action bounds, each held 1..HOLD_MAX ticks); an episode the
                    env ends (terminated or truncated) is reset and its rows go on as a new run, so
                    no training window spans a reset. Columns: time [s] (from 0 in each run; the
                    env's `dt` where it has one, else 1 per tick), run, act0.., obs0.. (the action
                    issued at the tick and the observation the env returned before it)
    GymSim          the plant in the loop (runtime.ControlLoop's `observe` / `actuate`): actions
                    clipped to the env's bounds, the ticks a late step skipped advanced under the
                    held action, an ended episode reset (counted)
    GymMPC          the learned controller: K candidates of the one action spread over its bounds,
                    evaluated in one `Session.peek` by control.forecast_mpc.ForecastMPC (the model
                    trained with `--data` on such a log), scored by `QuadraticCost`
    HoldAction      the baseline: one action held (default the middle of the bounds)
    run_loop        `ticks` ticks of a controller on the env under ControlLoop (virtual time, or
                    the wall clock at a period): the env's reward, episodes ended, deadline misses,
                    fallbacks

Observation layout of `GymSim.observe` (obs [3 + n + G n], n observation columns the model uses,
G = GAP_MAX): (1 if the env was reset since the last tick, the count g of skipped ticks, the n
measurements now, the action actuated at the last tick, then the g skipped ticks' measurements,
oldest first). Real-time: GymMPC.step does bounded work over buffers made once (one peek, the
costs), except on the tick after a reset (it starts a fresh history). The env's own `step` is the
user's code. Everything else here is not real-time code.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError

from .forecast_mpc import ForecastMPC, trained_signals

PREFIX = "gym:"
ACT, OBS = "act", "obs"  # column prefixes: act0, act1, ..; obs0, obs1, ..
HOLD_MAX = 8  # the exploration holds each random action 1..HOLD_MAX ticks
GAP_MAX = 64  # skipped ticks whose measurements the loop's observation carries
HEAD = 2  # obs[0:2] = (reset flag, skipped ticks)
CANDIDATES = 17  # the export's --batch: GymMPC spreads as many candidates over the action's bounds


def make_env(spec: Any, **kwargs: Any) -> Any:
    """`spec`: a gymnasium id, with or without the `gym:` prefix, or an Env instance (returned as
    is). The project's own pendulum is registered first (`tickformer/HiddenPendulum-v0`,
    control/gym_pendulum.py). kwargs go to gymnasium.make. The spaces are checked (`spaces`)."""
    if isinstance(spec, str):
        name = spec[len(PREFIX) :] if spec.startswith(PREFIX) else spec
        if not name:
            raise ConfigError(f"{spec!r} names no environment; give gym:ID, e.g. gym:Pendulum-v1")
        try:
            import gymnasium as gym
        except ImportError:
            raise ConfigError(
                f"{spec}: gymnasium is not installed; install the plant extra (pip install tickformer[plant])"
            ) from None
        from .gym_pendulum import register

        register()
        try:
            env = gym.make(name, **kwargs)
        except Exception as exc:  # gymnasium's own errors: unknown id, a missing dependency
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ConfigError(
                f"gym:{name}: gymnasium cannot make it ({first}); give a registered id (e.g. gym:Pendulum-v1) "
                "and install what it needs"
            ) from None
    else:
        env = spec
        for attr in ("reset", "step", "action_space", "observation_space"):
            if not hasattr(env, attr):
                raise ConfigError(
                    f"{type(env).__name__} has no {attr!r}: give a gymnasium.Env (reset, step, "
                    "action_space, observation_space)"
                )
    spaces(env)
    return env


def _box(space: Any, what: str, fix: str) -> tuple[np.ndarray, np.ndarray]:
    low, high, shape = (
        getattr(space, "low", None),
        getattr(space, "high", None),
        getattr(space, "shape", None),
    )
    if type(space).__name__ != "Box" or low is None or high is None:
        raise ConfigError(
            f"the {what} space is {type(space).__name__}, not a continuous Box: give a Box {what} space ({fix})"
        )
    if shape is None or len(shape) != 1:
        raise ConfigError(
            f"the {what} space has shape {shape}, not one dimension: give a flat Box (e.g. gymnasium.wrappers."
            f"Flatten{'Observation' if what == 'observation' else 'Action'} or a wrapper of your own)"
        )
    return np.asarray(low, np.float64).reshape(-1), np.asarray(high, np.float64).reshape(-1)


def spaces(env: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """(action low [m], action high [m], observation size n) of an env whose action and observation
    spaces are one-dimensional Box spaces with finite action bounds; else ConfigError naming it."""
    low, high = _box(
        env.action_space, "action", "wrap the env so it takes a continuous action (a Box of floats)"
    )
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ConfigError(
            "the action space is unbounded: give it finite bounds (wrap the env, e.g. gymnasium.wrappers."
            "ClipAction over a bounded Box), the exploration and the candidates span them"
        )
    olow, _ = _box(env.observation_space, "observation", "wrap the env so it returns an array of floats")
    return low, high, int(olow.size)


def columns(env: Any) -> tuple[list[str], list[str]]:
    """The log's action columns and observation columns (act0.., obs0..)."""
    low, _, n_obs = spaces(env)
    return [f"{ACT}{i}" for i in range(low.size)], [f"{OBS}{i}" for i in range(n_obs)]


def period_s(env: Any) -> float:
    """The env's control period: its `dt` (MuJoCo and classic-control envs have one), else 1."""
    dt = getattr(getattr(env, "unwrapped", env), "dt", None)
    return float(dt) if isinstance(dt, (int, float)) and dt > 0 else 1.0


def log_episodes(
    env: Any, *, runs: int, rows: int, seed: int, hold_max: int = HOLD_MAX
) -> dict[str, np.ndarray]:
    """`runs` episodes of `rows` ticks (module docstring); segments of one row are dropped."""
    validation.positive_int(runs, "--runs")
    validation.positive_int(rows, "--rows")
    validation.positive_int(hold_max, "hold_max")
    low, high, n_obs = spaces(env)
    act_names, obs_names = columns(env)
    dt = period_s(env)
    rng = np.random.default_rng(seed)
    env.action_space.seed(int(rng.integers(2**31)))
    table = np.empty((runs * rows, 2 + low.size + n_obs))  # [rows, time run act obs]
    seg, i = 0, 0
    for _ in range(runs):
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        t_seg, left = 0, 0
        action = np.empty(low.size)
        for _ in range(rows):
            if left == 0:
                action = rng.uniform(low, high)  # [m]
                left = int(rng.integers(1, hold_max + 1))
            left -= 1
            table[i, 0], table[i, 1] = t_seg * dt, seg
            table[i, 2 : 2 + low.size] = action
            table[i, 2 + low.size :] = np.asarray(obs, np.float64).reshape(-1)
            i += 1
            t_seg += 1
            obs, _, terminated, truncated, _ = env.step(action.astype(env.action_space.dtype))
            if terminated or truncated:  # the env ended the episode: a new run
                obs, _ = env.reset()
                seg, t_seg = seg + 1, 0
        seg += 1
    ids, counts = np.unique(table[:, 1], return_counts=True)
    table = table[np.isin(table[:, 1], ids[counts >= 2])]
    names = ["time [s]", "run", *act_names, *obs_names]
    return {name: np.ascontiguousarray(table[:, j]) for j, name in enumerate(names)}


class GymSim:
    """The plant in the loop (module docstring). `out_idx`: the observation indices the model
    measures, in its output order. Sums the env's reward; counts ended episodes."""

    def __init__(self, env: Any, out_idx: Sequence[int], *, seed: int) -> None:
        self.low, self.high, n_obs = spaces(env)
        if self.low.size != 1:
            raise ConfigError(
                f"the action space has {self.low.size} dimensions; the learned controller drives one: "
                "give an env of one action (wrap yours, holding the others in the wrapper)"
            )
        self.env, self.idx = env, np.asarray(out_idx, dtype=np.intp)
        if self.idx.size == 0 or self.idx.max() >= n_obs:
            raise ConfigError(f"observation indices {list(out_idx)} for an env with {n_obs} observations")
        n = self.idx.size
        self.obs = np.zeros(HEAD + n + 1 + GAP_MAX * n)  # [3 + n + G n]
        self.action = np.zeros(1, dtype=env.action_space.dtype)
        self.mid = float((self.low[0] + self.high[0]) / 2)
        self.last = self.mid
        self.reward, self.episodes_ended, self.t = 0.0, 0, 0
        raw, _ = env.reset(seed=seed)
        self.y = np.asarray(raw, np.float64).reshape(-1)[self.idx]
        self.reset_flag = 1.0

    def _advance(self, a: float) -> None:
        self.action[0] = a
        raw, r, terminated, truncated, _ = self.env.step(self.action)
        self.reward += float(r)
        self.t += 1
        if terminated or truncated:
            raw, _ = self.env.reset()
            self.episodes_ended += 1
            self.reset_flag = 1.0
        self.y = np.asarray(raw, np.float64).reshape(-1)[self.idx]

    def observe(self, k: int) -> np.ndarray:
        obs, n, gap = self.obs, self.idx.size, 0
        while self.t < k:  # skipped periods: the env went on under the held action
            if gap < GAP_MAX:
                obs[HEAD + n + 1 + gap * n : HEAD + n + 1 + (gap + 1) * n] = self.y
            gap += 1
            self._advance(self.last)
            if self.reset_flag:  # the skipped ticks before a reset are not this episode's history
                gap = 0
        obs[0], obs[1] = self.reset_flag, min(gap, GAP_MAX)
        obs[HEAD : HEAD + n] = self.y
        obs[HEAD + n] = self.last
        self.reset_flag = 0.0
        return obs

    def actuate(self, u: np.ndarray) -> None:
        u0 = float(u[0])
        self.last = min(self.high[0], max(self.low[0], u0)) if math.isfinite(u0) else self.mid
        self._advance(self.last)

    def summary(self) -> dict[str, Any]:
        return {
            "ticks": self.t,
            "reward": self.reward,
            "mean_reward": self.reward / max(1, self.t),
            "episodes_ended": self.episodes_ended,
        }


class QuadraticCost:
    """cost(pred [K, H, n], t) = sum over h and i of weight_i (pred - target_i)^2 (every horizon),
    the candidate's own cost added by GymMPC. Real-time safe (buffers made once)."""

    def __init__(self, target: Sequence[float], weights: Sequence[float] | None = None) -> None:
        self.target = np.asarray(target, np.float64)  # [n]
        self.weights = np.ones_like(self.target) if weights is None else np.asarray(weights, np.float64)
        if self.weights.shape != self.target.shape:
            raise ConfigError(
                f"{self.weights.size} weights for {self.target.size} targets: give one per output"
            )
        self.diff: np.ndarray | None = None

    def __call__(self, pred: np.ndarray, t: int) -> np.ndarray:
        if self.diff is None or self.diff.shape != pred.shape:
            self.diff = np.empty_like(pred)
            self.out = np.empty(pred.shape[0])
        np.subtract(pred, self.target, out=self.diff)
        np.square(self.diff, out=self.diff)
        np.einsum("khi,i->k", self.diff, self.weights, out=self.out)
        return self.out


def model_signals(session: Any) -> dict[str, Any]:
    """The signals a `--data` artifact was trained on (its manifest), or ConfigError."""
    return trained_signals(
        session,
        "train on a log of tickformer log gym:ID with tickformer train --data LOG --inputs act0 --outputs obs0,..",
    )


def model_columns(signals: dict[str, Any]) -> tuple[str, list[int]]:
    """(the model's command column, the observation indices of its outputs in its order)."""
    inputs = [c["name"] for c in signals["inputs"] if c["role"] != "output"]
    outputs = [c["name"] for c in signals["inputs"] if c["role"] == "output"]
    acts = [c for c in inputs if c.startswith(ACT) and c[len(ACT) :].isdigit()]
    if len(acts) != 1 or any(not (o.startswith(OBS) and o[len(OBS) :].isdigit()) for o in outputs):
        raise ConfigError(
            f"the model's inputs {inputs} and outputs {outputs} are not one act column and obs columns of a "
            "gym log: train with --inputs act0 --outputs obs0,.. on a log of tickformer log gym:ID"
        )
    return acts[0], [int(o[len(OBS) :]) for o in outputs]


class GymMPC:
    """The learned controller (module docstring): `step(obs) -> action [1]`. `command_weight`:
    the cost of a candidate c is command_weight c^2 on top of `cost`."""

    def __init__(
        self,
        session: Any,
        low: float,
        high: float,
        cost: Callable[[np.ndarray, int], np.ndarray],
        *,
        signals: dict[str, Any] | None = None,
        command_weight: float = 0.0,
    ) -> None:
        self.session = session
        self.signals = model_signals(session) if signals is None else signals
        self.command, self.out_idx = model_columns(self.signals)
        self.n = len(self.out_idx)
        self.cand = np.linspace(low, high, int(session.batch))  # [K]
        self.r_cand = command_weight * self.cand**2  # [K]
        self.user_cost = cost
        self.costs = np.zeros(self.cand.size)  # [K]
        self.mpc_obs = np.zeros(self.n + 1)  # (y, actuated) for ForecastMPC
        self.action = np.zeros(1)
        self.episodes = 0
        self._fresh()

    def _fresh(self) -> None:
        """A new episode: an empty history (not real-time: ForecastMPC's buffers are made)."""
        self.session.reset()
        self.mpc = ForecastMPC(
            self.session, self.signals, command=self.command, candidates=self.cand, cost=self._cost
        )
        self.episodes += 1

    def _cost(self, pred: np.ndarray, t: int) -> np.ndarray:
        np.add(self.user_cost(pred, t), self.r_cand, out=self.costs)
        return self.costs

    def step(self, obs: np.ndarray) -> np.ndarray:
        n = self.n
        if obs[0] and self.mpc.t:
            self._fresh()
        g = int(obs[1])
        self.mpc_obs[:] = obs[HEAD : HEAD + n + 1]
        gap = obs[HEAD + n + 1 : HEAD + n + 1 + g * n].reshape(g, n) if g else None
        self.action[0] = self.mpc.step(self.mpc_obs, gap)
        return self.action


class HoldAction:
    """The baseline: `value` every tick (None: the middle of the bounds, set by run_loop)."""

    def __init__(self, value: float | None = None) -> None:
        self.value = value
        self.action = np.zeros(1)

    def step(self, obs: np.ndarray) -> np.ndarray:
        self.action[0] = self.value
        return self.action


def run_loop(
    env: Any,
    controller: Any,
    ticks: int,
    *,
    out_idx: Sequence[int],
    seed: int = 0,
    wall_period_ns: int | None = None,
) -> dict[str, Any]:
    """`ticks` ticks of `controller` on `env` under ControlLoop (hold fallback, the output bounded
    to the action bounds' larger magnitude, then clipped to the bounds by GymSim); virtual time at
    the env's period unless `wall_period_ns`. Returns GymSim's summary and the loop's counts."""
    from tickformer.runtime.control_loop import ControlLoop, LoopConfig

    validation.positive_int(ticks, "--ticks")
    sim = GymSim(env, out_idx, seed=seed)
    if isinstance(controller, HoldAction) and controller.value is None:
        controller.value = sim.mid
    period = wall_period_ns or max(1, int(round(period_s(env) * 1e9)))
    bound = float(max(abs(sim.low[0]), abs(sim.high[0])))
    cfg = LoopConfig(period_ns=period, fallback="hold", safe_action=(sim.mid,), output_bound=bound)
    loop = ControlLoop.virtual(controller, cfg) if wall_period_ns is None else ControlLoop(controller, cfg)
    stats = loop.run(ticks, sim.observe, sim.actuate)
    out = sim.summary()
    out.update(stats.counts(), period_s=period / 1e9)
    return out
