"""The training settings: how long, in what batches, at what rate a model is trained.

Every task states its own (`model.tasks.Task.settings`: what reaches its target in a few CPU
minutes); `model.train` runs them. Validated on construction: an error names the field.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from tickformer.validation import nonneg_int, positive_int, positive_real, real


@dataclass(frozen=True)
class TrainSettings:
    steps: int
    batch_size: int
    warmup: int
    lr_scale: float = 1.0
    clip: float = 1.0
    seed: int = 0
    label_smoothing: float = 0.1
    ema_decay: float = 0.0  # 0: off; else the returned weights are an exponential moving average

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "warmup"):
            positive_int(getattr(self, name), name)
        nonneg_int(self.seed, "seed")
        positive_real(self.lr_scale, "lr_scale")
        positive_real(self.clip, "clip")
        real(self.label_smoothing, "label_smoothing", min_value=0.0, max_value=1.0, exclude_max=True)
        real(
            self.ema_decay,
            "ema_decay",
            min_value=0.0,
            max_value=1.0,
            exclude_max=True,
            hint="0 turns averaging off",
        )

    @classmethod
    def for_task(cls, task: "_HasSettings", *, steps: int | None = None, seed: int = 0) -> "TrainSettings":
        """The task's own settings (`Task.settings`), with `steps` (when given) and `seed`."""
        return replace(task.settings, steps=task.settings.steps if steps is None else steps, seed=seed)


class _HasSettings(Protocol):
    """A task (model.tasks.Task), as far as `for_task` reads it: tasks import this module."""

    @property
    def settings(self) -> TrainSettings: ...
