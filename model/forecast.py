"""Training on a user's time series: predict every output 1..H ticks ahead from the history of
inputs and outputs, in the data's own units.

    task = forecast_task(series, horizon=3)                    # series: model.series.TimeSeries
    config = forecast_config(series, horizon=3, window=32)     # d_in = inputs + outputs, d_out = H x outputs
    result = model.train.train(task, config, TrainSettings.for_task(task), out="ckpt")

Token t is (inputs_t, outputs_t) in the file's column order; output t is outputs_{t+1}, ..,
outputs_{t+H} (horizon-major: all outputs at t+1, then at t+2, ...): the form the control demo's
models have, so a model-predictive controller can evaluate candidate inputs at t with
`Session.peek`. Training standardises every column with the training runs' statistics; when it
ends, the standardisation is folded into the model's first and last linear layers
(`fold_standardisation`), so the checkpoint, the exported graphs, the generated C and a Session all
take and return values in the data's units. The checkpoint's meta names every column (name, unit,
order), the per-column ranges and the declared input domain (`input_domain`: the widest column
range widened by DOMAIN_MARGIN on each side, which export writes into the manifest).

Runs are split into training and held-out runs, whole runs only, by a permutation drawn from the
seed's data stream: the split is the same for a seed and is named in metrics.json. A training
sample is `max_len` consecutive ticks of one run (a window never spans two runs). Held-out
metrics: RMSE per output and horizon, in the data's units, of the model and of the baselines of
model/baselines.py (persistence, ARX over the same window, N4SID) at the same positions of the
held-out runs, and which is best. Not real-time code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tickformer.errors import DataError

from . import baselines as B
from .config import Config, preset
from .grad import Batch
from .names import IN_PROJ, OUT_PROJ
from .schedule import TrainSettings
from .series import TimeSeries
from .tasks import Task, TaskHooks
from .transformer import forward

Params = dict[str, np.ndarray]
HELD_OUT_SHARE = 0.2  # of the runs (at least one; at least one left to train on)
DOMAIN_MARGIN = 0.1  # the declared input domain: each range widened by 10% of its width per side
STAT_BATCH = 1 << 16  # rows per batch of the statistics passes
EVAL_ROWS = 100_000  # held-out rows scored in all, at most: an equal share of each run, from its start
DEFAULT_WINDOW = 32
DEFAULT_PRESET = "control-hidden"


@dataclass
class ForecastData:
    series: TimeSeries
    horizon: int
    train_runs: list[tuple[int, int]]
    held_out_runs: list[tuple[int, int]]
    first_rows: np.ndarray  # [R] the first row of each training run's first sample
    sample_ends: np.ndarray  # [R] cumulative count of samples through each training run
    seq_len: int
    mean: np.ndarray  # [C] training runs' statistics (float64)
    std: np.ndarray  # [C]
    delta_mean: np.ndarray  # [H * n_out] of y_{t+h} - y_t over the training samples' targets
    delta_std: np.ndarray  # [H * n_out]
    ranges: np.ndarray  # [C, 2] min, max over all rows
    skipped_runs: int  # training runs shorter than a sample


def forecast_config(
    series: TimeSeries,
    horizon: int,
    *,
    preset_name: str = DEFAULT_PRESET,
    window: int | None = DEFAULT_WINDOW,
    block: str = "attention",
    d_state: int | None = None,
) -> Config:
    """The preset's network with d_in = inputs + outputs and d_out = horizon x outputs; `window`
    sliding-window attention (None: the preset's), or the ssm block."""
    _check_horizon(horizon)
    base = preset(preset_name)
    cfg = base.replace(d_in=len(series.columns), d_out=horizon * len(series.outputs))
    if block == "ssm":
        return cfg.replace(block="ssm", window=None, d_state=d_state or 16)
    if window is not None:
        cfg = cfg.replace(window=window, max_len=max(cfg.max_len, window))
    return cfg


def forecast_task(
    series: TimeSeries,
    *,
    horizon: int = 1,
    held_out: float = HELD_OUT_SHARE,
    steps: int = 3000,
    batch_size: int = 16,
) -> Task:
    """A Task (model.tasks) over `series`: prepare splits the runs and indexes the samples, batch
    draws them, finalize folds the standardisation into the weights, evaluate scores the model and
    the baselines on the held-out runs."""
    _check_horizon(horizon)
    if not 0.0 < held_out < 1.0:
        raise DataError(f"held-out share {held_out!r} must be in (0, 1), e.g. 0.2")
    names = [c.name for c in series.outputs]

    def prepare(config: Config, rng: np.random.Generator) -> ForecastData:
        return _prepare(series, horizon, held_out, config, rng)

    def evaluate(params: Params, config: Config, data: ForecastData) -> dict[str, Any]:
        return _evaluate(params, config, data, names)

    return Task(
        name="data",
        description=f"forecast {', '.join(names)} 1..{horizon} ticks ahead from {series.source.get('data')}",
        preset=DEFAULT_PRESET,
        settings=TrainSettings(
            steps=steps, batch_size=batch_size, warmup=min(400, max(1, steps // 10)), ema_decay=0.995
        ),
        hooks=TaskHooks(prepare, _batch, evaluate, _meta, finalize=fold_standardisation),
    )


def _check_horizon(horizon: int) -> None:
    if not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 1:
        raise DataError(f"--horizon {horizon!r} must be a whole number >= 1 (ticks ahead), e.g. --horizon 3")


# ---------------------------------------------------------------------------------------------
# prepare, batch
# ---------------------------------------------------------------------------------------------


def _prepare(
    series: TimeSeries, horizon: int, share: float, config: Config, rng: np.random.Generator
) -> ForecastData:
    if config.d_in != len(series.columns) or config.d_out != horizon * len(series.outputs):
        raise DataError(
            f"the model has d_in {config.d_in}, d_out {config.d_out}; this data needs d_in "
            f"{len(series.columns)} (inputs + outputs) and d_out {horizon * len(series.outputs)} (horizon x outputs): "
            f"build the config with forecast_config"
        )
    runs = list(series.runs)
    if len(runs) < 2:
        raise DataError(
            f"{series.source.get('data')}: the data is one run ({series.rows:,} rows), so no run is left to "
            f"measure the model on; give --episode COL, or --time COL with gaps between runs, or log more runs"
        )
    seq = config.max_len
    need = seq + horizon
    if max(b - a for a, b in runs) < need:
        raise DataError(
            f"{series.source.get('data')}: the longest run has {max(b - a for a, b in runs):,} rows, fewer than a "
            f"training sample needs ({seq} ticks + horizon {horizon} = {need}); give longer runs, or a preset "
            f"with a smaller max_len"
        )
    order = rng.permutation(len(runs))
    n_held = min(len(runs) - 1, max(1, int(round(share * len(runs)))))
    held = sorted(order[:n_held].tolist())
    train = [r for i, r in enumerate(runs) if i not in set(held)]
    if max(b - a for a, b in train) < need:
        raise DataError(
            f"{series.source.get('data')}: no training run is long enough for a sample ({need} rows) once the "
            f"held-out runs are set aside; give longer runs"
        )
    # samples of run i start at rows first_rows[i] + 0 .. count_i - 1 (no [samples] array: a
    # 10-million-row file would need 160 MB for it)
    counts = np.array([max(0, b - a - need + 1) for a, b in train])
    mean, std = _statistics(series.values, train)
    delta_mean, delta_std = _delta_statistics(series.values, train, horizon, len(series.outputs))
    return ForecastData(
        series=series,
        horizon=horizon,
        train_runs=train,
        held_out_runs=[runs[i] for i in held],
        first_rows=np.array([a for a, _ in train]),
        sample_ends=np.cumsum(counts),
        seq_len=seq,
        mean=mean,
        std=std,
        delta_mean=delta_mean,
        delta_std=delta_std,
        ranges=series.column_ranges(),
        skipped_runs=sum(1 for a, b in train if b - a < need),
    )


def _statistics(values: np.ndarray, runs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of every column over the training runs (float64, in batches);
    a constant column gets std 1 (nothing to scale)."""
    n, s, ss = 0, np.zeros(values.shape[1]), np.zeros(values.shape[1])
    for a, b in runs:
        for c in range(a, b, STAT_BATCH):
            block = values[c : min(b, c + STAT_BATCH)].astype(np.float64)
            n += block.shape[0]
            s += block.sum(axis=0)
            ss += (block**2).sum(axis=0)
    mean = s / n
    std = np.sqrt(np.maximum(ss / n - mean**2, 0.0))
    std[std < 1e-12 * np.maximum(1.0, np.abs(mean))] = 1.0
    return mean, std


def _delta_statistics(
    values: np.ndarray, runs: list[tuple[int, int]], horizon: int, n_out: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of y_{t+h} - y_t per horizon and output over the training runs (horizon-major),
    in batches of rows (a long run is never held whole in float64)."""
    n, s, ss = 0, np.zeros(horizon * n_out), np.zeros(horizon * n_out)
    step = STAT_BATCH
    for a, b in runs:
        for c in range(a, b - horizon, step):
            e = min(b - horizon, c + step)  # deltas from ticks c .. e - 1
            y = values[c : e + horizon, -n_out:].astype(np.float64)  # [e - c + H, n_out]
            m = e - c
            d = np.concatenate(
                [y[j : j + m] - y[:m] for j in range(1, horizon + 1)], axis=1
            )  # [m, H * n_out]
            n += m
            s += d.sum(axis=0)
            ss += (d**2).sum(axis=0)
    mean = s / max(n, 1)
    std = np.sqrt(np.maximum(ss / max(n, 1) - mean**2, 0.0))
    std[std < 1e-12] = 1.0
    return mean, std


def _samples(data: ForecastData, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x [n, T, C] standardised, target [n, T, H * n_out]: y_{t+h} - y_t standardised per horizon."""
    t, h = data.seq_len, data.horizon
    n_out = len(data.series.outputs)
    rows = first[:, None] + np.arange(t + h)[None, :]  # [n, T + H]
    raw = data.series.values[rows].astype(np.float64)  # [n, T + H, C]
    x = (raw[:, :t] - data.mean) / data.std
    ys = raw[:, :, -n_out:]  # [n, T + H, n_out]
    delta = np.concatenate(
        [ys[:, j : j + t] - ys[:, :t] for j in range(1, h + 1)], axis=2
    )  # [n, T, H * n_out]
    target = (delta - data.delta_mean) / data.delta_std
    return x.astype(np.float32), target.astype(np.float32)


def sample_rows(data: ForecastData, k: np.ndarray) -> np.ndarray:
    """The first row of training samples number k (0 .. total - 1, run by run)."""
    run = np.searchsorted(data.sample_ends, k, side="right")  # [n]
    before = np.where(run > 0, data.sample_ends[np.maximum(run - 1, 0)], 0)
    return data.first_rows[run] + (k - before)


def _batch(data: ForecastData, rng: np.random.Generator, batch_size: int) -> Batch:
    x, target = _samples(data, sample_rows(data, rng.integers(0, int(data.sample_ends[-1]), size=batch_size)))
    return Batch(x=x, target=target)


# ---------------------------------------------------------------------------------------------
# the model in the data's units
# ---------------------------------------------------------------------------------------------


def fold_standardisation(params: Params, config: Config, data: ForecastData) -> Params:
    """The same function on raw values: x_std = (x - mean) / std folded into in_proj
    (W' = W / std, b' = b - (mean / std) W) and y = y_std * std_y + mean_y into out_proj. Exact in
    real arithmetic; in float32 the folded model differs from the standardised one by rounding
    (the held-out metrics are of the folded one)."""
    w_in = params[IN_PROJ["w"]].astype(np.float64)  # [C, D]
    b_in = params[IN_PROJ["b"]].astype(np.float64)  # [D]
    w_out = params[OUT_PROJ["w"]].astype(np.float64)  # [D, H * n_out]
    b_out = params[OUT_PROJ["b"]].astype(np.float64)  # [H * n_out]
    sy, my = data.delta_std, data.delta_mean  # [H * n_out] horizon-major
    out = dict(params)
    out[IN_PROJ["w"]] = (w_in / data.std[:, None]).astype(np.float32)
    out[IN_PROJ["b"]] = (b_in - (data.mean / data.std) @ w_in).astype(np.float32)
    out[OUT_PROJ["w"]] = (w_out * sy[None, :]).astype(np.float32)
    out[OUT_PROJ["b"]] = (b_out * sy + my).astype(np.float32)
    return out


def predict_run(params: Params, config: Config, values: np.ndarray, run: tuple[int, int]) -> np.ndarray:
    """The model's outputs [rows, H * n_out] over a run (raw values in, raw out): what a session
    stepping through the run from its start returns. A windowed model runs on overlapping segments
    (memory stays bounded for long runs), the ssm block in one pass."""
    a, b = run
    x = values[a:b].astype(np.float32)
    if config.block == "ssm" or config.window is None:
        if config.block != "ssm" and x.shape[0] > config.max_len:
            raise DataError(
                f"a run of {x.shape[0]} rows is longer than max_len {config.max_len} of a model without a "
                f"window; train with --window W"
            )
        return forward(params, config, x[None])[0]
    # A tick's output depends on the last n_layers * (W - 1) ticks (each layer looks W - 1 back at
    # the layer below), so a segment's first `warm` ticks only warm it up.
    warm = config.n_layers * (config.window - 1)
    seg = max(4 * warm, config.max_len, warm + 1)
    out = np.empty((x.shape[0], config.d_out), dtype=np.float32)
    s = 0
    while True:
        e = min(x.shape[0], s + seg)
        y = forward(params, config, x[None, s:e])[0]  # [e - s, d_out]
        keep = 0 if s == 0 else warm
        out[s + keep : e] = y[keep:]
        if e == x.shape[0]:
            return out
        s = e - warm


# ---------------------------------------------------------------------------------------------
# evaluate, meta
# ---------------------------------------------------------------------------------------------


def _evaluate(params: Params, config: Config, data: ForecastData, names: list[str]) -> dict[str, Any]:
    series, h = data.series, data.horizon
    n_out, n_in = len(series.outputs), len(series.inputs)
    history = config.window or 1
    values = series.values
    share = max(history + h + 1, EVAL_ROWS // len(data.held_out_runs))
    runs = [(a, min(b, a + share)) for a, b in data.held_out_runs]
    ends_by_run = [B.positions(r, history, h) for r in runs]
    if sum(e.size for e in ends_by_run) == 0:
        raise DataError(
            f"the held-out runs are too short to score (a window of {history} and a horizon of {h}); give longer runs"
        )
    truth = np.concatenate([B.targets(values, e, h, n_out) for e in ends_by_run])  # [n, H, n_out]
    preds: dict[str, np.ndarray] = {}
    model = []
    for r, e in zip(runs, ends_by_run):
        if e.size:
            y = predict_run(params, config, values, r)[e - r[0]]  # [n_r, H * n_out] deltas
            now = values[e][:, -n_out:].astype(np.float64)  # [n_r, n_out]
            model.append(y.reshape(e.size, h, n_out) + now[:, None, :])
    preds["model"] = np.concatenate(model)
    preds["persistence"] = np.concatenate([B.persistence(values, e, h, n_out) for e in ends_by_run])
    fitted: dict[str, Any] = {}
    arx = B.ARX.fit(
        values,
        data.train_runs,
        n_out=n_out,
        window=history,
        horizon=h,
        mean=data.mean,
        std=data.std,
    )
    fitted["arx"] = arx
    preds["arx"] = np.concatenate([arx.predict(values, e) for e in ends_by_run])
    notes: dict[str, str] = {}
    try:
        n4 = B.N4SID.fit(values, data.train_runs, n_in=n_in, mean=data.mean, std=data.std)
        fitted["n4sid"] = n4
        preds["n4sid"] = np.concatenate(
            [n4.predict_run(values, r, e, h) for r, e in zip(runs, ends_by_run) if e.size]
        )
    except ImportError:  # pragma: no cover - the lock installs it
        notes["n4sid"] = "not run: nfoursid is not installed (pip install 'tickformer[data]')"
    except (np.linalg.LinAlgError, ValueError) as exc:
        notes["n4sid"] = f"not identified: {exc}"
    scale = data.std[-n_out:]
    tables = {k: B.rmse_table(v, truth, names) for k, v in preds.items()}
    score = {k: B.mean_normalised(t, scale) for k, t in tables.items()}
    linear = [k for k in ("arx", "n4sid") if k in score]
    best_linear = min(linear, key=lambda k: score[k])
    best_baseline = min((k for k in score if k != "model"), key=lambda k: score[k])
    beats = {
        name: [bool(tables["model"][name][j] < tables[best_linear][name][j]) for j in range(h)]
        for name in names
    }
    return {
        "metric": "RMSE in the data's units per output and horizon, on the held-out runs",
        "positions": int(truth.shape[0]),
        "history": history,
        "rmse": tables,
        "mean_rmse_over_std": score,
        "best_baseline": best_baseline,
        "best_linear_baseline": best_linear,
        "model_beats_best_linear": beats,
        "verdict": (
            f"the model beats the best linear baseline ({best_linear}) at every output and horizon"
            if all(all(v) for v in beats.values())
            else f"the model does NOT beat the best linear baseline ({best_linear}) everywhere "
            "(model_beats_best_linear)"
        ),
        "baselines": {k: B.describe(v) for k, v in fitted.items()} | {"persistence": {}},
        "baseline_notes": notes,
        "model_rmse": float(score["model"]),
        "target": f"model RMSE below the best linear baseline's ({best_linear}) at every output and horizon",
        "target_met": bool(all(all(v) for v in beats.values())),
    }


def _meta(data: ForecastData) -> dict[str, Any]:
    s = data.series
    rng = data.ranges
    width = rng[:, 1] - rng[:, 0]
    lo = rng[:, 0] - DOMAIN_MARGIN * np.maximum(width, 1e-6 * np.maximum(1.0, np.abs(rng[:, 0])))
    hi = rng[:, 1] + DOMAIN_MARGIN * np.maximum(width, 1e-6 * np.maximum(1.0, np.abs(rng[:, 1])))
    n_in = len(s.inputs)
    cols = [
        {
            **c.to_dict(),
            "role": "input" if i < n_in else "output",
            "index": i,
            "min": float(rng[i, 0]),
            "max": float(rng[i, 1]),
            "domain": [float(lo[i]), float(hi[i])],
        }
        for i, c in enumerate(s.columns)
    ]
    outputs = [
        {"name": c.name, "unit": c.unit, "horizon": j, "index": (j - 1) * len(s.outputs) + k}
        for j in range(1, data.horizon + 1)
        for k, c in enumerate(s.outputs)
    ]
    return {
        "signals": {
            "inputs": cols,
            "outputs": outputs,
            "order": "token t = inputs then outputs at t, in this order; output = every output at t+1, then t+2, ...",
            "units": "the data's own: the standardisation is folded into the model's first and last layers",
        },
        "horizon": data.horizon,
        "input_domain": [float(np.min(lo)), float(np.max(hi))],
        "input_domain_per_column": [[float(a), float(b)] for a, b in zip(lo, hi)],
        "domain_margin": DOMAIN_MARGIN,
        "standardisation": {
            "mean": data.mean.tolist(),
            "std": data.std.tolist(),
            "from": "the training runs",
        },
        "data": {
            **s.source,
            "sample_period": None
            if s.sample_period is None or math.isnan(s.sample_period)
            else s.sample_period,
            "runs": len(s.runs),
            "train_runs": [list(r) for r in data.train_runs],
            "held_out_runs": [list(r) for r in data.held_out_runs],
            "dropped_rows": s.dropped_rows,
            "training_samples": int(data.sample_ends[-1]),
            "runs_too_short_to_train": data.skipped_runs,
        },
    }
