"""The loss and the accuracies of a sequence-to-sequence model under teacher forcing.

``exact_match`` (of decoded outputs) lives in :mod:`attnbook.evaluate`; it is importable from
here too, as ``attnbook.train.exact_match``.

Shapes: ``B`` batch, ``T`` target length, ``V`` target vocabulary size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._checks import (
    check_nonempty,
    check_positive_int,
    check_probability,
    check_tensor,
    checked,
)
from ..evaluate import exact_match  # one implementation, in the evaluator; kept here by name

__all__ = ["label_smoothed_loss", "token_accuracy", "exact_match"]


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


def _check_loss(logits, targets, pad_id=0, smoothing=0.0, reduction="mean") -> None:
    _check_logits_targets(logits, targets)
    check_positive_int("pad_id", pad_id, minimum=0)
    check_probability("smoothing", smoothing)
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    check_nonempty("logits", logits, "(B, T, V)")
    if targets.device != logits.device:
        raise ValueError(
            f"targets is on {targets.device} but logits is on {logits.device}; move it with "
            f".to({str(logits.device)!r})"
        )
    vocab = logits.shape[-1]
    if pad_id >= vocab:
        raise ValueError(f"pad_id must be a class of logits (V={vocab}): 0 <= pad_id < {vocab}")
    low, high = int(targets.min()), int(targets.max())  # once, at the edge (a host sync)
    if low < 0 or high >= vocab:
        raise ValueError(
            f"targets holds class {low if low < 0 else high}, outside the logits' "
            f"{vocab} classes: ids must be in [0, {vocab - 1}]"
        )
    if bool((targets == pad_id).all()):
        raise ValueError(
            f"targets holds only padding (pad_id={pad_id}): no token to score, so the loss "
            "would be a meaningless 0"
        )


@checked(_check_loss)
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
    eps = smoothing
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
