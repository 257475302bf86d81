"""The cart-pole's closed loops (control/cartpole_loop.py): the plant in ControlLoop through skipped
ticks and fallbacks, the learned controller's decision rule on a session whose answer is known,
the gap catch-up of ForecastMPC, and the logs (control/cartpole.py log_runs)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the plant extra (gymnasium[mujoco]) is not installed")
pytest.importorskip("mujoco", reason="the plant extra (gymnasium[mujoco]) is not installed")

from _cartpole_signals import SIGNALS  # noqa: E402

from tickformer.control import cartpole as C  # noqa: E402
from tickformer.control import cartpole_loop as L  # noqa: E402
from tickformer.control.forecast_mpc import ForecastMPC  # noqa: E402
from tickformer.errors import ConfigError  # noqa: E402


class LinearSession:
    """A forecast session whose answer is known: the nominal linearisation run from a fixed state
    `z0` (ignoring the history), the candidate acting over the third tick; peek/commit/step
    recorded."""

    batch = C.CANDIDATES

    def __init__(self, design: C.NominalDesign, z0: np.ndarray) -> None:
        self.design, self.z0 = design, z0
        self.peek_pending = False
        self.log: list = []

    def reset(self) -> None:
        self.log.append(("reset",))

    def peek(self, xs: np.ndarray) -> np.ndarray:
        self.peek_pending = True
        a, b = self.design.a, self.design.b[:, 0]
        z1 = a @ self.z0
        z2 = a @ z1
        out = np.empty((xs.shape[0], 1, 6), np.float32)
        y = xs[0, 0, 1:]
        for k in range(xs.shape[0]):
            z3 = a @ z2 + b * xs[k, 0, 0]
            out[k, 0] = np.concatenate([z1[:2], z2[:2], z3[:2]]) - np.tile(y, 3)
        self.log.append(("peek",))
        return out

    def commit(self, i: int) -> None:
        self.peek_pending = False
        self.log.append(("commit", i))

    def step(self, x: np.ndarray) -> np.ndarray:
        self.peek_pending = False
        self.log.append(("step", x[0, 0].copy()))
        return np.zeros((x.shape[0], 1, 6), np.float32)


def test_the_learned_rule_scores_the_models_positions_and_the_filters_velocities():
    """Each candidate's cost is the LQR value of (the model's positions at t+3, the filter's
    velocities through the commands in flight and the candidate, plus `blend` of the model's
    correction), computed here by hand."""
    design = C.NominalDesign.make()
    z0 = np.array([0.05, 0.02, -0.1, 0.3])
    s = LinearSession(design, z0)
    ctl = L.ModelFilterMPC(s, design, 0.04, delay=2, signals=SIGNALS, blend=0.5, ramp=1)
    obs = np.zeros(L.OBS_HEAD)
    obs[:2] = [0.01, -0.02]
    ctl.step(obs)  # tick 0: the blend is ramped in from 0
    obs[:2] = [0.02, -0.01]
    obs[2] = float(ctl.action[0])
    f = ctl.filter
    xhat = f.xhat + design.l @ (obs[:2] - f.c @ f.xhat)  # the filter's update at tick 1
    z = xhat.copy()
    for u in f.issued[1:] + [float(ctl.action[0])]:
        z = design.a @ z + design.b[:, 0] * u
    u = float(ctl.step(obs)[0])
    a, b = design.a, design.b[:, 0]
    z2 = a @ (a @ z0)
    ref, ref_dot = C.reference(4 * 0.04)
    costs = []
    for c in ctl.cand:
        p3 = (a @ z2 + b * c)[:2]  # the session's positions at t + 3
        zf = a @ z + b * c  # the filter's state at t + 3
        v = zf[2:] + 0.5 * ((p3 - z2[:2]) - (zf[:2] - z[:2])) / 0.04
        st = np.array([p3[0] - ref, p3[1], v[0] - ref_dot, v[1]])
        costs.append(st @ design.s @ st + C.R_COST * c * c)
    assert u == pytest.approx(float(ctl.cand[int(np.argmin(costs))]))
    np.testing.assert_allclose(ctl.costs, costs, rtol=1e-6)


def test_the_learned_controller_refuses_a_model_it_cannot_use():
    design = C.NominalDesign.make()
    s = LinearSession(design, np.zeros(4))
    short = dict(SIGNALS, outputs=[{}] * 4)  # horizon 2: the command acts at 3
    with pytest.raises(ConfigError, match="train with --horizon 3"):
        L.ModelFilterMPC(s, design, 0.04, delay=2, signals=short)
    other = {"inputs": [dict(SIGNALS["inputs"][0]), {"name": "level", "role": "output"}], "outputs": [{}] * 3}
    with pytest.raises(ConfigError, match="needs x,theta"):
        L.ModelFilterMPC(s, design, 0.04, delay=2, signals=other)


def test_forecast_mpc_catches_up_skipped_ticks_with_the_held_command():
    design = C.NominalDesign.make()
    s = LinearSession(design, np.zeros(4))
    ctl = ForecastMPC(
        s, SIGNALS, command="command", candidates=np.linspace(-3, 3, 17), cost=lambda p, t: p[:, 2, 1]
    )
    ctl.step(np.array([0.0, 0.0, 0.0]))
    held = float(ctl.cand[ctl.chosen])
    gap = np.array([[0.1, 0.01], [0.2, 0.02]])  # two skipped ticks, oldest first
    ctl.step(np.array([0.3, 0.03, held]), gap)
    kinds = [e[0] for e in s.log]
    assert kinds == ["peek", "commit", "step", "step", "peek"]
    for entry, y in zip(s.log[2:4], gap):
        assert list(entry[1]) == pytest.approx([held, *y])  # (command, x, theta) of each skipped tick
    assert ctl.t == 4  # one token per plant tick: 0, 1, 2 (skipped), 3


def test_the_sim_holds_the_command_through_skipped_ticks_and_reports_their_measurements():
    plant = C.HiddenCartPole(C.NOMINAL, seed=0)
    sim = L.CartPoleSim(plant, 10)
    sim.observe(0)
    sim.actuate(np.array([2.0]))
    obs = sim.observe(4)  # ticks 1, 2, 3 skipped: the actuator held 2.0
    assert plant.t == 4 and obs[3] == 3 and obs[2] == 2.0
    assert list(sim.commands[:4]) == [2.0, 2.0, 2.0, 2.0]
    assert np.all(obs[L.OBS_HEAD : L.OBS_HEAD + 6] != 0.0)
    sim.actuate(np.array([np.nan]))  # a non-finite action: nothing is pushed
    assert sim.commands[4] == 0.0


class _Flaky:
    """A controller whose every 5th output is NaN (ControlLoop's fallback holds the last good one)."""

    def __init__(self, inner):
        self.inner, self.n = inner, 0

    def step(self, obs):
        self.n += 1
        out = self.inner.step(obs)
        if self.n % 5 == 0:
            out = out.copy()
            out[0] = np.nan
        return out


def test_under_control_loop_a_fallback_is_counted_and_the_filter_learns_what_was_sent():
    design = C.NominalDesign.make()
    plant = C.HiddenCartPole(C.NOMINAL, seed=0)
    inner = L.make_controller("lqg", plant, design)
    r = L.run_episode(_Flaky(inner), plant, 201)  # tick 199's output is NaN: the fallback's
    assert r["fallbacks"] == 40 and r["deadline_misses"] == 0 and r["falls"] == 0
    # what the filter believes is in flight is what the plant has in flight (tick 199: the held
    # command), but for the command of the last tick, which the next observation would correct
    held = r["_sim"].commands[199]
    assert held == r["_sim"].commands[198]
    assert inner.filter.issued[:-1] == pytest.approx(plant.in_flight()[:-1]) == [held]


def test_virtual_time_is_deterministic_and_equals_the_plain_loop():
    """ControlLoop in virtual time changes nothing a controller decides (flush-to-zero aside)."""
    design = C.NominalDesign.make()
    p = L.held_out_draws(1, 3)[0]
    plain = C.HiddenCartPole(p, seed=1)
    ctl = C.LQG(design, plain.dt)
    y = plain.measure()
    for _ in range(300):
        y, _ = plain.step(ctl.step(y))
    runs = []
    for _ in range(2):
        plant = C.HiddenCartPole(p, seed=1)
        runs.append(L.run_episode(L.make_controller("lqg", plant, design), plant, 300))
    assert runs[0]["cost"] == runs[1]["cost"]  # to the bit
    # the same as without the loop, but for the loop's flush-to-zero of subnormals
    assert runs[0]["cost"] == pytest.approx(plain.summary()["cost"], rel=1e-6)


def test_the_verdict_compares_the_mean_costs():
    s = {
        k: {"mean_cost": v}
        for k, v in {"lqg": 0.1, "nominal_mpc": 0.2, "oracle_mpc": 0.01, "memoryless": 0.3}.items()
    }
    v = L.verdict({**s, "model": {"mean_cost": 0.014}})
    assert all(v[f"beats_{k}"]["met"] for k in L.BEATEN) and v["within_oracle"]["met"]
    v = L.verdict({**s, "model": {"mean_cost": 0.016}})
    assert not v["within_oracle"]["met"] and v["within_oracle"]["ratio"] == pytest.approx(1.6)
    assert not L.verdict({**s, "model": {"mean_cost": 0.15}})["beats_lqg"]["met"]


def test_the_tuned_log_policy_balances_every_training_rig_the_nominal_one_drops_some():
    # seed 1 draws a low-gear rig (band 0) among its three: the nominal LQG falls on it, again and again
    tuned = C.log_runs(runs=3, rows=400, seed=1, perturb=0.0)
    assert list(np.unique(tuned["run"])) == [0, 1, 2] and tuned["run"].size == 1200  # no fall
    nominal = C.log_runs(runs=3, rows=400, seed=1, perturb=0.0, policy="nominal")
    assert nominal["run"].size < 1200


def test_a_log_where_every_segment_is_too_short_is_refused():
    with pytest.raises(ConfigError, match="nothing to log"):
        C.log_runs(runs=1, rows=400, seed=0, perturb=0.0, policy="nominal")  # seed 0: a low-gear rig


def test_a_logged_segment_never_spans_a_fall_and_short_ones_are_left_out():
    cols = C.log_runs(runs=2, rows=1000, seed=2, perturb=0.5, hold_max=10)  # a held push: it falls
    run, theta = cols["run"], cols["theta [rad]"]
    ids, counts = np.unique(run, return_counts=True)
    assert ids.size > 2  # more segments than runs
    assert list(ids) != list(range(ids.size))  # a segment was left out (seed 2: one of 8 rows)
    assert counts.min() >= C.MIN_SEGMENT
    assert np.all(np.diff(run) >= 0)
    same = np.diff(run) == 0
    # a fall puts the pole upright again: within a segment the angle never jumps by a fall's size
    assert np.max(np.abs(np.diff(theta))[same]) < C.FALL_RAD


def test_held_out_draws_come_from_the_held_out_bands_and_are_fixed_by_their_seed():
    draws = L.held_out_draws(30, 100)
    assert draws == L.held_out_draws(30, 100)
    for p in draws:
        for name, (lo, hi) in C.RANGES.items():
            assert int((getattr(p, name) - lo) / ((hi - lo) / C.BANDS)) % 2 == 1, (name, p)


def _recording_draws(monkeypatch, module):
    splits: list[str] = []
    real = module.draw_params

    def draw(rng, split):
        splits.append(split)
        return real(rng, split)

    monkeypatch.setattr(module, "draw_params", draw)
    return splits


class _HoldSession(LinearSession):
    """A session of a `train --data` artifact (its manifest carries the signals) predicting that
    the positions stay where they were measured, but for the candidate's push over the third tick
    (the nominal B): with the filter's velocities (blend 0) it balances the training rigs."""

    def __init__(self, design):
        super().__init__(design, np.zeros(4))
        self.artifact = type("A", (), {"manifest": {"source": {"checkpoint_meta": {"signals": SIGNALS}}}})()

    def peek(self, xs):
        self.peek_pending = True
        out = np.zeros((xs.shape[0], 1, 6), np.float32)
        out[:, 0, 4:] = xs[:, 0, :1] * self.design.b[:2, 0]  # [K, 2] deltas at t + 3
        self.log.append(("peek",))
        return out


def test_relogging_runs_the_learned_controller_on_training_draws_only(monkeypatch):
    splits = _recording_draws(monkeypatch, L)
    s = _HoldSession(C.NominalDesign.make())
    cols = L.relog_runs(s, runs=2, rows=150, seed=0, first_run=7, perturb=0.0, blend=0.0)
    assert splits == ["train", "train"]
    assert s.log.count(("reset",)) == 2 and sum(e[0] == "peek" for e in s.log) == 300
    assert list(np.unique(cols["run"])) == [7, 8] and cols["run"].size == 300  # no fall
    assert set(cols) == {"time [s]", "run", "command", "x [m]", "theta [rad]"}
    commits = [e for e in s.log if e[0] == "commit"]
    assert (
        len(commits) == 298
    )  # perturb 0: the plant got the chosen candidate, committed (not the first tick of either run)


def test_the_logs_come_from_training_draws_only(monkeypatch):
    splits = _recording_draws(monkeypatch, C)
    C.log_runs(runs=3, rows=120, seed=0, perturb=0.0)
    assert splits == ["train"] * 3


def test_every_controller_meets_the_same_draws_and_noise():
    """evaluate: draw i's plant noise seed is i for every controller, so a controller's per-draw
    cost equals its own run on HiddenCartPole(draw, seed=i)."""
    draws = L.held_out_draws(2, 100)
    res = L.evaluate({}, draws, 60, controllers=("lqg", "nominal_mpc"))
    design = C.NominalDesign.make()
    for kind in ("lqg", "nominal_mpc"):
        alone = []
        for i, p in enumerate(draws):
            plant = C.HiddenCartPole(p, seed=i)
            alone.append(L.run_episode(L.make_controller(kind, plant, design), plant, 60)["cost"])
        assert res["controllers"][kind]["per_draw_cost"] == pytest.approx(alone, abs=1e-6)
    assert res["episode"]["params"] == draws[0].to_dict()


class _ScaledSession(LinearSession):
    """LinearSession whose candidate acts through `scale` times the nominal B: the actuator of a
    rig whose gear is `scale` times the nominal."""

    def __init__(self, design, scale):
        super().__init__(design, np.zeros(4))
        self.scale = scale

    def peek(self, xs):
        xs = xs.copy()
        xs[:, 0, 0] *= self.scale
        return super().peek(xs)


@pytest.mark.parametrize(("scale", "want"), [(0.6, 0.6), (1.0, 1.0), (10.0, L.GAIN_MAX), (0.05, L.GAIN_MIN)])
def test_the_learned_controller_reads_the_actuator_gain_the_model_shows(scale, want):
    design = C.NominalDesign.make()
    nominal_b = design.b.copy()
    ctl = L.ModelFilterMPC(
        _ScaledSession(design, scale), design, 0.04, delay=2, signals=SIGNALS, gain_rate=0.5
    )
    obs = np.zeros(L.OBS_HEAD)
    ctl.step(obs)
    assert ctl.gain == pytest.approx(1.0 + 0.5 * (want - 1.0), rel=1e-5)  # one low-pass step
    for _ in range(40):
        obs[2] = float(ctl.action[0])
        ctl.step(obs)
    assert ctl.gain == pytest.approx(want, rel=1e-5)
    np.testing.assert_allclose(ctl.b, want * nominal_b[:, 0], rtol=1e-5)  # the candidates' and in-flight B
    np.testing.assert_allclose(ctl.filter.design.b, want * nominal_b, rtol=1e-5)  # the filter's
    np.testing.assert_array_equal(design.b, nominal_b)  # the shared nominal design untouched


def test_with_gain_rate_zero_the_filter_keeps_the_nominal_gain():
    design = C.NominalDesign.make()
    ctl = L.ModelFilterMPC(_ScaledSession(design, 0.6), design, 0.04, delay=2, signals=SIGNALS, gain_rate=0.0)
    for _ in range(5):
        ctl.step(np.zeros(L.OBS_HEAD))
    assert ctl.gain == 1.0 and np.array_equal(ctl.filter.design.b, design.b)
    with pytest.raises(ConfigError, match="gain_rate"):
        L.ModelFilterMPC(_ScaledSession(design, 0.6), design, 0.04, delay=2, signals=SIGNALS, gain_rate=2.0)
