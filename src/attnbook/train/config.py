"""What decides how a model is trained: :class:`TrainConfig`, every knob, checked."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .._checks import check_positive_int, check_probability
from ..utils import DEVICES
from .schedules import _check_lr

__all__ = ["OPTIMIZERS", "SCHEDULES", "TrainConfig"]


OPTIMIZERS = ("adamw", "adam")
SCHEDULES = ("noam", "constant", "cosine")


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass
class TrainConfig:
    """Everything that decides how a model is trained. Checked on creation.

    Length of the run: ``steps`` (total optimiser steps, those of a resumed run included), or
    ``epochs`` (passes over the training data), and/or ``max_seconds`` (wall-clock budget of
    this call to :meth:`Trainer.fit`); with none of the three, 1000 steps.

    Learning rate: ``schedule="noam"`` uses :func:`noam_lr` with ``d_model`` (default: the
    model's ``d_model``, else its ``hidden_dim``), ``warmup`` and ``lr_scale``; ``"constant"``
    and ``"cosine"`` use ``lr`` (the peak) and ``warmup``.

    ``amp``: mixed precision; None = on for CUDA (bfloat16 where supported, else float16
    with a gradient scaler), off elsewhere; True on the CPU autocasts to bfloat16.
    ``eval_examples`` caps how many validation examples are greedy-decoded at each
    evaluation (None: all). ``out_dir``: where ``checkpoint.pt`` is written (at every
    evaluation, at the end and on Ctrl-C); None writes nothing.
    """

    steps: int | None = None
    epochs: int | None = None
    max_seconds: float | None = None
    batch_size: int = 64
    optimizer: str = "adamw"
    lr: float = 1e-3
    schedule: str = "noam"
    warmup: int = 400
    lr_scale: float = 1.0
    d_model: int | None = None
    min_lr_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.01
    grad_clip: float | None = 1.0
    label_smoothing: float = 0.1
    eval_every: int = 500
    eval_examples: int | None = 500
    log_every: int = 50
    bucket: bool = True
    device: str = "auto"
    amp: bool | None = None
    compile: bool = False
    seed: int = 0
    progress: bool = True
    out_dir: str | None = None

    def __post_init__(self):
        for name in ("steps", "epochs", "d_model", "eval_examples"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        for name in ("batch_size", "eval_every", "log_every"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("warmup", self.warmup, minimum=0)
        check_positive_int("seed", self.seed, minimum=0)
        if self.steps is not None and self.epochs is not None:
            raise ValueError(
                f"give steps or epochs, not both: got steps={self.steps} and epochs={self.epochs}"
            )
        if self.max_seconds is not None:
            _check_lr("max_seconds", self.max_seconds)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if (
            self.schedule == "cosine"
            and self.steps is None
            and self.epochs is None
            and self.max_seconds is not None
        ):
            raise ValueError(
                "schedule='cosine' needs to know the run's length: give steps or "
                "epochs (max_seconds alone does not say how many steps)"
            )
        if self.schedule == "noam" and self.warmup == 0:
            raise ValueError("schedule='noam' needs warmup >= 1, got 0")
        _check_lr("lr", self.lr)
        _check_lr("lr_scale", self.lr_scale)
        _check_lr("adam_eps", self.adam_eps)
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        betas = tuple(self.betas)
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must be two floats in [0, 1), got {self.betas!r}")
        self.betas = betas
        if isinstance(self.weight_decay, bool) or not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.grad_clip is not None:
            _check_lr("grad_clip", self.grad_clip)
        check_probability("label_smoothing", self.label_smoothing)
        if self.device not in DEVICES and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device must be one of {DEVICES} (or 'cuda:N'), got {self.device!r}")
        if self.amp not in (None, True, False):
            raise TypeError(f"amp must be None (auto), True or False, got {self.amp!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict, **overrides) -> TrainConfig:
        """Rebuild a config (e.g. from a checkpoint), ignoring keys it does not know."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in known}, **overrides})
