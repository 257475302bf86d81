"""The baselines a control engineer runs before trusting a learned model of a plant, on the same
held-out runs and positions: predict every output 1..H ticks ahead from the history up to tick t.

    persistence(...)   y_{t+h} = y_t
    ARX                y_{t+h} = linear in the last W inputs and outputs (+ a constant), one least-
                       squares fit per horizon on the training runs (direct multi-step)
    N4SID              a linear state-space model identified by a subspace method (nfoursid, the
                       `data` extra), its steady-state Kalman predictor filtering the run up to t,
                       then h steps ahead with the input held at u_t (what the model knows at t)

All three see exactly what the model sees at t (inputs and outputs up to t, nothing later), so the
comparison is fair to them. The fits are bounded in time and memory: ARX accumulates its normal
equations over at most ARX_MAX_WINDOWS training windows, N4SID is identified on at most N4SID_ROWS
rows of the training runs (their statistics are recorded beside the RMSE). Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

ARX_MAX_WINDOWS = 1_000_000  # training windows the ARX normal equations accumulate, at most (a stride)
ARX_CHUNK = 8192  # windows per accumulation step
ARX_RIDGE = 1e-8  # relative ridge on the normal equations (their trace / dim): conditioning only
# Training rows N4SID is identified on, at most: nfoursid takes a full SVD of a [block rows x
# outputs, rows] matrix, whose right factor is rows x rows float64 (3,000 rows: 72 MB; 20,000: 3.2 GB).
N4SID_ROWS = 3_000
N4SID_BLOCK_ROWS = 10  # block rows of its Hankel matrices (the largest order it can find)
N4SID_MAX_ORDER = 8
N4SID_ENERGY = 0.999  # the order: singular values holding this share of the total, at most the max


def lagged(values: np.ndarray, ends: np.ndarray, window: int) -> np.ndarray:
    """[n, window * C] rows values[e - window + 1 .. e] flattened oldest first, for each end e."""
    idx = ends[:, None] + np.arange(-window + 1, 1)[None, :]  # [n, W]
    return values[idx].reshape(ends.size, -1)  # [n, W, C] -> [n, W * C]


def positions(run: tuple[int, int], window: int, horizon: int) -> np.ndarray:
    """The scored ticks t of a run: a full window of history (t >= start + window - 1) and every
    horizon's target inside it (t + horizon < stop). Absolute row indices."""
    start, stop = run
    return np.arange(start + window - 1, stop - horizon)


@dataclass
class ARX:
    """y_{t+h} (standardised) = [lagged standardised signals, 1] @ coef[h]."""

    window: int
    horizon: int
    n_out: int
    mean: np.ndarray  # [C] the training runs' statistics
    std: np.ndarray  # [C]
    coef: np.ndarray  # [W * C + 1, H * n_out]
    windows_fitted: int

    @classmethod
    def fit(
        cls,
        values: np.ndarray,
        runs: Sequence[tuple[int, int]],
        *,
        n_out: int,
        window: int,
        horizon: int,
        mean: np.ndarray,
        std: np.ndarray,
    ) -> "ARX":
        total = sum(max(0, (b - horizon) - (a + window - 1)) for a, b in runs)
        stride = max(1, -(-total // ARX_MAX_WINDOWS))  # every stride-th window, evenly spread
        ends = np.concatenate(
            [np.arange(a + window - 1, b - horizon, stride) for a, b in runs] or [np.zeros(0, int)]
        )
        c = values.shape[1]
        dim = window * c + 1
        xtx = np.zeros((dim, dim))
        xty = np.zeros((dim, horizon * n_out))
        for a in range(0, ends.size, ARX_CHUNK):
            e = ends[a : a + ARX_CHUNK]
            x = _design(values, e, window, mean, std)  # [n, dim]
            y = _targets(values, e, horizon, n_out, mean, std)  # [n, H * n_out]
            xtx += x.T @ x
            xty += x.T @ y
        ridge = ARX_RIDGE * max(np.trace(xtx) / dim, 1e-12)
        coef = np.linalg.solve(xtx + ridge * np.eye(dim), xty)
        return cls(window, horizon, n_out, mean, std, coef, int(ends.size))

    def predict(self, values: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """[n, H, n_out] in the data's units."""
        z = _design(values, ends, self.window, self.mean, self.std) @ self.coef  # [n, H * n_out]
        z = z.reshape(ends.size, self.horizon, self.n_out)
        return z * self.std[-self.n_out :] + self.mean[-self.n_out :]


def _design(values, ends, window, mean, std) -> np.ndarray:
    z = (lagged(values, ends, window).astype(np.float64).reshape(ends.size, window, -1) - mean) / std
    return np.concatenate([z.reshape(ends.size, -1), np.ones((ends.size, 1))], axis=1)


def _targets(values, ends, horizon, n_out, mean, std) -> np.ndarray:
    idx = ends[:, None] + np.arange(1, horizon + 1)[None, :]  # [n, H]
    y = values[idx][..., -n_out:].astype(np.float64)  # [n, H, n_out]
    return ((y - mean[-n_out:]) / std[-n_out:]).reshape(ends.size, -1)


def persistence(values: np.ndarray, ends: np.ndarray, horizon: int, n_out: int) -> np.ndarray:
    """[n, H, n_out]: the last measured outputs, at every horizon."""
    last = values[ends][:, -n_out:].astype(np.float64)  # [n, n_out]
    return np.repeat(last[:, None, :], horizon, axis=1)


@dataclass
class N4SID:
    """x_{k+1} = A x_k + B u_k + K e_k, y_k = C x_k + D u_k + e_k on standardised signals; the
    steady-state Kalman gain from the identified noise covariances."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    k: np.ndarray
    n_in: int
    mean: np.ndarray
    std: np.ndarray
    order: int
    rows_fitted: int

    @classmethod
    def fit(
        cls,
        values: np.ndarray,
        runs: Sequence[tuple[int, int]],
        *,
        n_in: int,
        mean: np.ndarray,
        std: np.ndarray,
    ) -> "N4SID":
        """Identified on the training runs, longest first, concatenated up to N4SID_ROWS rows (a
        seam between two runs is one disturbance among many)."""
        import pandas as pd
        from nfoursid.nfoursid import NFourSID
        from scipy.linalg import solve_discrete_are

        parts, left = [], N4SID_ROWS
        for start, stop in sorted(runs, key=lambda r: r[0] - r[1]):
            take = min(stop - start, left)
            parts.append((values[start : start + take].astype(np.float64) - mean) / std)
            left -= take
            if left <= 0:
                break
        z = np.concatenate(parts)  # [rows, C]
        cols = [f"s{i}" for i in range(z.shape[1])]
        frame = pd.DataFrame(z, columns=cols)
        nf = NFourSID(
            frame, output_columns=cols[n_in:], input_columns=cols[:n_in], num_block_rows=N4SID_BLOCK_ROWS
        )
        nf.subspace_identification()
        sv = np.diag(nf.R32_decomposition.eigenvalues)
        share = np.cumsum(sv) / max(float(np.sum(sv)), 1e-300)
        order = int(min(N4SID_MAX_ORDER, np.searchsorted(share, N4SID_ENERGY) + 1, sv.size))
        ss, cov = nf.system_identification(rank=order)
        n_out = z.shape[1] - n_in
        r = cov[:n_out, :n_out] + 1e-9 * np.eye(n_out)
        s = cov[n_out:, :n_out]
        q = cov[n_out:, n_out:] + 1e-9 * np.eye(order)
        a, c = np.asarray(ss.a), np.asarray(ss.c)
        try:
            p = solve_discrete_are(a.T, c.T, q, r, s=s)
            k = (a @ p @ c.T + s) @ np.linalg.inv(c @ p @ c.T + r)
        except (np.linalg.LinAlgError, ValueError):  # an unstable or degenerate fit: open-loop
            k = np.zeros((order, n_out))
        return cls(a, np.asarray(ss.b), c, np.asarray(ss.d), k, n_in, mean, std, order, int(z.shape[0]))

    def predict_run(
        self, values: np.ndarray, run: tuple[int, int], ends: np.ndarray, horizon: int
    ) -> np.ndarray:
        """[len(ends), H, n_out]: the predictor filtered from the run's start through tick t (its
        output y_t included), then h steps ahead with u held at u_t. Data units."""
        start = run[0]
        last = int(ends.max()) if ends.size else start
        z = (values[start : last + 1].astype(np.float64) - self.mean) / self.std  # [T, C]
        u, y = z[:, : self.n_in], z[:, self.n_in :]
        a, b, c, d, k = self.a, self.b, self.c, self.d, self.k
        x = np.zeros(a.shape[0])  # x_{t|t-1}
        want = set((ends - start).tolist())
        powers = [np.eye(a.shape[0])]
        for _ in range(horizon):
            powers.append(a @ powers[-1])
        acc = [np.zeros_like(b)]  # sum_{j<h} A^j B: the held input's effect after h steps
        for h in range(horizon):
            acc.append(acc[-1] + powers[h] @ b)
        out = np.empty((ends.size, horizon, y.shape[1]))
        row = {t: i for i, t in enumerate((ends - start).tolist())}
        for t in range(z.shape[0]):
            innov = y[t] - c @ x - d @ u[t]
            x_next = a @ x + b @ u[t] + k @ innov  # x_{t+1|t}
            if t in want:
                for h in range(1, horizon + 1):
                    xh = powers[h - 1] @ x_next + acc[h - 1] @ u[t]  # x_{t+h|t}, u held from t+1
                    out[row[t], h - 1] = c @ xh + d @ u[t]
            x = x_next
        n_out = y.shape[1]
        return out * self.std[-n_out:] + self.mean[-n_out:]


def rmse_table(pred: np.ndarray, truth: np.ndarray, outputs: Sequence[str]) -> dict[str, list[float]]:
    """{output name: [RMSE at horizon 1..H]} of [n, H, n_out] predictions."""
    err = (pred - truth) ** 2  # [n, H, n_out]
    mse = err.mean(axis=0)  # [H, n_out]
    return {name: [float(v) for v in np.sqrt(mse[:, i])] for i, name in enumerate(outputs)}


def mean_normalised(table: dict[str, list[float]], std: np.ndarray) -> float:
    """One number to rank predictors: the mean over outputs and horizons of RMSE / the output's
    standard deviation (so outputs in different units weigh alike)."""
    vals = [v / max(float(s), 1e-300) for (name, row), s in zip(table.items(), std) for v in row]
    return float(np.mean(vals)) if vals else float("nan")


def targets(values: np.ndarray, ends: np.ndarray, horizon: int, n_out: int) -> np.ndarray:
    """[n, H, n_out] the measured outputs at t + 1 .. t + H."""
    idx = ends[:, None] + np.arange(1, horizon + 1)[None, :]
    return values[idx][..., -n_out:].astype(np.float64)


def describe(model: Any) -> dict[str, Any]:
    """What a fitted baseline rests on, for metrics.json."""
    if isinstance(model, ARX):
        return {"window": model.window, "windows_fitted": model.windows_fitted, "ridge": ARX_RIDGE}
    if isinstance(model, N4SID):
        return {
            "order": model.order,
            "rows_fitted": model.rows_fitted,
            "block_rows": N4SID_BLOCK_ROWS,
            "input": "held at u_t over the horizon",
        }
    return {}
