"""Argument checks shared by every module.

Each check raises ``TypeError`` or ``ValueError`` with a message that names the argument,
what it got and what it wants, so a caller's mistake never turns into a silent wrong shape or
a NaN further down.

The functions the book prints read as the math: their checks live in a check function that
:func:`checked` runs once, at the API edge, before the function itself. While it runs, the
checks of the calls it makes step aside (``scaled_dot_product_attention`` inside a checked
``MultiHeadAttention.forward`` does not check again), and so do all checks while
``torch.compile``, ``torch.export`` or the tracer record the model
(:func:`checks_active`): a check may read a tensor's values (token ids in range), which a
graph cannot hold. :func:`unchecked` turns the checks off where the caller has checked its
data itself (the trainer: no host sync in its training step).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

import torch

__all__ = [
    "TOKEN_DTYPES",
    "check_bool",
    "check_device",
    "check_like",
    "check_module_input",
    "check_nonempty",
    "check_tensor",
    "check_token_ids",
    "check_positive_int",
    "check_probability",
    "check_same_size",
    "checked",
    "checked_too",
    "checks_active",
    "checks_waived",
    "unchecked",
]


# --------------------------------------------------------------------------------------------
# when checks run
# --------------------------------------------------------------------------------------------

_state = threading.local()


def _recording() -> bool:
    """True while torch.compile, torch.export or the JIT tracer records a graph."""
    return torch.compiler.is_compiling() or torch.compiler.is_exporting() or torch.jit.is_tracing()


def checks_active() -> bool:
    """Whether argument checks run here: not inside a checked call (its edge has checked),
    not under :func:`unchecked`, not while a graph is being recorded."""
    return not _recording() and not getattr(_state, "off", 0)


class unchecked:
    """``with unchecked(): ...``: the package's argument checks step aside inside (for a
    caller that has checked its data once itself). Nests; per thread."""

    def __enter__(self):
        _state.off = getattr(_state, "off", 0) + 1
        _state.waived = getattr(_state, "waived", 0) + 1
        return self

    def __exit__(self, *exc):
        _state.off -= 1
        _state.waived -= 1
        return False


def checks_waived() -> bool:
    """True inside :class:`unchecked` (the trainer's step, its hot path): code there does no
    work beyond the math it prints (no guard for infinities: a diverging run is stopped by
    the trainer's non-finite-loss check instead). Unlike :func:`checks_active`, False inside
    an ordinary checked call."""
    return getattr(_state, "waived", 0) > 0


def checked(check: Callable) -> Callable:
    """Decorator: ``@checked(check_fn)`` runs ``check_fn`` with the function's arguments
    before the function, once at the API edge (see the module's docstring); the calls the
    function makes are not checked again."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if _recording() or getattr(_state, "off", 0):  # (a compiler folds the first)
                return fn(*args, **kwargs)
            check(*args, **kwargs)
            _state.off = 1
            try:
                return fn(*args, **kwargs)
            finally:
                _state.off = 0

        wrapper.check = check
        return wrapper

    return decorate


def checked_too(check: Callable) -> Callable:
    """Decorator: like :func:`checked`, ``check_fn`` runs first where checks are active, but
    the function's own calls keep their checks (for code whose checks live inline, as the
    RNN modules' do: they must not step aside)."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not _recording() and not getattr(_state, "off", 0):
                check(*args, **kwargs)
            return fn(*args, **kwargs)

        wrapper.check = check
        return wrapper

    return decorate


# --------------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------------


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
    if _recording():  # a tracer hands sizes (x.shape[1]) over as tensors
        return value
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


def check_bool(name: str, value) -> bool:
    """Check that ``value`` is a bool (a flag: ``"no"`` or ``0`` is refused, not read as
    truthy); return it."""
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be a bool (True or False), got {type(value).__name__} {value!r}"
        )
    return value


def check_nonempty(name: str, x: torch.Tensor, what: str = "") -> torch.Tensor:
    """Check that no dimension of ``x`` has size 0 (an empty batch, sequence or feature axis
    gives an empty or NaN result further down); return it."""
    if x.numel() == 0:
        hint = f" {what}" if what else ""
        raise ValueError(
            f"{name} must not be empty: every dimension{hint} needs size >= 1, got shape "
            f"{tuple(x.shape)}"
        )
    return x


def check_like(name: str, x: torch.Tensor, ref_name: str, ref: torch.Tensor) -> torch.Tensor:
    """Check that ``x`` has the dtype and the device of ``ref`` (tensors that meet in one
    product must); return it."""
    if x.dtype != ref.dtype:
        raise TypeError(
            f"{name} must have the same dtype as {ref_name} ({ref.dtype}), got {x.dtype}; "
            f"convert one of them (.to({ref.dtype}) or .to({x.dtype}))"
        )
    if x.device != ref.device:
        raise ValueError(
            f"{name} must be on the same device as {ref_name} ({ref.device}), got {x.device}; "
            f"move it with .to({str(ref.device)!r})"
        )
    return x


def check_device(name: str, x: torch.Tensor, device: torch.device, what: str) -> torch.Tensor:
    """Check that ``x`` is on ``device`` (the device of ``what``, say the model); return it."""
    if x.device != device:
        raise ValueError(
            f"{name} is on {x.device} but {what} is on {device}; move it with .to({str(device)!r})"
        )
    return x


def check_module_input(name: str, x: torch.Tensor, module: torch.nn.Module) -> torch.Tensor:
    """Check that a floating input ``x`` has the dtype and device of ``module``'s parameters
    (or buffers; a module with neither takes any); return it."""
    ref = next(module.parameters(), None)
    if ref is None:
        ref = next(module.buffers(), None)
    if ref is None:
        return x
    kind = type(module).__name__
    if x.is_floating_point() and ref.is_floating_point() and x.dtype != ref.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the {kind}'s weights are {ref.dtype}; convert "
            f"the input ({name}.to({ref.dtype})) or the module (.to({x.dtype}))"
        )
    return check_device(name, x, ref.device, f"the {kind}")


TOKEN_DTYPES = (torch.int64, torch.int32)


def check_token_ids(
    name: str, x, *, ndim: int | Sequence[int] = 2, shape_hint: str = ""
) -> torch.Tensor:
    """Check that ``x`` is a tensor of token ids an embedding can read: integer, of dtype
    int64 (``torch.long``) or int32 (other integer kinds are refused with the conversion to
    make), with no zero-size dimension; return it."""
    check_tensor(name, x, ndim=ndim, integer=True, shape_hint=shape_hint)
    if x.dtype not in TOKEN_DTYPES:
        raise TypeError(
            f"{name} must hold token ids as torch.int64 (long) or torch.int32, got dtype "
            f"{x.dtype}; convert with {name}.long()"
        )
    return x
