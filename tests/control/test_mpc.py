"""The controllers and the simulated plant of tickformer.control (used by the demo)."""

import numpy as np

from tickformer.control import ModelMPC, SimulatedPlant, SineReference, TrueMPC


def test_true_mpc_tracks_and_plant_holds_torque_through_skipped_ticks() -> None:
    from tickformer.model.plant import DEFAULT, pendulum_step

    ref = SineReference(amplitude=0.3, period_s=8.0)
    ctl = TrueMPC(17, DEFAULT)
    plant = SimulatedPlant(DEFAULT, ref, n_ticks_max=200)
    for k in range(80):
        plant.actuate(ctl.step(plant.observe(k)))
    assert plant.tracking()["rms_rad"] < 0.02  # ~0.005 rad measured
    # skipped ticks: observe(k) advances the plant with the held torque (zero-order hold)
    p = SimulatedPlant(DEFAULT, ref, n_ticks_max=10)
    p.observe(0)
    p.actuate(np.array([2.0]))
    before = p.state.copy()
    p.observe(4)  # ticks 1..3 were skipped
    expected = before
    for _ in range(3):
        expected = pendulum_step(expected, 2.0, DEFAULT)
    assert np.allclose(p.state, expected) and p.k == 4


def test_model_mpc_reports_broken_predictions_as_non_finite_action() -> None:
    class NaNSession:
        input_shape = (1, 1, 3)
        domain = (-10.0, 10.0)
        y = np.full((1, 1, 2), np.nan, np.float32)

        def reset(self) -> None:
            pass

        def step(self, x):
            return self.y

    norm = {"x_mean": [0, 0, 0], "x_std": [1, 1, 1], "dy_mean": [0, 0], "dy_std": [1, 1]}
    ctl = ModelMPC(17, 4.0, NaNSession(), norm, output_bound=None)
    u = ctl.step(np.array([0.1, 0.0, 0.2, 0.0]))
    assert np.isnan(u[0])  # -> the ControlLoop counts a contract violation and falls back
