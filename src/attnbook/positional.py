"""Positional encoding (位置编码): telling attention where each token is.

Self-attention treats its input as a *set*: permute the tokens and the outputs are permuted
the same way, nothing else changes. Word order has to be added to the input. Vaswani et al.
(2017, section 3.5) add a fixed sinusoid to every token embedding,

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

so dimension pair ``(2i, 2i+1)`` turns with frequency ``w_i = 10000^(-2i / d_model)``, from a
wavelength of ``2 pi`` (fast) to ``10000 * 2 pi`` (slow). Shifting every position by ``k`` turns
each pair by the angle ``w_i k``: a rotation that does not depend on the position
(:func:`relative_shift_matrix`). The paper found learned position embeddings work about as
well (Table 3, row E): ``PositionalEncoding(kind="learned")``.

Shapes: ``B`` batch, ``L`` sequence length, ``d_model`` the model width.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import (
    check_module_input,
    check_nonempty,
    check_positive_int,
    check_probability,
    check_tensor,
    checked,
)
from ._limits import FLOAT_BYTES, check_memory, is_size, sinusoidal_bytes

__all__ = ["sinusoidal_encoding", "relative_shift_matrix", "PositionalEncoding"]


def _check_d_model_and_base(d_model, base) -> float:
    check_positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(
            f"d_model must be even for the sinusoidal encoding (sin/cos pairs), got "
            f"d_model={d_model}"
        )
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base must be a number > 1, got {type(base).__name__} {base!r}")
    if not 1 < base < float("inf"):
        raise ValueError(f"base must be > 1, got {base}")
    return float(base)


def _frequencies(d_model: int, base: float) -> torch.Tensor:
    """``w_i = base^(-2i / d_model)`` for ``i = 0 .. d_model/2 - 1``, float64 ``(d_model/2,)``."""
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 0, 2, 4, ...
    return 1.0 / torch.pow(base, two_i / d_model)


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal positional encoding of the paper, ``(n_positions, d_model)`` float32.

    Row ``pos``, column ``2i`` is ``sin(pos / base^(2i / d_model))`` and column ``2i + 1`` is
    ``cos`` of the same angle (``base = 10000`` in the paper). Computed in float64, returned in
    float32. ``d_model`` must be even: sines and cosines come in pairs.
    """
    check_positive_int("n_positions", n_positions)
    base = _check_d_model_and_base(d_model, base)
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    angle = pos * _frequencies(d_model, base)  # (n, d/2)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


def relative_shift_matrix(offset: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The ``(d_model, d_model)`` matrix ``M_k`` with ``PE(pos + k) = PE(pos) @ M_k`` for every pos.

    By the angle-addition formulas, each pair ``(sin(w pos), cos(w pos))`` times
    ``[[cos wk, -sin wk], [sin wk, cos wk]]`` is ``(sin(w (pos + k)), cos(w (pos + k)))``, so
    ``M_k`` is block diagonal with one 2x2 rotation per pair. It depends on the offset ``k``
    (``offset``, may be negative) but not on the position. float32, computed in float64.
    """
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(
            f"offset must be an int (a shift in positions), got {type(offset).__name__} {offset!r}"
        )
    base = _check_d_model_and_base(d_model, base)
    angle = offset * _frequencies(d_model, base)  # (d/2,)
    cos, sin = torch.cos(angle), torch.sin(angle)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(cos)  # sin' = sin cos(wk) + cos sin(wk)
    m[1::2, 0::2] = torch.diag(sin)
    m[0::2, 1::2] = torch.diag(-sin)  # cos' = cos cos(wk) - sin sin(wk)
    m[1::2, 1::2] = torch.diag(cos)
    return m.float()


class PositionalEncoding(nn.Module):
    """Add a positional encoding to a batch of embeddings, then dropout (paper section 3.5).

    ``kind="sinusoidal"`` (the paper's) adds the fixed :func:`sinusoidal_encoding`, kept as a
    non-persistent buffer (it moves with ``.to(device)``, is not saved, has no parameters).
    ``kind="learned"`` adds one trained vector per position, an ``nn.Embedding(max_len,
    d_model)`` initialised ``N(0, d_model^-0.5)`` as fairseq does; ``d_model`` may then be odd.
    Either way the input can be at most ``max_len`` positions long.
    """

    KINDS = ("sinusoidal", "learned")

    def __init__(
        self, d_model: int, max_len: int = 5000, dropout: float = 0.1, kind: str = "sinusoidal"
    ):
        super().__init__()
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}, got {kind!r}")
        self.d_model = check_positive_int("d_model", d_model)
        self.max_len = check_positive_int("max_len", max_len)
        self.kind = kind
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        if kind == "sinusoidal":
            self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        else:
            self.embedding = nn.Embedding(max_len, d_model)
            nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)

    def encoding(self, n: int, offset: int = 0) -> torch.Tensor:
        """The vectors added at positions ``offset .. offset + n - 1``, ``(n, d_model)``."""
        check_positive_int("n", n)
        check_positive_int("offset", offset, minimum=0)
        if offset + n > self.max_len:
            at = f"{n} positions" if offset == 0 else f"positions {offset}..{offset + n - 1}"
            raise ValueError(
                f"the input has {at} but max_len={self.max_len}; build "
                "the model with a larger max_len"
            )
        table = self.pe if self.kind == "sinusoidal" else self.embedding.weight
        return table[offset : offset + n]

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x ``(B, L, d_model)`` -> ``dropout(x + encoding(L, offset))``, the same shape.

        ``offset`` is the position of ``x``'s first vector: incremental decoding feeds one new
        token at a time, at position ``offset``.
        """
        check_tensor("x", x, ndim=3, floating=True, shape_hint="(B, L, d_model)")
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}"
            )
        return self.dropout(x + self.encoding(x.shape[1], offset))  # (B, L, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, kind={self.kind!r}"


def _check_positional_forward(self, x, offset=0) -> None:
    check_tensor("x", x, ndim=3, floating=True, shape_hint="(B, L, d_model)")
    check_nonempty("x", x, "(B, L, d_model)")
    check_module_input("x", x, self)
    if isinstance(offset, int) and not isinstance(offset, bool) and offset > 0:
        if offset + x.shape[1] > self.max_len:
            raise ValueError(
                f"offset={offset} puts the input's {x.shape[1]} positions at "
                f"{offset}..{offset + x.shape[1] - 1}, beyond max_len={self.max_len}"
            )


PositionalEncoding.forward = checked(_check_positional_forward)(PositionalEncoding.forward)


# the sizes each table needs, checked before it is built (:mod:`attnbook._limits`)


def _check_sinusoidal(n_positions, d_model, base=10000.0) -> None:
    if is_size(n_positions) and is_size(d_model):
        check_memory(
            "sinusoidal_encoding",
            {"n_positions": n_positions, "d_model": d_model},
            "the (n_positions, d_model) table, computed in float64",
            sinusoidal_bytes(n_positions, d_model),
        )


def _check_relative_shift(offset, d_model, base=10000.0) -> None:
    if is_size(d_model):
        check_memory(
            "relative_shift_matrix",
            {"d_model": d_model},
            "the (d_model, d_model) matrix, computed in float64",
            12 * d_model * d_model,
        )


def _check_positional_init(self, d_model, max_len=5000, dropout=0.1, kind="sinusoidal") -> None:
    if is_size(d_model) and is_size(max_len):
        learned = kind == "learned"
        check_memory(
            "PositionalEncoding",
            {"max_len": max_len, "d_model": d_model},
            "its learned (max_len, d_model) table"
            if learned
            else "its sinusoidal (max_len, d_model) table, computed in float64",
            FLOAT_BYTES * max_len * d_model if learned else sinusoidal_bytes(max_len, d_model),
        )


sinusoidal_encoding = checked(_check_sinusoidal)(sinusoidal_encoding)
relative_shift_matrix = checked(_check_relative_shift)(relative_shift_matrix)
PositionalEncoding.__init__ = checked(_check_positional_init)(PositionalEncoding.__init__)
