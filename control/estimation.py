"""State estimation for the hidden pendulum: an extended Kalman filter of (theta, omega) from the
noisy angle, with given constants (the true ones: the oracle; the nominal ones: the nominal
baseline; identified ones: IdentifiedMPC). Python floats only: real-time safe per update."""

from __future__ import annotations

from .plant import HiddenPendulum, HiddenStepper


class HiddenEKF:
    """Extended Kalman filter of (theta, omega) from the noisy angle of one plant, with the
    constants of `plant` (the true ones: the oracle; the nominal ones: the nominal baseline).
    Process model `hidden_step` (HiddenStepper) under the command reaching the joint; Jacobian by
    central differences (step 1e-5); process noise diag(q_theta, q_omega) per tick, measurement
    noise plant.noise^2. Starts at (y_0, 0) with variances (noise^2, 1 rad^2/s^2).

    `update(y, applied)` takes the angle measured at tick t and the command that reached the
    joint over t-1..t (ignored on the first call) and returns the filtered (theta, omega).
    Python floats only (~30 us a call): no numpy allocation, bounded work."""

    def __init__(
        self,
        plant: HiddenPendulum,
        *,
        q_theta: float = 1e-6,
        q_omega: float = 1e-3,
        stepper: HiddenStepper | None = None,
    ) -> None:
        # `stepper`: one the caller also predicts with (so the filter follows its constants when
        # they change); default: this plant's own
        self.f = HiddenStepper(plant) if stepper is None else stepper
        self.q0, self.q1 = q_theta, q_omega
        self.r = max(plant.noise, 1e-6) ** 2
        self.x0 = self.x1 = 0.0
        self.p00 = self.p01 = self.p11 = 0.0
        self.started = False

    def update(self, y: float, applied: float) -> tuple[float, float]:
        if not self.started:
            self.x0, self.x1 = y, 0.0
            self.p00, self.p01, self.p11 = self.r, 0.0, 1.0
            self.started = True
            return self.x0, self.x1
        step, eps = self.f.step, 1e-5
        x0, x1 = self.x0, self.x1
        a_t, a_w = step(x0 + eps, x1, applied)
        b_t, b_w = step(x0 - eps, x1, applied)
        c_t, c_w = step(x0, x1 + eps, applied)
        d_t, d_w = step(x0, x1 - eps, applied)
        f00, f10 = (a_t - b_t) / (2 * eps), (a_w - b_w) / (2 * eps)  # d(theta', omega') / d theta
        f01, f11 = (c_t - d_t) / (2 * eps), (c_w - d_w) / (2 * eps)  # ... / d omega
        t, w = step(x0, x1, applied)
        p00, p01, p11 = self.p00, self.p01, self.p11
        # P' = F P F^T + Q (symmetric)
        m00, m01 = f00 * p00 + f01 * p01, f00 * p01 + f01 * p11
        m10, m11 = f10 * p00 + f11 * p01, f10 * p01 + f11 * p11
        q00 = m00 * f00 + m01 * f01 + self.q0
        q01 = m00 * f10 + m01 * f11
        q11 = m10 * f10 + m11 * f11 + self.q1
        s = q00 + self.r
        k0, k1 = q00 / s, q01 / s
        innov = y - t
        self.x0, self.x1 = t + k0 * innov, w + k1 * innov
        self.p00, self.p01, self.p11 = q00 - k0 * q00, q01 - k0 * q01, q11 - k1 * q01
        return self.x0, self.x1
