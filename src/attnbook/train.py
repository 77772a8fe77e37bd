"""Training (训练) a sequence-to-sequence model: loss, schedule, loop, checkpoints, many GPUs.

Every model of this package trains the same way, with teacher forcing: the decoder reads
``tgt_in`` = BOS + target and its logits are scored against ``tgt_out`` = target + EOS.

- :func:`label_smoothed_loss`: cross-entropy against a smoothed target distribution (label
  smoothing, 标签平滑, Szegedy et al. 2016; Vaswani et al. 2017 use ``eps = 0.1``), with the
  padding positions left out;
- :func:`noam_lr`: the warm-up schedule of the Transformer paper,
  ``lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``, and the alternatives
  :func:`constant_lr` and :func:`cosine_lr` (linear warm-up, then flat or a cosine decay);
- :class:`TrainConfig` (every knob, checked) and :class:`Trainer`: the loop, with AdamW/Adam,
  gradient clipping, mixed precision on CUDA, an optional ``torch.compile``, evaluation every
  ``eval_every`` steps (loss, token accuracy, exact match by greedy decoding) kept in
  ``trainer.history``, a progress bar, and checkpoints;
- :func:`train_model`: the one-call form the chapters use for runs of a few seconds.

Checkpoints (:meth:`Trainer.save_checkpoint`) hold the model, optimiser, scheduler, grad
scaler, every random-number generator, the position in the batch order, the step, the config
and the vocabularies. They are written atomically (:func:`atomic_save`: a temporary file, then
``os.replace``), so a crash while saving leaves the previous checkpoint whole, and a resumed
run (:meth:`Trainer.load_checkpoint`) continues exactly as if it had never stopped.

Several processes (``torchrun --nproc_per_node=N``): each process takes its share of every
global batch and ``DistributedDataParallel`` averages the gradients; the loss is normalised
by the token count of the *global* batch, so the update is the one a single process would
make on the whole batch. Only rank 0 evaluates and writes files.

Shapes: ``B`` batch, ``T`` target length, ``V`` target vocabulary size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import math
import os
import pickle
import random
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from ._checks import check_positive_int, check_probability, check_tensor
from .data import BOS, EOS, BucketBatchSampler, Seq2SeqDataset, TaskData, Vocab, collate
from .decode import greedy_decode
from .utils import DEVICES, get_device, model_device

__all__ = [
    "OPTIMIZERS",
    "SCHEDULES",
    "CHECKPOINT_FORMAT",
    "label_smoothed_loss",
    "token_accuracy",
    "exact_match",
    "noam_lr",
    "constant_lr",
    "cosine_lr",
    "scheduled_lr",
    "TrainConfig",
    "Trainer",
    "train_model",
    "atomic_save",
    "atomic_write",
    "remove_stale_temp_files",
    "load_checkpoint",
    "CheckpointError",
    "NonFiniteLossError",
    "init_distributed",
    "BatchOrder",
    "HISTORY_KEYS",
]

OPTIMIZERS = ("adamw", "adam")
SCHEDULES = ("noam", "constant", "cosine")
CHECKPOINT_FORMAT = "attnbook-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that does not fit the model or data at hand."""


class NonFiniteLossError(FloatingPointError):
    """Training diverged: the training loss (``what="training loss"``, found before the update
    of ``step`` is applied), the validation loss or the weights became NaN or infinite.
    Nothing is saved from such a model: ``checkpoint`` is the last good one (None if none),
    written at step ``saved_step``."""

    def __init__(
        self,
        step: int,
        loss: float,
        checkpoint: Path | None = None,
        *,
        what: str = "training loss",
        saved_step: int | None = None,
    ):
        self.step, self.loss, self.checkpoint = step, loss, checkpoint
        self.what, self.saved_step = what, saved_step
        at = f" (step {saved_step})" if saved_step is not None else ""
        kept = (
            f"the last good checkpoint, {checkpoint}{at}, is kept untouched"
            if checkpoint
            else "no checkpoint was written"
        )
        when = "before that update" if what == "training loss" else "without saving that model"
        super().__init__(
            f"the {what} became {loss} at step {step}; training stopped {when} "
            f"({kept}). Try a lower learning rate or lr scale, a longer warm-up, "
            "gradient clipping, or --no-amp"
        )


# --------------------------------------------------------------------------------------------
# loss and accuracy
# --------------------------------------------------------------------------------------------


def _check_logits_targets(logits, targets) -> None:
    check_tensor("logits", logits, ndim=3, floating=True, shape_hint="(B, T, V)")
    check_tensor("targets", targets, ndim=2, integer=True, shape_hint="(B, T)")
    if logits.shape[:2] != targets.shape:
        raise ValueError(
            f"logits (B, T, V) and targets (B, T) must agree in B and T, got "
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)}"
        )


def label_smoothed_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    pad_id: int = 0,
    smoothing: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy against the smoothed distribution ``q = (1 - eps) one_hot(y) + eps / V``.

    ``logits (B, T, V)``, ``targets (B, T)``; positions where ``targets == pad_id`` count for
    nothing. Per token the loss is

        -sum_v q_v log p_v  =  (1 - eps) * (-log p_y)  +  eps * mean_v(-log p_v)

    (the convention of ``F.cross_entropy(..., label_smoothing=eps)``: the ``eps`` mass is
    spread over all ``V`` classes). ``reduction="mean"`` averages over the real tokens,
    ``"sum"`` adds them up. Computed in float32 whatever the logits' dtype.
    """
    _check_logits_targets(logits, targets)
    check_positive_int("pad_id", pad_id, minimum=0)
    eps = check_probability("smoothing", smoothing)
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    log_p = F.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    real = targets != pad_id  # (B, T)
    nll = -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T): -log p_y
    loss = (1.0 - eps) * nll + eps * (-log_p.mean(dim=-1)) if eps else nll
    total = loss.masked_fill(~real, 0.0).sum()
    if reduction == "sum":
        return total
    return total / real.sum().clamp(min=1)


def token_accuracy(logits: torch.Tensor, targets: torch.Tensor, pad_id: int = 0) -> float:
    """Fraction of real (non-pad) target positions where the argmax of ``logits`` is right
    (teacher forcing: every position sees the true prefix)."""
    _check_logits_targets(logits, targets)
    real = targets != pad_id
    right = (logits.argmax(dim=-1) == targets) & real
    return right.sum().item() / max(real.sum().item(), 1)


def exact_match(predictions: torch.Tensor, targets: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """``(B,)`` bool: True where the prediction equals the target up to and including EOS.

    ``predictions (B, L)`` are decoded ids after BOS (as :func:`attnbook.decode.greedy_decode`
    gives them: padded with ``pad_id`` after EOS); ``targets (B, T)`` is ``tgt_out`` (target +
    EOS, padded). Widths may differ: the shorter is padded.
    """
    check_tensor("predictions", predictions, ndim=2, integer=True, shape_hint="(B, L)")
    check_tensor("targets", targets, ndim=2, integer=True, shape_hint="(B, T)")
    if predictions.shape[0] != targets.shape[0]:
        raise ValueError(
            f"predictions and targets must have the same batch size, got "
            f"{tuple(predictions.shape)} and {tuple(targets.shape)}"
        )
    width = max(predictions.shape[1], targets.shape[1])
    p = F.pad(predictions, (0, width - predictions.shape[1]), value=pad_id)  # (B, W)
    t = F.pad(targets, (0, width - targets.shape[1]), value=pad_id)  # (B, W)
    return (p == t).all(dim=1)


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
    if not 0.0 <= min_ratio <= 1.0:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
    if warmup and step <= warmup:
        return lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return lr * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def scheduled_lr(
    config: TrainConfig, step: int, total_steps: int | None, d_model: int | None
) -> float:
    """The learning rate of update ``step`` under ``config``'s schedule, for a run of
    ``total_steps`` (cosine) and a model of width ``d_model`` (noam)."""
    c = config
    if c.schedule == "noam":
        return noam_lr(step, d_model, c.warmup, c.lr_scale)
    if c.schedule == "constant":
        return constant_lr(step, c.lr, c.warmup)
    return cosine_lr(step, c.lr, c.warmup, total_steps, c.min_lr_ratio)


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


# --------------------------------------------------------------------------------------------
# the order of the batches: resumable
# --------------------------------------------------------------------------------------------


class BatchOrder:
    """Global batches of example indices, epoch after epoch, from a seeded generator.

    Epoch ``e``'s batches come from ``BucketBatchSampler`` (length-bucketed, shuffled) seeded
    by ``(seed, e)``, so the whole order is fixed by ``seed``; :meth:`state_dict` is the
    epoch and the position within it, all a checkpoint needs to continue with the very next
    batch. Partial batches are dropped (unless the data are smaller than one batch).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, bucket: bool = True):
        self.lengths, self.batch_size, self.seed = list(lengths), batch_size, seed
        self.bucket = bucket
        self.epoch, self.position = 0, 0
        self._cache: tuple[int, list[list[int]]] | None = None

    def _batches(self, epoch: int) -> list[list[int]]:
        if self._cache is None or self._cache[0] != epoch:
            drop_last = len(self.lengths) >= self.batch_size
            if self.bucket:
                sampler = BucketBatchSampler(
                    self.lengths, self.batch_size, seed=self.seed, drop_last=drop_last
                )
                sampler.set_epoch(epoch)
                batches = list(sampler)
            else:
                g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
                order = torch.randperm(len(self.lengths), generator=g).tolist()
                batches = [
                    order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)
                ]
                if drop_last:
                    batches = [b for b in batches if len(b) == self.batch_size]
            self._cache = (epoch, batches)
        return self._cache[1]

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._batches(0))

    def peek(self) -> list[int]:
        """The next batch's indices (not consumed until :meth:`advance`)."""
        batches = self._batches(self.epoch)
        if self.position >= len(batches):
            self.epoch, self.position = self.epoch + 1, 0
            batches = self._batches(self.epoch)
        return batches[self.position]

    def advance(self) -> None:
        self.position += 1

    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "n_examples": len(self.lengths),
            "bucket": self.bucket,
        }

    def load_state_dict(self, state: dict) -> None:
        for key, mine in (
            ("n_examples", len(self.lengths)),
            ("batch_size", self.batch_size),
            ("seed", self.seed),
            ("bucket", self.bucket),
        ):
            if state.get(key) != mine:
                raise CheckpointError(
                    f"the checkpoint's batch order has {key}={state.get(key)}"
                    f" but this run has {key}={mine}; resume with the same "
                    "data, batch size and seed"
                )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


# --------------------------------------------------------------------------------------------
# checkpoints on disk
# --------------------------------------------------------------------------------------------

_TEMP_MARK = ".tmp-"


def atomic_write(path: str | Path, write) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temporary file ``.NAME.tmp-PID`` (binary,
    in the same folder), which is flushed to disk and then ``os.replace``-d over ``path``. A
    failure part-way (an error, a full disk, Ctrl-C) leaves the old ``path`` untouched and
    removes the temporary file; a process killed outright leaves it behind for
    :func:`remove_stale_temp_files`. An ``OSError`` names the file (and says "no space left
    on device" for a full disk)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}{_TEMP_MARK}{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                why = "no space left on device"
            else:
                why = e.strerror or str(e)
            error = OSError(
                f"could not write {path}: {why} (the previous {path.name}, if any, is untouched)"
            )
            error.errno = e.errno
            raise error from e
        raise
    return path


def atomic_save(obj, path: str | Path) -> Path:
    """``torch.save(obj)`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda f: torch.save(obj, f))


def remove_stale_temp_files(folder: str | Path) -> list[Path]:
    """Remove the temporary files (``.NAME.tmp-PID``) that :func:`atomic_write` left in
    ``folder`` when its process was killed (SIGKILL, a power cut): those whose process is
    no longer running. Returns what was removed."""
    removed = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for tmp in folder.glob(f".*{_TEMP_MARK}*"):
        pid = tmp.name.rpartition(_TEMP_MARK)[2]
        if not pid.isdigit() or (int(pid) != os.getpid() and _process_exists(int(pid))):
            continue
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, as another user's process
        return True
    return True


def load_checkpoint(path: str | Path, map_location="cpu") -> dict:
    """Read a checkpoint written by :class:`Trainer`; :class:`CheckpointError` (one clear
    sentence) when the file is missing, unreadable or not an attnbook checkpoint.

    Loaded with ``torch.load(weights_only=True)``: a checkpoint holds tensors and plain
    Python values only, so loading one never runs code from the file.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist (or is not a file)")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a truncated zip, random bytes, a pickle with code...
        if isinstance(e, pickle.UnpicklingError) or "weights_only" in str(e).lower():
            why = "not a PyTorch checkpoint, or one holding more than tensors and plain values"
        else:
            why = str(e).strip().splitlines()[0][:150] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not a checkpoint: torch.load "
            f"could not read it ({why})"
        ) from e
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path} is not an attnbook training checkpoint (it has no "
            f"format={CHECKPOINT_FORMAT!r} entry)"
        )
    return ckpt


# --------------------------------------------------------------------------------------------
# processes and devices
# --------------------------------------------------------------------------------------------


def init_distributed(backend: str | None = None) -> tuple[int, int]:
    """Join the process group that ``torchrun`` describes in the environment.

    Returns ``(rank, world_size)``; ``(0, 1)`` without ``torchrun`` (WORLD_SIZE unset or 1).
    The backend is NCCL when CUDA is available, else gloo.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size()


def _distributed() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _resolve_device(preference: str, world_size: int) -> torch.device:
    if str(preference).startswith("cuda:"):
        return torch.device(preference)
    device = get_device(preference)
    if device.type == "cuda" and world_size > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def _amp_settings(device: torch.device, amp: bool | None) -> tuple[torch.dtype | None, bool]:
    """(autocast dtype or None when off, whether a gradient scaler is needed)."""
    if amp is None:
        amp = device.type == "cuda"
    if not amp:
        return None, False
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, False
        return torch.float16, True
    if device.type == "mps":
        return torch.float16, True
    return torch.bfloat16, False  # CPU


def _rng_state() -> dict:
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "numpy": (
            np_state[0],
            torch.from_numpy(np_state[1].astype(np.int64)),
            int(np_state[2]),
            int(np_state[3]),
            float(np_state[4]),
        ),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(_as_tuples(state["python"]))
    torch.set_rng_state(state["torch"].cpu())
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if (
        "cuda" in state
        and torch.cuda.is_available()
        and len(state["cuda"]) == torch.cuda.device_count()
    ):
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _as_tuples(x):
    """Python's random state is nested tuples; a round trip may give lists."""
    return tuple(_as_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


class _StopOnSignal:
    """While active (main thread only), the first Ctrl-C (SIGINT) or SIGTERM asks the loop to
    stop at the next step boundary; a second Ctrl-C interrupts at once."""

    def __init__(self):
        self.requested: str | None = None
        self._previous: dict = {}

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = self.requested or signal.Signals(signum).name

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        return False


# --------------------------------------------------------------------------------------------
# the trainer
# --------------------------------------------------------------------------------------------


def _as_dataset(name: str, data, src_vocab, tgt_vocab) -> Seq2SeqDataset:
    if isinstance(data, Seq2SeqDataset):
        return data
    if isinstance(data, (list, tuple)):
        if src_vocab is None or tgt_vocab is None:
            raise ValueError(
                f"{name} is a list of (source, target) pairs: pass src_vocab and "
                "tgt_vocab to encode it (or give a Seq2SeqDataset)"
            )
        return Seq2SeqDataset(data, src_vocab, tgt_vocab)
    raise TypeError(
        f"{name} must be a Seq2SeqDataset or a list of (source, target) pairs, got "
        f"{type(data).__name__}"
    )


def _check_fits(model: nn.Module, datasets: dict) -> None:
    """A model with a positional table (``max_len``) must be able to read every example:
    sources of up to ``max_len`` tokens, targets of up to ``max_len`` tokens after BOS."""
    limit = getattr(model, "max_len", None)
    if not isinstance(limit, int):
        return
    for name, data in datasets.items():
        if data is None:
            continue
        longest_src = max(len(src) for src, _ in data.items)
        longest_tgt = max(len(tgt) - 1 for _, tgt in data.items)  # BOS + target
        for side, n in (("source", longest_src), ("target (with BOS)", longest_tgt)):
            if n > limit:
                raise ValueError(
                    f"{name} holds a {side} of {n} tokens, but the model reads "
                    f"at most max_len={limit} positions (its positional table); "
                    "drop longer pairs or build the model with a larger max_len"
                )


HISTORY_KEYS = (
    "step",
    "epoch",
    "seconds",
    "lr",
    "train_loss",
    "val_loss",
    "token_accuracy",
    "exact_match",
)


class Trainer:
    """Train a seq2seq ``model`` (the interface of :mod:`attnbook.decode`, plus
    ``forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V)``).

    ``train_data`` and ``val_data`` are :class:`attnbook.data.Seq2SeqDataset` s or lists of
    ``(source, target)`` pairs (then ``src_vocab`` and ``tgt_vocab`` are needed); or
    ``train_data`` is a whole :class:`attnbook.data.TaskData` (its train split, its
    vocabularies and, unless ``val_data`` is given, its val split). Without validation data
    there is no evaluation. ``meta`` is stored in every checkpoint as given (the
    command line keeps the model's constructor arguments and the task there).

    ``fit()`` trains and returns ``history``: one dict a row (keys :data:`HISTORY_KEYS`) every
    ``log_every`` steps and at each evaluation, ``train_loss`` being the mean since the
    previous row and the evaluation keys None where no evaluation ran.
    """

    def __init__(
        self,
        model: nn.Module,
        train_data,
        val_data=None,
        config: TrainConfig | None = None,
        *,
        src_vocab: Vocab | None = None,
        tgt_vocab: Vocab | None = None,
        meta: dict | None = None,
    ):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        missing = [
            n
            for n in ("pad_id", "init_decoder", "decode_step", "reorder_state")
            if not hasattr(model, n)
        ]
        if missing:
            raise TypeError(
                f"model must be a seq2seq model with the decoding interface of "
                f"attnbook.decode; {type(model).__name__} lacks {missing}"
            )
        config = TrainConfig() if config is None else config
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        self.config, self.meta = config, dict(meta or {})
        if isinstance(train_data, TaskData):  # a whole task: its splits and vocabs
            task = train_data
            train_data, src_vocab, tgt_vocab = task.train, task.src_vocab, task.tgt_vocab
            val_data = task.val if val_data is None else val_data
        self.train_data = _as_dataset("train_data", train_data, src_vocab, tgt_vocab)
        self.val_data = (
            None
            if val_data is None or len(val_data) == 0
            else _as_dataset("val_data", val_data, src_vocab, tgt_vocab)
        )
        self.src_vocab = src_vocab or self.train_data.src_vocab
        self.tgt_vocab = tgt_vocab or self.train_data.tgt_vocab
        self.pad_id = model.pad_id
        _check_fits(model, {"train_data": self.train_data, "val_data": self.val_data})

        self.rank, self.world_size = _distributed()
        self.is_main = self.rank == 0
        self.device = _resolve_device(config.device, self.world_size)
        if config.batch_size < self.world_size:
            raise ValueError(
                f"batch_size (the global batch) must be >= the number of "
                f"processes, got {config.batch_size} < {self.world_size}"
            )
        self.model = model.to(self.device)
        self.amp_dtype, use_scaler = _amp_settings(self.device, config.amp)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=use_scaler)

        # what runs the training forward pass: compiled and/or wrapped for several processes
        self.train_module: nn.Module = self.model
        if config.compile:
            self.train_module = torch.compile(self.train_module)
        if self.world_size > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_module = nn.parallel.DistributedDataParallel(
                self.train_module, device_ids=ids
            )

        self.optimizer = self._make_optimizer()
        self.order = BatchOrder(
            self.train_data.lengths, config.batch_size, config.seed, config.bucket
        )
        # tokens scored per example (target + EOS), to normalise by the global batch's count
        self.n_tokens = [len(tgt) - 1 for _, tgt in self.train_data.items]
        self.total_steps = self._total_steps()
        self.d_model = (
            config.d_model or getattr(model, "d_model", None) or getattr(model, "hidden_dim", None)
        )
        if config.schedule == "noam" and self.d_model is None:
            raise ValueError(
                "schedule='noam' needs d_model: the model has no d_model or "
                "hidden_dim attribute, so set TrainConfig(d_model=...)"
            )
        # the optimiser's base lr is 1, so the schedule gives the learning rate itself
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda i: self.lr_at(i + 1)
        )  # update i + 1 runs with lr_at(i + 1)
        self.step, self.elapsed = 0, 0.0
        self.history: list[dict] = []
        self.interrupted: str | None = None  # "SIGINT" etc. when fit() was stopped
        self._updating = False  # inside an optimiser update (see fit)
        self.checkpoint_path = Path(config.out_dir) / "checkpoint.pt" if config.out_dir else None
        self.saved_step: int | None = None  # the step of the last checkpoint written

    # ------------------------------------------------------------------ set-up helpers

    def _make_optimizer(self) -> torch.optim.Optimizer:
        c = self.config
        params = [p for p in self.model.parameters() if p.requires_grad]
        if c.optimizer == "adamw":
            decay = [p for p in params if p.dim() >= 2]  # matrices and embeddings
            no_decay = [p for p in params if p.dim() < 2]  # biases, LayerNorm gains
            groups = [
                {"params": decay, "weight_decay": c.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(groups, lr=1.0, betas=c.betas, eps=c.adam_eps)
        return torch.optim.Adam(
            params, lr=1.0, betas=c.betas, eps=c.adam_eps, weight_decay=c.weight_decay
        )

    def _total_steps(self) -> int | None:
        c = self.config
        if c.steps is not None:
            return c.steps
        if c.epochs is not None:
            return c.epochs * len(self.order)
        return None if c.max_seconds is not None else 1000

    def lr_at(self, step: int) -> float:
        """The learning rate of update number ``step`` (1 = the first)."""
        return scheduled_lr(self.config, step, self.total_steps, self.d_model)

    def _autocast(self):
        return torch.autocast(
            self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None
        )

    def _batch(self, indices: Sequence[int], dataset: Seq2SeqDataset | None = None):
        data = self.train_data if dataset is None else dataset
        return collate([data[i] for i in indices], self.pad_id).to(self.device)

    def _all_reduce(self, values: list[float], op=None) -> list[float]:
        if self.world_size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
        return t.tolist()

    # ------------------------------------------------------------------ one step

    def train_step(self, indices: Sequence[int]) -> float:
        """One update on the global batch ``indices``; returns its mean loss (all processes).

        Raises :class:`NonFiniteLossError` *before* touching the weights if the loss is NaN
        or infinite.
        """
        global_tokens = sum(self.n_tokens[i] for i in indices)
        batch = self._batch(indices[self.rank :: self.world_size])  # this rank's share
        self.train_module.train()
        with self._autocast():
            logits = self.train_module(batch.src, batch.tgt_in)  # (B, T, V)
        if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
            raise TypeError(
                f"model(src, tgt_in) must return logits (B, T, V), got {type(logits).__name__}"
            )
        loss_sum = label_smoothed_loss(
            logits, batch.tgt_out, self.pad_id, self.config.label_smoothing, reduction="sum"
        )
        # DDP averages gradients over processes: scale so the result is the global mean
        loss = loss_sum * (self.world_size / global_tokens)
        (mean_loss,) = self._all_reduce([loss_sum.item() / global_tokens])
        if not math.isfinite(mean_loss):
            raise NonFiniteLossError(
                self.step + 1, mean_loss, self._last_saved(), saved_step=self.saved_step
            )
        self.scaler.scale(loss).backward()
        self._updating = True  # from here on, Ctrl-C must not save half an update
        if self.config.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return mean_loss

    def _last_saved(self) -> Path | None:
        p = self.checkpoint_path
        return p if p is not None and p.exists() else None

    def _save_if_healthy(self, val_loss: float | None) -> None:
        """Save the checkpoint of ``out_dir`` only from a healthy model: finite weights and a
        finite validation loss (None: not evaluated). Otherwise raise
        :class:`NonFiniteLossError` and keep the last good checkpoint as it is."""
        if self.checkpoint_path is None:
            return
        bad_weights = not all(torch.isfinite(p).all() for p in self.model.parameters())
        bad_loss = val_loss is not None and not math.isfinite(val_loss)
        (bad,) = self._all_reduce(
            [float(bad_weights) + 2.0 * float(bad_loss)],
            op=dist.ReduceOp.MAX if self.world_size > 1 else None,
        )
        if bad:
            what, value = (
                ("validation loss", val_loss)
                if bad_loss or bad >= 2
                else ("model's weights", "non-finite (NaN or inf)")
            )
            raise NonFiniteLossError(
                self.step, value, self._last_saved(), what=what, saved_step=self.saved_step
            )
        self.save_checkpoint()

    # ------------------------------------------------------------------ the loop

    def fit(self) -> list[dict]:
        """Train until ``steps``/``epochs`` are done, ``max_seconds`` have passed, or Ctrl-C
        (SIGINT) / SIGTERM asks to stop (then a checkpoint is saved and ``interrupted`` names
        the signal). Evaluates every ``eval_every`` steps and at the end. Returns ``history``.
        """
        from tqdm.auto import tqdm

        c = self.config
        self.interrupted, self._updating = None, False
        start, losses, last_eval = time.perf_counter(), [], None
        self._clock = (self.elapsed, start)  # seconds before this call, its start
        bar = tqdm(
            total=self.total_steps,
            initial=self.step,
            desc="training",
            unit="step",
            disable=not (c.progress and self.is_main),
            dynamic_ncols=True,
        )
        try:
            with _StopOnSignal() as stop:
                while self.total_steps is None or self.step < self.total_steps:
                    out_of_time = (
                        c.max_seconds is not None and time.perf_counter() - start >= c.max_seconds
                    )
                    if self._agree_to_stop(out_of_time or stop.requested is not None):
                        self.interrupted = stop.requested
                        break
                    losses.append(self.train_step(self.order.peek()))
                    self.order.advance()
                    self.step += 1
                    self._updating = False  # the update is complete
                    bar.update(1)
                    evaluate_now = self.step % c.eval_every == 0
                    if evaluate_now or self.step % c.log_every == 0:
                        row = self._log_row(losses, evaluate_now)
                        losses = []
                        last_eval = self.step if evaluate_now else last_eval
                        self._show(bar, row, tqdm.write if evaluate_now else None)
                        if evaluate_now:
                            self._save_if_healthy(row["val_loss"])
        except KeyboardInterrupt:  # a second Ctrl-C, or one outside the main thread
            if self._updating:  # half an update: nothing consistent to save
                raise
            self.optimizer.zero_grad(set_to_none=True)  # drop a half-done backward pass
            self.interrupted = "KeyboardInterrupt"
        finally:
            bar.close()
        final_eval = self.step != last_eval and not self.interrupted and self.val_data is not None
        row = None
        if losses or final_eval:
            row = self._log_row(losses, final_eval)
            self._show(None, row, tqdm.write)
        self.elapsed = self._clock[0] + time.perf_counter() - start
        self._save_if_healthy(row["val_loss"] if row is not None and final_eval else None)
        return self.history

    def _agree_to_stop(self, mine: bool) -> bool:
        """Every process stops at the same step (one asked -> all stop)."""
        if self.world_size == 1:
            return mine
        (anyone,) = self._all_reduce([float(mine)], op=dist.ReduceOp.MAX)
        return anyone > 0

    def _log_row(self, losses: list[float], evaluate: bool) -> dict:
        before, start = self._clock
        row = dict.fromkeys(HISTORY_KEYS)
        row.update(
            step=self.step,
            epoch=round(self.step / len(self.order), 4),
            seconds=round(before + time.perf_counter() - start, 3),
            lr=self.lr_at(self.step) if self.step else None,  # of the last update
            train_loss=sum(losses) / len(losses) if losses else None,
        )
        if evaluate and self.is_main and self.val_data is not None:
            row.update(self.evaluate())
        if self.history and self.history[-1]["step"] == self.step:
            self.history[-1].update({k: v for k, v in row.items() if v is not None})
        else:
            self.history.append(row)
        return self.history[-1]

    def _show(self, bar, row: dict, write) -> None:
        """The bar's postfix keeps the latest loss and the latest evaluation."""
        if not (self.config.progress and self.is_main):
            return
        shown = self.__dict__.setdefault("_shown", {})
        for key, name in (("train_loss", "loss"), ("val_loss", "val"), ("exact_match", "exact")):
            if row[key] is not None:
                shown[name] = f"{100 * row[key]:.1f}%" if name == "exact" else f"{row[key]:.4f}"
        if bar is not None:
            bar.set_postfix(shown, refresh=False)
        if write is not None and row["val_loss"] is not None:
            write(f"step {row['step']}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))

    # ------------------------------------------------------------------ evaluation

    @torch.no_grad()
    def evaluate(
        self, data=None, max_examples: int | None = -1, batch_size: int = 256
    ) -> dict[str, float]:
        """Loss, token accuracy (teacher forcing) and exact match (greedy decoding).

        ``data``: a Seq2SeqDataset or pairs (default: the validation data); ``max_examples``
        caps the examples used (the first ones; default ``config.eval_examples``, None =
        all). ``val_loss`` is the plain cross-entropy per token, without label smoothing.
        """
        data = (
            self.val_data
            if data is None
            else _as_dataset("data", data, self.src_vocab, self.tgt_vocab)
        )
        if data is None:
            raise ValueError("no data to evaluate: the trainer has no val_data; pass data")
        max_examples = self.config.eval_examples if max_examples == -1 else max_examples
        n = len(data) if max_examples is None else min(len(data), max_examples)
        check_positive_int("batch_size", batch_size)
        order = sorted(range(n), key=lambda i: data.lengths[i])  # less padding
        was_training = self.model.training
        self.model.eval()
        loss_sum = tokens = right = exact = 0.0
        for start in range(0, n, batch_size):
            batch = self._batch(order[start : start + batch_size], data)
            logits = self.model(batch.src, batch.tgt_in)  # (B, T, V)
            real = batch.tgt_out != self.pad_id
            loss_sum += label_smoothed_loss(
                logits, batch.tgt_out, self.pad_id, reduction="sum"
            ).item()
            tokens += real.sum().item()
            right += ((logits.argmax(-1) == batch.tgt_out) & real).sum().item()
            predicted = greedy_decode(
                self.model, batch.src, bos_id=BOS, eos_id=EOS, max_len=batch.tgt_out.shape[1]
            )  # (B, <= T)
            exact += exact_match(predicted, batch.tgt_out, self.pad_id).sum().item()
        self.model.train(was_training)
        return {
            "val_loss": loss_sum / tokens,
            "token_accuracy": right / tokens,
            "exact_match": exact / n,
        }

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict:
        """Everything a checkpoint holds (see the module docstring)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "step": self.step,
            "elapsed": self.elapsed,
            "model": self.model.state_dict(),
            "model_class": type(self.model).__name__,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "order": self.order.state_dict(),
            "rng": _rng_state(),
            "config": self.config.to_dict(),
            "vocab": {"src": self.src_vocab.to_dict(), "tgt": self.tgt_vocab.to_dict()},
            "history": self.history,
            "meta": self.meta,
            "world_size": self.world_size,
        }

    def save_checkpoint(self, path: str | Path | None = None) -> Path | None:
        """Write :meth:`state_dict` atomically to ``path`` (default ``out_dir/checkpoint.pt``).

        Only rank 0 writes; returns the path, or None when nothing was written.
        """
        path = self.checkpoint_path if path is None else Path(path)
        if path is None or not self.is_main:
            return None
        atomic_save(self.state_dict(), path)
        if path == self.checkpoint_path:
            self.saved_step = self.step
        return path

    def load_checkpoint(self, checkpoint: str | Path | dict) -> dict:
        """Restore a checkpoint (a path or a loaded dict) into this trainer, to resume.

        The model must have the same parameters, the data the same size and the vocabularies
        must be equal; otherwise :class:`CheckpointError` says what differs. Returns the dict.
        """
        ckpt = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint)
        if ckpt.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError("not an attnbook training checkpoint")
        if ckpt.get("model_class") != type(self.model).__name__:
            raise CheckpointError(
                f"the checkpoint holds a {ckpt.get('model_class')}, not a "
                f"{type(self.model).__name__}"
            )
        vocab = ckpt.get("vocab") or {}
        if vocab and (
            Vocab.from_dict(vocab["src"]) != self.src_vocab
            or Vocab.from_dict(vocab["tgt"]) != self.tgt_vocab
        ):
            raise CheckpointError("the checkpoint's vocabularies differ from this run's")
        try:
            self.model.load_state_dict(ckpt["model"])
        except RuntimeError as e:
            lines = str(e).strip().splitlines()
            raise CheckpointError(
                "the checkpoint's model does not fit this model (different "
                f"sizes or layers): {' '.join(lines[1:3])[:200]}"
            ) from e
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.scaler.load_state_dict(ckpt["scaler"])
        self.order.load_state_dict(ckpt["order"])
        _set_rng_state(ckpt["rng"])
        self.step, self.elapsed = int(ckpt["step"]), float(ckpt["elapsed"])
        self.history = list(ckpt.get("history", []))
        self.saved_step = self.step
        return ckpt


# --------------------------------------------------------------------------------------------
# the chapters' one call
# --------------------------------------------------------------------------------------------


def train_model(
    model: nn.Module,
    task: TaskData,
    steps: int = 500,
    *,
    batch_size: int = 64,
    progress: bool = False,
    **options,
) -> list[dict]:
    """Train ``model`` on ``task`` (from :func:`attnbook.data.make_task` or ``load_tsv``) for
    ``steps`` steps on the CPU-friendly defaults and return the history; the last row holds
    the final validation loss, token accuracy and exact match. ``options`` are further
    :class:`TrainConfig` fields (``lr``, ``schedule``, ``eval_every``, ``device`` ...).

    The model trains on ``device`` (default ``"auto"``: CUDA, then Apple's MPS, then the CPU)
    and is handed back on the device it came on, also when training stops with an error, so
    the tensors a chapter makes on the CPU work with it afterwards."""
    if not isinstance(task, TaskData):
        raise TypeError(
            f"task must be a TaskData (from make_task or load_tsv), got {type(task).__name__}"
        )
    options.setdefault("eval_every", max(1, -(-steps // 4)))  # 4 evaluations
    options.setdefault("log_every", max(1, min(50, steps // 10)))
    config = TrainConfig(steps=steps, batch_size=batch_size, progress=progress, **options)
    home = model_device(model)
    try:
        return Trainer(model, task, config=config).fit()
    finally:
        model.to(home)
