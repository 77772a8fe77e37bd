"""The Transformer's layers, in the paper's order (section 3.1-3.3).

The two sublayer helpers (:class:`FeedForward`, :class:`SublayerConnection`), one encoder
layer and one decoder layer built from them, and the stacks of ``n_layers`` layers
(:class:`Encoder`, :class:`Decoder`). Their argument checks live in
:mod:`attnbook.transformer.checks` and are attached at the end.

Shapes: ``B`` batch, ``S`` source length, ``T`` target length, ``H`` heads, ``L`` any length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_positive_int, check_probability, checked
from ..attention import MultiHeadAttention
from .checks import (
    _check_decoder_layer,
    _check_encoder,
    _check_encoder_layer,
    _check_feed_forward,
    _check_sublayer_init,
    _checked_sublayer,
)

__all__ = [
    "FeedForward",
    "SublayerConnection",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
]

# --------------------------------------------------------------------------------------------
# the two sublayers' helpers
# --------------------------------------------------------------------------------------------


class FeedForward(nn.Module):
    """Position-wise feed-forward network, ``FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`` (3.3).

    The same two linear maps are applied to every position separately: ``d_model -> d_ff ->
    d_model`` with a ReLU (and dropout, as in ``torch.nn.TransformerEncoderLayer``) between.
    """

    def __init__(self, d_model: int = 512, d_ff: int = 2048, dropout: float = 0.1):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x ``(B, L, d_model)`` -> ``(B, L, d_model)``."""
        return self.linear2(self.dropout(F.relu(self.linear1(x))))  # via (B, L, d_ff)


class SublayerConnection(nn.Module):
    """Residual connection and LayerNorm around one sublayer (残差连接与层归一化).

    post-LN (``norm_first=False``, the paper): ``LayerNorm(x + Dropout(Sublayer(x)))``.
    pre-LN (``norm_first=True``): ``x + Dropout(Sublayer(LayerNorm(x)))``; the residual path
    is then never normalised, which trains more stably without warm-up, and the stack needs one
    final LayerNorm (:class:`Encoder`, :class:`Decoder` add it).

    ``sublayer`` is a function of the (normalised) input. It may return a tensor, or a pair
    ``(tensor, extra)`` such as attention's ``(output, weights)``; then ``(x, extra)`` is
    returned.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.norm_first = bool(norm_first)

    def forward(self, x: torch.Tensor, sublayer):
        out = sublayer(self.norm(x) if self.norm_first else x)
        y, extra = out if isinstance(out, tuple) else (out, None)
        x = x + self.dropout(y)
        if not self.norm_first:
            x = self.norm(x)
        return (x, extra) if isinstance(out, tuple) else x

    def extra_repr(self) -> str:
        return "pre-LN" if self.norm_first else "post-LN"


# --------------------------------------------------------------------------------------------
# layers
# --------------------------------------------------------------------------------------------


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention, then the feed-forward network, each with a residual."""

    def __init__(
        self,
        d_model: int = 512,
        n_heads: int = 8,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.residual_attn = SublayerConnection(d_model, dropout, norm_first)
        self.residual_ffn = SublayerConnection(d_model, dropout, norm_first)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x ``(B, S, d_model)``, mask ``(B, 1, S)`` (padding) or ``(S, S)`` / ``(B, S, S)``.

        Returns ``(x (B, S, d_model), weights (B, H, S, S) or None)``.
        """
        x, weights = self.residual_attn(
            x, lambda h: self.self_attn(h, h, h, mask, need_weights=need_weights)
        )
        x = self.residual_ffn(x, self.feed_forward)
        return x, weights


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention over the encoder output
    (queries from the decoder, keys and values from ``memory``), then the feed-forward network.
    """

    def __init__(
        self,
        d_model: int = 512,
        n_heads: int = 8,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.residual_self = SublayerConnection(d_model, dropout, norm_first)
        self.residual_cross = SublayerConnection(d_model, dropout, norm_first)
        self.residual_ffn = SublayerConnection(d_model, dropout, norm_first)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """x ``(B, T, d_model)``, memory ``(B, S, d_model)``; tgt_mask ``(T, T)`` or
        ``(B, T, T)`` (causal, with padding); memory_mask ``(B, 1, S)`` (source padding).

        Returns ``(x (B, T, d_model), self weights (B, H, T, T), cross weights (B, H, T, S))``,
        the weights None unless ``need_weights``.
        """
        x, self_w = self.residual_self(
            x, lambda h: self.self_attn(h, h, h, tgt_mask, need_weights=need_weights)
        )
        x, cross_w = self.residual_cross(
            x, lambda h: self.cross_attn(h, memory, memory, memory_mask, need_weights=need_weights)
        )
        x = self.residual_ffn(x, self.feed_forward)
        return x, self_w, cross_w


# --------------------------------------------------------------------------------------------
# stacks
# --------------------------------------------------------------------------------------------


class Encoder(nn.Module):
    """``n_layers`` encoder layers; with ``norm_first`` a final LayerNorm (pre-LN needs it)."""

    def __init__(
        self,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        check_positive_int("n_layers", n_layers)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """x ``(B, S, d_model)`` -> ``memory (B, S, d_model)`` and the per-layer
        ``(B, H, S, S)`` weights (or None)."""
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask, need_weights)
            weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return x, (weights if need_weights else None)


class Decoder(nn.Module):
    """``n_layers`` decoder layers; with ``norm_first`` a final LayerNorm (pre-LN needs it)."""

    def __init__(
        self,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        check_positive_int("n_layers", n_layers)
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """x ``(B, T, d_model)``, memory ``(B, S, d_model)`` -> ``(x (B, T, d_model),
        [per layer self weights (B, H, T, T)], [per layer cross weights (B, H, T, S)])``,
        the lists None unless ``need_weights``.
        """
        self_ws, cross_ws = [], []
        for layer in self.layers:
            x, self_w, cross_w = layer(x, memory, tgt_mask, memory_mask, need_weights)
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        if self.norm is not None:
            x = self.norm(x)
        if not need_weights:
            return x, None, None
        return x, self_ws, cross_ws


# --------------------------------------------------------------------------------------------
# the checks (attnbook.transformer.checks), attached at the edge
# --------------------------------------------------------------------------------------------

FeedForward.forward = checked(_check_feed_forward)(FeedForward.forward)
SublayerConnection.__init__ = checked(_check_sublayer_init)(SublayerConnection.__init__)
SublayerConnection.forward = _checked_sublayer(SublayerConnection.forward)
EncoderLayer.forward = checked(_check_encoder_layer)(EncoderLayer.forward)
DecoderLayer.forward = checked(_check_decoder_layer)(DecoderLayer.forward)
Encoder.forward = checked(_check_encoder)(Encoder.forward)
Decoder.forward = checked(_check_decoder_layer)(Decoder.forward)
