"""Closed loops on the cart-pole (control/cartpole.py) under the deadline machinery
(runtime.ControlLoop), the learned controller that balances it, and relogging under that
controller.

    CartPoleSim      the plant in the loop: `observe(k)` advances it through the ticks the loop
                     skipped (the actuator holds the last command) and returns obs; `actuate(u)`
                     issues u[0] and advances one tick
    ModelFilterMPC   the learned controller: K candidates in one `Session.peek` of a model trained
                     with `train --data` (control.forecast_mpc.ForecastMPC), the pole's and cart's
                     positions at t + d + 1 from the model; their velocities from a Kalman filter
                     predicted through the commands in flight and the candidate (its input gain
                     the nominal B, or with `gain_rate` > 0 the nominal B scaled by the actuator
                     gain the model shows: read each tick from how its K predicted positions at
                     t + d + 1 move with the candidate, low-passed), plus a share `blend`
                     (default 0.5) of the model's own velocity correction (its positions' change over the last tick
                     minus the filter's), ramped in over the first `ramp` ticks; each candidate
                     scored by the nominal LQR's cost-to-go (the rule every cart-pole controller
                     shares). With `bank=True` (the controller of kind "model"): the
                     velocities and B from a gear bank instead (control/gear_bank.py: Kalman
                     filters over the training bands' gears weighted by the likelihood of their
                     innovations), no share of the model's correction
    PhysicsLoop      LQG or PhysicsMPC (nominal, oracle) behind the same `step(obs)`
    run_episode      one held-out draw under ControlLoop, in virtual time (deterministic) or on
                     the wall clock: cost, falls, saturations, deadline misses, fallbacks
    relog_runs       runs on training draws under ModelFilterMPC plus a white perturbation of the
                     command: data from the loop's own regime for the next training round

Why the filter: the model's positions carry the episode's physics (its window saw the plant
respond), but a velocity from the difference of two predicted positions over one tick (0.04 s)
follows the prediction's noise; the nominal filter's velocities are smooth but carry the nominal
physics, and fail where the actuator gain is far from nominal; half the model's correction
keeps the controller up on most of those draws. The gain the model shows (the slope of its K
predictions over the candidates: one least-squares fit on [K, 2] per tick) puts the episode's
actuator into the filter instead; it is an option, not the default: it won on the validation
draws and lost on the held-out ones, falling where a heavy, lightly damped pole meets a weak
actuator (experiments/notes/2026-12-07-cartpole-loop.md measures all three). The gear bank
puts the episode's actuator into the velocities by classical adaptive estimation on the
measurements and commands; it needs the model's context to pay: with the memoryless model the same
bank falls on every draw (experiments/notes/2026-12-07-cartpole-gear-bank.md).

Observation (`CartPoleSim.observe`): obs [4 + 2G] = (x, theta measured now, the command actuated
at the last tick, n, then the n measurements (x, theta) of the ticks skipped since, oldest first;
G = GAP_MAX). Real-time: each controller's `step` does bounded work (K candidates, a fixed number
of 4x4 products; the physics controllers K + d MuJoCo steps) over buffers made once; Python
floats are made per tick. The rest (construction, run_episode, relog_runs) is not real-time code.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError

from .cartpole import (
    COMMAND_LIMIT,
    LQG,
    MIN_SEGMENT,
    R_COST,
    CartPoleParams,
    HiddenCartPole,
    NominalDesign,
    PhysicsMPC,
    _concatenated,
    draw_params,
    reference,
)
from .forecast_mpc import ForecastMPC, trained_signals
from .gear_bank import FLOOR, GearBank, bank_designs, training_gear_grid

OBS_HEAD = 4  # obs[0:4] = (x, theta, the command actuated last tick, n skipped ticks)
GAP_MAX = 64  # measurements of skipped ticks the observation carries
BLEND = (
    0.5  # the share of the model's own velocity correction (experiments/notes/2026-12-07-cartpole-loop.md)
)
# per tick: the low-pass of the actuator gain read from the model; 0 (the default): the nominal gain.
# 0.05 with BLEND 0 won on the validation draws and lost on the chain's held-out ones (the note)
GAIN_RATE = 0.0
GAIN_MIN, GAIN_MAX = 0.3, 3.0  # the read gain's clip, relative to the nominal
RAMP = 32  # ticks over which the share is ramped in: the model's window filling
BANK_BLEND = 0.0  # with the gear bank: none of the model's own correction (the bank carries the actuator)
RELOG_PERTURB = 0.3  # std of the white perturbation added to the learned controller's command when relogging


class CartPoleSim:
    """The plant in the loop, one tick per control period; the true state of every tick kept
    (`states` [n + 1, 4]) for plots."""

    def __init__(self, plant: HiddenCartPole, n_ticks_max: int) -> None:
        validation.positive_int(n_ticks_max, "n_ticks_max")
        self.plant = plant
        self.last = 0.0  # the last command issued (held through skipped ticks)
        self.y = plant.measure()
        self.obs = np.zeros(OBS_HEAD + 2 * GAP_MAX)  # [4 + 2G]
        self.states = np.full((n_ticks_max + GAP_MAX + 1, 4), np.nan)  # [n, 4] true state per tick
        self.commands = np.full(n_ticks_max + GAP_MAX + 1, np.nan)  # [n] the command issued per tick
        self.states[0] = plant.state

    def _advance(self, command: float) -> None:
        t = self.plant.t
        if t < self.commands.size:
            self.commands[t] = command
        self.y, _ = self.plant.step(command)
        if self.plant.t < self.states.shape[0]:
            self.states[self.plant.t] = self.plant.state

    def observe(self, k: int) -> np.ndarray:
        obs, gap = self.obs, 0
        while self.plant.t < k:  # skipped periods: the plant kept moving under the held command
            if gap < GAP_MAX:
                obs[OBS_HEAD + 2 * gap] = self.y[0]
                obs[OBS_HEAD + 2 * gap + 1] = self.y[1]
            gap += 1
            self._advance(self.last)
        obs[0], obs[1], obs[2], obs[3] = self.y[0], self.y[1], self.last, min(gap, GAP_MAX)
        return obs

    def actuate(self, u: np.ndarray) -> None:
        u0 = float(u[0])
        self.last = min(COMMAND_LIMIT, max(-COMMAND_LIMIT, u0)) if math.isfinite(u0) else 0.0
        self._advance(self.last)


def _gap(obs: np.ndarray) -> np.ndarray:
    n = int(obs[3])
    return obs[OBS_HEAD : OBS_HEAD + 2 * n].reshape(n, 2)  # [n, 2] a view


class _Filtered:
    """The nominal Kalman filter (LQG's) kept in step with what the plant was really sent."""

    def _start(self, design: NominalDesign, dt: float, delay: int) -> None:
        self.filter = LQG(design, dt, delay)
        self.ticks = 0
        self.action = np.zeros(1)  # [1] the step's output buffer

    def _catch_up(self, obs: np.ndarray) -> None:
        f, actuated = self.filter, float(obs[2])
        if self.ticks:
            f.issued[-1] = actuated  # a loop's fallback may have sent another command
        for yg in _gap(obs):  # the skipped ticks: measured, the command held
            f.estimate(yg)
            f._advance(actuated)
        self.ticks += 1


class PhysicsLoop(_Filtered):
    """LQG or PhysicsMPC (control.cartpole) behind `step(obs) -> action [1]`."""

    def __init__(self, controller: LQG) -> None:
        self.filter = controller
        self.ticks = 0
        self.action = np.zeros(1)

    def step(self, obs: np.ndarray) -> np.ndarray:
        self._catch_up(obs)
        self.action[0] = self.filter.step(obs[:2])
        return self.action


class ModelFilterMPC(_Filtered):
    """The learned controller (module docstring). `session`: a forecast artifact exported with
    `--batch K` whose inputs are (command, x, theta) and outputs x, theta at t+1..t+H, H > delay."""

    def __init__(
        self,
        session: Any,
        design: NominalDesign,
        dt: float,
        *,
        delay: int,
        signals: dict[str, Any] | None = None,
        blend: float = BLEND,
        ramp: int = RAMP,
        gain_rate: float = GAIN_RATE,
        bank: bool = False,
        grid: tuple[float, ...] | None = None,
        floor: float = FLOOR,
    ) -> None:
        if signals is None:
            signals = trained_signals(
                session, "train with tickformer train --data LOG --inputs command --outputs x,theta"
            )
        outputs = [c["name"] for c in signals["inputs"] if c["role"] == "output"]
        if outputs != ["x", "theta"]:
            raise ConfigError(f"the model's outputs are {outputs}; the cart-pole controller needs x,theta")
        horizon = len(signals["outputs"]) // 2
        if horizon <= delay:
            raise ConfigError(
                f"the model predicts {horizon} ticks ahead; the command acts at {delay + 1}: train with "
                f"--horizon {delay + 1}"
            )
        validation.positive_int(ramp, "ramp")
        if not 0.0 <= gain_rate <= 1.0:
            raise ConfigError(f"gain_rate {gain_rate}: give a rate in [0, 1] (0: the nominal gain)")
        self._start(design, dt, delay)
        # the filter's own copy of the design: its input gain B is scaled in place by the read gain
        self.filter.design = dataclasses.replace(design, b=design.b.copy())
        self.design, self.dt, self.delay = design, dt, delay
        self.blend, self.ramp = float(blend), ramp
        k = int(session.batch)
        self.cand = np.linspace(-COMMAND_LIMIT, COMMAND_LIMIT, k)  # [K]
        self.mpc = ForecastMPC(session, signals, command="command", candidates=self.cand, cost=self._cost)
        self.zpred = np.zeros(4)  # the filter's state at t + d
        self.base = np.zeros(4)  # A zpred
        self.st = np.zeros((k, 4))  # [K, 4] the state at t + d + 1 per candidate
        self.costs = np.zeros(k)  # [K]
        self.obs3 = np.zeros(3)  # (x, theta, actuated) for ForecastMPC
        self.r_cand = R_COST * self.cand**2  # [K]
        self.nominal_b = design.b[:, 0].copy()  # [4]
        self.b = self.nominal_b.copy()  # [4] the nominal B times the read gain
        self.gain_rate, self.gain = float(gain_rate), 1.0
        self.cc = self.cand - self.cand.mean()  # [K] the candidates, centred
        self.cc_norm = float(self.cc @ self.cc)
        self.b_pos_norm = float(self.nominal_b[:2] @ self.nominal_b[:2])
        self.slope = np.zeros(2)  # [2] d position(t + d + 1) / d candidate, the model's
        self.bank: GearBank | None = None
        if bank:  # the bank in place of the nominal filter: its estimate and its weighted B
            if self.gain_rate:
                raise ConfigError("the gear bank carries the actuator gain: give gain_rate 0 with bank=True")
            self.grid = tuple(grid) if grid is not None else training_gear_grid()
            self.bank = GearBank(bank_designs(self.grid), delay, floor=floor)
            self.filter = self.bank  # type: ignore[assignment]  # the interface used of LQG
            self.b = self.bank.b_mix  # updated in place by the bank each tick

    @property
    def gear(self) -> float | None:
        """The bank's gear (the weighted mean of its grid's), None without a bank."""
        return None if self.bank is None else float(self.bank.weights @ np.asarray(self.grid))

    def _read_gain(self, pred: np.ndarray) -> None:
        """The actuator gain the model shows: the least-squares slope of its positions at t+d+1
        over the candidates, on the nominal B's position rows; low-passed, clipped; scales B."""
        np.matmul(self.cc, pred[:, self.delay, :], out=self.slope)  # [K] @ [K, 2] -> [2]
        r = float(self.slope @ self.nominal_b[:2]) / (self.cc_norm * self.b_pos_norm)
        self.gain += self.gain_rate * (min(GAIN_MAX, max(GAIN_MIN, r)) - self.gain)
        np.multiply(self.nominal_b, self.gain, out=self.b)
        self.filter.design.b[:, 0] = self.b

    def _cost(self, pred: np.ndarray, t: int) -> np.ndarray:
        """pred [K, H, 2]: x, theta at t+1..t+H per candidate -> K costs."""
        if self.gain_rate:
            self._read_gain(pred)
        d, dt, st = self.delay, self.dt, self.st
        ref, ref_dot = reference((t + d + 1) * dt)
        np.matmul(self.design.a, self.zpred, out=self.base)
        a = self.blend * min(1.0, t / self.ramp)
        st[:, :2] = pred[:, d]
        # the filter's velocities at t+d+1 (the candidate through B), plus `a` of the model's correction
        for j in (0, 1):
            st[:, 2 + j] = self.base[2 + j] + self.b[2 + j] * self.cand
            if a:  # the gear bank's controller has none of the correction: no work for a share of 0
                model_dv = (pred[:, d, j] - pred[:, d - 1, j]) / dt  # [K] the model's change over the tick
                filt_dv = (self.base[j] + self.b[j] * self.cand - self.zpred[j]) / dt  # [K] the filter's
                st[:, 2 + j] += a * (model_dv - filt_dv)
        st[:, 0] -= ref
        st[:, 2] -= ref_dot
        np.einsum("ki,ij,kj->k", st, self.design.s, st, out=self.costs)
        self.costs += self.r_cand
        return self.costs

    def step(self, obs: np.ndarray) -> np.ndarray:
        self._catch_up(obs)
        f = self.filter
        f.estimate(obs[:2])
        z = self.zpred
        z[:] = f.xhat
        for u in f.issued:  # through the commands in flight: the state at t + d
            z[:] = self.design.a @ z + self.b * u
        self.obs3[0], self.obs3[1], self.obs3[2] = obs[0], obs[1], obs[2]
        gap = _gap(obs)
        u = self.mpc.step(self.obs3, gap if gap.shape[0] else None)
        f._advance(u)
        self.action[0] = u
        return self.action


CONTROLLERS = ("lqg", "nominal_mpc", "oracle_mpc", "memoryless", "model_nominal_filter", "model")
# the model's artifact behind each learned kind: "model" (the windowed model with the gear bank)
# and "model_nominal_filter" (the same model with the nominal filter: the controller relogging uses)
SESSION_OF = {"model_nominal_filter": "model"}


def make_controller(
    kind: str,
    plant: HiddenCartPole,
    design: NominalDesign,
    session: Any = None,
    *,
    blend: float = BLEND,
) -> Any:
    """One of CONTROLLERS for `plant` (the oracle reads its true state and physics; the model
    kinds need `session`, reset here): "model" the windowed model with the gear bank,
    "model_nominal_filter" and "memoryless" ModelFilterMPC with the nominal filter and `blend`."""
    validation.one_of(kind, "controller", CONTROLLERS)
    dt, delay = plant.dt, plant.params.delay
    if kind == "lqg":
        return PhysicsLoop(LQG(design, dt, delay))
    if kind == "nominal_mpc":
        return PhysicsLoop(PhysicsMPC(design, CartPoleParams(delay=delay), dt))
    if kind == "oracle_mpc":
        return PhysicsLoop(PhysicsMPC(design, plant.params, dt, plant=plant))
    if session is None:
        raise ConfigError(f"controller {kind!r} needs a session of the model's artifact")
    session.reset()
    if kind == "model":
        return ModelFilterMPC(session, design, dt, delay=delay, blend=BANK_BLEND, bank=True)
    return ModelFilterMPC(session, design, dt, delay=delay, blend=blend)


def run_episode(
    controller: Any,
    plant: HiddenCartPole,
    ticks: int,
    *,
    wall_period_ns: int | None = None,
) -> dict[str, Any]:
    """`ticks` ticks of `controller` on `plant` under ControlLoop (hold fallback, output bound
    the command limit). wall_period_ns None: virtual time (runtime.control_loop.VirtualClock:
    every tick on time, the result depends on the seeds alone); else the wall clock at that
    period, traced. Returns the plant's summary (cost, falls, saturations) and the loop's counts."""
    from tickformer.runtime.control_loop import ControlLoop, LoopConfig

    sim = CartPoleSim(plant, ticks)
    period = wall_period_ns or int(round(plant.dt * 1e9))
    cfg = LoopConfig(period_ns=period, fallback="hold", safe_action=(0.0,), output_bound=COMMAND_LIMIT)
    loop = ControlLoop.virtual(controller, cfg) if wall_period_ns is None else ControlLoop(controller, cfg)
    stats = loop.run(ticks, sim.observe, sim.actuate, trace=wall_period_ns is not None)
    out = plant.summary()
    out.update(stats.counts())
    if loop.trace is not None:
        step_us = loop.trace["step_ns"] / 1e3
        out["step_us"] = {
            "p50": float(np.percentile(step_us, 50)),
            "p99": float(np.percentile(step_us, 99)),
            "max": float(step_us.max()),
        }
        out["period_us"] = period / 1e3
        out["_step_us"] = step_us  # every tick's step time, for callers that pool several runs
    out["_sim"] = sim
    return out


def held_out_draws(n: int, seed: int) -> list[CartPoleParams]:
    """`n` plant draws from the held-out bands."""
    validation.positive_int(n, "--draws")
    rng = np.random.default_rng(seed)
    return [draw_params(rng, "held_out") for _ in range(n)]


def relog_runs(
    session: Any,
    *,
    runs: int,
    rows: int,
    seed: int,
    perturb: float = RELOG_PERTURB,
    first_run: int = 0,
    blend: float = BLEND,
) -> dict[str, np.ndarray]:
    """`runs` runs of `rows` ticks on training draws under ModelFilterMPC on `session` with a
    white perturbation (std `perturb`) added to each command: the loop's own regime, in
    control.cartpole.log_runs's columns; segments split at falls (run ids from `first_run`)."""
    validation.positive_int(runs, "--runs")
    validation.positive_int(rows, "--rows")
    rng = np.random.default_rng(seed)
    design = NominalDesign.make()
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("time [s]", "run", "command", "x [m]", "theta [rad]")}
    segment = first_run
    for _ in range(runs):
        plant = HiddenCartPole(draw_params(rng, "train"), seed=int(rng.integers(2**31)))
        ctl = make_controller("model_nominal_filter", plant, design, session, blend=blend)
        obs = np.zeros(OBS_HEAD)
        table = np.empty((rows, 4))  # [rows, 4] command, x, theta, segment
        y, last = plant.measure(), 0.0
        for t in range(rows):
            obs[0], obs[1], obs[2] = y[0], y[1], last
            u = float(ctl.step(obs)[0])
            last = min(COMMAND_LIMIT, max(-COMMAND_LIMIT, u + float(rng.normal(0.0, perturb))))
            table[t] = (last, y[0], y[1], segment)
            y, fell = plant.step(last)
            segment += int(fell)
        segment += 1
        ids, counts = np.unique(table[:, 3], return_counts=True)
        keep = np.isin(table[:, 3], ids[counts >= MIN_SEGMENT])
        out["time [s]"].append((np.arange(rows) * plant.dt)[keep])
        out["run"].append(table[keep, 3])
        out["command"].append(table[keep, 0])
        out["x [m]"].append(table[keep, 1])
        out["theta [rad]"].append(table[keep, 2])
    return _concatenated(out)


def tick_time(
    session: Any, plant: HiddenCartPole, ticks: int = 2000, *, kind: str = "model"
) -> dict[str, float]:
    """The learned controller's step (K candidates: one peek, the filter or the bank, the cost),
    timed with perf_counter_ns over `ticks` ticks on `plant` (the plant's own step outside the
    timing); `kind` one of the learned kinds of CONTROLLERS."""
    validation.positive_int(ticks, "ticks")
    ctl = make_controller(kind, plant, NominalDesign.make(), session)
    obs = np.zeros(OBS_HEAD)
    y, last = plant.measure(), 0.0
    ns = np.empty(ticks, np.int64)
    for t in range(ticks):
        obs[0], obs[1], obs[2] = y[0], y[1], last
        t0 = time.perf_counter_ns()
        last = float(ctl.step(obs)[0])
        ns[t] = time.perf_counter_ns() - t0
        y, _ = plant.step(last)
    us = ns[ticks // 10 :] / 1e3  # after a warm-up tenth
    return {
        "ticks": ticks,
        "p50_us": float(np.percentile(us, 50)),
        "p99_us": float(np.percentile(us, 99)),
        "max_us": float(us.max()),
        "period_us": plant.dt * 1e6,
    }


TARGET_ORACLE_RATIO = 1.5  # the target: the model's mean cost within 1.5x the oracle's
BEATEN = ("lqg", "nominal_mpc", "memoryless")  # what the model must beat on the mean cost
EPISODE_TICKS = 500  # ticks of the plotted episode kept in the summary (20 s of plant time)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    costs = [r["cost"] for r in rows]
    return {
        "mean_cost": float(np.mean(costs)),
        "median_cost": float(np.median(costs)),
        "max_cost": float(np.max(costs)),
        "falls": int(sum(r["falls"] for r in rows)),
        "draws_with_falls": int(sum(r["falls"] > 0 for r in rows)),
        "saturations": int(sum(r["saturations"] for r in rows)),
        "deadline_misses": int(sum(r["deadline_misses"] for r in rows)),
        "fallbacks": int(sum(r["fallbacks"] for r in rows)),
        "ticks": int(sum(r["loop_ticks"] for r in rows)),
        "per_draw_cost": [round(c, 6) for c in costs],
        "per_draw_falls": [int(r["falls"]) for r in rows],
    }


def evaluate(
    artifacts: dict[str, str],
    draws: list[CartPoleParams],
    ticks: int,
    *,
    controllers: tuple[str, ...] = CONTROLLERS,
    episode: int = 0,
) -> dict[str, Any]:
    """Every controller on every draw (plant noise seed = the draw's index: the same for every
    controller), `ticks` ticks each under ControlLoop in virtual time. artifacts: the model kinds'
    artifact folders ("model", "memoryless"). Returns per controller the summary over the draws,
    the true states and commands of draw `episode` (for the plot), and the verdict."""
    from tickformer import runtime

    design = NominalDesign.make()
    sessions = {k: runtime.load(p, backend="ort", threads=1) for k, p in artifacts.items()}
    out: dict[str, Any] = {
        "controllers": {},
        "episode": {"draw": episode, "params": draws[episode].to_dict()},
    }
    try:
        for kind in controllers:
            rows = []
            for i, params in enumerate(draws):
                plant = HiddenCartPole(params, seed=i)
                session = sessions.get(SESSION_OF.get(kind, kind))
                r = run_episode(make_controller(kind, plant, design, session), plant, ticks)
                sim = r.pop("_sim")
                if i == episode:  # the first EPISODE_TICKS ticks, for the plot
                    n = min(ticks, EPISODE_TICKS)
                    out["episode"][kind] = {
                        "states": np.round(sim.states[: n + 1], 5).tolist(),
                        "commands": np.round(sim.commands[:n], 5).tolist(),
                    }
                rows.append(r)
            out["controllers"][kind] = _summary(rows)
    finally:
        for s in sessions.values():
            s.close()
    out["dt_s"] = HiddenCartPole(draws[0]).dt
    out["verdict"] = verdict(out["controllers"])
    return out


def verdict(summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Does the model beat BEATEN on the mean cost, and how far is it from the oracle's?"""
    if "model" not in summaries:
        return {}
    model = summaries["model"]["mean_cost"]
    v: dict[str, Any] = {
        f"beats_{k}": {"met": model < summaries[k]["mean_cost"], "ratio": model / summaries[k]["mean_cost"]}
        for k in BEATEN
        if k in summaries
    }
    if "oracle_mpc" in summaries:
        ratio = model / summaries["oracle_mpc"]["mean_cost"]
        v["within_oracle"] = {
            "met": ratio <= TARGET_ORACLE_RATIO,
            "ratio": ratio,
            "target": TARGET_ORACLE_RATIO,
        }
    return v
