"""The Transformer of Vaswani et al. (2017), "Attention Is All You Need", in the paper's order.

An encoder of ``n_layers`` identical layers (self-attention, feed-forward) turns the source
tokens into ``memory``; a decoder of ``n_layers`` layers (masked self-attention,
cross-attention over the memory, feed-forward) turns the target prefix into next-token logits.
Every sublayer is wrapped in a residual connection and a LayerNorm (:class:`SublayerConnection`):

    post-LN (the paper, the default):  x = LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN  (``norm_first=True``):      x = x + Dropout(Sublayer(LayerNorm(x))), and one final
                                        LayerNorm after the last layer of each stack

Attention itself is :class:`attnbook.attention.MultiHeadAttention`. Masks are boolean, True
where attention is allowed. Argument names follow ``torch.nn.Transformer`` where they exist
(``norm_first``, ``tgt_mask``, ``memory_mask``); everything is batch first.

Shapes: ``B`` batch, ``S`` source length, ``T`` target length, ``H`` heads, ``V`` vocabulary.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_bool,
    check_device,
    check_module_input,
    check_nonempty,
    check_positive_int,
    check_probability,
    check_same_size,
    check_tensor,
    check_token_ids,
    checked,
    checks_active,
)
from .attention import MultiHeadAttention, causal_mask, padding_mask, to_torch_multihead
from .positional import PositionalEncoding

__all__ = [
    "FeedForward",
    "SublayerConnection",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "Transformer",
    "POSITIONAL_KINDS",
    "count_parameters",
    "parameter_breakdown",
    "to_torch_transformer",
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
# the checks of the layers above, attached at the edge (the book prints the classes as they read)
# --------------------------------------------------------------------------------------------


def _check_activations(name: str, x, module: nn.Module, d_model: int, hint: str) -> None:
    check_tensor(name, x, ndim=3, floating=True, shape_hint=hint)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must have last dimension d_model={d_model}, got shape {tuple(x.shape)}"
        )
    check_nonempty(name, x, hint)
    check_module_input(name, x, module)


def _check_layer_mask(name: str, mask, b: int, l_q: int, l_k: int, like=None) -> None:
    """A mask a layer hands to its attention: ``(L_q, L_k)``, ``(B, L_q | 1, L_k)`` or
    ``(B, H | 1, L_q | 1, L_k)``, boolean, True = may attend."""
    if mask is None:
        return
    check_tensor(
        name,
        mask,
        ndim=(2, 3, 4),
        boolean=True,
        shape_hint=f"({l_q}, {l_k}) or ({b}, {l_q}, {l_k})",
    )
    if like is not None:
        check_device(name, mask, like.device, "the input")
    want = (b, l_q, l_k) if mask.dim() < 4 else (b, mask.shape[1], l_q, l_k)
    try:
        ok = torch.broadcast_shapes(mask.shape, want) == want
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} must be broadcastable to (B, L_q, L_k) = ({b}, {l_q}, {l_k}), got shape "
            f"{tuple(mask.shape)}"
        )


def _check_feed_forward(self, x) -> None:  # position-wise: any leading dimensions
    d_model = self.linear1.in_features
    check_tensor("x", x, floating=True, shape_hint="(..., d_model)")
    if x.dim() < 1 or x.shape[-1] != d_model:
        raise ValueError(
            f"x must have last dimension d_model={d_model}, got shape {tuple(x.shape)}"
        )
    check_nonempty("x", x, "(..., d_model)")
    check_module_input("x", x, self)


def _check_sublayer_init(self, d_model, dropout=0.1, norm_first=False) -> None:
    check_positive_int("d_model", d_model)
    check_bool("norm_first", norm_first)


def _check_sublayer(self, x, sublayer) -> None:
    d_model = self.norm.normalized_shape[0]
    check_tensor("x", x, floating=True, shape_hint="(..., d_model)")
    if x.dim() < 1 or x.shape[-1] != d_model:
        raise ValueError(
            f"x must have last dimension d_model={d_model}, got shape {tuple(x.shape)}"
        )
    check_nonempty("x", x)
    check_module_input("x", x, self)
    if not callable(sublayer):
        raise TypeError(
            f"sublayer must be a function or module of x, got {type(sublayer).__name__}"
        )


def _check_encoder_layer(self, x, mask=None, need_weights=False) -> None:
    _check_activations("x", x, self, self.self_attn.d_model, "(B, S, d_model)")
    _check_layer_mask("mask", mask, x.shape[0], x.shape[1], x.shape[1], x)
    check_bool("need_weights", need_weights)


def _check_decoder_layer(self, x, memory, tgt_mask=None, memory_mask=None, need_weights=False):
    d_model = (self.layers[0] if isinstance(self, Decoder) else self).self_attn.d_model
    _check_activations("x", x, self, d_model, "(B, T, d_model)")
    _check_activations("memory", memory, self, d_model, "(B, S, d_model)")
    check_same_size("x", x.shape[0], "memory", memory.shape[0], "batch size")
    _check_layer_mask("tgt_mask", tgt_mask, x.shape[0], x.shape[1], x.shape[1], x)
    _check_layer_mask("memory_mask", memory_mask, x.shape[0], x.shape[1], memory.shape[1], x)
    check_bool("need_weights", need_weights)


def _check_encoder(self, x, mask=None, need_weights=False) -> None:
    _check_encoder_layer(self.layers[0], x, mask, need_weights)


FeedForward.forward = checked(_check_feed_forward)(FeedForward.forward)
SublayerConnection.__init__ = checked(_check_sublayer_init)(SublayerConnection.__init__)


def _returns_shape_of(x, sublayer):
    """``sublayer``, made to refuse an output whose shape is not ``x``'s (the residual sum
    would broadcast it silently, or fail inside PyTorch)."""

    def run(inp):
        out = sublayer(inp)
        y = out[0] if isinstance(out, tuple) else out
        if not isinstance(y, torch.Tensor) or y.shape != x.shape:
            got = f"shape {tuple(y.shape)}" if isinstance(y, torch.Tensor) else type(y).__name__
            raise ValueError(
                f"sublayer must return a tensor of x's shape {tuple(x.shape)} (or a pair "
                f"(tensor, extra)), got {got}"
            )
        return out

    return run


def _checked_sublayer(forward):
    """``checked(_check_sublayer)``, and at the API edge the sublayer's output is checked too."""
    inner = checked(_check_sublayer)(forward)

    @functools.wraps(forward)
    def wrapper(self, x, sublayer):
        if checks_active() and callable(sublayer):
            sublayer = _returns_shape_of(x, sublayer)
        return inner(self, x, sublayer)

    wrapper.check = _check_sublayer
    return wrapper


SublayerConnection.forward = _checked_sublayer(SublayerConnection.forward)
EncoderLayer.forward = checked(_check_encoder_layer)(EncoderLayer.forward)
DecoderLayer.forward = checked(_check_decoder_layer)(DecoderLayer.forward)
Encoder.forward = checked(_check_encoder)(Encoder.forward)
Decoder.forward = checked(_check_decoder_layer)(Decoder.forward)


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------

POSITIONAL_KINDS = ("sinusoidal", "learned", None)


class Transformer(nn.Module):
    """The encoder-decoder Transformer, from token ids to next-token logits.

    ``Transformer(src_vocab_size, tgt_vocab_size)`` is the paper's base model (d_model 512,
    8 heads, 6 + 6 layers, d_ff 2048, dropout 0.1). Token embeddings are multiplied by
    ``sqrt(d_model)`` and the positional encoding is added (section 3.4-3.5).

    - ``share_embeddings``: one embedding table for source and target (needs equal
      vocabularies), as the paper does with its shared 37,000-token vocabulary.
    - ``tie_output``: the pre-softmax projection reuses the target embedding matrix (3.4).
    - ``pad_id``: the padding token of both vocabularies; padding masks are built from it.
    - ``positional``: ``"sinusoidal"`` (the paper), ``"learned"``, or ``None`` (no position
      information at all, to show that attention alone ignores order).

    Weights are initialised as the paper's reference implementations (tensor2tensor, fairseq)
    do: Xavier uniform for every linear map, zero biases, ``N(0, d_model^-0.5)`` embeddings
    (so that after the ``sqrt(d_model)`` scaling they have unit variance).

    The output projection ``output`` has no bias (as in tensor2tensor; the tied matrix has
    none either).

    It is a :class:`attnbook.seq2seq.Seq2SeqModel` (``encode``, ``forward``, ``init_decoder``,
    ``decode_step``, ``reorder_state``), as the RNN ``Seq2Seq`` is: the decoders and the
    evaluator treat both alike.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        norm_first: bool = False,
        share_embeddings: bool = False,
        tie_output: bool = False,
        *,
        pad_id: int = 0,
        positional: str | None = "sinusoidal",
    ):
        super().__init__()
        check_positive_int("src_vocab_size", src_vocab_size)
        check_positive_int("tgt_vocab_size", tgt_vocab_size)
        check_positive_int("d_model", d_model)
        check_positive_int("n_heads", n_heads)
        check_positive_int("n_layers", n_layers)
        check_positive_int("d_ff", d_ff)
        check_positive_int("max_len", max_len)
        check_probability("dropout", dropout)
        if d_model % n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={d_model} and "
                f"n_heads={n_heads} (d_model % n_heads = {d_model % n_heads})"
            )
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True needs one vocabulary for source and target, "
                f"got src_vocab_size={src_vocab_size} and "
                f"tgt_vocab_size={tgt_vocab_size}"
            )
        if isinstance(pad_id, bool) or not isinstance(pad_id, int):
            raise TypeError(f"pad_id must be an int, got {type(pad_id).__name__} {pad_id!r}")
        if not 0 <= pad_id < min(src_vocab_size, tgt_vocab_size):
            raise ValueError(
                f"pad_id must be a token id in both vocabularies, 0 <= pad_id < "
                f"{min(src_vocab_size, tgt_vocab_size)}, got {pad_id}"
            )
        if positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {POSITIONAL_KINDS}, got {positional!r}")
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.d_model, self.n_heads, self.n_layers = d_model, n_heads, n_layers
        self.max_len, self.pad_id = max_len, pad_id

        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = (
            self.src_embed if share_embeddings else nn.Embedding(tgt_vocab_size, d_model)
        )
        if positional is None:
            self.src_pos = self.tgt_pos = nn.Dropout(dropout)
        else:
            self.src_pos = PositionalEncoding(d_model, max_len, dropout, kind=positional)
            self.tgt_pos = PositionalEncoding(d_model, max_len, dropout, kind=positional)
        self.encoder = Encoder(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.decoder = Decoder(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._reset_parameters()
        if tie_output:
            self.output.weight = self.tgt_embed.weight  # (V, d_model), shared

    def _reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):  # tokens (and learned positions)
                nn.init.normal_(module.weight, mean=0.0, std=self.d_model**-0.5)

    # ---------------------------------------------------------------------------- checks, masks

    def _check_tokens(self, name: str, tokens, vocab: str) -> torch.Tensor:
        """Check token ids: ``(B, L)`` integer, 1 <= L <= max_len, ids in ``[0, vocab)``.
        Steps aside where checks do not run (:func:`attnbook._checks.checks_active`): the range
        check reads the ids, a host sync on a GPU."""
        if not checks_active():
            return tokens
        vocab_size = getattr(self, vocab)
        check_token_ids(name, tokens, ndim=2, shape_hint="(B, L) of token ids")
        check_device(name, tokens, self.output.weight.device, "the model")
        b, n = tokens.shape
        if b == 0 or n == 0:
            raise ValueError(
                f"{name} must hold at least one sequence of at least one token, got "
                f"shape {tuple(tokens.shape)}"
            )
        if n > self.max_len:
            raise ValueError(
                f"{name} has length {n} (shape {tuple(tokens.shape)}) but the model "
                f"was built with max_len={self.max_len}"
            )
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"{name} holds token id {bad}, outside the vocabulary: ids must be in "
                f"[0, {vocab_size - 1}] ({vocab}={vocab_size})"
            )
        return tokens

    @staticmethod
    def _check_mask(name: str, mask, b: int, l_q: int, l_k: int, like=None) -> None:
        if mask is None or not checks_active():
            return
        check_tensor(
            name,
            mask,
            ndim=(2, 3),
            boolean=True,
            shape_hint=f"({l_q}, {l_k}) or ({b}, {l_q} or 1, {l_k})",
        )
        if like is not None:
            check_device(name, mask, like.device, "the model")
        try:
            ok = torch.broadcast_shapes(mask.shape, (b, l_q, l_k)) == (b, l_q, l_k)
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name} must be broadcastable to (B, L_q, L_k) = ({b}, {l_q}, "
                f"{l_k}), got shape {tuple(mask.shape)}"
            )

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        """Padding mask of the source, ``(B, 1, S)``: True at real tokens (keys to attend to)."""
        return padding_mask(src, self.pad_id)

    def tgt_mask(self, tgt: torch.Tensor) -> torch.Tensor:
        """Look-ahead and padding mask of the target, ``(B, T, T)``: position ``i`` may attend
        to positions ``<= i`` that are not padding."""
        return causal_mask(tgt.shape[1], device=tgt.device) & padding_mask(tgt, self.pad_id)

    # ---------------------------------------------------------------------------- the passes

    def _check_encode(self, src, src_mask=None, return_attention=False) -> None:
        self._check_tokens("src", src, "src_vocab_size")
        check_bool("return_attention", return_attention)
        self._check_mask("src_mask", src_mask, src.shape[0], src.shape[1], src.shape[1], src)

    @checked(_check_encode)
    def encode(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """src ``(B, S)`` token ids -> memory ``(B, S, d_model)``.

        ``src_mask`` defaults to :meth:`src_mask` (padding). With ``return_attention`` returns
        ``(memory, [per layer self-attention weights (B, H, S, S)])``.
        """
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        x = self.src_pos(self.src_embed(src) * math.sqrt(self.d_model))  # (B, S, d_model)
        memory, weights = self.encoder(x, src_mask, need_weights=return_attention)
        return (memory, weights) if return_attention else memory

    def _check_decode(
        self, tgt, memory, memory_mask=None, tgt_mask=None, return_attention=False
    ) -> None:
        self._check_tokens("tgt", tgt, "tgt_vocab_size")
        check_tensor("memory", memory, ndim=3, floating=True, shape_hint="(B, S, d_model)")
        if memory.shape[-1] != self.d_model:
            raise ValueError(
                f"memory must have last dimension d_model={self.d_model}, got shape "
                f"{tuple(memory.shape)}"
            )
        check_nonempty("memory", memory, "(B, S, d_model)")
        check_module_input("memory", memory, self)
        check_bool("return_attention", return_attention)
        check_same_size("tgt", tgt.shape[0], "memory", memory.shape[0], "batch size")
        b, t = tgt.shape
        self._check_mask("tgt_mask", tgt_mask, b, t, t, tgt)
        self._check_mask("memory_mask", memory_mask, b, t, memory.shape[1], tgt)

    @checked(_check_decode)
    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """tgt ``(B, T)`` token ids (the shifted target, starting with BOS), memory
        ``(B, S, d_model)`` -> logits ``(B, T, V)``; position ``i`` predicts token ``i + 1``.

        ``memory_mask`` should be the source padding mask ``(B, 1, S)`` (:meth:`src_mask`);
        None lets every position attend to every source position. ``tgt_mask`` defaults to
        :meth:`tgt_mask` (look-ahead and padding). With ``return_attention`` returns ``(logits,
        {"decoder_self": [per layer (B, H, T, T)], "cross": [per layer (B, H, T, S)]})``.
        """
        tgt_mask = self.tgt_mask(tgt) if tgt_mask is None else tgt_mask
        x = self.tgt_pos(self.tgt_embed(tgt) * math.sqrt(self.d_model))  # (B, T, d_model)
        x, self_ws, cross_ws = self.decoder(
            x, memory, tgt_mask, memory_mask, need_weights=return_attention
        )
        logits = self.output(x)  # (B, T, V)
        if return_attention:
            return logits, {"decoder_self": self_ws, "cross": cross_ws}
        return logits

    def _check_forward(
        self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, return_attention=False
    ) -> None:
        self._check_tokens("src", src, "src_vocab_size")
        self._check_tokens("tgt", tgt, "tgt_vocab_size")
        check_same_size("src", src.shape[0], "tgt", tgt.shape[0], "batch size")
        check_bool("return_attention", return_attention)
        (b, s), t = src.shape, tgt.shape[1]
        self._check_mask("src_mask", src_mask, b, s, s, src)
        self._check_mask("tgt_mask", tgt_mask, b, t, t, src)
        self._check_mask("memory_mask", memory_mask, b, t, s, src)

    @checked(_check_forward)
    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """src ``(B, S)``, tgt ``(B, T)`` token ids -> logits ``(B, T, V)``.

        Masks default to those built from ``pad_id``: ``src_mask`` (padding, ``(B, 1, S)``),
        ``tgt_mask`` (look-ahead and padding, ``(B, T, T)``) and ``memory_mask`` (the source
        padding). Without ``return_attention`` no weights are kept and the fused attention
        kernel runs. With it, returns ``(logits, attention)`` where ``attention`` is
        ``{"encoder_self": [per layer (B, H, S, S)], "decoder_self": [per layer (B, H, T, T)],
        "cross": [per layer (B, H, T, S)]}``.
        """
        if memory_mask is None:
            memory_mask = self.src_mask(src)  # (B, 1, S)
        if return_attention:
            memory, enc_ws = self.encode(src, src_mask, return_attention=True)
            logits, dec = self.decode(tgt, memory, memory_mask, tgt_mask, return_attention=True)
            return logits, {"encoder_self": enc_ws, **dec}
        return self.decode(tgt, self.encode(src, src_mask), memory_mask, tgt_mask)

    # ---------------------------------------------------------------------------- decoding

    def init_decoder(self, src: torch.Tensor, use_cache: bool = False) -> dict:
        """Run the encoder once: ``{"memory": (B, S, d_model), "memory_mask": (B, 1, S)}``.

        Part of the seq2seq protocol (:mod:`attnbook.seq2seq`). With ``use_cache`` the state
        also holds a key/value cache (KV 缓存) for incremental decoding, batch first:

        - ``"cross_k"``, ``"cross_v"``: per decoder layer ``(B, H, S, d_k)``, the
          cross-attention keys and values of the memory, computed here, once;
        - ``"self_k"``, ``"self_v"``: per decoder layer ``(B, H, capacity, d_k)``, buffers whose
          first ``t`` positions hold the self-attention keys and values of the ``t`` target
          positions fed so far (the capacity doubles when it runs out);
        - ``"self_mask"`` ``(B, t)``: False where one of those positions is padding. Its width
          ``t`` is the number of positions in the cache (0 here).

        Without it (the default) :meth:`decode_step` re-runs the decoder over the whole prefix.
        """
        if not isinstance(use_cache, bool):
            raise TypeError(
                f"use_cache must be a bool (True: keep a key/value cache), got "
                f"{type(use_cache).__name__} {use_cache!r}"
            )
        memory = self.encode(src)  # (B, S, d_model); checks src
        state = {"memory": memory, "memory_mask": self.src_mask(src)}
        if use_cache:
            cross = [layer.cross_attn.heads(None, memory, memory) for layer in self.decoder.layers]
            state["cross_k"] = [k for _, k, _ in cross]  # per layer (B, H, S, d_k)
            state["cross_v"] = [v for _, _, v in cross]
            empty = cross[0][1][:, :, :0]  # (B, H, 0, d_k)
            state["self_k"] = [empty] * self.n_layers
            state["self_v"] = [empty] * self.n_layers
            state["self_mask"] = torch.zeros(src.shape[0], 0, dtype=torch.bool, device=src.device)
        return state

    def decode_step(self, tokens: torch.Tensor, state: dict):
        """tokens ``(B, t)``, the prefix so far starting with BOS -> ``(logits (B, V) of the
        next token, state, {"decoder_self": (B, n_layers, H, t), "cross": (B, n_layers, H, S)})``,
        the attention of the newest position in every layer.

        Without a cache (``init_decoder(src)``) the decoder re-runs over the whole prefix and
        ``state`` comes back unchanged: ``t`` positions of work for every new token. With one
        (``init_decoder(src, use_cache=True)``) only the positions not yet in the cache run
        (just the newest token when the returned state is passed back each step); their
        queries attend over the cached keys and values. Both give the same logits and weights,
        to float rounding. The new keys and values are written into the cache's buffers in
        place: pass the returned state on, and branch with :meth:`reorder_state` (it copies).
        """
        if "self_k" not in state:
            logits, att = self.decode(
                tokens, state["memory"], state["memory_mask"], return_attention=True
            )
            newest = {
                name: torch.stack([w[:, :, -1] for w in ws], dim=1)  # (B, n_layers, H, .)
                for name, ws in att.items()
            }
            return logits[:, -1], state, newest
        return self._decode_cached(tokens, state)

    def _decode_cached(self, tokens: torch.Tensor, state: dict):
        """:meth:`decode_step` with a key/value cache: run only the ``n`` new positions."""
        check_tensor("tokens", tokens, ndim=2, integer=True, shape_hint="(B, t) of token ids")
        (b, t), (batch, cached) = tokens.shape, state["self_mask"].shape
        if b != batch or t <= cached:
            raise ValueError(
                f"tokens must be (B={batch}, t > {cached}): the state caches {cached} positions, "
                f"so tokens must hold them and at least one more; got shape {tuple(tokens.shape)}"
            )
        if t > self.max_len:
            raise ValueError(
                f"tokens has length {t}, but the model was built with max_len={self.max_len}: "
                "the positional encoding and the key/value cache hold at most max_len positions"
            )
        new = self._check_tokens("tokens", tokens[:, cached:], "tgt_vocab_size")  # (B, n)
        n, state = new.shape[1], dict(state)  # a new dict: the caller's keeps its entries
        state["self_mask"] = torch.cat([state["self_mask"], new != self.pad_id], dim=1)  # (B, t)
        mask = state["self_mask"][:, None, None, :]  # (B, 1, 1, t): padding keys masked
        if n > 1:  # several new positions: each sees itself and the positions before it
            mask = mask & torch.ones(n, t, dtype=torch.bool, device=tokens.device).tril(cached)
        capacity = state["self_k"][0].shape[2]
        if t > capacity:  # grow the buffers, at least doubling them
            grow = min(max(t, 2 * capacity), self.max_len) - capacity
            for name in ("self_k", "self_v"):
                state[name] = [F.pad(c, (0, 0, 0, grow)) for c in state[name]]
        x = self.tgt_embed(new) * math.sqrt(self.d_model)  # (B, n, d_model)
        if isinstance(self.tgt_pos, PositionalEncoding):  # at positions cached .. t - 1
            x = self.tgt_pos(x, offset=cached)
        else:  # positional=None: dropout only
            x = self.tgt_pos(x)
        memory_mask = state["memory_mask"][:, None]  # (B, 1, 1, S)
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.decoder.layers):
            k_cache, v_cache = state["self_k"][i], state["self_v"][i]  # (B, H, capacity, d_k)

            def self_attention(h, layer=layer, k_cache=k_cache, v_cache=v_cache):
                q, k, v = layer.self_attn.heads(h, h, h)  # (B, H, n, d_k)
                k_cache[:, :, cached:t], v_cache[:, :, cached:t] = k, v  # into the cache
                return layer.self_attn.attend(q, k_cache[:, :, :t], v_cache[:, :, :t], mask)

            def cross_attention(h, i=i, mha=layer.cross_attn):
                q = mha._split_heads(mha.w_q(h))  # (B, H, n, d_k)
                return mha.attend(q, state["cross_k"][i], state["cross_v"][i], memory_mask)

            x, self_w = layer.residual_self(x, self_attention)  # (B, n, d_model)
            x, cross_w = layer.residual_cross(x, cross_attention)
            x = layer.residual_ffn(x, layer.feed_forward)
            self_ws.append(self_w[:, :, -1])  # (B, H, t): the newest position
            cross_ws.append(cross_w[:, :, -1])  # (B, H, S)
        if self.decoder.norm is not None:
            x = self.decoder.norm(x)
        logits = self.output(x[:, -1])  # (B, V)
        newest = {"decoder_self": torch.stack(self_ws, 1), "cross": torch.stack(cross_ws, 1)}
        return logits, state, newest

    @staticmethod
    def reorder_state(state: dict, index: torch.Tensor) -> dict:
        """Select (and repeat) batch rows of the state, the key/value cache included: ``index``
        ``(B',)`` -> batch ``B'`` (beam search moves and copies beams with it)."""
        return {
            name: [t.index_select(0, index) for t in value]
            if isinstance(value, list)
            else value.index_select(0, index)
            for name, value in state.items()
        }

    def extra_repr(self) -> str:
        return (
            f"src_vocab_size={self.src_vocab_size}, tgt_vocab_size={self.tgt_vocab_size}, "
            f"pad_id={self.pad_id}, max_len={self.max_len}"
        )


def _check_transformer_init(self, *args, **kwargs) -> None:
    names = ("norm_first", "share_embeddings", "tie_output")
    given = dict(zip(names, args[8:11], strict=False)) | {
        k: v for k, v in kwargs.items() if k in names
    }
    for name, value in given.items():
        check_bool(name, value)


def _check_decode_step(self, tokens, state) -> None:
    if not isinstance(state, dict) or not {"memory", "memory_mask"} <= state.keys():
        raise TypeError(
            "state must be the dict that init_decoder(src) returns (with 'memory' and "
            f"'memory_mask'), got {type(state).__name__}"
            + (f" with keys {sorted(state)}" if isinstance(state, dict) else "")
        )
    if "self_mask" not in state:  # no cache: the whole prefix runs
        self._check_tokens("tokens", tokens, "tgt_vocab_size")
        check_same_size(
            "tokens", tokens.shape[0], "state['memory']", state["memory"].shape[0], "batch size"
        )
        return
    # a cache: _decode_cached checks the shapes against it; the new ids are checked here
    check_token_ids("tokens", tokens, ndim=2, shape_hint="(B, t) of token ids")
    (b, t), (batch, cached) = tokens.shape, state["self_mask"].shape
    if b == batch and cached < t <= self.max_len:
        self._check_tokens("tokens", tokens[:, cached:], "tgt_vocab_size")


Transformer.__init__ = checked(_check_transformer_init)(Transformer.__init__)
Transformer.decode_step = checked(_check_decode_step)(Transformer.decode_step)


# --------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters, each shared (tied) tensor counted once."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_bool("trainable_only", trainable_only)
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


_COMPONENTS = (
    ("embeddings", (nn.Embedding,)),
    ("attention", (MultiHeadAttention,)),
    ("feed_forward", (FeedForward,)),
    ("norms", (nn.LayerNorm,)),
)


def parameter_breakdown(model: nn.Module) -> dict[str, int]:
    """Parameters by component: ``embeddings`` (token and learned position tables),
    ``attention`` (every ``W^Q, W^K, W^V, W^O`` and bias), ``feed_forward``, ``norms``,
    ``output`` (the pre-softmax projection; 0 when tied to the target embedding) and
    ``other``. Shared tensors are counted once, under the first component that holds them;
    the values sum to :func:`count_parameters`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    counts = dict.fromkeys(
        ["embeddings", "attention", "feed_forward", "norms", "output", "other"], 0
    )
    seen: set[int] = set()

    def add(component: str, module: nn.Module) -> None:
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                counts[component] += p.numel()

    for name, module in model.named_modules():
        for component, types in _COMPONENTS:
            if isinstance(module, types):
                add(component, module)
        if name == "output":
            add("output", module)
    add("other", model)
    return counts


# --------------------------------------------------------------------------------------------
# PyTorch's own Transformer, with the same weights
# --------------------------------------------------------------------------------------------


def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """A ``torch.nn.Transformer`` (batch first, eval mode) holding ``model``'s layer weights.

    ``torch.nn.Transformer`` has no embeddings, positional encoding or output layer: feed it
    ``sqrt(d_model) * embedding + PE`` and multiply its output by ``model.output.weight.T``
    to compare logits. PyTorch always ends both stacks with a LayerNorm; for a post-LN model
    (the paper's) those are removed, since the paper has none.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be an attnbook Transformer, got {type(model).__name__}")
    norm_first = model.encoder.norm is not None
    first = model.encoder.layers[0]
    ref = nn.Transformer(
        model.d_model,
        model.n_heads,
        model.n_layers,
        model.n_layers,
        first.feed_forward.linear1.out_features,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
    )
    # PyTorch's fast path turns padded inputs into (prototype) nested tensors and warns;
    # the comparison wants the plain path.
    ref.encoder.enable_nested_tensor = ref.encoder.use_nested_tensor = False

    def copy(mine: nn.Module, theirs: nn.Module) -> None:
        theirs.load_state_dict(mine.state_dict())

    def copy_attention(mine: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
        theirs.load_state_dict(to_torch_multihead(mine).state_dict())

    with torch.no_grad():
        for mine, theirs in zip(model.encoder.layers, ref.encoder.layers, strict=True):
            copy_attention(mine.self_attn, theirs.self_attn)
            copy(mine.feed_forward.linear1, theirs.linear1)
            copy(mine.feed_forward.linear2, theirs.linear2)
            copy(mine.residual_attn.norm, theirs.norm1)
            copy(mine.residual_ffn.norm, theirs.norm2)
        for mine, theirs in zip(model.decoder.layers, ref.decoder.layers, strict=True):
            copy_attention(mine.self_attn, theirs.self_attn)
            copy_attention(mine.cross_attn, theirs.multihead_attn)
            copy(mine.feed_forward.linear1, theirs.linear1)
            copy(mine.feed_forward.linear2, theirs.linear2)
            copy(mine.residual_self.norm, theirs.norm1)
            copy(mine.residual_cross.norm, theirs.norm2)
            copy(mine.residual_ffn.norm, theirs.norm3)
        if norm_first:
            copy(model.encoder.norm, ref.encoder.norm)
            copy(model.decoder.norm, ref.decoder.norm)
        else:
            ref.encoder.norm = None
            ref.decoder.norm = None
    return ref.eval()
