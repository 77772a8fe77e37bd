"""The RNN-era attention modules: one query vector (the decoder state) per decoder step.

Bahdanau's additive attention and Luong's dot and general attention share one ``forward``
(score, masked softmax, weighted sum) and differ only in their score function;
:func:`make_attention` builds one by the name of its score.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import (
    check_bool,
    check_like,
    check_module_input,
    check_nonempty,
    check_positive_int,
    check_same_size,
    check_tensor,
    checked,
)
from .functional import additive_score, dot_score, general_score, masked_softmax, scaled_dot_score
from .masks import _check_mask

__all__ = [
    "AdditiveAttention",
    "DotAttention",
    "GeneralAttention",
    "SCORE_FUNCTIONS",
    "make_attention",
]


class _ScoredAttention(nn.Module):
    """Shared forward of the RNN-era attention modules; subclasses define ``score``."""

    score_name = ""

    def score(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def check_score(self, query: torch.Tensor, keys: torch.Tensor) -> None:
        """The checks of :meth:`score` (run once, by :meth:`forward`'s check)."""

    def _check_forward(self, query, keys, values=None, mask=None) -> None:
        check_tensor(
            "query", query, ndim=(2, 3), floating=True, shape_hint="(B, d_q) or (B, L_q, d_q)"
        )
        check_tensor("keys", keys, ndim=3, floating=True, shape_hint="(B, L_k, d_k)")
        values = keys if values is None else values
        check_tensor("values", values, ndim=3, floating=True, shape_hint="(B, L_k, d_v)")
        check_same_size("query", query.shape[0], "keys", keys.shape[0], "batch size")
        check_same_size("keys", keys.shape[0], "values", values.shape[0], "batch size")
        check_same_size(
            "keys", keys.shape[1], "values", values.shape[1], "number of positions (L_k)"
        )
        for name, t in (("query", query), ("keys", keys), ("values", values)):
            check_nonempty(name, t)
            check_module_input(name, t, self)
        check_like("values", values, "keys", keys)
        q = query.unsqueeze(1) if query.dim() == 2 else query
        self.check_score(q, keys)
        if mask is not None:
            check_tensor("mask", mask, boolean=True)
            mask = mask.unsqueeze(1) if mask.dim() == 2 else mask
            _check_mask(mask, torch.Size((q.shape[0], q.shape[1], keys.shape[1])), like=keys)

    @checked(_check_forward)
    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query`` over ``keys`` and return ``(context, weights)``.

        query ``(B, d_q)`` (one decoder state) or ``(B, L_q, d_q)``; keys ``(B, L_k, d_k)``
        (the encoder states); values ``(B, L_k, d_v)``, by default the keys themselves as in
        Bahdanau et al.; mask ``(B, L_k)`` or broadcastable to ``(B, L_q, L_k)``, True at real
        source tokens. context is ``(B, d_v)`` or ``(B, L_q, d_v)``; weights ``(B, L_k)`` or
        ``(B, L_q, L_k)``.
        """
        values = keys if values is None else values
        single = query.dim() == 2
        q = query.unsqueeze(1) if single else query
        if mask is not None and mask.dim() == 2:
            mask = mask.unsqueeze(1)  # (B, 1, L_k)
        weights = masked_softmax(self.score(q, keys), mask)  # (B, L_q, L_k)
        context = weights @ values  # (B, L_q, d_v)
        if single:
            return context.squeeze(1), weights.squeeze(1)
        return context, weights

    def extra_repr(self) -> str:
        return f"score={self.score_name!r}"


class AdditiveAttention(_ScoredAttention):
    """Bahdanau attention: ``score(s, h) = v_a^T tanh(W_a [s; h])``.

    ``w_a`` is ``nn.Linear(query_dim + key_dim, hidden_dim, bias=False)`` and ``v_a`` is
    ``nn.Linear(hidden_dim, 1, bias=False)``, exactly the two layers of the formula.
    """

    score_name = "additive"

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        check_positive_int("query_dim", query_dim)
        check_positive_int("key_dim", key_dim)
        check_positive_int("hidden_dim", hidden_dim)
        self.w_a = nn.Linear(query_dim + key_dim, hidden_dim, bias=False)
        self.v_a = nn.Linear(hidden_dim, 1, bias=False)

    def score(self, query, keys):
        return additive_score(query, keys, self.w_a.weight, self.v_a.weight[0])

    def check_score(self, query, keys):
        additive_score.check(query, keys, self.w_a.weight, self.v_a.weight[0])


class DotAttention(_ScoredAttention):
    """Luong's dot attention, ``score(s, h) = s . h``; ``scaled=True`` divides by sqrt(d)."""

    def __init__(self, scaled: bool = False):
        super().__init__()
        self.scaled = check_bool("scaled", scaled)
        self.score_name = "scaled_dot" if self.scaled else "dot"

    def score(self, query, keys):
        return scaled_dot_score(query, keys) if self.scaled else dot_score(query, keys)

    def check_score(self, query, keys):
        dot_score.check(query, keys)


class GeneralAttention(_ScoredAttention):
    """Luong's general attention, ``score(s, h) = s^T W_a h``, ``W_a`` ``(query_dim, key_dim)``."""

    score_name = "general"

    def __init__(self, query_dim: int, key_dim: int):
        super().__init__()
        check_positive_int("query_dim", query_dim)
        check_positive_int("key_dim", key_dim)
        self.w_a = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.w_a)

    def score(self, query, keys):
        return general_score(query, keys, self.w_a)

    def check_score(self, query, keys):
        general_score.check(query, keys, self.w_a)


SCORE_FUNCTIONS = ("additive", "dot", "general", "scaled_dot")


def make_attention(
    score: str, query_dim: int, key_dim: int, hidden_dim: int | None = None
) -> _ScoredAttention:
    """Build an RNN-era attention module by the name of its score function.

    ``score`` is one of ``"additive"`` (needs ``hidden_dim``, default ``key_dim``), ``"dot"``,
    ``"scaled_dot"`` (both need ``query_dim == key_dim``) or ``"general"``.
    """
    if score not in SCORE_FUNCTIONS:
        raise ValueError(f"score must be one of {SCORE_FUNCTIONS}, got {score!r}")
    check_positive_int("query_dim", query_dim)
    check_positive_int("key_dim", key_dim)
    if score == "additive":
        if hidden_dim is None:
            hidden_dim = key_dim
        check_positive_int("hidden_dim", hidden_dim)
        return AdditiveAttention(query_dim, key_dim, hidden_dim)
    if score == "general":
        return GeneralAttention(query_dim, key_dim)
    if query_dim != key_dim:
        raise ValueError(
            f"score={score!r} needs query_dim == key_dim, got {query_dim} and "
            f"{key_dim}; use 'general' or 'additive' for different sizes"
        )
    return DotAttention(scaled=score == "scaled_dot")
