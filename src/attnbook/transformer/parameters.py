"""Counting a model's parameters, in all and by component."""

from __future__ import annotations

from torch import nn

from .._checks import check_bool
from ..attention import MultiHeadAttention
from .layers import FeedForward

__all__ = [
    "count_parameters",
    "parameter_breakdown",
]


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters, each shared (tied) tensor counted once."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_bool("trainable_only", trainable_only)
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


_COMPONENTS = (
    ("embeddings", (nn.Embedding,)),
    ("attention", (MultiHeadAttention,)),
    ("feed_forward", (FeedForward,)),
    ("norms", (nn.LayerNorm,)),
)


def parameter_breakdown(model: nn.Module) -> dict[str, int]:
    """Parameters by component: ``embeddings`` (token and learned position tables),
    ``attention`` (every ``W^Q, W^K, W^V, W^O`` and bias), ``feed_forward``, ``norms``,
    ``output`` (the pre-softmax projection; 0 when tied to the target embedding) and
    ``other``. Shared tensors are counted once, under the first component that holds them;
    the values sum to :func:`count_parameters`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    counts = dict.fromkeys(
        ["embeddings", "attention", "feed_forward", "norms", "output", "other"], 0
    )
    seen: set[int] = set()

    def add(component: str, module: nn.Module) -> None:
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                counts[component] += p.numel()

    for name, module in model.named_modules():
        for component, types in _COMPONENTS:
            if isinstance(module, types):
                add(component, module)
        if name == "output":
            add("output", module)
    add("other", model)
    return counts
