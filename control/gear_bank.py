"""A multiple-model adaptive estimator (MMAE) of the cart-pole's actuator gear, for the learned
controller (control/cartpole_loop.py ModelFilterMPC), issue 36.

    training_gear_grid   gears spread over the training bands of control/cartpole.py's RANGES
                         (bands 0, 2, 4: the band the logs were drawn from), never a held-out one
    bank_designs         per grid gear, the nominal design with that gear (NominalDesign.make on
                         the nominal constants with the gear replaced: A, B, Kalman gain L), cached
    GearBank             M steady-state Kalman filters of the positions, each the nominal filter
                         with one grid gear's B, run side by side on the same measurements and
                         commands; each weighted by the Gaussian likelihood of its position
                         innovations (log-weights, normalised, floored so a filter can come back);
                         the state estimate the weighted mix of the filters', and B the same mix
                         (the most likely filter's alone, "argmax", was measured against it:
                         experiments/cartpole_gear_bank.py)

control/cartpole_loop.py's ModelFilterMPC(bank=True) (the controller of kind "model") uses the
bank's estimate and its weighted B wherever it used the nominal filter's (the state through the
commands in flight, the candidate's velocity at t + d + 1); the cost (the nominal LQR's S) is
unchanged.

The innovation covariance of each filter is C P C^T + V with P the filter's prior covariance; it
is recovered from the Kalman gain alone (C L = X (X + V)^-1 with X = C P C^T, so X = (I - C L)^-1
C L V), so the filter's design stays NominalDesign.make's. The gear changes B only: the filters
share A and L (the unforced dynamics and the noise model do not depend on the actuator), so what
tells them apart is how the commands they were sent moved the cart and the pole.

Real-time: `GearBank.estimate` and `_advance` do a fixed number of [M, 4] products over buffers
made once (M the grid's size); construction (M linearisations by MuJoCo and Riccati solves, cached
per grid) is not real-time code.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError

from .cartpole import BANDS, NOMINAL, RANGES, NominalDesign, _Delayed

POINTS_PER_BAND = 3  # grid gears per training band: its two ends and its middle
FLOOR = 1e-3  # the least weight a filter keeps (so it can come back when the plant's response changes)


def training_gear_grid(points_per_band: int = POINTS_PER_BAND) -> tuple[float, ...]:
    """`points_per_band` gears evenly over each training band of the gear's range (bands 0, 2, 4
    of BANDS), in increasing order."""
    validation.positive_int(points_per_band, "points_per_band")
    lo, hi = RANGES["gear"]
    width = (hi - lo) / BANDS
    out: list[float] = []
    for band in range(0, BANDS, 2):
        a = lo + width * band
        pts = [a + width / 2] if points_per_band == 1 else np.linspace(a, a + width, points_per_band)
        out += [round(float(g), 6) for g in pts]
    return tuple(out)


@functools.lru_cache(maxsize=8)
def bank_designs(grid: tuple[float, ...]) -> tuple[NominalDesign, ...]:
    """The nominal design (A, B, L, S) with each grid gear in place of the nominal one."""
    return tuple(NominalDesign.make(dataclasses.replace(NOMINAL, gear=float(g))) for g in grid)


def innovation_cov(design: NominalDesign, noise: float = NOMINAL.noise) -> np.ndarray:
    """[2, 2] the steady-state filter's innovation covariance C P C^T + V, from its gain L."""
    v = np.eye(2) * noise**2
    cl = design.l[:2, :]  # C L [2, 2]
    x = np.linalg.solve(np.eye(2) - cl, cl @ v)
    return x + v


class GearBank(_Delayed):
    """M Kalman filters (one per grid gear) behind the interface ModelFilterMPC uses of LQG:
    `issued` (the commands in flight: control.cartpole._Delayed's, as every cart-pole
    controller's), `estimate(y)` (measurement update; the weights; `xhat` and `b_mix` the bank's
    estimate and B), `_advance(command)` (the time update with the command that reaches the cart,
    then `command` issued). `weights` [M] the normalised weights."""

    def __init__(
        self,
        designs: tuple[NominalDesign, ...],
        delay: int,
        *,
        floor: float = FLOOR,
        noise: float = NOMINAL.noise,
    ) -> None:
        m = len(designs)
        if m < 2:
            raise ConfigError(f"a bank of {m} filter: give at least 2 gears")
        if not 0.0 < floor < 1.0 / m:
            raise ConfigError(f"floor {floor}: give a weight in (0, 1/M) = (0, {1.0 / m:.3g})")
        # the gear moves B alone: every filter has the nominal A, Kalman gain L and innovation
        # covariance S (NominalDesign.make's, checked here), so one copy of each serves all M, and
        # S's log-determinant, the same for all, cancels in the normalised weights
        first = designs[0]
        if any(not (np.array_equal(d.a, first.a) and np.array_equal(d.l, first.l)) for d in designs):
            raise ConfigError("the bank's designs differ in more than B: give designs of one A and one L")
        self.a = first.a  # [4, 4]
        self.bs = np.stack([d.b[:, 0] for d in designs])  # [M, 4]
        self.l = first.l  # [4, 2]
        self.s_inv = np.linalg.inv(innovation_cov(first, noise))  # [2, 2]
        self.log_floor = math.log(floor)
        super().__init__(delay)
        self.x = np.zeros((m, 4))  # [M, 4] each filter's estimate
        self.logw = np.full(m, -math.log(m))  # [M] normalised log-weights
        self.weights = np.full(m, 1.0 / m)  # [M]
        self.xhat = np.zeros(4)  # [4] the bank's estimate
        self.b_mix = np.zeros(4)  # [4] the bank's input gain B
        np.matmul(self.weights, self.bs, out=self.b_mix)
        self.nu = np.zeros((m, 2))  # [M, 2] innovations
        self.tmp = np.zeros((m, 2))
        self.dx = np.zeros((m, 4))  # [M, 4] the measurement update; the time update's result (swapped with x)
        self.input = np.zeros((m, 4))  # [M, 4] B u per filter
        self.loglik = np.zeros(m)

    def estimate(self, y: np.ndarray) -> np.ndarray:
        """Each filter's innovation on the positions `y` [2], the weights' update by its Gaussian
        likelihood, each filter's measurement update; the bank's estimate in `xhat` (returned)."""
        nu = self.nu
        np.subtract(y[:2], self.x[:, :2], out=nu)  # [M, 2]
        np.einsum("ij,mj->mi", self.s_inv, nu, out=self.tmp)
        np.einsum("mi,mi->m", nu, self.tmp, out=self.loglik)
        self.loglik *= -0.5
        lw = self.logw
        lw += self.loglik
        lw -= lw.max()
        np.exp(lw, out=self.weights)  # the buffer only holds the sum's terms here
        lw -= math.log(float(self.weights.sum()))
        np.maximum(lw, self.log_floor, out=lw)  # the floor: a filter can come back
        np.exp(lw, out=self.weights)
        self.weights /= self.weights.sum()
        np.log(self.weights, out=lw)
        np.einsum("ij,mj->mi", self.l, nu, out=self.dx)
        self.x += self.dx
        np.matmul(self.weights, self.x, out=self.xhat)
        np.matmul(self.weights, self.bs, out=self.b_mix)
        return self.xhat

    def _advance(self, command: float) -> None:
        applied = self.issued[0]  # what reaches the cart over this tick
        np.einsum("ij,mj->mi", self.a, self.x, out=self.dx)
        np.multiply(self.bs, applied, out=self.input)
        self.dx += self.input
        self.x, self.dx = self.dx, self.x  # the new estimates; the old buffer is the next scratch
        self._issue(command)
