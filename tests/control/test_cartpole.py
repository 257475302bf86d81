"""The MuJoCo plant behind the gymnasium API (control/cartpole.py), its physics baselines, and the
generic forecast MPC (control/forecast_mpc.py) on a fake session whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium", reason="the plant extra (gymnasium[mujoco]) is not installed")
pytest.importorskip("mujoco", reason="the plant extra (gymnasium[mujoco]) is not installed")

from tickformer.control import cartpole as C  # noqa: E402
from tickformer.control.forecast_mpc import ForecastMPC  # noqa: E402
from tickformer.errors import ConfigError  # noqa: E402


def test_the_env_passes_gymnasiums_own_checker():
    from gymnasium.utils.env_checker import check_env

    env = C.HiddenCartPole.env_class()()
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert obs.shape == (2,) and set(info["params"]) >= {"pole_mass", "hinge_damping", "gear"}


def test_held_out_draws_never_share_a_band_with_training_draws():
    rng = np.random.default_rng(0)
    for split, parity in (("train", 0), ("held_out", 1)):
        for _ in range(50):
            p = C.draw_params(rng, split)
            for name, (lo, hi) in C.RANGES.items():
                band = int((getattr(p, name) - lo) / ((hi - lo) / C.BANDS))
                assert band % 2 == parity, (split, name, band)


def test_the_physics_is_set_on_the_mujoco_model_and_the_command_is_delayed():
    p = C.draw_params(np.random.default_rng(1), "held_out")
    plant = C.HiddenCartPole(p, seed=0)
    assert plant.model.body_mass[2] == pytest.approx(p.pole_mass)
    assert plant.model.dof_damping[1] == pytest.approx(p.hinge_damping)
    assert plant.model.actuator_gear[0, 0] == pytest.approx(p.gear)
    twin = C.HiddenCartPole(p, seed=0)  # the same plant, never pushed
    plant.step(3.0)  # issued now: reaches the cart two ticks later
    twin.step(0.0)
    for _ in range(1):
        plant.step(0.0)
        twin.step(0.0)
    np.testing.assert_array_equal(plant.state, twin.state)  # the push has not arrived
    plant.step(0.0)
    twin.step(0.0)
    assert plant.state[2] - twin.state[2] > 1e-3  # the first command acts over the third tick


def test_lqg_balances_the_nominal_plant_and_the_oracle_beats_it_on_a_held_out_one():
    design = C.NominalDesign.make()

    def run(make, params):
        plant = C.HiddenCartPole(params, seed=0)
        ctl = make(plant)
        y = plant.measure()
        for _ in range(400):
            y, _ = plant.step(ctl.step(y))
        return plant.summary()

    nominal = run(lambda pl: C.LQG(design, pl.dt), C.NOMINAL)
    assert nominal["falls"] == 0 and nominal["cost"] < 0.05
    p = C.draw_params(np.random.default_rng(5), "held_out")
    lqg = run(lambda pl: C.LQG(design, pl.dt), p)
    oracle = run(lambda pl: C.PhysicsMPC(design, pl.params, pl.dt, plant=pl), p)
    assert oracle["falls"] == 0 and oracle["cost"] < lqg["cost"]


class _Session:
    """A forecast artifact's session whose prediction is known: y(t+h) - y(t) = h * c * [1, -1]
    (the command pushes the first output up and the second down), peek/commit/step recorded."""

    batch = 3

    def __init__(self):
        self.peek_pending = False
        self.log: list = []

    def peek(self, xs):
        self.peek_pending = True
        self.log.append(("peek", xs[:, 0, 0].copy(), xs[0, 0, 1:].copy()))
        c = xs[:, 0, 0]
        h = np.arange(1, 3)
        out = (h[None, :, None] * c[:, None, None] * np.array([1.0, -1.0])).reshape(3, 1, 4)
        return out.astype(np.float32)

    def commit(self, i):
        self.peek_pending = False
        self.log.append(("commit", i))

    def step(self, x):
        self.peek_pending = False
        self.log.append(("step", x[0, 0].copy()))


SIGNALS = {
    "inputs": [
        {"name": "u", "role": "input"},
        {"name": "a", "role": "output"},
        {"name": "b", "role": "output"},
    ],
    "outputs": [{}] * 4,  # horizon 2 x 2 outputs
}


def test_forecast_mpc_picks_the_cost_minimiser_and_commits_what_the_plant_got():
    s = _Session()
    want = np.array([2.0, -2.0])  # a cost that wants output a at +2, b at -2 two ticks ahead

    def cost(pred, t):
        return np.sum((pred[:, 1, :] - want) ** 2, axis=1)

    ctl = ForecastMPC(s, SIGNALS, command="u", candidates=[-1.0, 0.0, 1.0], cost=cost)
    assert ctl.step(np.array([0.0, 0.0, 0.0])) == 1.0  # 2 * 1 = 2: the candidate 1 reaches it
    assert s.log[0][0] == "peek" and list(s.log[0][1]) == [-1.0, 0.0, 1.0]
    assert ctl.step(np.array([1.0, -1.0, 1.0])) == 0.0  # already at... a 1 -> 2 needs 0.5: 0 is closest
    assert s.log[1] == ("commit", 2)  # the plant got candidate 2's command: committed, no recompute
    ctl.step(np.array([1.0, -1.0, 0.7]))  # a fallback sent 0.7, not the chosen 0.0
    assert s.log[3][0] == "step" and list(s.log[3][1]) == pytest.approx([0.7, 1.0, -1.0])
    assert ctl.replaced == 1


def test_forecast_mpc_refuses_a_wrong_command_column_or_candidate_count():
    with pytest.raises(ConfigError, match="is not an input column"):
        ForecastMPC(_Session(), SIGNALS, command="a", candidates=[0, 1, 2], cost=lambda p, t: p[:, 0, 0])
    with pytest.raises(ConfigError, match="export with --batch 2"):
        ForecastMPC(_Session(), SIGNALS, command="u", candidates=[0, 1], cost=lambda p, t: p[:, 0, 0])
