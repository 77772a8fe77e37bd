"""Checks for the exercises where the reader writes code.

Each chapter's implementation exercise ends with a check cell such as::

    check(my_causal_mask(4), causal_mask(4), name="my_causal_mask(4)")

It prints ``correct`` or what differs (the type, the shape, the dtype, or the entries that
differ and by how much), and returns nothing. It never raises on a wrong answer: a reader
learns more from "entry (2, 3) is True, want False" than from a traceback.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

__all__ = ["check", "compare"]


def _as_array(x):
    """A tensor, array, number or nested list as a numpy array; None where it is none of them."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, numbers.Number) or isinstance(x, list | tuple):
        try:
            return np.asarray(x)
        except (ValueError, TypeError):
            return None
    return None


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    if x is None or isinstance(x, numbers.Number):
        return f"{type(x).__name__} {x!r}"
    return f"a {type(x).__name__}"


def compare(got, want, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """What differs between ``got`` and ``want``, in one or a few lines; None when they agree.

    Tensors and arrays must have the same shape; booleans and integers must match exactly, and
    floats to within ``atol + rtol * |want|`` (as :func:`torch.allclose`). A tensor's dtype must
    be the same kind (bool, integer or floating point) as the expected one. Other values (str,
    dict, ...) are compared with ``==``.
    """
    if not (isinstance(atol, numbers.Real) and atol >= 0 and math.isfinite(atol)):
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    if not (isinstance(rtol, numbers.Real) and rtol >= 0 and math.isfinite(rtol)):
        raise ValueError(f"rtol must be a finite number >= 0, got {rtol!r}")
    w = _as_array(want)
    if w is None:  # not numeric: plain equality
        return None if got == want else f"got {got!r}, want {want!r}"
    g = _as_array(got)
    if g is None:
        return f"got {_describe(got)}, want {_describe(want)}"
    if g.shape != w.shape:
        return f"shape differs: got {g.shape}, want {w.shape}"

    def kind(a):
        return "bool" if a.dtype == bool else "integer" if a.dtype.kind in "iu" else "float"

    if isinstance(want, torch.Tensor | np.ndarray) and kind(g) != kind(w):
        return f"dtype differs: got {kind(g)} ({g.dtype}), want {kind(w)} ({w.dtype})"
    if kind(w) == "float":
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        if not np.isfinite(g64).all():
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(g64))[0])
            return f"entry {bad} is {g64[bad].item()}, want a finite number"
        wrong = np.abs(g64 - w64) > atol + rtol * np.abs(w64)
    else:
        wrong = g != w
    if not wrong.any():
        return None
    where = [tuple(int(i) for i in idx) for idx in np.argwhere(wrong)]
    shown = "; ".join(f"entry {i} is {g[i].item()!r}, want {w[i].item()!r}" for i in where[:3])
    more = f" (and {len(where) - 3} more)" if len(where) > 3 else ""
    return f"{len(where)} of {w.size} entries differ: {shown}{more}"


def check(got, want, name: str = "your answer", atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Print ``correct`` when ``got`` equals ``want`` (see :func:`compare`), else what differs.

    It returns nothing, so a check cell shows only that line (a returned True or False would
    print under it); :func:`compare` gives the same verdict to code.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    problem = compare(got, want, atol=atol, rtol=rtol)
    print(f"{name}: correct" if problem is None else f"{name}: not yet. {problem}")
