"""Two cascaded tanks fed by a pump: a plant a linear model cannot capture, for `tickformer log
tanks` (docs/your_data.md) and the tests of training on logged data.

A pump driven by a voltage v (0..10 V) fills the upper tank; it drains through an orifice into the
lower tank, which drains out. Torricelli outflow q = a sqrt(2 g h) (square-root, not linear, in
the level), a pump dead zone (no flow below V_DEAD) and saturation (no more above V_SAT), and
overflow at the tanks' height:

    A dh1/dt = k max(0, min(v, V_SAT) - V_DEAD) - a1 sqrt(2 g h1)
    A dh2/dt = a1 sqrt(2 g h1) - a2 sqrt(2 g h2),       0 <= h <= H_MAX

integrated with RK4 (10 substeps of the 1 s sample period), the levels measured with Gaussian
noise. Each run starts from rest at a random level and is driven by random voltage steps held
for a random time (the exploration a control engineer logs a rig with). Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tickformer import validation

G = 981.0  # cm / s^2


@dataclass(frozen=True)
class TwoTanks:
    area: float = 28.0  # cm^2, both tanks
    a1: float = 0.071  # cm^2, upper outlet
    a2: float = 0.057  # cm^2, lower outlet
    pump_gain: float = 3.33  # cm^3 / (V s)
    v_dead: float = 1.5  # V: no flow below
    v_sat: float = 8.0  # V: no more flow above
    h_max: float = 20.0  # cm: the tanks overflow above
    dt: float = 1.0  # s, the sample period
    substeps: int = 10
    noise: float = 0.05  # cm, level measurement noise (std)
    hold_s: tuple[float, float] = (20.0, 120.0)  # how long each random voltage is held

    def derivative(self, h: np.ndarray, v: float) -> np.ndarray:
        q_in = self.pump_gain * max(0.0, min(v, self.v_sat) - self.v_dead)
        out1 = self.a1 * np.sqrt(2 * G * max(h[0], 0.0))
        out2 = self.a2 * np.sqrt(2 * G * max(h[1], 0.0))
        return np.array([(q_in - out1) / self.area, (out1 - out2) / self.area])

    def step(self, h: np.ndarray, v: float) -> np.ndarray:
        """One sample period under the held voltage v (RK4), levels clipped to [0, h_max]."""
        dt = self.dt / self.substeps
        for _ in range(self.substeps):
            k1 = self.derivative(h, v)
            k2 = self.derivative(h + 0.5 * dt * k1, v)
            k3 = self.derivative(h + 0.5 * dt * k2, v)
            k4 = self.derivative(h + dt * k3, v)
            h = np.clip(h + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4), 0.0, self.h_max)
        return h


def log_runs(plant: TwoTanks, *, runs: int, rows: int, seed: int) -> dict[str, np.ndarray]:
    """`runs` runs of `rows` samples: columns time [s] (from 0 in each run), run, pump [V],
    level1 [cm], level2 [cm] (measured: with noise)."""
    validation.positive_int(runs, "--runs")
    validation.positive_int(rows, "--rows")
    rng = np.random.default_rng(seed)
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("time [s]", "run", "pump [V]", "level1 [cm]", "level2 [cm]")
    }
    for r in range(runs):
        h = rng.uniform(0.0, 0.6 * plant.h_max, 2)
        v = np.empty(rows)
        t = 0
        while t < rows:
            hold = int(rng.uniform(*plant.hold_s) / plant.dt)
            v[t : t + hold] = rng.uniform(0.0, 10.0)
            t += max(1, hold)
        levels = np.empty((rows, 2))
        for i in range(rows):
            levels[i] = h
            h = plant.step(h, float(v[i]))
        measured = levels + rng.normal(0.0, plant.noise, levels.shape)
        cols["time [s]"].append(np.arange(rows) * plant.dt)
        cols["run"].append(np.full(rows, r))
        cols["pump [V]"].append(v)
        cols["level1 [cm]"].append(measured[:, 0])
        cols["level2 [cm]"].append(measured[:, 1])
    return {k: np.concatenate(v) for k, v in cols.items()}
