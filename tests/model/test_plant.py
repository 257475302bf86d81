"""The pendulum plant: RK4 accuracy, energy behaviour, purity, trajectory generation."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.errors import ConfigError
from tickformer.model.plant import (
    DEFAULT,
    PendulumParams,
    derivative,
    generate_trajectories,
    pendulum_step,
    random_controls,
    simulate,
)


def test_rest_is_an_equilibrium_and_step_is_pure() -> None:
    np.testing.assert_array_equal(pendulum_step(np.zeros(2), 0.0), np.zeros(2))
    state = np.array([1.0, -0.5])
    a = pendulum_step(state, 0.7)
    b = pendulum_step(state, 0.7)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(state, [1.0, -0.5])  # input untouched


def test_batched_step_equals_single_steps() -> None:
    rng = np.random.default_rng(0)
    states = rng.normal(size=(5, 2))
    u = rng.normal(size=5)
    batched = pendulum_step(states, u)
    for i in range(5):
        np.testing.assert_allclose(batched[i], pendulum_step(states[i], u[i]), rtol=0, atol=1e-15)


def test_rk4_converges_at_fourth_order() -> None:
    """Halving the RK4 step divides the one-period error by ~2^4 = 16 (reference: 1024 substeps)."""
    state = np.array([2.0, 1.0])
    ref = pendulum_step(state, 1.5, PendulumParams(substeps=1024))
    errors = [np.abs(pendulum_step(state, 1.5, PendulumParams(substeps=n)) - ref).max() for n in (8, 16, 32)]
    assert errors[0] / errors[1] == pytest.approx(16, rel=0.35)
    assert errors[1] / errors[2] == pytest.approx(16, rel=0.35)
    assert errors[0] < 2e-5  # the default (8 substeps of 50 ms): far below the prediction errors studied


def test_undamped_unforced_pendulum_conserves_energy() -> None:
    params = PendulumParams(damping=0.0)
    controls = np.zeros(50)  # 20 s
    states = simulate(np.array([2.5, 0.0]), controls, params)
    energy = 0.5 * states[:, 1] ** 2 + params.g_over_l * (1 - np.cos(states[:, 0]))
    assert np.abs(energy - energy[0]).max() < 1e-4 * energy[0]  # RK4 at h = 50 ms: ~4e-5 drift in 20 s


def test_damping_dissipates_energy() -> None:
    states = simulate(np.array([2.5, 0.0]), np.zeros(25))
    energy = 0.5 * states[:, 1] ** 2 + DEFAULT.g_over_l * (1 - np.cos(states[:, 0]))
    assert np.all(np.diff(energy) <= 1e-12)
    assert energy[-1] < 0.5 * energy[0]


def test_control_is_saturated() -> None:
    state = np.array([0.3, 0.2])
    np.testing.assert_array_equal(pendulum_step(state, 1e6), pendulum_step(state, DEFAULT.u_max))
    np.testing.assert_array_equal(derivative(state, 0.0)[0], 0.2)


def test_generated_trajectories_are_seeded_and_stay_below_the_top() -> None:
    s1, u1 = generate_trajectories(np.random.default_rng(5), 20, 30)
    s2, u2 = generate_trajectories(np.random.default_rng(5), 20, 30)
    np.testing.assert_array_equal(s1, s2)
    np.testing.assert_array_equal(u1, u2)
    assert s1.shape == (20, 31, 2) and u1.shape == (20, 30)
    assert np.all(np.abs(s1[..., 0]) < np.pi)
    assert np.all(np.abs(u1) <= DEFAULT.u_max)
    np.testing.assert_allclose(s1[:, 1:], pendulum_step(s1[:, :-1], u1), rtol=0, atol=1e-12)


def test_random_controls_are_piecewise_constant() -> None:
    u = random_controls(np.random.default_rng(0), 3, 200, max_hold=10)
    for row in u:
        changes = np.flatnonzero(np.diff(row)) + 1
        runs = np.diff(np.concatenate([[0], changes, [len(row)]]))
        assert runs.max() <= 10 and len(runs) >= 200 // 10


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ConfigError, match="dt"):
        PendulumParams(dt=0.0)
    with pytest.raises(ConfigError, match="substeps"):
        PendulumParams(substeps=0)
    with pytest.raises(ValueError, match=r"shape \[\.\.\., 2\]"):
        pendulum_step(np.zeros(3), 0.0)
