"""Learning-rate schedules: the warm-up of the Transformer paper, constant and cosine."""

from __future__ import annotations

import math
from typing import Protocol

from .._checks import check_positive_int

__all__ = ["noam_lr", "constant_lr", "cosine_lr", "scheduled_lr", "ScheduleOptions"]


# --------------------------------------------------------------------------------------------
# learning-rate schedules: step 1 is the first update
# --------------------------------------------------------------------------------------------


def _check_step(step) -> int:
    return check_positive_int("step", step)


def _check_lr(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive float, got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite float, got {value}")
    return float(value)


def noam_lr(step: int, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The schedule of Vaswani et al. (2017), 5.3:
    ``lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    It rises linearly for ``warmup`` steps to its peak ``scale * (d_model * warmup)^-0.5``,
    then decays as ``1 / sqrt(step)``.
    """
    _check_step(step)
    check_positive_int("d_model", d_model)
    check_positive_int("warmup", warmup)
    scale = _check_lr("scale", scale)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def constant_lr(step: int, lr: float, warmup: int = 0) -> float:
    """``lr`` after a linear warm-up of ``warmup`` steps (none when 0)."""
    _check_step(step)
    lr = _check_lr("lr", lr)
    check_positive_int("warmup", warmup, minimum=0)
    return lr * min(1.0, step / warmup) if warmup else lr


def cosine_lr(step: int, lr: float, warmup: int, total_steps: int, min_ratio: float = 0.1) -> float:
    """Linear warm-up to ``lr`` over ``warmup`` steps, then a half cosine down to
    ``min_ratio * lr`` at ``total_steps`` (and flat after it)."""
    _check_step(step)
    lr = _check_lr("lr", lr)
    check_positive_int("warmup", warmup, minimum=0)
    check_positive_int("total_steps", total_steps)
    if isinstance(min_ratio, bool) or not isinstance(min_ratio, (int, float)):
        raise TypeError(f"min_ratio must be a float in [0, 1], got {type(min_ratio).__name__}")
    if not 0.0 <= min_ratio <= 1.0:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
    if warmup and step <= warmup:
        return lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return lr * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


class ScheduleOptions(Protocol):
    """What :func:`scheduled_lr` reads from a ``TrainConfig`` (named here so that this module
    need not import the config module, which imports this one)."""

    schedule: str
    lr: float
    warmup: int
    lr_scale: float
    min_lr_ratio: float


def scheduled_lr(
    config: ScheduleOptions, step: int, total_steps: int | None, d_model: int | None
) -> float:
    """The learning rate of update ``step`` under ``config``'s schedule, for a run of
    ``total_steps`` (cosine) and a model of width ``d_model`` (noam)."""
    c = config
    if c.schedule == "noam":
        return noam_lr(step, d_model, c.warmup, c.lr_scale)
    if c.schedule == "constant":
        return constant_lr(step, c.lr, c.warmup)
    return cosine_lr(step, c.lr, c.warmup, total_steps, c.min_lr_ratio)
