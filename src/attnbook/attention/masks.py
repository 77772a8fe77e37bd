"""Masks (掩码): which keys a query may attend to.

A mask is a boolean tensor, **True where attention is allowed**, broadcastable to the scores
``(..., L_q, L_k)``: :func:`padding_mask` hides the padding of a batch, :func:`causal_mask`
hides the future; ``&`` combines them.
"""

from __future__ import annotations

import torch

from .._checks import (
    check_nonempty,
    check_positive_int,
    check_tensor,
    checked,
)
from .._limits import causal_mask_bytes, check_memory, is_size, padding_mask_bytes

__all__ = [
    "padding_mask",
    "causal_mask",
]


def _check_mask(
    mask, scores_shape: torch.Size, name: str = "mask", like: torch.Tensor | None = None
) -> torch.Tensor:
    check_tensor(name, mask, boolean=True)
    if like is not None and mask.device != like.device:
        raise ValueError(
            f"{name} is on {mask.device} but the scores are on {like.device}; move it with "
            f".to({str(like.device)!r})"
        )
    try:
        shape = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        shape = None
    if shape != scores_shape:
        raise ValueError(
            f"{name} must be broadcastable to the scores' shape {tuple(scores_shape)} "
            f"(..., L_q, L_k), got shape {tuple(mask.shape)}"
        )
    return mask


def padding_mask(
    lengths_or_tokens: torch.Tensor, pad_id: int | None = None, max_len: int | None = None
) -> torch.Tensor:
    """Mask out padding keys.

    Give either the true lengths, a 1-D integer tensor ``(B,)`` (then ``max_len`` defaults to
    the longest), or a 2-D tensor of token ids ``(B, L)`` together with ``pad_id``.

    Returns a boolean mask of shape ``(B, 1, L)``: True at real tokens, False at padding. The
    middle axis of size 1 broadcasts over the query positions, so the mask can be passed
    straight to :func:`scaled_dot_product_attention` or combined with :func:`causal_mask`
    by ``&``.
    """
    x = check_tensor(
        "lengths_or_tokens",
        lengths_or_tokens,
        ndim=(1, 2),
        integer=True,
        shape_hint="(lengths (B,) or token ids (B, L))",
    )
    if x.dim() == 1:
        if pad_id is not None:
            raise ValueError(
                f"pad_id is only used with token ids (B, L); got lengths (B,) and pad_id={pad_id}"
            )
        if x.numel() == 0:
            raise ValueError("lengths_or_tokens is empty: need at least one sequence")
        if (x < 0).any():
            raise ValueError(f"lengths must be >= 0, got {x.tolist()}")
        longest = int(x.max())
        if max_len is None:
            max_len = longest
        check_positive_int("max_len", max_len)
        if longest > max_len:
            raise ValueError(f"max_len={max_len} is shorter than the longest length {longest}")
        positions = torch.arange(max_len, device=x.device)
        return (positions[None, :] < x[:, None])[:, None, :]
    if pad_id is None:
        raise ValueError(
            f"pad_id is required when lengths_or_tokens holds token ids of shape {tuple(x.shape)}"
        )
    if max_len is not None:
        raise ValueError("max_len is only used with lengths (B,), not with token ids")
    return (x != pad_id)[:, None, :]


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The look-ahead mask (前瞻掩码): ``(n, n)`` boolean, True on and below the diagonal.

    Query position ``i`` may attend to key positions ``0..i`` and not to the future.
    """
    check_positive_int("n", n)
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


# The two functions above are printed by the book as they read; their further checks (the
# ids' kind and size, pad_id's type, device's name) run first, at the edge, through checked.


def _check_padding_mask(lengths_or_tokens, pad_id=None, max_len=None) -> None:
    if isinstance(lengths_or_tokens, torch.Tensor) and lengths_or_tokens.dim() == 2:
        check_nonempty("lengths_or_tokens", lengths_or_tokens, "(B, L)")
    if (
        isinstance(lengths_or_tokens, torch.Tensor)
        and lengths_or_tokens.dim() == 1
        and not lengths_or_tokens.is_floating_point()
        and lengths_or_tokens.numel()
        and bool((lengths_or_tokens < 0).any())
    ):
        raise ValueError(
            f"lengths_or_tokens holds lengths, which must be >= 0, got {lengths_or_tokens.tolist()}"
        )
    if pad_id is not None and (isinstance(pad_id, bool) or not isinstance(pad_id, int)):
        raise TypeError(
            f"pad_id must be an int (a token id), got {type(pad_id).__name__} {pad_id!r}"
        )
    if (
        isinstance(lengths_or_tokens, torch.Tensor)
        and lengths_or_tokens.dim() == 1
        and is_size(max_len)
    ):
        batch = lengths_or_tokens.numel()
        check_memory(
            "padding_mask",
            {"max_len": max_len},
            f"the ({batch}, 1, max_len) mask and its positions",
            padding_mask_bytes(batch, max_len),
            device=lengths_or_tokens.device,
        )


def _check_causal_mask(n, device=None) -> None:
    _check_device_name(device)
    if is_size(n):
        check_memory(
            "causal_mask",
            {"n": n},
            "the (n, n) boolean mask (all True, then its lower triangle)",
            causal_mask_bytes(n),
            device=device,
        )


def _check_device_name(device) -> None:
    if device is None or isinstance(device, torch.device):
        return
    if not isinstance(device, str):
        raise TypeError(
            f"device must be a torch.device, a name such as 'cpu' or 'cuda', or None, got "
            f"{type(device).__name__} {device!r}"
        )
    try:
        torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device must name a device such as 'cpu', 'cuda' or 'cuda:0', got {device!r}"
        ) from None


padding_mask = checked(_check_padding_mask)(padding_mask)
causal_mask = checked(_check_causal_mask)(causal_mask)
