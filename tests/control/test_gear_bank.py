"""The gear bank (control/gear_bank.py): its grid lies in the training bands, its innovation
covariance is the filter's, and on a plant with a low gear its weight concentrates on the nearest
grid gear (a bank whose likelihood has its sign flipped, or ignores the commands, does not); in the
learned controller (kind "model" of control/cartpole_loop.py) it does the same and its weighted B is
the controller's input gain, while kind "model_nominal_filter" keeps the nominal filter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the plant extra (gymnasium[mujoco]) is not installed")
pytest.importorskip("mujoco", reason="the plant extra (gymnasium[mujoco]) is not installed")

from tickformer.control import cartpole as C  # noqa: E402
from tickformer.control import gear_bank as G  # noqa: E402
from tickformer.errors import ConfigError  # noqa: E402


def test_the_grid_covers_the_training_bands_only():
    grid = G.training_gear_grid()
    assert grid == (55.0, 62.5, 70.0, 85.0, 92.5, 100.0, 115.0, 122.5, 130.0)
    lo, hi = C.RANGES["gear"]
    width = (hi - lo) / C.BANDS
    for g in grid:
        band = min(int((g - lo) / width), C.BANDS - 1)
        on_edge = abs((g - lo) / width - round((g - lo) / width)) < 1e-9
        assert band % 2 == 0 or on_edge  # inside a training band, or on its edge


def test_the_innovation_covariance_is_the_filters():
    from scipy.linalg import solve_discrete_are

    d = G.bank_designs((70.0, 100.0))[0]
    c = np.eye(2, 4)
    v = np.eye(2) * C.NOMINAL.noise**2
    p = solve_discrete_are(d.a.T, c.T, np.diag([1e-6, 1e-6, 1e-4, 1e-4]), v)  # NominalDesign.make's
    np.testing.assert_allclose(G.innovation_cov(d), c @ p @ c.T + v, rtol=1e-9)


def _rig(gear: float, ticks: int, seed: int = 1):
    """A plant with `gear` driven by the rig's own LQG (its true physics) plus a white
    perturbation: per tick, what the plant measured and the command it was then sent."""
    params = dataclasses.replace(C.NOMINAL, gear=gear)
    plant = C.HiddenCartPole(params, seed=seed)
    rig = C.LQG(C.NominalDesign.make(params), plant.dt)
    rng = np.random.default_rng(seed)
    y = plant.measure()
    for _ in range(ticks):
        c = min(C.COMMAND_LIMIT, max(-C.COMMAND_LIMIT, rig.step(y) + float(rng.normal(0.0, 0.3))))
        rig.issued[-1] = c
        yield y, c
        y, _ = plant.step(c)


def _run(bank: G.GearBank, gear: float, ticks: int, seed: int = 1) -> list[np.ndarray]:
    """The bank fed what the rig's plant measured and was sent (`_rig`): its weights per tick."""
    out = []
    for y, c in _rig(gear, ticks, seed):
        bank.estimate(y)
        bank._advance(c)
        out.append(bank.weights.copy())
    return out


N_TICKS = 60  # the weight is on the nearest grid gear from here on


@pytest.mark.parametrize("gear", [57.0, 72.0])
def test_a_low_gear_is_identified_within_n_ticks(gear):
    grid = G.training_gear_grid()
    nearest = int(np.argmin(np.abs(np.asarray(grid) - gear)))
    bank = G.GearBank(G.bank_designs(grid), 2)
    w = np.array(_run(bank, gear, 300))  # [ticks, M]
    assert np.all(np.argmax(w[N_TICKS:], axis=1) == nearest)
    assert np.median(w[N_TICKS:, nearest]) > 0.8
    # the bank's B is the weighted one, so the controller's input gain is the low gear's
    b = bank.b_mix[:2] / G.bank_designs(grid)[grid.index(100.0)].b[:2, 0]  # against the nominal gear's
    assert b == pytest.approx([grid[nearest] / 100.0] * 2, abs=0.1)


class _SignFlipped(G.GearBank):
    """A mutant: each filter weighted by the inverse of its likelihood (S^-1 negated: the
    log-likelihood's quadratic term changes sign; its log-determinant, shared, cancels)."""

    def estimate(self, y):
        self.s_inv = -self.s_inv
        try:
            return super().estimate(y)
        finally:
            self.s_inv = -self.s_inv


class _CommandBlind(G.GearBank):
    """A mutant: the filters' time update without the command (B u dropped), so nothing tells
    the gears apart."""

    def _advance(self, command):
        bs, self.bs = self.bs, np.zeros_like(self.bs)
        try:
            super()._advance(command)
        finally:
            self.bs = bs


def test_the_mutant_that_ignores_the_commands_is_not_identified():
    grid = G.training_gear_grid()
    nearest = int(np.argmin(np.abs(np.asarray(grid) - 72.0)))
    w = np.array(_run(_CommandBlind(G.bank_designs(grid), 2), 72.0, 300))
    assert not np.all(np.argmax(w[N_TICKS:], axis=1) == nearest)


def test_the_mutant_with_the_likelihoods_sign_flipped_is_not_identified():
    grid = G.training_gear_grid()
    nearest = int(np.argmin(np.abs(np.asarray(grid) - 72.0)))
    w = np.array(_run(_SignFlipped(G.bank_designs(grid), 2), 72.0, 300))
    assert not np.all(np.argmax(w[N_TICKS:], axis=1) == nearest)


def test_the_floor_lets_a_filter_come_back_and_the_bank_refuses_bad_settings():
    grid = (70.0, 130.0)
    bank = G.GearBank(G.bank_designs(grid), 2, floor=1e-3)
    _run(bank, 130.0, 150)
    assert bank.weights[1] > 0.99 and bank.weights[0] >= 0.99e-3
    w = np.array(_run(bank, 70.0, 150))  # the actuator changes: the floored filter comes back
    assert w[-1, 0] > 0.9
    with pytest.raises(ConfigError, match="floor"):
        G.GearBank(G.bank_designs(grid), 2, floor=0.6)
    with pytest.raises(ConfigError, match="at least 2"):
        G.GearBank(G.bank_designs(grid)[:1], 2)
    other_mass = C.NominalDesign.make(dataclasses.replace(C.NOMINAL, pole_mass=8.0))
    with pytest.raises(ConfigError, match="more than B"):  # the bank shares one A and L
        G.GearBank((*G.bank_designs(grid), other_mass), 2)


# the bank in the learned controller (control/cartpole_loop.py: kind "model", ModelFilterMPC(bank=True))

from _cartpole_signals import SIGNALS  # noqa: E402


class _StillSession:
    """A forecast session of a `train --data` artifact predicting that the positions stay where
    they were measured (the controller's positions; its velocities are the filter's)."""

    batch = C.CANDIDATES

    def __init__(self) -> None:
        self.peek_pending = False
        self.artifact = type("A", (), {"manifest": {"source": {"checkpoint_meta": {"signals": SIGNALS}}}})()

    def reset(self) -> None:
        pass

    def peek(self, xs: np.ndarray) -> np.ndarray:
        self.peek_pending = True
        return np.zeros((xs.shape[0], 1, 6), np.float32)

    def commit(self, i: int) -> None:
        self.peek_pending = False

    def step(self, x: np.ndarray) -> np.ndarray:
        self.peek_pending = False
        return np.zeros((x.shape[0], 1, 6), np.float32)


def _drive(ctl, gear: float, ticks: int, seed: int = 1) -> list[np.ndarray]:
    """The learned controller stepped on the rig's plant (`_rig`; what the plant got is the
    observation's actuated command, as under ControlLoop's fallback): the bank's weights per tick."""
    from tickformer.control import cartpole_loop as L

    obs, last, out = np.zeros(L.OBS_HEAD), 0.0, []
    for y, c in _rig(gear, ticks, seed):
        obs[0], obs[1], obs[2] = y[0], y[1], last
        ctl.step(obs)
        last = c
        out.append(ctl.bank.weights.copy())
    return out


def test_the_learned_controller_identifies_a_low_gear_with_its_bank():
    from tickformer.control import cartpole_loop as L

    plant = C.HiddenCartPole(C.NOMINAL)
    ctl = L.make_controller("model", plant, C.NominalDesign.make(), _StillSession())
    assert isinstance(ctl.filter, G.GearBank) and ctl.filter is ctl.bank
    assert ctl.blend == L.BANK_BLEND == 0.0
    grid = G.training_gear_grid()
    nearest = grid.index(70.0)
    w = np.array(_drive(ctl, 72.0, 300))
    assert np.all(np.argmax(w[N_TICKS:], axis=1) == nearest)
    assert np.median(w[N_TICKS:, nearest]) > 0.8
    assert ctl.gear == pytest.approx(70.0, abs=5.0)
    assert ctl.b is ctl.bank.b_mix  # the candidates' and in-flight input gain is the bank's
    nominal = C.NominalDesign.make().b[:2, 0]
    assert ctl.b[:2] / nominal == pytest.approx([70.0 / 100.0] * 2, abs=0.1)


def test_the_nominal_filter_kind_keeps_the_nominal_filter():
    from tickformer.control import cartpole_loop as L

    design = C.NominalDesign.make()
    plant = C.HiddenCartPole(C.NOMINAL)
    ctl = L.make_controller("model_nominal_filter", plant, design, _StillSession())
    assert isinstance(ctl.filter, C.LQG) and ctl.bank is None and ctl.gear is None and ctl.blend == L.BLEND
    np.testing.assert_array_equal(ctl.b, design.b[:, 0])
    with pytest.raises(ConfigError, match="bank=True"):
        L.ModelFilterMPC(_StillSession(), design, 0.04, delay=2, gain_rate=0.05, bank=True)
