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

The package holds one concern a module: :mod:`.losses`, :mod:`.schedules`, :mod:`.config`,
:mod:`.batches`, :mod:`.checkpoint`, :mod:`.runtime` and :mod:`.trainer` (the loop).
Every name is importable from ``attnbook.train`` itself.
"""

from .batches import BatchOrder
from .checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    NonFiniteLossError,
    atomic_save,
    atomic_write,
    load_checkpoint,
    remove_stale_temp_files,
)
from .config import DEFAULT_STEPS, OPTIMIZERS, SCHEDULES, TrainConfig
from .losses import exact_match, label_smoothed_loss, token_accuracy
from .runtime import init_distributed
from .schedules import constant_lr, cosine_lr, noam_lr, scheduled_lr
from .trainer import HISTORY_KEYS, Trainer, train_model

__all__ = [
    "OPTIMIZERS",
    "SCHEDULES",
    "DEFAULT_STEPS",
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
