"""Attention: score functions, masks, scaled dot-product attention and multi-head attention.

Every attention mechanism in this book is the same three steps (notes 03, Part 2):

1. score every key against the query (the *alignment score*, 对齐分数),
2. turn the scores into weights with a softmax over the keys,
3. return the weighted sum of the values (the *context vector*, 上下文向量).

Only step 1 differs between Bahdanau, Luong and Vaswani. This module holds the four score
functions, the masked softmax of step 2, and the modules built from them.

Mask convention (as in ``torch.nn.functional.scaled_dot_product_attention``): a mask is a
boolean tensor, **True where attention is allowed**. A query whose keys are all masked gets
zero weights and a zero output, never NaN.

Shapes: ``B`` batch, ``H`` heads, ``L_q`` query positions, ``L_k`` key positions,
``d_k`` query/key size, ``d_v`` value size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_bool,
    check_like,
    check_module_input,
    check_nonempty,
    check_positive_int,
    check_probability,
    check_same_size,
    check_tensor,
    checked,
)

__all__ = [
    "masked_softmax",
    "softmax_saturation",
    "dot_score",
    "scaled_dot_score",
    "general_score",
    "additive_score",
    "scaled_dot_product_attention",
    "padding_mask",
    "causal_mask",
    "AdditiveAttention",
    "DotAttention",
    "GeneralAttention",
    "make_attention",
    "SCORE_FUNCTIONS",
    "MultiHeadAttention",
    "to_torch_multihead",
    "SelfAttentionHead",
]


# --------------------------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------------------------


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


def _check_device_name(n, device=None) -> None:
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
causal_mask = checked(_check_device_name)(causal_mask)


# --------------------------------------------------------------------------------------------
# step 2: masked softmax
# --------------------------------------------------------------------------------------------


def _check_masked_softmax(scores, mask=None) -> None:
    check_tensor("scores", scores, floating=True)
    if scores.dim() < 1 or scores.shape[-1] == 0:
        raise ValueError(
            f"scores must have at least one key (last axis), got shape {tuple(scores.shape)}"
        )
    check_nonempty("scores", scores)
    if mask is not None:
        if scores.dim() < 2:
            raise ValueError(
                "scores must be (..., L_q, L_k) when a mask is given, got shape "
                f"{tuple(scores.shape)}"
            )
        _check_mask(mask, scores.shape, like=scores)


@checked(_check_masked_softmax)
def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis, giving exactly zero weight to masked keys.

    ``scores`` is ``(..., L_q, L_k)``; ``mask`` is boolean, broadcastable to it, True where
    attention is allowed. A row with no allowed key gets all-zero weights (not NaN), and its
    gradient stays finite.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    mask = mask.expand(scores.shape)
    # Rows where every key is masked would be softmax(-inf, ..., -inf) = NaN. Give them
    # finite scores (any value works) and zero them after the softmax.
    no_key = ~mask.any(dim=-1, keepdim=True)
    filled = scores.masked_fill(~mask, float("-inf")).masked_fill(no_key, 0.0)
    return torch.softmax(filled, dim=-1).masked_fill(~mask, 0.0)


def softmax_saturation(scores: torch.Tensor) -> dict[str, torch.Tensor]:
    """How saturated the softmax of ``scores`` (..., L_k) is, row by row.

    Returns ``max_weight`` (1 = all weight on one key), ``entropy`` in nats (``log L_k`` =
    uniform, 0 = one-hot) and ``jacobian_norm``, the Frobenius norm of
    ``d softmax / d scores = diag(p) - p p^T``: how strongly the weights still respond to the
    scores. A saturated softmax has a Jacobian near zero, so almost no gradient flows back
    through it to the queries and keys.
    """
    check_tensor("scores", scores, floating=True)
    p = torch.softmax(scores, dim=-1)
    entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    jacobian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    return {
        "max_weight": p.amax(-1),
        "entropy": entropy,
        "jacobian_norm": jacobian.flatten(-2).norm(dim=-1),
    }


# --------------------------------------------------------------------------------------------
# step 1: score functions
# --------------------------------------------------------------------------------------------


def _check_batch_dims(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    """The leading (batch) dimensions of two (..., L, d) tensors must broadcast."""
    try:
        torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"{name_a} and {name_b} must have broadcastable batch dimensions (...), got "
            f"{name_a} {tuple(a.shape)} and {name_b} {tuple(b.shape)}"
        ) from None


def _check_query_keys(query, keys):
    check_tensor("query", query, floating=True, shape_hint="(..., L_q, d_q)")
    check_tensor("keys", keys, floating=True, shape_hint="(..., L_k, d_k)")
    if query.dim() < 2 or keys.dim() < 2:
        raise ValueError(
            f"query and keys must be (..., L, d) with at least 2 dimensions, got "
            f"query {tuple(query.shape)} and keys {tuple(keys.shape)}"
        )
    check_nonempty("query", query, "(..., L_q, d_q)")
    check_nonempty("keys", keys, "(..., L_k, d_k)")
    check_like("keys", keys, "query", query)
    _check_batch_dims("query", query, "keys", keys)


def _check_dot(query, keys) -> None:
    _check_query_keys(query, keys)
    check_same_size("query", query.shape[-1], "keys", keys.shape[-1], "last dimension (d)")


@checked(_check_dot)
def dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Luong's dot score, ``score(q, k) = q . k``.

    query ``(..., L_q, d)``, keys ``(..., L_k, d)`` -> scores ``(..., L_q, L_k)``.
    """
    return query @ keys.transpose(-2, -1)


@checked(_check_dot)
def scaled_dot_score(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Vaswani's scaled dot score, ``score(q, k) = q . k / sqrt(d_k)``."""
    return dot_score(query, keys) / math.sqrt(query.shape[-1])


def _check_general(query, keys, weight) -> None:
    _check_query_keys(query, keys)
    check_tensor("weight", weight, ndim=2, floating=True, shape_hint="(d_q, d_k)")
    check_like("weight", weight, "query", query)
    if weight.shape != (query.shape[-1], keys.shape[-1]):
        raise ValueError(
            f"weight must have shape (d_q, d_k) = ({query.shape[-1]}, "
            f"{keys.shape[-1]}), got {tuple(weight.shape)}"
        )


@checked(_check_general)
def general_score(query: torch.Tensor, keys: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Luong's general score, ``score(q, k) = q^T W_a k`` with ``W_a`` of shape ``(d_q, d_k)``.

    Unlike the dot score, ``q`` and ``k`` may have different sizes.
    """
    return (query @ weight) @ keys.transpose(-2, -1)


def _check_additive(query, keys, w_a, v_a) -> None:
    _check_query_keys(query, keys)
    d_q, d_k = query.shape[-1], keys.shape[-1]
    check_tensor("w_a", w_a, ndim=2, floating=True, shape_hint="(d_attn, d_q + d_k)")
    check_tensor("v_a", v_a, ndim=1, floating=True, shape_hint="(d_attn,)")
    check_nonempty("w_a", w_a, "(d_attn, d_q + d_k)")
    check_like("w_a", w_a, "query", query)
    check_like("v_a", v_a, "query", query)
    if w_a.shape[1] != d_q + d_k:
        raise ValueError(
            f"w_a must have shape (d_attn, d_q + d_k) = (d_attn, {d_q + d_k}), "
            f"got {tuple(w_a.shape)}"
        )
    check_same_size("w_a", w_a.shape[0], "v_a", v_a.shape[0], "attention size (d_attn)")


@checked(_check_additive)
def additive_score(
    query: torch.Tensor, keys: torch.Tensor, w_a: torch.Tensor, v_a: torch.Tensor
) -> torch.Tensor:
    """Bahdanau's additive score, ``score(q, k) = v_a^T tanh(W_a [q; k])``.

    ``w_a`` is ``(d_attn, d_q + d_k)`` and ``v_a`` is ``(d_attn,)``. The concatenation is never
    built: ``W_a [q; k] = W_a[:, :d_q] q + W_a[:, d_q:] k``, so the query part is computed
    once per query and the key part once per key, then broadcast to every (query, key) pair.
    """
    d_q = query.shape[-1]
    from_query = query @ w_a[:, :d_q].T  # (..., L_q, d_attn)
    from_keys = keys @ w_a[:, d_q:].T  # (..., L_k, d_attn)
    hidden = torch.tanh(
        from_query.unsqueeze(-2) + from_keys.unsqueeze(-3)
    )  # (..., L_q, L_k, d_attn)
    return hidden @ v_a  # (..., L_q, L_k)


# --------------------------------------------------------------------------------------------
# steps 1-3 together: scaled dot-product attention
# --------------------------------------------------------------------------------------------


def _check_sdpa(q, k, v, mask=None, dropout_p=0.0) -> None:
    check_tensor("q", q, floating=True, shape_hint="(..., L_q, d_k)")
    check_tensor("k", k, floating=True, shape_hint="(..., L_k, d_k)")
    check_tensor("v", v, floating=True, shape_hint="(..., L_k, d_v)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., L, d), got shape {tuple(t.shape)}"
            )
    check_nonempty("q", q, "(..., L_q, d_k)")
    check_nonempty("k", k, "(..., L_k, d_k)")
    check_nonempty("v", v, "(..., L_k, d_v)")
    check_like("k", k, "q", q)
    check_like("v", v, "q", q)
    check_same_size("q", q.shape[-1], "k", k.shape[-1], "last dimension (d_k)")
    check_same_size("k", k.shape[-2], "v", v.shape[-2], "number of positions (L_k)")
    _check_batch_dims("q", q, "k", k)
    _check_batch_dims("k", k, "v", v)
    check_probability("dropout_p", dropout_p)
    if mask is not None:  # against the scores (..., L_q, L_k)
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        _check_mask(mask, torch.Size((*batch, q.shape[-2], k.shape[-2])), like=q)


@checked(_check_sdpa)
def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``, written out step by step.

    q ``(..., L_q, d_k)``, k ``(..., L_k, d_k)``, v ``(..., L_k, d_v)``; ``mask`` boolean,
    broadcastable to ``(..., L_q, L_k)``, True where attention is allowed.

    Returns ``(output (..., L_q, d_v), weights (..., L_q, L_k))``. ``weights`` are the softmax
    weights before dropout (dropout, if ``dropout_p > 0``, is applied to the weights that mix
    the values, as in the paper).
    """
    scores = scaled_dot_score(q, k)  # (..., L_q, L_k)
    weights = masked_softmax(scores, mask)  # (..., L_q, L_k)
    mixing = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return mixing @ v, weights  # (..., L_q, d_v)


# --------------------------------------------------------------------------------------------
# RNN-era attention modules: one query vector per decoder step
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Transformer attention
# --------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Multi-head attention (多头注意力) of Vaswani et al. (2017), batch first.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O`` with
    ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``. The ``h`` per-head projections of size
    ``d_model x d_k`` are stored side by side in one ``nn.Linear(d_model, d_model)`` each
    (``w_q``, ``w_k``, ``w_v``), as the notes name them; ``w_o`` is ``W^O``.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={d_model} and "
                f"n_heads={n_heads} (d_model % n_heads = {d_model % n_heads})"
            )
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = check_probability("dropout", dropout)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape  # (B, L, d_model)
        return x.view(b, n, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, L, d_k)

    def _project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``Q W^Q, K W^K, V W^V``. When the inputs are the same tensor (self-attention: all
        three; cross-attention: key and value) the weights are stacked and applied in one
        matrix product, as ``torch.nn.MultiheadAttention`` does with its ``in_proj_weight``:
        same parameters and result, fewer kernel calls (it matters for small models).
        ``query=None`` projects only the keys and values (and returns None for ``Q W^Q``)."""
        layers = (self.w_q, self.w_k, self.w_v)
        if query is key and key is value:
            groups = [(query, layers)]
        elif key is value:
            groups = [(query, layers[:1]), (key, layers[1:])]
        else:
            groups = [(query, layers[:1]), (key, layers[1:2]), (value, layers[2:])]
        out = [] if query is not None else [None]
        groups = groups if query is not None else groups[1:]
        for x, group in groups:
            if len(group) == 1:
                out.append(group[0](x))
                continue
            weight = torch.cat([lin.weight for lin in group])
            bias = None if group[0].bias is None else torch.cat([lin.bias for lin in group])
            out.extend(F.linear(x, weight, bias).chunk(len(group), dim=-1))
        return out[0], out[1], out[2]

    def _check_forward(self, query, key, value, mask=None, need_weights=True) -> None:
        for name, t in (("query", query), ("key", key), ("value", value)):
            check_tensor(name, t, ndim=3, floating=True, shape_hint="(B, L, d_model)")
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have last dimension d_model={self.d_model}, got "
                    f"shape {tuple(t.shape)}"
                )
            check_nonempty(name, t, "(B, L, d_model)")
            check_module_input(name, t, self)
        check_bool("need_weights", need_weights)
        check_same_size("query", query.shape[0], "key", key.shape[0], "batch size")
        check_same_size("key", key.shape[0], "value", value.shape[0], "batch size")
        check_same_size("key", key.shape[1], "value", value.shape[1], "length (L_k)")
        if mask is not None:
            check_tensor(
                "mask",
                mask,
                ndim=(2, 3, 4),
                boolean=True,
                shape_hint="(L_q, L_k), (B, L_q, L_k) or (B, H, L_q, L_k)",
            )
            mask = mask.unsqueeze(1) if mask.dim() == 3 else mask  # (B, 1, L_q | 1, L_k)
            b, l_q, l_k = query.shape[0], query.shape[1], key.shape[1]
            _check_mask(mask, torch.Size((b, self.n_heads, l_q, l_k)), like=query)

    @checked(_check_forward)
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query ``(B, L_q, d_model)``, key and value ``(B, L_k, d_model)``.

        ``mask`` (boolean, True = may attend) is ``(L_q, L_k)``, ``(B, L_q, L_k)`` (or
        ``(B, 1, L_k)`` from :func:`padding_mask`), or ``(B, H, L_q, L_k)``.

        Returns ``(output (B, L_q, d_model), weights (B, H, L_q, L_k))``. With
        ``need_weights=False`` the fused ``F.scaled_dot_product_attention`` kernel is used and
        ``weights`` is None.
        """
        b, l_q = query.shape[0], query.shape[1]
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, 1, L_q | 1, L_k)
        q, k, v = (self._split_heads(t) for t in self._project(query, key, value))
        p = self.dropout if self.training else 0.0
        if need_weights:
            z, weights = scaled_dot_product_attention(q, k, v, mask, p)
        else:
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            if mask is not None:  # rows with no allowed key -> 0
                z = z.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
            weights = None
        z = z.transpose(1, 2).reshape(b, l_q, self.d_model)  # concat heads: (B, L_q, H * d_k)
        return self.w_o(z), weights

    def heads(
        self, query: torch.Tensor | None, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
        """``Q W^Q, K W^K, V W^V`` split into heads, each ``(B, H, L, d_k)`` (what a key/value
        cache stores); ``query=None`` gives only the keys and values. No argument checks: the
        incremental decoding of :meth:`attnbook.transformer.Transformer.decode_step` calls it
        with tensors it has checked."""
        q, k, v = self._project(query, key, value)
        return (
            (None if q is None else self._split_heads(q)),
            self._split_heads(k),
            self._split_heads(v),
        )

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention of heads already projected (:meth:`heads`): q ``(B, H, L_q, d_k)``, k and
        v ``(B, H, L_k, d_k)`` (for instance from a key/value cache), ``mask`` broadcastable to
        ``(B, H, L_q, L_k)`` -> ``(output (B, L_q, d_model), weights (B, H, L_q, L_k))``, the
        heads concatenated and multiplied by ``W^O`` as in :meth:`forward`."""
        z, weights = scaled_dot_product_attention(
            q, k, v, mask, self.dropout if self.training else 0.0
        )
        b, _, l_q, _ = q.shape
        return self.w_o(z.transpose(1, 2).reshape(b, l_q, self.d_model)), weights

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, "
            f"dropout={self.dropout}"
        )


def _check_multihead_init(self, d_model, n_heads, dropout=0.0, bias=True) -> None:
    check_bool("bias", bias)


MultiHeadAttention.__init__ = checked(_check_multihead_init)(MultiHeadAttention.__init__)


def to_torch_multihead(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention`` (batch first, eval mode) with ``mha``'s weights.

    PyTorch stores ``W^Q, W^K, W^V`` stacked in one ``in_proj_weight``; this copies them
    there, so the two modules can be compared on the same input (masks aside, PyTorch's
    boolean masks mean the opposite: True = blocked).
    """
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be a MultiHeadAttention, got {type(mha).__name__}")
    bias = mha.w_q.bias is not None
    ref = nn.MultiheadAttention(mha.d_model, mha.n_heads, dropout=0.0, bias=bias, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.w_q.weight, mha.w_k.weight, mha.w_v.weight]))
        ref.out_proj.weight.copy_(mha.w_o.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([mha.w_q.bias, mha.w_k.bias, mha.w_v.bias]))
            ref.out_proj.bias.copy_(mha.w_o.bias)
    return ref.eval()


class SelfAttentionHead(nn.Module):
    """One self-attention head, ``softmax(X W_Q (X W_K)^T / sqrt(d_k)) X W_V``, no bias.

    By default every position shares the same ``W_Q, W_K, W_V`` of shape ``(d_model, d_k)``,
    as in the Transformer. With ``n_positions`` set, every position gets its *own* three
    matrices (stored as ``(n_positions, d_model, d_k)``): the counterfactual of notes 05,
    section 三 ("what if each input vector had its own W?"). That layer has ``n_positions``
    times the parameters and cannot run on a sequence longer than ``n_positions``.
    """

    def __init__(self, d_model: int, d_k: int, n_positions: int | None = None):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_k", d_k)
        if n_positions is not None:
            check_positive_int("n_positions", n_positions)
        self.d_model, self.d_k, self.n_positions = d_model, d_k, n_positions
        shape = (d_model, d_k) if n_positions is None else (n_positions, d_model, d_k)
        bound = math.sqrt(6.0 / (d_model + d_k))  # Xavier uniform (per position)
        self.w_q = nn.Parameter(torch.empty(shape).uniform_(-bound, bound))
        self.w_k = nn.Parameter(torch.empty(shape).uniform_(-bound, bound))
        self.w_v = nn.Parameter(torch.empty(shape).uniform_(-bound, bound))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x ``(B, L, d_model)`` -> ``(output (B, L, d_k), weights (B, L, L))``."""
        check_tensor("x", x, ndim=3, floating=True, shape_hint="(B, L, d_model)")
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}"
            )
        n = x.shape[1]
        if self.n_positions is None:  # shared: one W for every position
            q, k, v = x @ self.w_q, x @ self.w_k, x @ self.w_v
        elif n > self.n_positions:
            raise ValueError(
                f"x has {n} positions but this layer only has weights for "
                f"n_positions={self.n_positions}: per-position weights cannot "
                "handle longer sequences"
            )
        else:  # position l uses its own W[l]
            q = torch.einsum("bld,ldk->blk", x, self.w_q[:n])
            k = torch.einsum("bld,ldk->blk", x, self.w_k[:n])
            v = torch.einsum("bld,ldk->blk", x, self.w_v[:n])
        return scaled_dot_product_attention(q, k, v, mask)

    def extra_repr(self) -> str:
        where = (
            "shared"
            if self.n_positions is None
            else f"per position (n_positions={self.n_positions})"
        )
        return f"d_model={self.d_model}, d_k={self.d_k}, weights {where}"
