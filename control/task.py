"""The control demo's training task, `pendulum-hidden`: predict the hidden pendulum's angle
1..delay+1 ticks ahead (and, for an identifying model, its state and constants) from the stream
of noisy angles and commands, with the held-out baselines a control engineer would compare
against: the same network without memory (window 1), a linear AR model and nominal physics with
an extended Kalman filter.

The episodes come from `tickformer.control.plant` (random-command and closed-loop episodes, the
constants of held-out episodes from bands no training episode visits); the features, targets and
their standardisation (`hidden_features`, `hidden_predictions`, `hidden_identified`) are the
contract between a trained model and the controllers of `tickformer.control.delayed`, and go
into the checkpoint's meta (`norm`). Registered for `tickformer train --task pendulum-hidden` by
the CLI beside the tasks of `tickformer.model.tasks`. Nothing here is real-time safe.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tickformer.errors import ConfigError
from tickformer.model.config import Config
from tickformer.model.grad import Batch
from tickformer.model.tasks import PENDULUM_MIN_STEPS, Task, TaskHooks
from tickformer.model.train import TrainSettings, train_steps
from tickformer.model.transformer import forward

from .estimation import HiddenEKF
from .plant import NOMINAL, PARAM_RANGES, HiddenPendulum, HiddenStepper, hidden_episodes

Params = dict[str, np.ndarray]

# ---------------------------------------------------------------------------------------------
# pendulum-hidden
# ---------------------------------------------------------------------------------------------

# Episodes are max_len ticks (the training sequence length) plus the `delay + 1` ticks of future
# the last position's targets need. Transition counts are fixed, not episode counts.
HIDDEN_TRAIN_TRANSITIONS = 1_000_000  # 15,625 episodes of 64 ticks: constants enough to learn to identify
HIDDEN_HELD_OUT_TRANSITIONS = 16_000
HIDDEN_HISTORY = 16  # baseline history (and first scored position + 1) for a model without a window
# Loss weight of each horizon theta_{t+1..t+delay+1} (docs/control.md "Data, seeded"): the
# controller decides on theta_{t+delay+1}, whose dependence on the command issued at t is the
# small signal identification has to get right. Applied by scaling: horizon j's target is
# standardised by dy_std_j / sqrt(w_j), so the MSE weighs it by w_j (norm["dy_std"] is that scale).
HIDDEN_HORIZON_WEIGHTS = (0.2, 1.0, 2.0)
# Optional identification outputs after the horizons (a model whose d_out has these 5 more
# columns, `hidden_io_widths(identify=True)`): the plant's state at t and its constants, in the
# coordinates the dynamics use. A controller can run a filter with the identified constants
# (control.delayed.IdentifiedMPC); each is standardised by its training std (loss weight 1).
HIDDEN_CONSTANTS = ("g/L", "b/(m L^2)", "k/(m L^2)")  # control.plant HiddenPendulum.coefficients, in order
HIDDEN_IDENTIFY_OUTPUTS = ("theta_t - y_t", "omega_t") + tuple(f"log {c}" for c in HIDDEN_CONSTANTS)


HIDDEN_Y_LAGS = (
    2  # earlier measurements in a token (y_{t-1}, y_{t-2}): velocity and curvature are linear in them
)
HIDDEN_C_LAGS_MAX = (
    2 * NOMINAL.delay
)  # earlier commands in a token: at most the in-flight ones and as many more


def hidden_io_widths(
    plant: HiddenPendulum = NOMINAL, y_lags: int = 0, c_lags: int = 0, *, identify: bool = False
) -> tuple[int, int]:
    """(d_in, d_out) of a `pendulum-hidden` model: a token (y_t, c_t, y_{t-1..t-y_lags},
    c_{t-1..t-c_lags}); outputs theta_{t+1..t+delay+1}, then with `identify` the
    HIDDEN_IDENTIFY_OUTPUTS (the state at t and the constants)."""
    return 2 + y_lags + c_lags, plant.delay + 1 + (len(HIDDEN_IDENTIFY_OUTPUTS) if identify else 0)


def hidden_horizons(norm: dict[str, Any]) -> int:
    """How many of a model's output columns are horizons theta_{t+1..}: all but its norm's
    identification outputs (norm["identify"], absent on a horizons-only model)."""
    return len(norm["dy_mean"]) - len(norm.get("identify", ()))


def token_lags(norm: dict[str, Any]) -> tuple[int, int]:
    """(measurement lags, command lags) of a token standardised by `norm` (its "lags" entry;
    a norm without one is the plain (y_t, c_t) token, or commands only after it)."""
    if "lags" in norm:
        y_lags, c_lags = norm["lags"]
        return int(y_lags), int(c_lags)
    return 0, len(norm["x_mean"]) - 2


def lagged(v: np.ndarray, lags: int) -> np.ndarray:
    """v [..., T] -> [..., T, lags]: v_{t-1}, ..., v_{t-lags}, 0 before the first tick (the plant
    starts at rest with no command in flight)."""
    cols = []
    for j in range(1, lags + 1):
        shifted = np.zeros_like(v)  # [..., T]
        shifted[..., j:] = v[..., :-j]
        cols.append(shifted)
    return np.stack(cols, axis=-1) if cols else np.zeros(v.shape + (0,), v.dtype)


def hidden_features(y: np.ndarray, cmds: np.ndarray, norm: dict[str, Any]) -> np.ndarray:
    """Model inputs from raw signals: measured angles y [..., T], commands c [..., T] -> [..., T,
    2 + y_lags + c_lags] float32, the token (y_t, c_t, y_{t-1}, .., c_{t-1}, ..) (`token_lags`),
    standardised with the training statistics in norm (every lag with its signal's)."""
    y_lags, c_lags = token_lags(norm)
    raw = np.concatenate(
        [y[..., None], cmds[..., None], lagged(y, y_lags), lagged(cmds, c_lags)], axis=-1
    )  # [..., T, 2 + y_lags + c_lags]
    return ((raw - np.asarray(norm["x_mean"])) / np.asarray(norm["x_std"])).astype(np.float32)


def hidden_predictions(y_now: np.ndarray | float, out: np.ndarray, norm: dict[str, Any]) -> np.ndarray:
    """Model outputs [..., d_out] to predicted angles theta_{t+1..t+delay+1} [..., delay + 1]:
    y_t + mean + std * out over the horizon columns (`hidden_horizons`; the rest are identification)."""
    h = hidden_horizons(norm)
    return y_now + np.asarray(norm["dy_mean"][:h]) + np.asarray(norm["dy_std"][:h]) * out[..., :h]


def hidden_identified(out: np.ndarray, norm: dict[str, Any]) -> np.ndarray:
    """Model outputs [..., d_out] of an identifying model to its HIDDEN_IDENTIFY_OUTPUTS [..., 5]
    in their own units (theta_t - y_t rad, omega_t rad/s, the log constants): mean + std * out."""
    h = hidden_horizons(norm)
    if h == len(norm["dy_mean"]):
        raise ConfigError("this model has no identification outputs; train it with d_out = delay + 6")
    return np.asarray(norm["dy_mean"][h:]) + np.asarray(norm["dy_std"][h:]) * out[..., h:]


@dataclass
class HiddenData:
    """Episodes of the hidden pendulum (control.plant): true angles theta [N, T + delay + 1],
    measured y (same shape), issued commands [N, T + delay]; T = the training sequence length."""

    train_theta: np.ndarray
    train_y: np.ndarray
    train_cmds: np.ndarray
    test_theta: np.ndarray
    test_y: np.ndarray
    test_cmds: np.ndarray
    test_plants: list[HiddenPendulum]
    norm: dict[str, list[float]]
    plant: HiddenPendulum
    steps: int  # T
    train_settings: Any = None  # the run's TrainSettings (model.train sets it): the twin's too
    # an identifying model's extra targets (None otherwise): true omega [N, T + delay + 1] and
    # the log constants log (g/L, b/(m L^2), k/(m L^2)) [N, 3] of every episode
    train_omega: np.ndarray | None = None
    train_log_coef: np.ndarray | None = None
    test_omega: np.ndarray | None = None
    test_log_coef: np.ndarray | None = None

    @property
    def identify(self) -> bool:
        return self.train_omega is not None


def _hidden_targets(theta: np.ndarray, y: np.ndarray, steps: int, delay: int) -> np.ndarray:
    """theta_{t+j} - y_t for j = 1..delay+1 at t < steps: [N, steps, delay + 1]."""
    return np.stack([theta[:, j : j + steps] - y[:, :steps] for j in range(1, delay + 2)], axis=-1)


def _identify_targets(
    theta: np.ndarray, y: np.ndarray, omega: np.ndarray, log_coef: np.ndarray, steps: int
) -> np.ndarray:
    """HIDDEN_IDENTIFY_OUTPUTS at t < steps: [N, steps, 5] (theta_t - y_t, omega_t, the episode's
    three log constants at every t)."""
    n = theta.shape[0]
    return np.concatenate(
        [
            (theta[:, :steps] - y[:, :steps])[..., None],
            omega[:, :steps, None],
            np.broadcast_to(log_coef[:, None, :], (n, steps, log_coef.shape[-1])),
        ],
        axis=-1,
    )


def _log_coefficients(plants: list[HiddenPendulum]) -> np.ndarray:
    return np.log(np.array([p.coefficients for p in plants], dtype=np.float64))  # [N, 3]


def hidden_prepare(
    config: Config,
    rng: np.random.Generator,
    *,
    n_train: int | None = None,
    n_test: int | None = None,
) -> HiddenData:
    """Training episodes (every constant from the even bands of its range) and held-out episodes
    (odd bands; control.plant.draw_hidden), config.max_len ticks each, all from rng (the training
    seed's data stream); both mixed alike, closed-loop and random-command episodes
    (control.plant.hidden_episodes, LOOP_SHARE)."""
    y_lags = HIDDEN_Y_LAGS if config.d_in > 2 + NOMINAL.delay else 0
    c_lags = config.d_in - 2 - y_lags
    identify = config.d_out == hidden_io_widths(NOMINAL, identify=True)[1]
    d_in, d_out = hidden_io_widths(NOMINAL, y_lags, max(0, c_lags), identify=identify)
    if (
        config.arch != "decoder"
        or config.inputs != "continuous"
        or not 0 <= c_lags <= HIDDEN_C_LAGS_MAX
        or (config.d_in, config.d_out) != (d_in, d_out)
    ):
        raise ConfigError(
            f"task 'pendulum-hidden' needs a decoder-only continuous model with d_out {NOMINAL.delay + 1} (angles "
            f"1..{NOMINAL.delay + 1} ticks ahead, or {NOMINAL.delay + 1 + len(HIDDEN_IDENTIFY_OUTPUTS)} with the "
            f"state and constants after them) and d_in 2 (y, command) up to {2 + NOMINAL.delay} (and the commands "
            f"in flight), or {3 + NOMINAL.delay} up to {2 + HIDDEN_Y_LAGS + HIDDEN_C_LAGS_MAX} "
            f"(and {HIDDEN_Y_LAGS} earlier measurements, more earlier commands); use --preset control-hidden "
            f"(got {config.arch}, {config.inputs}, d_in {config.d_in}, d_out {config.d_out})"
        )
    steps = config.max_len
    if steps < PENDULUM_MIN_STEPS:
        raise ConfigError(
            f"task 'pendulum-hidden' needs max_len >= {PENDULUM_MIN_STEPS} (got {config.max_len})"
        )
    n_train = max(8, HIDDEN_TRAIN_TRANSITIONS // steps) if n_train is None else n_train
    n_test = max(4, HIDDEN_HELD_OUT_TRANSITIONS // steps) if n_test is None else n_test
    extra = NOMINAL.delay + 1
    tr_theta, tr_y, tr_c, tr_plants, tr_omega = hidden_episodes(
        rng, n_train, steps + extra - 1, "train", NOMINAL, omega=True
    )
    te_theta, te_y, te_c, te_plants, te_omega = hidden_episodes(
        rng, n_test, steps + extra - 1, "held_out", NOMINAL, omega=True
    )
    x = np.stack([tr_y[:, :steps], tr_c[:, :steps]], axis=-1).reshape(-1, 2)  # [N*T, 2]
    dy = _hidden_targets(tr_theta, tr_y, steps, NOMINAL.delay).reshape(-1, extra)  # [N*T, d+1]
    x_mean, x_std = x.mean(0).tolist(), x.std(0).tolist()
    weights = np.asarray(HIDDEN_HORIZON_WEIGHTS, dtype=np.float64)  # [d + 1]
    norm = {  # the lag columns standardised as their signal
        "x_mean": x_mean + x_mean[:1] * y_lags + x_mean[1:] * c_lags,
        "x_std": x_std + x_std[:1] * y_lags + x_std[1:] * c_lags,
        "lags": [y_lags, c_lags],
        "dy_mean": dy.mean(0).tolist(),
        "dy_std": (
            dy.std(0) / np.sqrt(weights)
        ).tolist(),  # [d + 1] the loss weights (HIDDEN_HORIZON_WEIGHTS)
    }
    data = HiddenData(tr_theta, tr_y, tr_c, te_theta, te_y, te_c, te_plants, norm, NOMINAL, steps)
    if identify:
        data.train_omega, data.train_log_coef = tr_omega, _log_coefficients(tr_plants)
        data.test_omega, data.test_log_coef = te_omega, _log_coefficients(te_plants)
        ident = _identify_targets(tr_theta, tr_y, tr_omega, data.train_log_coef, steps).reshape(
            -1, len(HIDDEN_IDENTIFY_OUTPUTS)
        )
        norm["dy_mean"] = norm["dy_mean"] + ident.mean(0).tolist()
        norm["dy_std"] = norm["dy_std"] + ident.std(0).tolist()  # loss weight 1 each
        norm["identify"] = list(HIDDEN_IDENTIFY_OUTPUTS)
    return data


def hidden_arrays(
    theta: np.ndarray,
    y: np.ndarray,
    cmds: np.ndarray,
    data: HiddenData,
    omega: np.ndarray | None = None,
    log_coef: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Episodes -> (x [N, T, d_in], standardised targets [N, T, d_out]) float32; an identifying
    model's targets need the episodes' omega and log constants too."""
    t, norm = data.steps, data.norm
    x = hidden_features(y[:, :t], cmds[:, :t], norm)  # [N, T, d_in]
    raw = _hidden_targets(theta, y, t, data.plant.delay)  # [N, T, d + 1]
    if data.identify:
        if omega is None or log_coef is None:
            raise ConfigError("an identifying model's targets need the episodes' omega and constants")
        raw = np.concatenate([raw, _identify_targets(theta, y, omega, log_coef, t)], axis=-1)
    target = (raw - np.asarray(norm["dy_mean"])) / np.asarray(norm["dy_std"])
    return x, target.astype(np.float32)


def hidden_batch(data: HiddenData, rng: np.random.Generator, batch_size: int) -> Batch:
    """batch_size training episodes, drawn with replacement."""
    idx = rng.integers(0, data.train_theta.shape[0], size=batch_size)
    extra = (data.train_omega[idx], data.train_log_coef[idx]) if data.identify else (None, None)  # type: ignore[index]
    x, target = hidden_arrays(data.train_theta[idx], data.train_y[idx], data.train_cmds[idx], data, *extra)
    return Batch(x=x, target=target)


def hidden_model_angles(params: Params, config: Config, data: HiddenData) -> np.ndarray:
    """Predicted theta_{t+1..t+delay+1} of the held-out episodes [N, T, delay + 1] (rad)."""
    out = hidden_test_outputs(params, config, data)  # [N, T, d_out]
    return hidden_predictions(data.test_y[:, : data.steps, None], out, data.norm)


def hidden_test_features(data: HiddenData) -> np.ndarray:
    """The held-out episodes' model inputs [N, T, d_in] float32 (`hidden_features`)."""
    return hidden_features(data.test_y[:, : data.steps], data.test_cmds[:, : data.steps], data.norm)


def hidden_test_outputs(params: Params, config: Config, data: HiddenData) -> np.ndarray:
    """The model's raw (standardised) outputs on the held-out episodes [N, T, d_out] float64."""
    return forward(params, config, hidden_test_features(data)).astype(np.float64)


def hidden_ar_angles(data: HiddenData, order: int) -> np.ndarray:
    """Least-squares linear AR over the last `order` (y, c) pairs plus a constant, fitted on the
    training episodes, one output per horizon; held-out predictions at t >= order - 1 as
    [N, T - order + 1, delay + 1] (rad)."""

    def lagged(y: np.ndarray, c: np.ndarray) -> np.ndarray:
        t = data.steps
        z = np.stack([y[:, :t], c[:, :t]], axis=-1)  # [N, T, 2]
        cols = [z[:, order - 1 - j : t - j] for j in range(order)]  # each [N, T - order + 1, 2]
        return np.concatenate(cols + [np.ones(cols[0].shape[:-1] + (1,))], axis=-1)

    a = lagged(data.train_y, data.train_cmds)
    target = _hidden_targets(data.train_theta, data.train_y, data.steps, data.plant.delay)[:, order - 1 :]
    coef, *_ = np.linalg.lstsq(a.reshape(-1, a.shape[-1]), target.reshape(-1, target.shape[-1]), rcond=None)
    return data.test_y[:, order - 1 : data.steps, None] + lagged(data.test_y, data.test_cmds) @ coef


def hidden_nominal_angles(data: HiddenData, start: int) -> np.ndarray:
    """Nominal-physics predictions of the held-out episodes at t >= start: an extended Kalman
    filter with the nominal constants (control.estimation.HiddenEKF) over each episode's measured
    angles and known commands, then the true equations forward with the nominal constants
    through the commands in flight and the one issued at t. [N, T - start, delay + 1]."""
    d, t = data.plant.delay, data.steps
    if start < d:
        raise ConfigError(f"nominal predictor needs start >= {d}")
    n = data.test_y.shape[0]
    f = HiddenStepper(data.plant)
    out = np.zeros((n, t - start, d + 1))
    for e in range(n):
        y, cmds = data.test_y[e].tolist(), data.test_cmds[e].tolist()
        ekf = HiddenEKF(data.plant)
        for s in range(t):
            th, om = ekf.update(y[s], cmds[s - 1 - d] if s - 1 - d >= 0 else 0.0)
            if s >= start:
                for j in range(d + 1):
                    th, om = f.step(th, om, cmds[s - d + j])
                    out[e, s - start, j] = th
    return out


def hidden_evaluate(params: Params, config: Config, data: HiddenData) -> dict[str, Any]:
    """One-step RMSE (rad) of theta_{t+1} on the held-out episodes for the model and, on the same
    positions, its baselines: the memoryless twin (trained here, same network and settings, window
    1), least-squares linear AR over the same history length, and nominal physics. Positions
    t >= H - 1 are scored, H = the window (max_len without one), so every baseline has its full
    history. Also the (delay + 1)-step RMSE, the horizon a command issued now first reaches."""
    window = config.window
    memoryless = window == 1
    history = window if window else min(HIDDEN_HISTORY, config.max_len)
    start = max(history - 1, data.plant.delay)
    truth = np.stack(
        [data.test_theta[:, j : j + data.steps] for j in range(1, data.plant.delay + 2)], axis=-1
    )[:, start:]  # [N, T', d+1]

    def rmse(pred: np.ndarray) -> tuple[float, float]:
        err = pred - truth
        return float(np.sqrt(np.mean(err[..., 0] ** 2))), float(np.sqrt(np.mean(err[..., -1] ** 2)))

    model = rmse(hidden_model_angles(params, config, data)[:, start:])
    result: dict[str, Any] = {
        "held_out_episodes": int(data.test_theta.shape[0]),
        "held_out_constants": (
            "every coordinate in bands 1, 3, 5 of 6 of its range, training in 0, 2, 4 (control.plant)"
        ),
        "scored_positions_per_episode": int(truth.shape[1]),
        "history": history,
        "rmse_units": "rad, against the true (noise-free) angle",
        "model_rmse": model[0],
        f"model_rmse_{data.plant.delay + 1}_step": model[1],
    }
    if memoryless:
        if data.train_settings is not None:
            _TWINS[_twin_key(config, data.train_settings)] = params
        return result
    twin, twin_config = _train_memoryless_twin(config, data)
    ar = hidden_ar_angles(data, history)[:, start - (history - 1) :]
    baselines = {
        "memoryless": rmse(hidden_model_angles(twin, twin_config, data)[:, start:]),
        "linear_ar": rmse(ar),
        "nominal": rmse(hidden_nominal_angles(data, start)),
    }
    result["baselines"] = {
        name: {"rmse": v[0], f"rmse_{data.plant.delay + 1}_step": v[1]} for name, v in baselines.items()
    }
    result["baseline_descriptions"] = {
        "memoryless": "the same network and training settings with window 1 (attention over its own key)",
        "linear_ar": f"least-squares linear AR over the last {history} (y, command) pairs + constant",
        "nominal": (
            f"true equations, nominal constants {NOMINAL.to_dict()}; state from an extended Kalman filter "
            "with the nominal constants over the measured angles (control.estimation.HiddenEKF)"
        ),
    }
    if data.identify:
        result["identification"] = hidden_identification(params, config, data, start)
    ratio = model[0] / baselines["memoryless"][0]
    result["ratio_to_memoryless"] = ratio
    result["target"] = "model_rmse <= 0.5 * memoryless and < linear_ar and < nominal"
    result["target_met"] = bool(
        ratio <= 0.5 and model[0] < baselines["linear_ar"][0] and model[0] < baselines["nominal"][0]
    )
    return result


def hidden_identification(params: Params, config: Config, data: HiddenData, start: int) -> dict[str, Any]:
    """How well an identifying model's state and constants outputs match the truth on the
    held-out episodes, positions t >= start: RMSE of theta_t (rad) and omega_t (rad/s), the RMS
    and the mean of each constant's relative error (identified / true - 1), and the measurement
    noise's RMS for scale (theta_t's error would be it if the model passed y_t through)."""
    assert data.test_omega is not None and data.test_log_coef is not None
    got = hidden_identified(hidden_test_outputs(params, config, data), data.norm)[:, start:]  # [N, T', 5]
    t = data.steps
    theta_err = (data.test_y[:, start:t] + got[..., 0]) - data.test_theta[:, start:t]
    omega_err = got[..., 1] - data.test_omega[:, start:t]
    rel = np.exp(got[..., 2:] - data.test_log_coef[:, None, :]) - 1.0  # [N, T', 3]
    names = HIDDEN_CONSTANTS
    return {
        "theta_rmse": float(np.sqrt(np.mean(theta_err**2))),
        "omega_rmse": float(np.sqrt(np.mean(omega_err**2))),
        "noise_rms": float(np.sqrt(np.mean((data.test_y[:, start:t] - data.test_theta[:, start:t]) ** 2))),
        "constants_relative_error_rms": {
            n: float(np.sqrt(np.mean(rel[..., i] ** 2))) for i, n in enumerate(names)
        },
        "constants_relative_error_mean": {n: float(np.mean(rel[..., i])) for i, n in enumerate(names)},
    }


def _train_memoryless_twin(config: Config, data: HiddenData) -> tuple[Params, Config]:
    """The memoryless baseline: the same config with window 1 (attention over its own key only;
    an ssm model's twin is the attention network of its sizes with window 1), trained with this
    run's settings (`data.train_settings`, set by model.train) on the same training episodes."""
    task = HIDDEN_TASK
    twin = config.replace(block="attention", d_state=0, window=1)
    settings = data.train_settings or TrainSettings.for_task(task)
    key = _twin_key(twin, settings)
    if key not in _TWINS:
        _TWINS[key] = train_steps(task, twin, settings)[0]
    return _TWINS[key], twin


# Memoryless models trained in this process, by (config, settings): training is deterministic, so a
# window-1 run with the same settings (the demo trains it first) is the twin, and is not trained twice.
_TWINS: dict[str, Params] = {}


def _twin_key(config: Config, settings: Any) -> str:
    return json.dumps([config.to_dict(), asdict(settings)], sort_keys=True)


def hidden_meta(data: HiddenData) -> dict[str, Any]:
    return {
        "norm": data.norm,
        "plant": data.plant.to_dict(),
        "param_ranges": {k: list(v) for k, v in PARAM_RANGES.items()},
        "features": ["y (measured angle)", "command"]
        + [f"y {j} tick{'s' if j > 1 else ''} before" for j in range(1, token_lags(data.norm)[0] + 1)]
        + [f"command {j} tick{'s' if j > 1 else ''} before" for j in range(1, token_lags(data.norm)[1] + 1)],
        "outputs": "standardised theta_{t+j} - y_t, j = 1..delay+1: theta = y_t + dy_mean + dy_std * out"
        + (
            "; then " + ", ".join(HIDDEN_IDENTIFY_OUTPUTS) + ": value = dy_mean + dy_std * out"
            if data.identify
            else ""
        ),
        "horizon_weights": list(HIDDEN_HORIZON_WEIGHTS),
        "sequence_length": data.steps,
    }


HIDDEN_TASK = Task(
    name="pendulum-hidden",
    description=(
        "decoder-only continuous: predict a pendulum's angle 1..delay+1 ticks ahead from its noisy-angle and "
        "command stream (unknown per-episode physics, actuator delay)"
    ),
    preset="control-hidden",
    # In-context identification of each episode's constants needs many episodes and steps:
    # 1,500 steps of 8 learnt a slope d theta / d command about the same for every episode
    # (docs/control.md, experiments/control_diagnosis.py).
    settings=TrainSettings(steps=10_000, batch_size=16, warmup=400, ema_decay=0.995),
    hooks=TaskHooks(hidden_prepare, hidden_batch, hidden_evaluate, hidden_meta),
)
