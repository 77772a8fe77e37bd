"""Transformer attention: multi-head attention, its twin in PyTorch, and a single head.

:class:`MultiHeadAttention` projects queries, keys and values, splits them into heads, runs
:func:`~attnbook.attention.functional.scaled_dot_product_attention` in every head (or PyTorch's
fused kernel when no weights are wanted) and mixes the heads with ``W^O``.
:func:`to_torch_multihead` copies its weights into ``torch.nn.MultiheadAttention``.
:class:`SelfAttentionHead` is one head, with shared or per-position weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import (
    check_bool,
    check_module_input,
    check_nonempty,
    check_positive_int,
    check_probability,
    check_same_size,
    check_tensor,
    checked,
)
from .._limits import FLOAT_BYTES, check_memory, mha_parameters
from .functional import scaled_dot_product_attention
from .masks import _check_mask

__all__ = [
    "MultiHeadAttention",
    "to_torch_multihead",
    "SelfAttentionHead",
]


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
    check_positive_int("d_model", d_model)
    check_positive_int("n_heads", n_heads)
    check_memory(
        "MultiHeadAttention",
        {"d_model": d_model},
        "its 4 projections' weights",
        FLOAT_BYTES * mha_parameters(d_model, bias),
    )


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


def _check_self_attention_head_init(self, d_model, d_k, n_positions=None) -> None:
    check_positive_int("d_model", d_model)
    check_positive_int("d_k", d_k)
    sizes = {"d_model": d_model, "d_k": d_k}
    positions = 1
    if n_positions is not None:
        positions = check_positive_int("n_positions", n_positions)
        sizes["n_positions"] = n_positions
    check_memory(
        "SelfAttentionHead",
        sizes,
        "its 3 weight matrices" + (" per position" if n_positions is not None else ""),
        FLOAT_BYTES * 3 * positions * d_model * d_k,
    )


SelfAttentionHead.__init__ = checked(_check_self_attention_head_init)(SelfAttentionHead.__init__)
