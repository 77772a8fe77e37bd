"""What decides how a model is trained: :class:`TrainConfig`, every knob, checked."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from .._checks import check_positive_int, check_probability
from .._files import check_path
from .._limits import check_memory, history_bytes
from .._options import (
    float_pair,
    fraction,
    natural_int,
    option,
    positive_float,
    positive_int,
    unit_interval,
)
from ..utils import DEVICES
from .schedules import _check_lr

__all__ = ["OPTIMIZERS", "SCHEDULES", "DEFAULT_STEPS", "TrainConfig"]


OPTIMIZERS = ("adamw", "adam")
SCHEDULES = ("noam", "constant", "cosine")
# the length of a run given neither steps, epochs nor max_seconds (the command line: neither
# --steps nor --epochs)
DEFAULT_STEPS = 1250


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


@dataclass
class TrainConfig:
    """Everything that decides how a model is trained. Checked on creation.

    Length of the run: ``steps`` (total optimiser steps, those of a resumed run included), or
    ``epochs`` (passes over the training data), and/or ``max_seconds`` (wall-clock budget of
    this call to :meth:`~attnbook.train.trainer.Trainer.fit`); with none of the three,
    :data:`DEFAULT_STEPS`.

    Learning rate: ``schedule="noam"`` uses :func:`~attnbook.train.schedules.noam_lr` with
    ``d_model`` (default: the model's ``d_model``, else its ``hidden_dim``), ``warmup`` and
    ``lr_scale``; ``"constant"`` and ``"cosine"`` use ``lr`` (the peak) and ``warmup``.

    ``amp``: mixed precision; None = on for CUDA (bfloat16 where supported, else float16
    with a gradient scaler), off elsewhere; True on the CPU autocasts to bfloat16.
    ``eval_examples`` caps how many validation examples are greedy-decoded at each
    evaluation (None: all). ``out_dir``: where ``checkpoint.pt`` is written (at every
    evaluation, at the end and on Ctrl-C); None writes nothing.

    Each field is declared with :func:`attnbook._options.option`, which holds its help: the
    command line's ``train`` options are made from these fields, so the two cannot disagree.
    The defaults are those that train fastest on a 2-core CPU at the book's sizes
    (``benchmarks/results/train_speed.md``): a cosine schedule, peak ``lr`` 6e-3 after 100
    warm-up steps, down to 0 at the last of :data:`DEFAULT_STEPS` steps (the command line's
    dates Transformer: 99.5% held-out exact match within 20 s, the median of the seeds; a
    decay to 0 rather than to a tenth of the peak ended better on 3 of 5 seeds).
    """

    # the length of the run
    steps: int | None = option(
        None,
        f"total updates (default {DEFAULT_STEPS} unless --epochs)",
        type=positive_int,
        metavar="N",
        group="optimisation",
        exclusive="length",
    )
    epochs: int | None = option(
        None,
        "passes over the training data, instead of --steps",
        type=positive_int,
        metavar="N",
        group="optimisation",
        exclusive="length",
    )
    max_seconds: float | None = option(
        None,
        "stop after S seconds of training (evaluations included), or when "
        "--steps/--epochs are done if that comes first",
        type=positive_float,
        metavar="S",
        group="optimisation",
    )
    # the optimiser and its schedule
    batch_size: int = option(
        64,
        "pairs per update, over all processes",
        type=positive_int,
        metavar="N",
        group="optimisation",
    )
    optimizer: str = option("adamw", "optimiser", choices=OPTIMIZERS, group="optimisation")
    lr: float = option(
        6e-3, "peak learning rate of constant/cosine", type=positive_float, group="optimisation"
    )
    schedule: str = option(
        "cosine",
        "learning-rate schedule: noam (the paper's warm-up, 1/sqrt(step) decay), constant, "
        "or cosine (warm-up, then a cosine decay to min-lr-ratio * lr at the last step; it "
        "ends cleaner on short runs: see benchmarks/results/train_speed.md)",
        choices=SCHEDULES,
        group="optimisation",
    )
    warmup: int = option(100, "warm-up steps", type=natural_int, metavar="N", group="optimisation")
    lr_scale: float = option(
        1.0,
        "noam: factor on d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)",
        type=positive_float,
        metavar="F",
        group="optimisation",
    )
    d_model: int | None = option(
        None,
        "noam: the d_model of its formula (default: the model's d_model, else its hidden size)",
        type=positive_int,
        metavar="N",
        flag="--noam-d-model",
        dest="noam_d_model",
        group="optimisation",
    )
    min_lr_ratio: float = option(
        0.0,
        "cosine: the last step's learning rate, as a fraction of lr",
        type=unit_interval,
        metavar="R",
        group="optimisation",
    )
    betas: tuple[float, float] = option(
        (0.9, 0.98), "Adam's beta1,beta2", type=float_pair, metavar="B1,B2", group="optimisation"
    )
    adam_eps: float = option(
        1e-9, "Adam's epsilon", type=positive_float, metavar="EPS", group="optimisation"
    )
    weight_decay: float = option(
        0.01, "AdamW weight decay", type=float, metavar="W", group="optimisation"
    )
    grad_clip: float | None = option(
        1.0, "clip the gradient norm", type=positive_float, metavar="NORM", group="optimisation"
    )
    label_smoothing: float = option(
        0.1, "label smoothing", type=fraction, metavar="EPS", group="optimisation"
    )
    # evaluation and logging
    eval_every: int = option(
        250,
        "evaluate (and save a checkpoint) every N steps",
        type=positive_int,
        metavar="N",
        group="optimisation",
    )
    eval_examples: int | None = option(
        500,
        "validation pairs decoded at each evaluation",
        type=positive_int,
        metavar="N",
        group="optimisation",
    )
    log_every: int = option(
        25, "a history row every N steps", type=positive_int, metavar="N", group="optimisation"
    )
    bucket: bool = option(
        True,
        "batches of similar lengths (less padding); --no-bucket shuffles freely",
        group="optimisation",
    )
    # where and how it runs
    device: str = option("auto", "auto = cuda, then mps, then cpu", choices=DEVICES, group="run")
    amp: bool | None = option(
        None,
        "mixed precision (default: on for CUDA, off elsewhere; on the CPU it autocasts to "
        "bfloat16)",
        group="run",
    )
    compile: bool = option(
        False,
        "torch.compile the model for training (minutes of compiling on a CPU; worth it for "
        "long GPU runs)",
        group="run",
        show_default=False,
    )
    seed: int = option(0, "random seed", type=natural_int, group="run")
    progress: bool = option(
        True,
        "no progress bar or log lines",
        flag="--quiet",
        dest="quiet",
        invert=True,
        group="run",
        show_default=False,
    )
    out_dir: str | None = option(
        None,
        "output folder (default: runs/TASK-MODEL; on --resume the checkpoint's folder)",
        metavar="DIR",
        flag="--out",
        dest="out",
        group="run",
    )

    def __post_init__(self):
        _check_kinds(self)
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
        elif self.steps is not None:  # the history the steps will write (attnbook._limits)
            check_memory(
                "TrainConfig",
                {"steps": self.steps, "log_every": self.log_every},
                "the training history (a row every log_every steps and at every evaluation)",
                history_bytes(self.steps, self.log_every, self.eval_every),
            )
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
        if isinstance(self.weight_decay, bool) or not isinstance(self.weight_decay, (int, float)):
            raise TypeError(f"weight_decay must be a number >= 0, got {self.weight_decay!r}")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.grad_clip is not None:
            _check_lr("grad_clip", self.grad_clip)
        check_probability("label_smoothing", self.label_smoothing)
        if self.device not in DEVICES and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device must be one of {DEVICES} (or 'cuda:N'), got {self.device!r}")
        if not (self.amp is None or isinstance(self.amp, bool)):
            raise TypeError(f"amp must be None (auto), True or False, got {self.amp!r}")
        for name in ("bucket", "compile", "progress"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(
                    f"{name} must be a bool (True or False), got {type(value).__name__} {value!r}"
                )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict, **overrides) -> TrainConfig:
        """Rebuild a config (e.g. from a checkpoint), ignoring keys it does not know."""
        if not isinstance(d, Mapping):
            raise TypeError(f"d must be a dict of TrainConfig's fields, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in d.items() if k in known}, **overrides})


def _number(name: str, value, low: float, high: float, *, high_open: bool = False) -> float:
    """``value``: a real number (not a bool, not NaN) in ``[low, high]`` (``[low, high)``)."""
    want = f"[{low}, {high}{')' if high_open else ']'}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name} must be a float in {want}, got {type(value).__name__} {value!r:.40}"
        )
    if not (low <= value < high if high_open else low <= value <= high):
        raise ValueError(f"{name} must be a float in {want}, got {value!r}")
    return float(value)


def _check_kinds(c: TrainConfig) -> None:
    """The fields whose type the range checks of ``__post_init__`` take for granted: each
    wrong one a ``TypeError`` or ``ValueError`` naming it (never a comparison's own error)."""
    _number("min_lr_ratio", c.min_lr_ratio, 0.0, 1.0)
    if isinstance(c.betas, (str, bytes)) or not isinstance(c.betas, (tuple, list)):
        raise TypeError(
            f"betas must be two floats in [0, 1) such as (0.9, 0.98), got "
            f"{type(c.betas).__name__} {c.betas!r:.40}"
        )
    if len(c.betas) != 2:
        raise ValueError(f"betas must be two floats in [0, 1), got {len(c.betas)}: {c.betas!r:.60}")
    for i, beta in enumerate(c.betas):
        _number(f"betas[{i}]", beta, 0.0, 1.0, high_open=True)
    if isinstance(c.weight_decay, (int, float)) and not isinstance(c.weight_decay, bool):
        if not math.isfinite(c.weight_decay):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {c.weight_decay}")
    if not isinstance(c.device, str):
        raise TypeError(
            f"device must be a str, one of {DEVICES} or 'cuda:N', got "
            f"{type(c.device).__name__} {c.device!r:.40}"
        )
    if c.device.startswith("cuda:") and not c.device[5:].isdigit():
        raise ValueError(f"device 'cuda:N' wants N a GPU's number such as cuda:0, got {c.device!r}")
    if c.out_dir is not None:
        check_path("out_dir", c.out_dir)
