"""The worked matrix examples of the source notes, every intermediate computed by code.

Notes 05 (``05-transformer-questions-and-worked-examples.md``) works one attention head by
hand on a 3x4 input and then concatenates two heads. This module recomputes both with the
package's own attention code, and keeps the notes' printed matrices (``NOTES_SINGLE_HEAD``) so
that the book can show, cell by cell, where the hand arithmetic slipped.

The notes give LayerNorm only as a formula (notes 01 and 05); :func:`layer_norm_example` works
it on a small matrix, keeping every intermediate (chapter 9, Add & Norm).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from ._checks import check_tensor
from .attention import dot_score, masked_softmax

__all__ = [
    "NOTES_X",
    "NOTES_W",
    "NOTES_SINGLE_HEAD",
    "NOTES_Z2",
    "SingleHeadExample",
    "TwoHeadExample",
    "single_head_example",
    "two_head_example",
    "differences_from_notes",
    "LN_EXAMPLE_X",
    "LN_EXAMPLE_GAMMA",
    "LN_EXAMPLE_BETA",
    "LayerNormExample",
    "layer_norm_example",
    "DTYPE",
    "default_w_o",
]

DTYPE = torch.float64

#: The notes' input: 3 tokens, each a 4-dimensional vector.
NOTES_X = ((1, 0, 1, 0), (0, 1, 0, 1), (1, 1, 1, 1))

#: The notes take W^Q = W^K = W^V equal to this 4x4 matrix.
NOTES_W = ((1, 0, 1, 0), (0, 1, 0, 1), (1, 0, 1, 0), (0, 1, 0, 1))

#: The matrices exactly as the notes print them (quoted source material, not results: the
#: book compares them with what :func:`single_head_example` computes).
NOTES_SINGLE_HEAD = {
    "Q": ((2, 0, 2, 0), (0, 2, 0, 2), (4, 0, 4, 0)),
    "scores": ((8, 0, 16), (0, 8, 0), (16, 0, 32)),
    "scaled": ((4, 0, 8), (0, 4, 0), (8, 0, 16)),
    "weights": ((0.018, 0.0001, 0.982), (0.0001, 0.999, 0.0001), (0.018, 0.0001, 0.982)),
    "Z": ((3.964, 0, 3.964, 0), (0, 2, 0, 2), (7.928, 0, 7.928, 0)),
}

#: Head 2's output, which the notes simply assume (no weights are given for head 2).
NOTES_Z2 = ((1, 0.5, 1, 0.5), (0.2, 1.5, 0.2, 1.5), (0.8, 0.3, 0.8, 0.3))


def _as_tensor(name: str, value, wanted: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.tensor(value, dtype=DTYPE)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(
            f"{name} must be a tensor or {wanted}, got {type(value).__name__} {value!r}"
        ) from None


def _matrix(name: str, value, shape: tuple[int, int] | None = None) -> torch.Tensor:
    t = _as_tensor(name, value, "a nested sequence of numbers (a matrix)")
    check_tensor(name, t, ndim=2)
    t = t.to(DTYPE)
    if shape is not None and tuple(t.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
    return t


@dataclass(frozen=True)
class SingleHeadExample:
    """Every matrix of one attention head, in the order the computation makes them."""

    X: torch.Tensor  # (n, d_model) input, one row per token
    W_Q: torch.Tensor  # (d_model, d_k)
    W_K: torch.Tensor  # (d_model, d_k)
    W_V: torch.Tensor  # (d_model, d_v)
    Q: torch.Tensor  # (n, d_k) = X W_Q
    K: torch.Tensor  # (n, d_k) = X W_K
    V: torch.Tensor  # (n, d_v) = X W_V
    scores: torch.Tensor  # (n, n)   = Q K^T
    scaled: torch.Tensor  # (n, n)   = Q K^T / sqrt(d_k)
    weights: torch.Tensor  # (n, n)   = softmax(scaled), row by row
    Z: torch.Tensor  # (n, d_v) = weights V

    @property
    def d_k(self) -> int:
        return self.Q.shape[-1]

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def single_head_example(X=NOTES_X, W_Q=NOTES_W, W_K=None, W_V=None) -> SingleHeadExample:
    """Compute one self-attention head on ``X`` step by step (float64).

    With no arguments this is the notes' example: the 3x4 ``X`` and ``W^Q = W^K = W^V``.
    ``W_K`` and ``W_V`` default to ``W_Q``, as in the notes. Any matrix can be replaced (the
    book's widget does this) as long as the shapes fit.
    """
    X = _matrix("X", X)
    W_Q = _matrix("W_Q", W_Q)
    W_K = W_Q if W_K is None else _matrix("W_K", W_K)
    W_V = W_Q if W_V is None else _matrix("W_V", W_V)
    for name, w in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        if w.shape[0] != X.shape[1]:
            raise ValueError(
                f"{name} must have {X.shape[1]} rows to multiply X of shape "
                f"{tuple(X.shape)}, got shape {tuple(w.shape)}"
            )
    if W_Q.shape[1] != W_K.shape[1]:
        raise ValueError(
            f"W_Q and W_K must have the same number of columns (d_k), got "
            f"{tuple(W_Q.shape)} and {tuple(W_K.shape)}"
        )
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = dot_score(Q, K)
    scaled = scores / Q.shape[-1] ** 0.5
    weights = masked_softmax(scaled)
    return SingleHeadExample(X, W_Q, W_K, W_V, Q, K, V, scores, scaled, weights, weights @ V)


@dataclass(frozen=True)
class TwoHeadExample:
    """The notes' two-head example: concatenate the heads' outputs, then project by W^O."""

    Z1: torch.Tensor  # (n, d_v) head 1: the single-head example, computed
    Z2: torch.Tensor  # (n, d_v) head 2: as the notes assume it
    concat: torch.Tensor  # (n, 2 d_v) = [Z1 ; Z2] along the feature axis
    W_O: torch.Tensor  # (2 d_v, d_model)
    output: torch.Tensor  # (n, d_model) = concat W_O

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def default_w_o(rows: int = 8, cols: int = 4, seed: int = 0) -> torch.Tensor:
    """A small, readable W^O (entries -1, 0 or 1) drawn from a fixed seed.

    The notes leave W^O unspecified ("an 8x4 matrix"); any fixed choice shows the mechanics.
    """
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 2, (rows, cols), generator=g).to(DTYPE)


def two_head_example(Z2=NOTES_Z2, W_O=None) -> TwoHeadExample:
    """Concatenate head 1 (the computed single-head ``Z``) with ``Z2`` and multiply by ``W_O``."""
    Z1 = single_head_example().Z
    Z2 = _matrix("Z2", Z2, tuple(Z1.shape))
    concat = torch.cat([Z1, Z2], dim=-1)
    W_O = default_w_o(concat.shape[1], Z1.shape[1]) if W_O is None else _matrix("W_O", W_O)
    if W_O.shape[0] != concat.shape[1]:
        raise ValueError(
            f"W_O must have {concat.shape[1]} rows (= 2 heads x d_v) to multiply "
            f"the concatenation of shape {tuple(concat.shape)}, got "
            f"{tuple(W_O.shape)}"
        )
    return TwoHeadExample(Z1, Z2, concat, W_O, concat @ W_O)


def differences_from_notes(
    example: SingleHeadExample | None = None, atol: float = 1e-9
) -> dict[str, list[tuple[int, int, float, float]]]:
    """Cells where the notes' printed matrices differ from the computed ones.

    Returns ``{matrix name: [(row, col, notes value, computed value), ...]}`` for the
    matrices in :data:`NOTES_SINGLE_HEAD`; a cell counts as different when it is off by more
    than ``atol`` plus the rounding of the printed value (half a unit in its last digit).
    """
    example = single_head_example() if example is None else example
    out: dict[str, list[tuple[int, int, float, float]]] = {}
    for name, printed in NOTES_SINGLE_HEAD.items():
        computed = getattr(example, name)
        cells = []
        for i, row in enumerate(printed):
            for j, value in enumerate(row):
                text = repr(float(value)).rstrip("0")
                decimals = len(text.split(".")[1]) if "." in text and not text.endswith(".") else 0
                tol = atol + 0.5 * 10.0 ** (-decimals)
                got = float(computed[i, j])
                if abs(got - float(value)) > tol:
                    cells.append((i, j, float(value), got))
        out[name] = cells
    return out


# --------------------------------------------------------------------------------------------
# LayerNorm, step by step (chapter 9)
# --------------------------------------------------------------------------------------------

#: The book's LayerNorm input: 4 tokens (rows) of 4 features, each row showing one property.
LN_EXAMPLE_X = (
    (2, 4, 6, 8),  # evenly spread: mean 5, variance 5
    (1, 0, 1, 0),  # the notes' first token: mean 0.5, variance 0.25
    (20, 40, 60, 80),  # row 1 times 10: the same normalised values
    (3, 3, 3, 3),
)  # constant: variance 0, and eps keeps the division finite

#: A learned scale and shift, as they might look after training (at initialisation PyTorch
#: sets gamma to ones and beta to zeros).
LN_EXAMPLE_GAMMA = (1.0, 2.0, 0.5, 1.0)
LN_EXAMPLE_BETA = (0.0, 0.0, 1.0, -1.0)


@dataclass(frozen=True)
class LayerNormExample:
    """Every intermediate of ``LayerNorm(x) = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta``,
    computed over the last axis (each row, one token, on its own), in float64."""

    x: torch.Tensor  # (n, d) input, one row per token
    gamma: torch.Tensor  # (d,)   learned scale
    beta: torch.Tensor  # (d,)   learned shift
    eps: float  # added to the variance
    mean: torch.Tensor  # (n, 1) mu = mean of each row
    centered: torch.Tensor  # (n, d) x - mu
    var: torch.Tensor  # (n, 1) sigma^2 = mean of (x - mu)^2: the biased variance (/ d)
    std: torch.Tensor  # (n, 1) sqrt(sigma^2 + eps)
    normalized: torch.Tensor  # (n, d) (x - mu) / sqrt(sigma^2 + eps): mean 0, variance ~1
    output: torch.Tensor  # (n, d) gamma * normalized + beta
    var_unbiased: torch.Tensor  # (n, 1) the sample variance (/ (d - 1)), which LayerNorm does
    #        NOT use; kept to show the difference

    def as_dict(self) -> dict[str, torch.Tensor | float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _vector(name: str, value, size: int) -> torch.Tensor:
    t = _as_tensor(name, value, f"a sequence of {size} numbers")
    check_tensor(name, t, ndim=1, shape_hint=f"({size},), one value per feature")
    if t.shape[0] != size:
        raise ValueError(
            f"{name} must have shape ({size},), one value per feature of x, got {tuple(t.shape)}"
        )
    return t.to(DTYPE)


def layer_norm_example(
    x=LN_EXAMPLE_X, gamma=LN_EXAMPLE_GAMMA, beta=LN_EXAMPLE_BETA, eps: float = 1e-5
) -> LayerNormExample:
    """Layer normalisation of each row of ``x`` ``(n, d)``, step by step (float64).

    ``mean`` and ``var`` are taken over the ``d`` features of each row; ``var`` divides by
    ``d`` (the biased variance), as ``torch.nn.LayerNorm`` does. ``gamma`` and ``beta`` are
    ``(d,)``; None gives PyTorch's initial values (ones, zeros). ``eps`` is ``nn.LayerNorm``'s
    default ``1e-5``. With no arguments this is the book's example (:data:`LN_EXAMPLE_X`).
    The result equals ``nn.LayerNorm(d, eps)`` with that weight and bias.
    """
    x = _matrix("x", x)
    d = x.shape[1]
    if d < 2:
        raise ValueError(
            f"x must have at least 2 features (columns) to normalise, got shape {tuple(x.shape)}"
        )
    gamma = torch.ones(d, dtype=DTYPE) if gamma is None else _vector("gamma", gamma, d)
    beta = torch.zeros(d, dtype=DTYPE) if beta is None else _vector("beta", beta, d)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps must be a float >= 0, got {type(eps).__name__} {eps!r}")
    if not (eps >= 0 and eps < float("inf")):
        raise ValueError(f"eps must be a finite float >= 0, got {eps}")
    mean = x.mean(dim=-1, keepdim=True)  # (n, 1)
    centered = x - mean  # (n, d)
    var = (centered**2).mean(dim=-1, keepdim=True)  # (n, 1), divides by d
    std = torch.sqrt(var + eps)  # (n, 1)
    normalized = centered / std  # (n, d)
    output = gamma * normalized + beta  # (n, d), gamma/beta per feature
    var_unbiased = (centered**2).sum(dim=-1, keepdim=True) / (d - 1)
    return LayerNormExample(
        x, gamma, beta, float(eps), mean, centered, var, std, normalized, output, var_unbiased
    )
