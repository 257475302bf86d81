"""The figure of docs/your_plant.md: one held-out episode of the cart-pole under every controller
(control/cartpole_loop.py `evaluate`'s `episode`): the pole's angle and the cart against its
reference over the first seconds. Rendered in memory, written with one atomic replace. Not
real-time code."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.durable import atomic_write

from .cartpole import FALL_RAD, reference

LABELS = {
    "lqg": "LQG (nominal)",
    "nominal_mpc": "MPC, nominal physics",
    "oracle_mpc": "MPC, true physics (oracle)",
    "memoryless": "memoryless model",
    "model_nominal_filter": "windowed model, nominal filter",
    "model": "windowed model, gear bank",
}


def plot_episode(path: Path, episode: dict[str, Any], dt: float, seconds: float = 20.0) -> None:
    """theta and x - ref of each controller in `episode` over the first `seconds` of plant time."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    kinds = [k for k in LABELS if k in episode]
    fig, (ax_th, ax_x) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for kind in kinds:
        s = np.asarray(episode[kind]["states"], dtype=float)  # [n + 1, 4]
        n = min(s.shape[0], int(seconds / dt) + 1)
        t = np.arange(n) * dt
        ref = np.array([reference(ti)[0] for ti in t])
        width = 1.6 if kind == "model" else 0.9
        ax_th.plot(t, s[:n, 1], lw=width, label=LABELS[kind])
        ax_x.plot(t, s[:n, 0] - ref, lw=width, label=LABELS[kind])
    for sign in (-1, 1):
        ax_th.axhline(sign * FALL_RAD, color="k", lw=0.6, ls=":")
    p = episode["params"]
    ax_th.set_title(
        f"held-out draw {episode['draw']}: pole {p['pole_mass']:.2f} kg, hinge damping {p['hinge_damping']:.2f}, "
        f"gear {p['gear']:.0f} (nominal 5.02, 1.00, 100)",
        fontsize=10,
    )
    ax_th.set_ylabel("pole angle [rad] (fall at ±0.2)")
    ax_x.set_ylabel("cart x - reference [m]")
    ax_x.set_xlabel("plant time [s]")
    ax_th.legend(fontsize=8, ncol=3, loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    atomic_write(Path(path), buf.getvalue())
