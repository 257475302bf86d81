"""The hidden pendulum (control/plant.py, its filter control/estimation.py) and the `pendulum-hidden`
task (control/task.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tickformer.control.estimation import HiddenEKF
from tickformer.control.plant import (
    BANDS,
    NOMINAL,
    PARAM_RANGES,
    HiddenStepper,
    draw_hidden,
    hidden_episodes,
    hidden_rollout,
    hidden_step,
)
from tickformer.control.task import hidden_ar_angles, hidden_nominal_angles, hidden_prepare
from tickformer.errors import ConfigError
from tickformer.model import preset


def _band(name, value):
    lo, hi = PARAM_RANGES[name]
    return min(BANDS - 1, int((value - lo) / ((hi - lo) / BANDS)))


def test_held_out_constants_never_fall_in_a_training_band():
    rng = np.random.default_rng(0)
    for split, parity in (("train", 0), ("held_out", 1)):
        for _ in range(300):
            p = draw_hidden(rng, split)
            for name in PARAM_RANGES:
                assert _band(name, getattr(p, name)) % 2 == parity, (split, name, getattr(p, name))


def test_scalar_stepper_equals_the_vectorised_step():
    p = draw_hidden(np.random.default_rng(1), "held_out")
    f = HiddenStepper(p)
    for th, om, c in [(0.3, -1.2, 0.7), (-2.0, 0.5, -3.0), (1.0, 0.0, 0.0)]:
        want = hidden_step(np.array([th, om]), c, p)
        got = f.step(th, om, c)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_a_command_first_moves_the_angle_delay_plus_one_ticks_later():
    p = dataclasses.replace(NOMINAL, delay=2)
    base = np.zeros(6)
    kick = base.copy()
    kick[0] = 1.0  # issued at tick 0
    a = hidden_rollout(np.array([0.2, 0.0]), base, p)
    b = hidden_rollout(np.array([0.2, 0.0]), kick, p)
    np.testing.assert_array_equal(a[: p.delay + 1], b[: p.delay + 1])  # theta_0..theta_d unchanged
    assert abs(a[p.delay + 1, 0] - b[p.delay + 1, 0]) > 1e-3  # theta_{d+1} moves


def test_episodes_are_seeded_and_stay_below_the_top():
    a = hidden_episodes(np.random.default_rng(3), 20, 50, "train")
    b = hidden_episodes(np.random.default_rng(3), 20, 50, "train")
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert np.all(np.abs(a[0]) < np.pi)
    noise = a[1] - a[0]
    assert 0.5 * NOMINAL.noise < noise.std() < 1.5 * NOMINAL.noise


def test_ekf_with_the_true_constants_beats_the_raw_measurement():
    rng = np.random.default_rng(4)
    theta, y, cmds, plants = hidden_episodes(rng, 1, 300, "held_out")
    ekf = HiddenEKF(plants[0])
    d = plants[0].delay
    est = []
    for t in range(301):
        applied = cmds[0, t - 1 - d] if t - 1 - d >= 0 else 0.0
        est.append(ekf.update(float(y[0, t]), float(applied))[0])
    err_ekf = np.sqrt(np.mean((np.array(est[50:]) - theta[0, 50:]) ** 2))
    err_raw = np.sqrt(np.mean((y[0, 50:] - theta[0, 50:]) ** 2))
    assert err_ekf < 0.7 * err_raw


def test_prepare_refuses_a_wrong_model_with_the_fix():
    with pytest.raises(ConfigError, match="--preset control-hidden"):
        hidden_prepare(preset("control"), np.random.default_rng(0))


def test_lag_columns_are_the_signals_before_each_tick():
    """A token (y_t, c_t, y_{t-1}, .., c_{t-1}, ..): d_in 2..4 adds the commands in flight, 5..8
    two earlier measurements and up to four earlier commands; 0 before the first tick, every lag
    standardised with its signal's statistics; wider tokens are refused with the fix."""
    from tickformer.control.task import hidden_features, lagged, token_lags

    c = np.array([[0.5, -0.25, 1.0, 0.75]])  # [1, T]
    np.testing.assert_array_equal(lagged(c, 2)[0], [[0, 0], [0.5, 0], [-0.25, 0.5], [1.0, -0.25]])
    base = preset("control-hidden")
    for d_in, lags in ((2, (0, 0)), (4, (0, 2)), (8, (2, 4))):
        data = hidden_prepare(base.replace(d_in=d_in), np.random.default_rng(5), n_train=20, n_test=4)
        y_lags, c_lags = token_lags(data.norm)
        assert (y_lags, c_lags) == lags
        m = data.norm["x_mean"]
        assert m[2 : 2 + y_lags] == [m[0]] * y_lags and m[2 + y_lags :] == [m[1]] * c_lags
        x = hidden_features(data.test_y[:, :8], data.test_cmds[:, :8], data.norm)  # [N, 8, d_in]
        assert x.shape[-1] == d_in
        for j in range(1, y_lags + 1):  # y_{t-j} is the token j before's y
            np.testing.assert_array_equal(x[:, j:, 1 + j], x[:, :-j, 0])
        for j in range(1, c_lags + 1):
            np.testing.assert_array_equal(x[:, j:, 1 + y_lags + j], x[:, :-j, 1])
    with pytest.raises(ConfigError, match="d_in 2 .* up to 4.* or 5 up to 8"):
        hidden_prepare(base.replace(d_in=9), np.random.default_rng(0))


def test_horizon_weights_scale_the_targets():
    """The MSE weighs horizon j by HIDDEN_HORIZON_WEIGHTS[j]: its target is standardised by
    std_j / sqrt(w_j), and that scale is what norm["dy_std"] holds (predictions map back by it)."""
    from tickformer.control.task import HIDDEN_HORIZON_WEIGHTS, _hidden_targets

    data = hidden_prepare(preset("control-hidden"), np.random.default_rng(5), n_train=20, n_test=4)
    raw = _hidden_targets(data.train_theta, data.train_y, data.steps, data.plant.delay).reshape(-1, 3)
    np.testing.assert_allclose(
        np.asarray(data.norm["dy_std"]) * np.sqrt(HIDDEN_HORIZON_WEIGHTS), raw.std(0), rtol=1e-12
    )
    assert HIDDEN_HORIZON_WEIGHTS[-1] > HIDDEN_HORIZON_WEIGHTS[0]  # the decision's horizon weighs most


def test_baselines_predict_far_better_than_holding_the_angle():
    cfg = preset("control-hidden")
    data = hidden_prepare(cfg, np.random.default_rng(5), n_train=60, n_test=20)
    start = cfg.window - 1
    truth = data.test_theta[:, start + 1 : data.steps + 1]
    hold = np.sqrt(np.mean((data.test_y[:, start : data.steps] - truth) ** 2))
    ar = hidden_ar_angles(data, cfg.window)[:, :, 0]
    nominal = hidden_nominal_angles(data, start)[:, :, 0]
    for pred in (ar, nominal):
        assert pred.shape == truth.shape
        assert np.sqrt(np.mean((pred - truth) ** 2)) < 0.7 * hold


@pytest.mark.slow  # trains three models
def test_the_memoryless_twin_is_the_window_1_run_with_the_same_settings():
    """The windowed run's evaluation reuses a window-1 run of this process with the same
    settings as its memoryless baseline (training is deterministic): the reused weights equal a
    fresh training of the twin bit for bit, and other settings are not confused with it."""
    from tickformer.control import task as T
    from tickformer.model.train import TrainSettings, train_steps

    task = T.HIDDEN_TASK
    cfg = preset("control-hidden")
    settings = TrainSettings.for_task(task, steps=3, seed=11)
    T._TWINS.clear()
    params, _, data, *_ = train_steps(task, cfg.replace(window=1), settings)
    T.hidden_evaluate(params, cfg.replace(window=1), data)  # registers the window-1 run
    assert len(T._TWINS) == 1
    data.train_settings = settings
    twin, twin_cfg = T._train_memoryless_twin(cfg, data)
    assert twin_cfg.window == 1 and twin is next(iter(T._TWINS.values()))
    fresh, *_ = train_steps(task, cfg.replace(window=1), settings)
    for name in fresh:
        np.testing.assert_array_equal(twin[name], fresh[name])
    data.train_settings = TrainSettings.for_task(task, steps=3, seed=12)
    other, _ = T._train_memoryless_twin(cfg, data)
    assert other is not twin and len(T._TWINS) == 2
    T._TWINS.clear()


@pytest.mark.slow  # training
def test_an_ssm_model_trains_and_evaluates_on_the_hidden_task():
    """Regression: the evaluation's memoryless twin of an ssm model is the attention network of
    its sizes with window 1 (config.replace(window=1) alone raised ConfigError for block 'ssm')."""
    from tickformer.control import task as T
    from tickformer.model.train import TrainSettings, train

    task = T.HIDDEN_TASK
    cfg = preset("control-hidden").replace(window=None, block="ssm", d_state=4)
    result = train(task, cfg, TrainSettings.for_task(task, steps=2, seed=3))
    held = result.metrics["held_out"]
    assert np.isfinite(held["model_rmse"]) and np.isfinite(held["baselines"]["memoryless"]["rmse"])
    T._TWINS.clear()


@pytest.mark.parametrize("field", ["delay", "substeps"])
def test_a_bool_is_not_an_integer_count(field):
    """True is an int to Python; as a delay or a substep count it is a mistake, refused with the name."""
    with pytest.raises(ConfigError, match=field):
        dataclasses.replace(NOMINAL, **{field: True})
    from tickformer.model.plant import PendulumParams  # the fully observed pendulum

    with pytest.raises(ConfigError, match="substeps"):
        PendulumParams(substeps=True)


def test_episodes_omega_is_the_true_velocity_of_the_same_draws():
    """`omega=True` adds the true angular velocities of the same episodes (the rng consumed as
    without it): replaying an episode's commands from its (theta_0, omega_0) gives back both."""
    a = hidden_episodes(np.random.default_rng(6), 5, 40, "train")
    theta, y, cmds, plants, omega = hidden_episodes(np.random.default_rng(6), 5, 40, "train", omega=True)
    np.testing.assert_array_equal(a[0], theta)
    np.testing.assert_array_equal(a[1], y)
    for i in range(5):
        states = hidden_rollout(np.array([theta[i, 0], omega[i, 0]]), cmds[i], plants[i])  # [41, 2]
        np.testing.assert_allclose(states[:, 0], theta[i], rtol=0, atol=1e-12)
        np.testing.assert_allclose(states[:, 1], omega[i], rtol=0, atol=1e-12)


def test_identifying_model_targets_are_the_state_and_the_constants():
    """d_out = delay + 6: after the horizons, theta_t - y_t, omega_t and the episode's log
    constants, each standardised by its training statistics; the horizons and the episodes are
    those of the horizons-only model (same draws, same norm for its columns)."""
    from tickformer.control.task import (
        HIDDEN_IDENTIFY_OUTPUTS,
        hidden_arrays,
        hidden_horizons,
        hidden_identified,
        hidden_io_widths,
    )

    base = preset("control-hidden")
    plain = hidden_prepare(base, np.random.default_rng(5), n_train=20, n_test=4)
    d_out = hidden_io_widths(NOMINAL, identify=True)[1]
    assert d_out == NOMINAL.delay + 1 + len(HIDDEN_IDENTIFY_OUTPUTS)
    data = hidden_prepare(base.replace(d_out=d_out), np.random.default_rng(5), n_train=20, n_test=4)
    np.testing.assert_array_equal(plain.train_theta, data.train_theta)
    h = NOMINAL.delay + 1
    assert hidden_horizons(data.norm) == h == hidden_horizons(plain.norm)
    assert data.norm["dy_mean"][:h] == plain.norm["dy_mean"] and data.norm["identify"] == list(
        HIDDEN_IDENTIFY_OUTPUTS
    )
    x, target = hidden_arrays(
        data.train_theta, data.train_y, data.train_cmds, data, data.train_omega, data.train_log_coef
    )
    plain_x, plain_target = hidden_arrays(plain.train_theta, plain.train_y, plain.train_cmds, plain)
    np.testing.assert_array_equal(x, plain_x)  # the same inputs: only the targets grow
    np.testing.assert_array_equal(target[..., :h], plain_target)
    got = hidden_identified(target.astype(np.float64), data.norm)  # back to their units
    t = data.steps
    np.testing.assert_allclose(got[..., 0], data.train_theta[:, :t] - data.train_y[:, :t], atol=1e-6)
    np.testing.assert_allclose(got[..., 1], data.train_omega[:, :t], atol=1e-5)
    i = 7
    want = np.log(_train_plants_coefficients(data, i))  # [3]
    np.testing.assert_allclose(got[i, :, 2:], np.broadcast_to(want, (t, 3)), atol=1e-5)
    with pytest.raises(ConfigError, match="no identification outputs"):
        hidden_identified(plain_target, plain.norm)
    with pytest.raises(ConfigError, match="omega and constants"):
        hidden_arrays(data.train_theta, data.train_y, data.train_cmds, data)


def _train_plants_coefficients(data, i):
    """Episode i's (g/L, b/(m L^2), k/(m L^2)) recovered from its own trajectory: the three
    numbers that make one RK4 tick reproduce it (least squares over its ticks), so the test does
    not read the constants the way the code under test does."""
    from tickformer.control.plant import _rk4

    th, om, c = data.train_theta[i], data.train_omega[i], data.train_cmds[i]
    d = NOMINAL.delay
    applied = np.concatenate([np.zeros(d), c])[: c.size]
    h, n = NOMINAL.dt / NOMINAL.substeps, NOMINAL.substeps

    def residual(coef):
        a, b, k = coef
        x = np.stack([th[:-1], om[:-1]], axis=-1)
        nxt = _rk4(x, a, b, k * np.clip(applied, -1, 1), h, n)
        return np.concatenate([nxt[:, 0] - th[1:], nxt[:, 1] - om[1:]])

    from scipy.optimize import least_squares

    return least_squares(residual, x0=np.array(NOMINAL.coefficients), xtol=1e-14, ftol=1e-14).x


def _replayed_references(seed, n, split):
    """loop_episodes' references, from the same draws in its documented order (constants, then
    amplitude, period, phase)."""
    from tickformer.control.plant import LOOP_AMPLITUDE, LOOP_PERIOD_S

    rng = np.random.default_rng(seed)
    for _ in range(n):
        draw_hidden(rng, split)
    amp = rng.uniform(*LOOP_AMPLITUDE, n)
    rate = 2.0 * np.pi / rng.uniform(*LOOP_PERIOD_S, n)
    return amp, rate, rng.uniform(0.0, 2.0 * np.pi, n)


def _off_rule(seed, n, steps, **kw):
    """loop_episodes(default_rng(seed), n, steps, "train", **kw) and, per episode and tick,
    whether its command costs more than the rule's pick (ties within 1e-12: the vectorised and
    the scalar RK4 may differ in the last bits), the cost computed by the controllers' own scalar
    code (control.delayed.rollout through the commands in flight, then control.plant.tracking_cost
    against r(t + d + 1)) on the true state."""
    from tickformer.control.delayed import rollout
    from tickformer.control.plant import LOOP_CANDIDATES, LOOP_KP, LOOP_W_OMEGA, loop_episodes, tracking_cost

    episodes = loop_episodes(np.random.default_rng(seed), n, steps, "train", **kw)
    theta, _, cmds, plants, omega = episodes
    amp, rate, phase = _replayed_references(seed, n, "train")
    cand = np.linspace(-1.0, 1.0, LOOP_CANDIDATES).tolist()
    pred = np.empty((len(cand), 2))
    off = np.zeros((n, steps), dtype=bool)
    for i, p in enumerate(plants):
        d = p.delay
        for t in range(steps):
            flight = [float(cmds[i, t - d + j]) if t - d + j >= 0 else 0.0 for j in range(d)]
            rollout(pred, cand, float(theta[i, t]), float(omega[i, t]), flight, 0, d, HiddenStepper(p))
            when = (t + d + 1) * p.dt
            r = amp[i] * np.sin(rate[i] * when + phase[i])
            r_dot = amp[i] * rate[i] * np.cos(rate[i] * when + phase[i])
            cost = [tracking_cost(p0, p1, r, r_dot, p.dt, LOOP_KP, LOOP_W_OMEGA) for p0, p1 in pred]
            off[i, t] = cost[cand.index(float(cmds[i, t]))] > min(cost) + 1e-12
    return episodes, (amp, rate, phase), off


def test_loop_episodes_follow_the_decision_rule_on_the_true_state():
    """Without exploration every command of a closed-loop training episode is the candidate the
    controllers' own scalar code picks on the true state (`_off_rule`): the vectorised generator
    and the loop agree on the rule, the delay and the reference's timing."""
    n, steps = 6, 30
    (theta, y, cmds, plants, omega), (amp, rate, phase), off = _off_rule(7, n, steps, explore=0.0)
    assert theta.shape == y.shape == omega.shape == (n, steps + 1) and cmds.shape == (n, steps)
    assert not off.any(), np.argwhere(off)
    # tracked: the angle follows the sine within a fraction of its amplitude after the start
    when = np.arange(steps + 1) * plants[0].dt
    ref = amp[:, None] * np.sin(rate[:, None] * when[None, :] + phase[:, None])
    assert np.sqrt(np.mean((theta[:, 10:] - ref[:, 10:]) ** 2)) < 0.5 * amp.mean()


def test_loop_episodes_explore_at_their_share():
    """With the default exploration a share LOOP_EXPLORE of ticks draw a random candidate; one in
    LOOP_CANDIDATES of those is the rule's own pick, so about LOOP_EXPLORE * 16/17 of the
    commands differ from the rule's."""
    from tickformer.control.plant import LOOP_CANDIDATES, LOOP_EXPLORE

    n, steps = 40, 30
    off = _off_rule(8, n, steps)[2]
    want = LOOP_EXPLORE * (LOOP_CANDIDATES - 1) / LOOP_CANDIDATES * n * steps  # 113 of 1200
    assert 0.6 * want < off.sum() < 1.4 * want  # binomial sd ~10: a wide, seed-fixed margin


def test_training_episodes_mix_loop_and_random_commands(monkeypatch):
    """LOOP_SHARE of the episodes are closed-loop ones (their commands on the candidates' grid; a
    random-command episode's are uniform in [-1, 1], never on it), the rest the random-command
    recipe; with LOOP_SHARE 0 the draws are exactly that recipe's (`_open_episodes`, the same
    random numbers)."""
    import tickformer.control.plant as P

    theta, y, cmds, plants = hidden_episodes(np.random.default_rng(9), 200, 20, "train")
    grid = np.linspace(-1.0, 1.0, P.LOOP_CANDIDATES)
    on_grid = np.all(np.isclose(cmds[..., None], grid).any(-1), axis=1)  # [200]
    assert abs(on_grid.sum() - P.LOOP_SHARE * 200) <= 20  # redrawn episodes shift the count a little
    assert on_grid[
        : int((1 - P.LOOP_SHARE) * 200) - 20
    ].any()  # shuffled: unshuffled, the open ones come first
    monkeypatch.setattr(P, "LOOP_SHARE", 0.0)
    a = P._draw_episodes(np.random.default_rng(10), 12, 20, "train", NOMINAL, 8)
    b = P._open_episodes(np.random.default_rng(10), 12, 20, "train", NOMINAL, 8)
    for u, v in zip(a[:3] + a[4:], b[:3] + b[4:]):
        np.testing.assert_array_equal(u, v)
    assert a[3] == b[3]
