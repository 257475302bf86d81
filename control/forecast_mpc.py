"""Model-predictive control with a model trained on your data (`tickformer train --data`, model.forecast):
K candidate values of one input evaluated in one `Session.peek` over the shared history, the one a
cost prefers committed.

The artifact (exported with `--batch K`) takes the token (inputs, outputs) at t in the data's units
and returns y(t+h) - y(t) for h = 1..H, every output, horizon-major (model.forecast). At tick t
the controller puts the measured outputs and each candidate of the command column into K tokens,
peeks, adds y(t) back, and hands the K predicted futures [K, H, n_out] to `cost(pred, t)`, which
returns K costs. The token of tick t joins the history at tick t + 1, with the command the plant
was really sent (`obs` carries it: a loop's fallback may have sent another): `commit(j)` when it
is candidate j, else a plain step with it. Ticks a loop skipped (`gap`: their measured outputs,
oldest first, under the command held through them) join the history as plain steps, so the
history stays one token per tick. Real-time safe per tick after construction (buffers made once;
the cost is the caller's).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from tickformer.errors import ConfigError


def trained_signals(session: Any, how: str) -> dict[str, Any]:
    """The signals a `train --data` artifact was trained on (its manifest's checkpoint_meta), or
    ConfigError ending with `how` (the train command that makes one, for the caller's plant)."""
    signals = session.artifact.manifest.get("source", {}).get("checkpoint_meta", {}).get("signals")
    if not signals:
        raise ConfigError(f"the artifact names no signals (not trained with --data); {how}")
    return signals


class ForecastMPC:
    """`step(obs) -> command`, obs = (measured outputs in the model's output order, the command
    actuated at the previous tick)."""

    def __init__(
        self,
        session: Any,
        signals: dict[str, Any],
        *,
        command: str,
        candidates: Sequence[float],
        cost: Callable[[np.ndarray, int], np.ndarray],
    ) -> None:
        inputs = [c["name"] for c in signals["inputs"]]
        outputs = [c["name"] for c in signals["inputs"] if c["role"] == "output"]
        if command not in inputs or command in outputs:
            raise ConfigError(f"command {command!r} is not an input column of the model ({inputs})")
        k = int(session.batch)
        if len(candidates) != k:
            raise ConfigError(
                f"{len(candidates)} candidates for an artifact exported with batch {k}; export with --batch "
                f"{len(candidates)}"
            )
        self.session, self.cost = session, cost
        self.n_out = len(outputs)
        self.horizon = len(signals["outputs"]) // self.n_out
        self.cmd_col = inputs.index(command)
        self.out_cols = [inputs.index(o) for o in outputs]
        self.cand = np.asarray(candidates, dtype=np.float32)  # [K]
        self.xs = np.zeros((k, 1, len(inputs)), dtype=np.float32)  # [K, 1, d_in]
        self.xs[:, 0, self.cmd_col] = self.cand
        self.token = np.zeros((k, 1, len(inputs)), dtype=np.float32)  # a plain step's rows
        self.pred = np.zeros((k, self.horizon, self.n_out))  # [K, H, n_out]
        self.y_prev = np.zeros(self.n_out)  # the outputs measured at the last tick
        self.t = 0
        self.chosen = -1
        self.replaced = 0  # tokens committed with another command than the chosen candidate

    def _commit_last(self, y_prev: np.ndarray, actuated: float) -> None:
        if self.chosen < 0:
            return
        if self.session.peek_pending and abs(float(self.cand[self.chosen]) - actuated) < 1e-6:
            self.session.commit(self.chosen)
        else:  # the plant got another command: that is the history
            self._plain(y_prev, actuated)
            self.replaced += 1

    def _plain(self, y: np.ndarray, command: float) -> None:
        self.token[:, 0, :] = 0.0
        self.token[:, 0, self.out_cols] = y
        self.token[:, 0, self.cmd_col] = command
        self.session.step(self.token)

    def step(self, obs: np.ndarray, gap: np.ndarray | None = None) -> float:
        """obs = (outputs measured now, the command actuated at the previous tick); gap [n,
        n_out]: the outputs measured at the n ticks skipped since, oldest first (None: none)."""
        y, actuated = obs[: self.n_out], float(obs[self.n_out])
        if self.t:
            self._commit_last(self.y_prev, actuated)
        if gap is not None:
            for g in range(gap.shape[0]):  # the command was held through the skipped ticks
                self._plain(gap[g], actuated)
                self.t += 1
        self.xs[:, 0, self.out_cols] = y
        out = self.session.peek(self.xs)  # [K, 1, H * n_out] deltas
        np.add(out[:, 0, :].reshape(-1, self.horizon, self.n_out), y, out=self.pred)
        j = int(np.argmin(self.cost(self.pred, self.t)))
        self.chosen = j
        self.y_prev[:] = y
        self.t += 1
        return float(self.cand[j])
