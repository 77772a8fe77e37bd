"""The two RNN decoders: one with only the fixed context vector, one with attention.

:class:`ContextDecoder` starts from the context vector ``C = h_S`` and never sees the source
again (notes 03, Part 1); :class:`AttentionDecoder` attends over every encoder state at every
step (Part 2). Both share the embedding, the recurrence and the output layer of
:class:`_RNNDecoderBase`.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import (
    check_positive_int,
    check_same_size,
    check_tensor,
    checked_too,
)
from ..attention import SCORE_FUNCTIONS, make_attention
from .common import (
    State,
    _check_attention_decoder,
    _check_context_decoder,
    _check_ids,
    _check_state,
    _from_torch_state,
    _Recurrent,
    _to_torch_state,
)

__all__ = [
    "ContextDecoder",
    "AttentionDecoder",
]


class _RNNDecoderBase(_Recurrent):
    """Embedding, recurrence and output layer shared by both decoders."""

    def __init__(
        self, vocab_size: int, emb_dim: int, hidden_dim: int, cell: str, dropout: float, pad_id: int
    ):
        super().__init__(vocab_size, emb_dim, hidden_dim, cell, dropout, pad_id)
        self.out = nn.Linear(hidden_dim, vocab_size)  # W_o

    def _recur(self, tgt_in: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """s_1..s_T from y_0..y_{T-1} (tgt_in, starting with BOS) and s_0 = ``state``."""
        _check_ids("tgt_in", tgt_in, self.vocab_size, "(B, T) of token ids")
        _check_state("state", state, self.cell, tgt_in.shape[0], self.hidden_dim)
        y = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        s, last = self.rnn(y, _to_torch_state(state))  # s: (B, T, H)
        return s, _from_torch_state(last)


class ContextDecoder(_RNNDecoderBase):
    """The decoder of notes 03, Part 1: the fixed context vector is its initial state.

    ``forward(tgt_in (B, T), context) -> (logits (B, T, V), state)``. ``context`` is
    ``C = h_S`` ``(B, H)`` (a pair ``(h, c)`` for an LSTM) and becomes ``s_0``; it is the only
    thing the decoder knows about the source. ``tgt_in`` starts with BOS; ``logits[:, t]``
    scores ``y_{t+1}``. The returned state is ``s_T``, to continue decoding from.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        cell: str = "gru",
        dropout: float = 0.0,
        pad_id: int = 0,
    ):
        super().__init__(vocab_size, emb_dim, hidden_dim, cell, dropout, pad_id)

    def forward(self, tgt_in: torch.Tensor, context: State) -> tuple[torch.Tensor, State]:
        s, state = self._recur(tgt_in, context)  # (B, T, H)
        return self.out(self.dropout(s)), state  # (B, T, V)


class AttentionDecoder(_RNNDecoderBase):
    """The decoder of notes 03, Part 2: a fresh context vector ``c_t`` at every step.

    ``forward(tgt_in (B, T), state, memory (B, S, D), src_mask (B, S)) ->
    (logits (B, T, V), state, weights (B, T, S))``. ``state`` is ``s_0``; ``memory`` holds the
    encoder states ``h_1..h_S``; ``src_mask`` is True at real source tokens (padding gets
    weight exactly 0). ``weights[:, t]`` is the attention of the step that predicts ``y_{t+1}``
    and sums to 1 over the real source tokens.

    ``score`` names the alignment score (``"additive"``, ``"dot"``, ``"general"``,
    ``"scaled_dot"``); ``attn_dim`` is the hidden size of the additive score's ``W_a``
    (default ``hidden_dim``). ``"dot"`` needs ``memory_dim == hidden_dim``.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        memory_dim: int,
        score: str = "additive",
        attn_dim: int | None = None,
        cell: str = "gru",
        dropout: float = 0.0,
        pad_id: int = 0,
    ):
        super().__init__(vocab_size, emb_dim, hidden_dim, cell, dropout, pad_id)
        check_positive_int("memory_dim", memory_dim)
        if attn_dim is not None:
            check_positive_int("attn_dim", attn_dim)
        if score not in SCORE_FUNCTIONS:
            raise ValueError(f"score must be one of {SCORE_FUNCTIONS}, got {score!r}")
        self.memory_dim, self.score = memory_dim, score
        self.attention = make_attention(score, hidden_dim, memory_dim, attn_dim or hidden_dim)
        self.combine = nn.Linear(memory_dim + hidden_dim, hidden_dim)  # W_c

    def forward(
        self, tgt_in: torch.Tensor, state: State, memory: torch.Tensor, src_mask: torch.Tensor
    ) -> tuple[torch.Tensor, State, torch.Tensor]:
        check_tensor("memory", memory, ndim=3, floating=True, shape_hint="(B, S, D)")
        if memory.shape[-1] != self.memory_dim:
            raise ValueError(
                f"memory must have last dimension memory_dim={self.memory_dim}, "
                f"got shape {tuple(memory.shape)}"
            )
        check_tensor("src_mask", src_mask, ndim=2, boolean=True, shape_hint="(B, S)")
        if src_mask.shape != memory.shape[:2]:
            raise ValueError(
                f"src_mask must have shape (B, S) = {tuple(memory.shape[:2])}, "
                f"got {tuple(src_mask.shape)}"
            )
        check_same_size("tgt_in", tgt_in.shape[0], "memory", memory.shape[0], "batch size")
        s, state = self._recur(tgt_in, state)  # (B, T, H)
        # steps 1-3 for all T decoder states at once: scores, softmax, weighted sum
        context, weights = self.attention(s, memory, mask=src_mask)  # (B,T,D), (B,T,S)
        attentional = torch.tanh(self.combine(torch.cat([context, s], dim=-1)))  # (B, T, H)
        return self.out(self.dropout(attentional)), state, weights  # (B, T, V)

    def extra_repr(self) -> str:
        return f"score={self.score!r}, memory_dim={self.memory_dim}"


ContextDecoder.forward = checked_too(_check_context_decoder)(ContextDecoder.forward)
AttentionDecoder.forward = checked_too(_check_attention_decoder)(AttentionDecoder.forward)
