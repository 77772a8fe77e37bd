"""The three steps of attention as functions: score, softmax, weighted sum.

Step 1, the score functions (``dot``, ``scaled_dot``, ``general``, ``additive``); step 2, the
softmax that gives masked keys exactly zero weight; steps 1-3 together, scaled dot-product
attention. The modules of :mod:`~attnbook.attention.rnn_era` and
:mod:`~attnbook.attention.multihead` are built from them.

Shapes: ``H`` heads, ``L_q`` query positions, ``L_k`` key positions, ``d_k`` query/key size,
``d_v`` value size; ``...`` any batch dimensions.

Infinities, huge numbers and NaN (issue 40). For finite scores every function here gives
exactly (bit for bit) what its printed code computes. Beyond that, the results are the limits:

- :func:`masked_softmax` of a row whose largest allowed score is ``+inf`` spreads the weight
  equally over its ``+inf`` entries (the limit of the softmax as those scores grow), zero
  elsewhere. A score of ``-inf`` is a key that can never win, like a masked key: a row whose
  allowed scores are all ``-inf`` (or that has no allowed key) gets all-zero weights, as an
  all-masked row does. So the weights are always finite and non-negative, and sum to 1 on
  every row with an allowed key of finite or ``+inf`` score, 0 on the others. The gradient
  of the weights of a row that holds ``+inf`` or only ``-inf`` is zero, never NaN.
- :func:`scaled_dot_product_attention` of finite ``q``, ``k``, ``v`` never gives NaN: where
  ``q k^T`` overflows (``q * 1e30``), the row's weights are the limit, the softmax of the
  true (unrepresentable) scores: all the weight on the largest score, shared equally by exact
  ties, with the finite gaps that float can still resolve after rescaling ``q`` and ``k``.
  Checking for that costs one bound on ``max|q| max|k|`` per call, and the softmax one look
  for NaN in its result (each a host read on a GPU); the limits are computed only where
  they are needed.
- NaN propagates, as in PyTorch, and is not refused: a NaN score at an allowed key makes its
  row of weights NaN (a NaN at a masked key is ignored); a NaN or infinite value in ``q``,
  ``k`` or ``v`` makes NaN where it reaches. (Refusing it would read every tensor on the host
  at every call; the trainer stops on the first non-finite loss, and a checkpoint with a
  non-finite weight is neither written nor read: :mod:`attnbook.train.checkpoint`.)
- The trainer's step (under :class:`attnbook._checks.unchecked`) runs the printed code only,
  with no extra kernel or host read; :class:`~attnbook.attention.MultiHeadAttention` with
  ``need_weights=False`` runs PyTorch's fused kernel as is. There an overflowing score gives
  NaN (as in PyTorch), which the trainer reports as a diverged run.

Masks are boolean and positions are counted in ints, so :mod:`~attnbook.attention.masks` and
:mod:`attnbook.positional` have no NaN to meet; the models and decoding read token ids, and
their weights are checked finite when a checkpoint is saved or loaded.
"""

from __future__ import annotations

import functools
import math
import threading

import torch
import torch.nn.functional as F

from .._checks import (
    _recording,
    check_like,
    check_nonempty,
    check_probability,
    check_same_size,
    check_tensor,
    checked,
    checks_waived,
)
from .masks import _check_mask

__all__ = [
    "masked_softmax",
    "softmax_saturation",
    "dot_score",
    "scaled_dot_score",
    "general_score",
    "additive_score",
    "scaled_dot_product_attention",
]

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
    p = _softmax_limits(scores)  # torch.softmax, with the limits at +-inf (module docstring)
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
# the limits at infinity (module docstring): around the printed functions, whose code the
# book shows (``show_source`` unwraps to them) and which run as printed for finite scores
# --------------------------------------------------------------------------------------------

_printed_masked_softmax = masked_softmax.__wrapped__
_printed_sdpa = scaled_dot_product_attention.__wrapped__


def _softmax_limits(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The printed masked softmax, and on rows whose largest allowed score is +-inf its limit:
    equal weights on the +inf entries, or zero weights (all -inf). Rows with a finite largest
    score are computed from the same numbers as before (bit-identical); no host sync."""
    filled = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    top = filled.amax(dim=-1, keepdim=True)  # (..., L_q, 1); NaN if the row holds one
    at_infinity = top.isinf()
    # the printed softmax sees finite numbers on those rows, so its gradient stays finite
    weights = _printed_masked_softmax(scores.masked_fill(at_infinity, 0.0), mask)
    share = (filled == top).to(weights.dtype)  # the +inf entries (or the -inf ones)
    limit = share / share.sum(dim=-1, keepdim=True) * (top > 0)
    return torch.where(at_infinity, limit, weights)


# set when a masked softmax met a row at infinity (or a NaN): the attention that called it
# then looks for scores that overflowed (one host read per call, not two)
_at_infinity = threading.local()


@functools.wraps(_printed_masked_softmax)
def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    if _recording():  # a graph: the limits without a branch
        return _softmax_limits(scores, mask)
    weights = _printed_masked_softmax(scores, mask)
    # NaN comes out only of a row whose largest allowed score is +-inf (or holds a NaN): then,
    # and only then, the limits (one host read; none in the trainer's step)
    if not checks_waived() and bool(weights.isnan().any()):
        _at_infinity.seen = True
        return _softmax_limits(scores, mask)
    return weights


def _overflow_limit(q, k, v, mask, dropout_p, output, weights):
    """Where ``q k^T / sqrt(d_k)`` may overflow (a bound, one host read), recompute the rows
    that overflowed from ``q / max|q|`` and ``k / max|k|``: the true scores' gaps, scaled
    back where float can hold them (-inf beyond), give the limit of their softmax."""
    big = torch.finfo(q.dtype).max / 4
    largest = [torch.linalg.vector_norm(t.detach(), float("inf")).double() for t in (q, k)]
    if not bool(largest[0] * largest[1] * math.sqrt(q.shape[-1]) > big):  # (False for NaN)
        return output, weights
    qa = q.detach().abs().amax(dim=-1, keepdim=True)  # (..., L_q, 1)
    kb = k.detach().abs().amax(dim=(-2, -1), keepdim=True)  # (..., 1, 1)
    scores = scaled_dot_score(q.detach(), k.detach())
    allowed_scores = scores if mask is None else scores.masked_fill(~mask, 0.0)
    overflowed = ~allowed_scores.isfinite().all(dim=-1, keepdim=True)  # (..., L_q, 1)
    qa = torch.where(qa > 0, qa, 1.0)
    kb = torch.where(kb > 0, kb, 1.0)
    small = scaled_dot_score(q.detach() / qa, k.detach() / kb)  # |small| <= sqrt(d_k)
    top = (small if mask is None else small.masked_fill(~mask, float("-inf"))).amax(
        dim=-1, keepdim=True
    )
    gaps = (small - top.masked_fill(top.isinf(), 0.0)) * qa * kb  # <= 0 at allowed keys
    limit = _softmax_limits(gaps, mask)
    mixing = F.dropout(limit, dropout_p) if dropout_p > 0 else limit
    return (
        torch.where(overflowed, mixing @ v, output),
        torch.where(overflowed, limit, weights),
    )


@functools.wraps(_printed_sdpa)
def _scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    if checks_waived() or _recording():  # the trainer's step; a graph being recorded
        return _checked_sdpa(q, k, v, mask, dropout_p)
    # scores that overflowed (finite q and k, an infinite or NaN q k^T) make a row of the
    # softmax NaN, which its limits replace and record: only then is the overflow looked for
    _at_infinity.seen = False
    output, weights = _checked_sdpa(q, k, v, mask, dropout_p)
    if not _at_infinity.seen:
        return output, weights
    return _overflow_limit(q, k, v, mask, dropout_p, output, weights)


_checked_sdpa = scaled_dot_product_attention
_scaled_dot_product_attention.check = _check_sdpa
masked_softmax = checked(_check_masked_softmax)(_masked_softmax)
scaled_dot_product_attention = _scaled_dot_product_attention
