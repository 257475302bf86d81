"""Tracking control of the hidden pendulum (control.plant `HiddenPendulum`): the plant in the loop
and the controllers that share one decision rule and differ only in what predicts the angle.

The plant measures only a noisy angle, its constants are unknown to every controller but the
oracle, and a command issued at tick t reaches the joint at t + delay. So a command issued now
first moves the angle at t + delay + 1: the commands in flight are already decided, and the one
choice is among K candidate commands c_j in [-1, 1] (`DelayedMPC`). Each tick every controller
predicts, per candidate, theta_{t+d} (the same for every candidate) and theta_{t+d+1}, and
picks the candidate minimising (control.plant.tracking_cost)

    (theta_{t+d+1} - r)^2 + w (omega_hat - omega_des)^2,   omega_hat = (theta_{t+d+1} - theta_{t+d}) / dt,
    omega_des = r' + kp (r - theta_{t+d+1})

with r, r' the reference and its rate at t + d + 1 (a one-step decision horizon: the horizon
over which the decision acts is d + 1 ticks, all but the last already fixed).

    HistoryMPC   the learned model over the measured stream, on a runtime session: one
                 `Session.peek` of the K candidates over the shared history, then `commit(j*)`
                 of the chosen one once it is known to have been actuated (no reset; a
                 windowed session slides past its window). On a
                 window-1 model it is the memoryless baseline (attention over its own key only).
    IdentifiedMPC  the learned model identifies, a filter estimates: HistoryMPC's session,
                 peek and commit on a model that also outputs the plant's constants; those,
                 smoothed over the ticks, in NominalMPC's filter and prediction in place of the
                 nominal ones (control.task HIDDEN_IDENTIFY_OUTPUTS)
    NominalMPC   the true equations with the nominal constants; state (theta, omega) from an
                 extended Kalman filter with those constants over the measured angles
                 (control.estimation.HiddenEKF), the commands in flight from its own record.
    OracleMPC    the true equations with the episode's true constants and the same filter with
                 them: everything known but the noise (`true_state=True`: the true state too).

Observation (`HiddenPlantSim.observe`): obs [5 + G] = (y_t, r(t + d + 1), r'(t + d + 1), the
command actuated last tick, n, then the n measurements of the ticks the loop skipped since,
oldest first; G = 64). A late tick makes `ControlLoop` skip periods, and the plant keeps moving
under the held command; a controller whose state is a history must see those ticks, or its
tokens stop being one per tick: each controller first catches up (`catch_up`: HistoryMPC commits
a plain step per skipped tick, the filters update), bounded by G, then decides.

`step(obs)` returns the controller's action buffer [1]; an unusable prediction gives a non-finite action, which
`tickformer.runtime.ControlLoop` replaces by its fallback. Real-time: after construction every
controller works in Python floats over buffers made once (no numpy array is made per tick;
HistoryMPC's `Session.peek` + `commit` allocate 0 bytes on ORT IOBinding), bounded work (K
candidates, a fixed number of RK4 steps); zero net allocation over thousands of ticks
(tests/control/test_delayed.py), transient Python floats only.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from tickformer import validation
from tickformer.contracts.output_bound import output_excess
from tickformer.errors import ConfigError

from .estimation import HiddenEKF
from .plant import NOMINAL, HiddenPendulum, HiddenStepper, tracking_cost
from .task import HIDDEN_CONSTANTS, hidden_horizons, token_lags

Reference = Callable[[float], tuple[float, float]]
OBS_HEAD = 5  # obs[0:5] = (y_t, r, r', the command actuated last tick, n skipped ticks)
GAP_MAX = 64  # measurements of skipped ticks the observation carries (obs[5:5 + n], oldest first)


class HiddenPlantSim:
    """The hidden pendulum in the loop: one tick per control period, zero-order hold, the
    command delayed by `plant.delay` ticks, the angle measured with N(0, noise^2) noise from a
    seeded generator. `observe(k)` advances through skipped ticks (holding the last command)
    and returns obs [3]; `actuate(u)` issues u[0] (clipped to [-1, 1]) and advances one tick."""

    def __init__(
        self,
        plant: HiddenPendulum,
        reference: Reference,
        n_ticks_max: int,
        *,
        seed: int = 0,
        theta0: float = 0.0,
    ) -> None:
        validation.positive_int(n_ticks_max, "n_ticks_max")
        self.plant, self.reference = plant, reference
        self._f = HiddenStepper(plant)
        self.state = np.array([theta0, 0.0])  # [2] true (theta, omega)
        self.in_flight = np.zeros(plant.delay)  # [d] commands issued at t-d..t-1, oldest first
        self.k = 0
        self.last = 0.0  # the last command issued (held through skipped ticks)
        self.rng = np.random.default_rng(seed)
        self.obs = np.zeros(OBS_HEAD + GAP_MAX)  # [5 + G] (module docstring, "Observation")
        self.theta = np.full(n_ticks_max + 1, np.nan)  # [n] true theta at each plant tick
        self.theta[0] = theta0
        self.y = self.state[0] + self.plant.noise * float(self.rng.standard_normal())

    def _advance(self, command: float) -> None:
        d = self.plant.delay
        if d:
            applied = float(self.in_flight[0])
            self.in_flight[:-1] = self.in_flight[1:]
            self.in_flight[-1] = command
        else:
            applied = command
        th, om = self._f.step(float(self.state[0]), float(self.state[1]), applied)
        self.state[0], self.state[1] = th, om
        self.k += 1
        if self.k < self.theta.size:
            self.theta[self.k] = self.state[0]
        self.y = float(self.state[0]) + self.plant.noise * float(self.rng.standard_normal())

    def observe(self, k: int) -> np.ndarray:
        obs, gap = self.obs, 0
        while self.k < k:  # skipped periods: the plant kept moving under the held command
            if gap < GAP_MAX:  # the sensor's buffer: the measurement of each skipped tick
                obs[OBS_HEAD + gap] = self.y
            gap += 1
            self._advance(self.last)
        r, r_dot = self.reference((k + self.plant.delay + 1) * self.plant.dt)
        obs[0], obs[1], obs[2], obs[3], obs[4] = self.y, r, r_dot, self.last, min(gap, GAP_MAX)
        return obs

    def actuate(self, u: np.ndarray) -> None:
        u0 = float(u[0])
        self.last = min(1.0, max(-1.0, u0)) if math.isfinite(u0) else 0.0
        self._advance(self.last)

    def _last_tick(self, until: int | None) -> int:
        """The last plant tick whose angle is recorded, or `until` if earlier."""
        return min(self.k, self.theta.size - 1, self.k if until is None else until)

    def tracking_error(self, skip: int = 0, until: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Over plant ticks skip+1..k (skip: a settling prefix; until: stop at that tick instead
        of the last): the reference and its rate at each tick [m, 2] and the error theta - r [m]."""
        n = self._last_tick(until)
        t = np.arange(skip + 1, n + 1) * self.plant.dt  # [m = n - skip]
        rr = np.array([self.reference(float(ti)) for ti in t]).reshape(-1, 2)  # [m, 2] (r, r')
        return rr, self.theta[skip + 1 : n + 1] - rr[:, 0]

    def tracking(self, skip: int = 0, until: int | None = None) -> dict[str, float]:
        """RMS and max |theta - r| over plant ticks skip+1..k (`tracking_error`)."""
        err = self.tracking_error(skip, until)[1]
        n = self._last_tick(until)
        return {
            "rms_rad": float(np.sqrt(np.mean(err**2))),
            "max_abs_rad": float(np.max(np.abs(err))),
            "plant_ticks": int(n),
            "settling_ticks_skipped": int(skip),
        }


class DelayedMPC:
    """The decision rule (module docstring); subclasses fill `self.pred` [K, 2] =
    (theta_{t+d}, theta_{t+d+1}) per candidate in `predict(obs)` and may override `chosen(j)`."""

    def __init__(
        self, candidates: int, dt: float, *, kp: float = 2.0, w_omega: float = 0.05, w_du: float = 0.0
    ) -> None:
        k = validation.integer(candidates, "candidates", min_value=2, hint="a choice needs alternatives")
        validation.positive_real(dt, "dt")
        self.cand = np.linspace(-1.0, 1.0, k)  # [K] candidate commands
        self._cand = self.cand.tolist()  # as Python floats (the loop below allocates nothing)
        self.pred = np.zeros((k, 2))  # [K, 2]
        self.out = np.zeros(1, dtype=np.float32)  # [1]
        self.dt, self.kp, self.w, self.w_du = float(dt), float(kp), float(w_omega), float(w_du)
        self.last = 0.0

    def predict(self, obs: np.ndarray) -> bool:
        """Fill self.pred; False = the prediction is unusable this tick."""
        raise NotImplementedError

    def chosen(self, j: int) -> None:
        """Called with the chosen candidate's index (HistoryMPC commits it)."""

    def catch_up(self, obs: np.ndarray) -> None:
        """Take in the ticks the loop skipped (obs[4] of them, measurements obs[5:]) and the
        command actually actuated last tick (obs[3]). Default: nothing."""

    def step(self, obs: np.ndarray) -> np.ndarray:
        self.catch_up(obs)
        if not self.predict(obs):
            self.chosen(-1)
            self.out[0] = np.nan  # a broken prediction -> non-finite action -> loop's fallback
            return self.out
        r, r_dot = obs.item(1), obs.item(2)
        item = self.pred.item
        best, best_cost = 0, math.inf
        for j in range(len(self._cand)):
            cost = tracking_cost(item(j, 0), item(j, 1), r, r_dot, self.dt, self.kp, self.w)
            cost = cost + self.w_du * (self._cand[j] - self.last) ** 2
            if cost < best_cost:
                best, best_cost = j, cost
        self.chosen(best)
        self.last = self._cand[best]
        self.out[0] = self.last
        return self.out


class HistoryMPC(DelayedMPC):
    """The learned model on a runtime session exported with batch K (the candidates): one peek
    per tick over the shared history (module docstring). The token of tick t is committed at
    the start of tick t + 1, when the command actually actuated at t is known (obs[3]): the
    peeked candidate if it is that command (`commit(j)`, no extra work), else a plain step with
    it (the loop fell back, or the prediction was unusable), so every token is what the plant
    got. Then one plain step per skipped tick, then the peek of this tick. Model outputs are
    checked with the output-bound contract; a violation, or a measured angle outside the
    declared input domain, gives a non-finite action (the loop's fallback).

    Bounded catch-up (`catch_up_max` = m): tokens that still need a plain step wait in a queue
    made once, and at most m of them are stepped per tick (None: all of them), plus one more on
    a tick that cannot predict anyway, so a tick never runs more than m + 1 steps. While the
    queue is not empty the tick's own token joins it and the tick has no prediction (the loop's
    fallback holds the command); the queue shrinks by m tokens per such tick. After a
    stall of many periods the work per tick stays bounded instead of making the next ticks late
    too. A queue longer than `QUEUE` drops its oldest tokens (counted in `dropped`; beyond a
    window-W model's W newest they change nothing)."""

    QUEUE = 2 * GAP_MAX + 2  # tokens the catch-up queue holds

    def __init__(
        self,
        session: Any,
        norm: dict[str, Any],
        plant: HiddenPendulum,
        output_bound: float | None,
        *,
        catch_up_max: int | None = None,
        **weights: float,
    ) -> None:
        k = session.input_shape[0]
        super().__init__(k, plant.dt, **weights)
        self.session, self.bound = session, output_bound
        self.d = plant.delay
        self.xs = np.zeros(session.input_shape, dtype=np.float32)  # [K, 1, d_in]
        xm, xs = norm["x_mean"], norm["x_std"]
        self.ym, self.ys = float(xm[0]), float(xs[0])
        self.cm, self.cs = float(xm[1]), float(xs[1])
        # a token (y_t, c_t, y_{t-1}, .., c_{t-1}, ..) (control.task hidden_features): the
        # measurements and commands of the tokens before, in history order, standardised,
        # newest first (Python floats)
        self.y_lags, self.c_lags = token_lags(norm)
        self.lags = self.y_lags + self.c_lags
        if int(session.input_shape[-1]) != 2 + self.lags or len(xm) != 2 + self.lags:
            raise ConfigError(
                f"HistoryMPC: the artifact's {session.input_shape[-1]} input columns, the norm's {len(xm)} and "
                f"its lags {self.y_lags} + {self.c_lags} disagree; export the checkpoint whose norm this is"
            )
        # one output column per horizon theta_{t+1..t+d+1}: a model trained for another delay, or
        # a norm of another model, would otherwise read the wrong columns (or fail mid-loop)
        # (an identifying model has its identification columns after them: control.task)
        d_out, n_id = int(session.config.d_out), len(norm.get("identify", ()))
        if d_out != self.d + 1 + n_id or len(norm["dy_mean"]) != d_out or len(norm["dy_std"]) != d_out:
            raise ConfigError(
                f"HistoryMPC: the artifact's {d_out} output columns, the norm's {len(norm['dy_mean'])} "
                f"columns ({n_id} of them identification outputs) and the plant's delay {self.d} (which needs "
                f"{self.d + 1} horizons: theta_t+1..t+{self.d + 1}) disagree; use a checkpoint trained for "
                f"this plant's delay, with its own norm"
            )
        # nothing before the first tick: the plant at rest at 0, no command in flight
        self._lag = [(0.0 - self.ym) / self.ys] * self.y_lags + [(0.0 - self.cm) / self.cs] * self.c_lags
        for j, c in enumerate(self._cand):
            self.xs[j, 0, 1] = (c - self.cm) / self.cs  # candidate column: fixed
        # the prediction theta_{t+j} = y + (dy_mean[j-1] + dy_std[j-1] * out[.., j-1]) for every
        # output column, into one float64 buffer; self.pred [K, 2] is its view of j = d, d + 1
        # (an identification column i holds y + its value: IdentifiedMPC subtracts y)
        self._scale = np.asarray(norm["dy_std"], dtype=np.float64)  # [d_out]
        self._mean = np.asarray(norm["dy_mean"], dtype=np.float64)  # [d_out]
        self._shift = np.zeros_like(self._mean)  # [d_out] y + dy_mean, per tick
        self._full = np.zeros((k, 1, self._mean.size))  # [K, 1, d_out] float64
        self.pred = self._full[:, 0, self.d - 1 : self.d + 1]  # [K, 2] (theta_{t+d}, theta_{t+d+1})
        self.lo, self.hi = session.domain
        self._index = list(range(k))  # candidate indices as ints made once
        self.gap_xs = np.zeros(session.input_shape, dtype=np.float32)  # [K, 1, d_in] every row the same
        # views made once, filled in place each tick (no Python loop over the K rows, no array made)
        self._z = self.xs[:, 0, 0]  # [K] the measurement column of the peek input
        self._gap_z, self._gap_c = self.gap_xs[:, 0, 0], self.gap_xs[:, 0, 1]  # [K], [K]
        self._lag_cols = [self.xs[:, 0, 2 + i] for i in range(self.lags)]  # each [K]
        self._gap_lag_cols = [self.gap_xs[:, 0, 2 + i] for i in range(self.lags)]  # each [K]
        self._pending = False  # a token of the last tick awaits its actuated command
        self._pend_z = 0.0  # its standardised measurement
        self._pend_j = -1  # the candidate chosen for it (-1: none)
        self.skipped = 0  # skipped ticks taken in (their tokens queued)
        self.replaced = 0  # tokens committed with another command than the chosen candidate
        self.catch_up_max = (
            self.QUEUE if catch_up_max is None else validation.positive_int(catch_up_max, "catch_up_max")
        )
        self._qz = [0.0] * self.QUEUE  # queued tokens' standardised measurements (a ring)
        self._qc = [0.0] * self.QUEUE  # and their actuated commands
        self._ql = [[0.0] * self.lags for _ in range(self.QUEUE)]  # and their lag columns
        self._head = self._size = 0
        self._defer = False  # this tick catches up and does not predict
        self.deferred = 0  # ticks without a prediction because the queue was not empty
        self.dropped = 0  # tokens dropped from a full queue (the oldest)

    def _plain(self, z: float, command: float, lag: list[float]) -> None:
        self._gap_z[...] = z
        self._gap_c[...] = (command - self.cm) / self.cs
        for col, v in zip(self._gap_lag_cols, lag):
            col[...] = v
        self.session.step(self.gap_xs)

    def _entered(self, z: float, command: float) -> None:
        """A token (standardised measurement z, actuated command) joined the history (committed
        or queued): its y and c are y_{t-1} and c_{t-1} of the next token."""
        lag, ny = self._lag, self.y_lags
        for i in range(ny - 1, 0, -1):
            lag[i] = lag[i - 1]
        for i in range(len(lag) - 1, ny, -1):
            lag[i] = lag[i - 1]
        if ny:
            lag[0] = z
        if self.c_lags:
            lag[ny] = (command - self.cm) / self.cs

    def _push(self, z: float, command: float) -> None:
        q = self.QUEUE
        if self._size == q:  # full: drop the oldest
            self._head = (self._head + 1) % q
            self._size -= 1
            self.dropped += 1
        i = (self._head + self._size) % q
        self._qz[i], self._qc[i] = z, command
        self._ql[i][:] = self._lag  # slice assignment: the list made once is reused
        self._entered(z, command)
        self._size += 1

    def catch_up(self, obs: np.ndarray) -> None:
        """Commit the last tick's token with the command actuated (obs[3]) -- `commit(j)` of
        the peeked candidate, or into the queue -- then queue one token per skipped tick (y_i,
        held command), then step up to `catch_up_max` queued tokens, oldest first, every batch
        row the same (one more if the queue is still not empty: this tick will not peek): one
        token per plant tick, and the K rows stay one history."""
        actual = obs.item(3)
        if self._pending:
            self._pending = False
            j = self._pend_j
            if j >= 0 and self.session.peek_pending and abs(self._cand[j] - actual) < 1e-6:
                self.session.commit(self._index[j])
                self._entered(self._pend_z, actual)
            else:
                self.replaced += 1
                self._push(self._pend_z, actual)
        n = int(obs.item(4))
        for i in range(n):
            z = (obs.item(OBS_HEAD + i) - self.ym) / self.ys
            if self.lo <= z <= self.hi:  # outside the declared domain: that tick stays out
                self._push(z, actual)
        self.skipped += n
        for _ in range(min(self._size, self.catch_up_max)):
            self._pop()
        self._defer = self._size > 0  # no prediction this tick: the peek's share goes to the queue
        if self._defer:
            self._pop()

    def _pop(self) -> None:
        h = self._head
        self._plain(self._qz[h], self._qc[h], self._ql[h])
        self._head = (h + 1) % self.QUEUE
        self._size -= 1

    def predict(self, obs: np.ndarray) -> bool:
        s, xs = self.session, self.xs
        y = obs.item(0)
        z = (y - self.ym) / self.ys
        self._pend_j = -1
        if not (self.lo <= z <= self.hi):
            return False  # outside the model's declared input domain: no token for this tick
        self._pending, self._pend_z = True, z
        if self._defer:  # still catching up: this tick's token waits its turn in the queue
            self.deferred += 1
            return False
        self._z[...] = z
        for col, v in zip(self._lag_cols, self._lag):
            col[...] = v
        out = s.peek(xs)  # [K, 1, d + 1] standardised theta_{t+j} - y_t
        if output_excess(out, self.bound) > 0.0:
            return False
        full = self._full  # (y + dy_mean) + dy_std * out, in float64 (out widened exactly)
        np.add(self._mean, y, out=self._shift)
        np.multiply(out, self._scale, out=full)
        np.add(full, self._shift, out=full)  # self.pred is its view
        return True

    def chosen(self, j: int) -> None:
        self._pend_j = j


def smoothing_weight(value: Any) -> float:
    """IdentifiedMPC's moving-average weight on the newest estimate, checked: in (0, 1] (1: the
    newest estimate only; 0 would never move off the first)."""
    return validation.real(
        value, "smoothing", min_value=0.0, max_value=1.0, exclude_min=True, hint="1: the newest estimate only"
    )


def rollout(
    pred: np.ndarray,
    candidates: list[float],
    th: float,
    om: float,
    issued: list[float],
    first: int,
    delay: int,
    f: HiddenStepper,
) -> None:
    """The physics prediction every filter-based controller makes: from the state (th, om) at t
    forward through the d commands in flight (issued[first:first + d], oldest first: they reach
    the joint over t..t+d), then each candidate over one more tick; pred[j] = (theta_{t+d},
    theta_{t+d+1}). Python floats, no list made."""
    step = f.step
    for j in range(delay):
        th, om = step(th, om, issued[first + j])
    for j, c in enumerate(candidates):
        pred[j, 0] = th
        pred[j, 1] = step(th, om, c)[0]


class _Filtered:
    """What every filter-based controller keeps (NominalMPC, OracleMPC, IdentifiedMPC): the
    stepper `f` of the constants it believes, an EKF of (theta, omega) through that same stepper
    (control.estimation.HiddenEKF), and its own record of the commands it issued, `issued` = the
    commands of ticks t-d-1..t-1 (the commands in flight). Mixed in before the decision rule's
    class: `catch_up` and `chosen` do that class's part first (a session's commit, for
    IdentifiedMPC), then the filter's. Python floats only."""

    pred: np.ndarray
    _cand: list[float]
    last: float

    def _start_filter(self, plant: HiddenPendulum) -> None:
        self.f = HiddenStepper(plant)
        self.ekf = HiddenEKF(plant, stepper=self.f)  # one stepper: the filter and the prediction agree
        self._delay = plant.delay
        self.issued = [0.0] * (plant.delay + 1)

    def catch_up(self, obs: np.ndarray) -> None:
        super().catch_up(obs)  # type: ignore[misc]
        issued = self.issued
        issued[-1] = obs.item(3)  # what was actuated last tick (the loop's fallback, if it fell back)
        for i in range(int(obs.item(4))):  # skipped ticks: filter through them, the command held
            self.ekf.update(obs.item(OBS_HEAD + i), issued[0])
            self._shift_issued(issued[-1])

    def _filter(self, y: float) -> tuple[float, float]:
        """The filtered (theta, omega) at t: the command that reached the joint over t-1..t was
        issued at t-1-d, issued[0]."""
        return self.ekf.update(y, self.issued[0])

    def _shift_issued(self, command: float) -> None:
        issued = self.issued
        for i in range(len(issued) - 1):
            issued[i] = issued[i + 1]
        issued[-1] = command

    def _simulate(self, th: float, om: float, flight: list[float], first: int, f: HiddenStepper) -> None:
        rollout(self.pred, self._cand, th, om, flight, first, self._delay, f)

    def chosen(self, j: int) -> None:
        super().chosen(j)  # type: ignore[misc]
        self._shift_issued(self._cand[j] if j >= 0 else self.last)


class NominalMPC(_Filtered, DelayedMPC):
    """The true equations with `plant`'s constants (default: the nominal ones); state from an
    extended Kalman filter with the same constants over the measured angles (control.estimation
    HiddenEKF), the commands in flight from this controller's own record of what it issued.
    Python floats only: no numpy allocation, bounded work (2 + delay + K RK4 steps a tick)."""

    def __init__(self, candidates: int, plant: HiddenPendulum = NOMINAL, **weights: float) -> None:
        super().__init__(candidates, plant.dt, **weights)
        self.plant = plant
        self._start_filter(plant)

    def predict(self, obs: np.ndarray) -> bool:
        th, om = self._filter(obs.item(0))
        self._simulate(th, om, self.issued, 1, self.f)
        return True


class OracleMPC(NominalMPC):
    """The true equations with the episode's true constants (read from the simulated plant),
    the same filter with those constants: everything known but the measurement noise. With
    `true_state=True` it reads the plant's true state and commands in flight as well."""

    def __init__(
        self, candidates: int, sim: HiddenPlantSim, *, true_state: bool = False, **weights: float
    ) -> None:
        super().__init__(candidates, sim.plant, **weights)
        self.sim, self.true_state = sim, true_state

    def predict(self, obs: np.ndarray) -> bool:
        if not self.true_state:
            return super().predict(obs)
        sim = self.sim
        self._simulate(float(sim.state[0]), float(sim.state[1]), sim.in_flight.tolist(), 0, self.f)
        return True


class IdentifiedMPC(_Filtered, HistoryMPC):
    """The learned model identifies, a filter estimates: an identifying model (control.task
    `HIDDEN_IDENTIFY_OUTPUTS`, its norm's "identify") on the same session as HistoryMPC (one
    peek of the K candidates, committed the same way), of whose outputs only the three
    constants (log g/L, log b/(m L^2), log k/(m L^2)) are used: averaged over the candidates,
    smoothed over the ticks by an exponential moving average of weight `smoothing` on the newest
    (the window's estimate varies from tick to tick; the plant's constants do not), and given to
    an extended Kalman filter of (theta, omega) over the measured angles (control.estimation.HiddenEKF)
    and to the physics prediction (`rollout`), as NominalMPC with the model's constants in place
    of the nominal ones. The filter sees every measured angle, skipped ticks included; a tick
    whose model output is unusable (HistoryMPC: input domain, output bound, catching up) gives
    no prediction, the constants unchanged. Bounded work: NominalMPC's plus one peek."""

    def __init__(
        self,
        session: Any,
        norm: dict[str, Any],
        plant: HiddenPendulum,
        *args: Any,
        smoothing: float = 0.02,
        **kwargs: Any,
    ) -> None:
        """HistoryMPC's arguments (`args`: output_bound; `kwargs`: catch_up_max and the cost
        weights), plus `smoothing`, the moving-average weight on the newest constants estimate."""
        names = list(norm.get("identify", ()))
        wanted = [f"log {c}" for c in HIDDEN_CONSTANTS]
        if not set(wanted) <= set(names):
            raise ConfigError(
                "IdentifiedMPC needs an identifying model (outputs the state and constants after its "
                f"horizons; its norm's identify {names or 'is missing'}): train pendulum-hidden with "
                f"d_out = delay + 6, or use HistoryMPC"
            )
        super().__init__(session, norm, plant, *args, **kwargs)
        self.smoothing = smoothing_weight(smoothing)
        self.pred = np.zeros((self.pred.shape[0], 2))  # [K, 2] the physics prediction (not the horizons)
        first = hidden_horizons(norm)  # the identification columns follow the horizons (control.task)
        self._const_cols = [first + names.index(n) for n in wanted]  # the log constants' columns
        self._sum = np.zeros((1, self._mean.size))  # [1, d_out] the candidates' sum, per tick
        self._k = float(self.pred.shape[0])  # K, to take the candidates' mean
        self.log_coef = [0.0, 0.0, 0.0]  # the smoothed log constants (Python floats)
        self.identified = 0  # ticks whose output updated them
        # the plant's sensor and timing, the nominal constants until the model's first usable
        # output (the filter's first update only starts it at (y, 0)), then the model's
        self._start_filter(
            dataclasses.replace(
                plant, mass=NOMINAL.mass, length=NOMINAL.length, damping=NOMINAL.damping, gain=NOMINAL.gain
            )
        )

    def predict(self, obs: np.ndarray) -> bool:
        y = obs.item(0)
        th, om = self._filter(y)  # every measured angle, whether or not the model's output is usable
        if not super().predict(obs):
            return False
        np.sum(self._full, axis=0, out=self._sum)  # y + each column's value, summed over the candidates
        lg, a = self.log_coef, self.smoothing
        for i, col in enumerate(self._const_cols):
            v = self._sum.item(0, col) / self._k - y
            lg[i] = v if not self.identified else lg[i] + a * (v - lg[i])
        f = self.f
        f.a, f.b, f.c = math.exp(lg[0]), math.exp(lg[1]), math.exp(lg[2])
        self.identified += 1
        self._simulate(th, om, self.issued, 1, f)
        return True
