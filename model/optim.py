"""Optimisation: Adam, the paper's warmup schedule, and global-norm gradient clipping.

Sources: Kingma & Ba 2015 (Adam, with bias correction); Vaswani et al. 2017, section 5.3:
Adam(beta1=0.9, beta2=0.98, eps=1e-9) and

    lr(step) = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

(scale 1, warmup 4000 in the paper): linear warmup, then inverse-square-root decay, peaking at
step = warmup with scale * (d_model * warmup)^-0.5. Clipping by global norm: Pascanu et al. 2013.

Adam's state lives in float64 regardless of the parameter dtype, so the update is the same
computation on every machine (numpy's float64 elementwise ops are IEEE-exact per element);
parameters are updated in place in their own dtype. Not real-time safe (training only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tickformer.validation import positive_int, positive_real, real


def noam_lr(step: int, *, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The paper's learning rate at 1-based `step`."""
    positive_int(step, "step", hint="the schedule is 1-based")
    positive_int(warmup, "warmup")
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def global_norm(grads: dict[str, np.ndarray]) -> float:
    """sqrt(sum of squares of every gradient entry), accumulated in float64 (one float64 dot
    product per tensor: no squared copy is made)."""
    total = 0.0
    for g in grads.values():
        flat = g.astype(np.float64).ravel()  # [n], a float64 copy
        total += float(flat @ flat)
    return float(np.sqrt(total))


def clip_by_global_norm(grads: dict[str, np.ndarray], max_norm: float) -> tuple[dict[str, np.ndarray], float]:
    """Scale every gradient by min(1, max_norm / norm); returns (clipped grads, norm before)."""
    positive_real(max_norm, "max_norm")
    norm = global_norm(grads)
    if not np.isfinite(norm):
        raise FloatingPointError(f"gradient norm is {norm}; the loss diverged (lower the learning rate)")
    if norm <= max_norm:
        return grads, norm
    factor = max_norm / norm
    return {name: (g * factor).astype(g.dtype, copy=False) for name, g in grads.items()}, norm


@dataclass
class Adam:
    """Adam with bias correction. `step(params, grads, lr)` updates params in place."""

    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-9
    t: int = 0
    m: dict[str, np.ndarray] = field(default_factory=dict)
    v: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("beta1", "beta2"):
            real(
                getattr(self, name),
                name,
                min_value=0.0,
                max_value=1.0,
                exclude_max=True,
                hint="Adam's moment decay",
            )
        positive_real(self.eps, "eps", hint="Adam's denominator floor")

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray], lr: float) -> None:
        self.t += 1
        c1 = 1.0 - self.beta1**self.t
        c2 = 1.0 - self.beta2**self.t
        for name, p in params.items():
            g = grads[name].astype(np.float64)  # a copy we own, reused as scratch below
            if name not in self.m:
                self.m[name] = np.zeros(p.shape, dtype=np.float64)
                self.v[name] = np.zeros(p.shape, dtype=np.float64)
            m, v = self.m[name], self.v[name]
            # In place, the same operations in the same order as
            #   m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g;  update = lr (m/c1) / (sqrt(v/c2) + eps)
            t = (1.0 - self.beta1) * g
            m *= self.beta1
            m += t
            np.multiply(g, 1.0 - self.beta2, out=t)
            t *= g
            v *= self.beta2
            v += t
            np.divide(v, c2, out=t)
            np.sqrt(t, out=t)
            t += self.eps
            np.divide(m, c1, out=g)
            g *= lr
            g /= t
            p -= g.astype(p.dtype, copy=False)
