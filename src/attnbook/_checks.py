"""Argument checks shared by every module.

Each check raises ``TypeError`` or ``ValueError`` with a message that names the argument,
what it got and what it wants, so a caller's mistake never turns into a silent wrong shape or
a NaN further down.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["check_tensor", "check_positive_int", "check_probability", "check_same_size"]


def check_tensor(
    name: str,
    x,
    *,
    ndim: int | Sequence[int] | None = None,
    floating: bool = False,
    integer: bool = False,
    boolean: bool = False,
    shape_hint: str = "",
) -> torch.Tensor:
    """Check that ``x`` is a tensor of the wanted rank and kind of dtype; return it."""
    hint = f" {shape_hint}" if shape_hint else ""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor{hint}, got {type(x).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.dim() not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(
                f"{name} must have {want} dimensions{hint}, got shape {tuple(x.shape)}"
            )
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if integer and (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor (token ids), got dtype {x.dtype}")
    if boolean and x.dtype != torch.bool:
        raise TypeError(f"{name} must be a boolean tensor (True = may attend), got dtype {x.dtype}")
    return x


def check_positive_int(name: str, value, *, minimum: int = 1) -> int:
    """Check that ``value`` is an int (not a bool) of at least ``minimum``; return it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_probability(name: str, value) -> float:
    """Check that ``value`` is a number in [0, 1); return it as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float in [0, 1), got {type(value).__name__}")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return float(value)


def check_same_size(name_a: str, a: int, name_b: str, b: int, what: str) -> None:
    """Raise if two sizes that must agree differ."""
    if a != b:
        raise ValueError(f"{name_a} and {name_b} must have the same {what}, got {a} and {b}")
