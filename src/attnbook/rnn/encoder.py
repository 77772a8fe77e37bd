"""The RNN encoder, and the vanishing gradient (梯度消失) it suffers from, measured.

:class:`RNNEncoder` reads the source and keeps every hidden state (the memory an attention
decoder looks at) and the final one (the context vector of the decoder without attention).
:func:`gradient_by_distance` measures how strongly that final state still depends on each
input, against the input's distance from the end.
"""

from __future__ import annotations

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .._checks import (
    checked_too,
    checks_active,
)
from .common import (
    State,
    _check_encoder,
    _check_ids,
    _Recurrent,
)

__all__ = [
    "RNNEncoder",
    "gradient_by_distance",
]


class RNNEncoder(_Recurrent):
    """Embed the source and run a GRU (default), LSTM or plain RNN over it.

    ``forward(src (B, S)) -> (outputs (B, S, D), final)``:

    - ``outputs[:, s]`` is ``h_s``, the state after reading ``x_1..x_s``; with
      ``bidirectional=True`` it is ``[->h_s; <-h_s]`` (``D = 2H``), the annotation of Bahdanau
      et al. (2014), which summarises the words both before and after ``x_s``. Padding
      positions are zero.
    - ``final`` is ``h_S`` at each row's *true* last token (padding is skipped with a packed
      sequence, so it never changes the result). Bidirectional: ``[->h_S; <-h_1]``, each
      direction's last state. For an LSTM, ``final`` is the pair ``(h, c)``.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        cell: str = "gru",
        bidirectional: bool = False,
        dropout: float = 0.0,
        pad_id: int = 0,
    ):
        super().__init__(vocab_size, emb_dim, hidden_dim, cell, dropout, pad_id, bidirectional)
        self.output_dim = hidden_dim * (2 if self.bidirectional else 1)  # D

    def source_mask(self, src: torch.Tensor) -> torch.Tensor:
        """``(B, S)`` bool, True at real tokens; checks that ``src`` is right-padded."""
        _check_ids("src", src, self.vocab_size, "(B, S) of token ids")
        mask = src != self.pad_id  # (B, S)
        if not checks_active():
            return mask
        lengths = mask.sum(dim=1)  # (B,)
        if (lengths == 0).any():
            row = int((lengths == 0).nonzero()[0])
            raise ValueError(
                f"src row {row} is all padding (pad_id={self.pad_id}); every "
                "source needs at least one real token"
            )
        positions = torch.arange(src.shape[1], device=src.device)
        if not torch.equal(mask, positions[None, :] < lengths[:, None]):
            row = int((mask != (positions[None, :] < lengths[:, None])).any(1).nonzero()[0])
            raise ValueError(
                f"src must be right-padded (real tokens first, then pad_id="
                f"{self.pad_id}); row {row} has padding before a real token: "
                f"{src[row].tolist()}"
            )
        return mask

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, State]:
        mask = self.source_mask(src)  # (B, S)
        lengths = mask.sum(dim=1)  # (B,)
        x = self.dropout(self.embedding(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, last = self.rnn(packed)  # last: (dirs, B, H) per state tensor
        outputs, _ = pad_packed_sequence(
            packed_out, batch_first=True, total_length=src.shape[1]
        )  # (B, S, D)

        def merge(h):  # (dirs, B, H) -> (B, dirs * H) = [->; <-]
            return h.transpose(0, 1).reshape(h.shape[1], -1)

        final = tuple(merge(h) for h in last) if self.cell == "lstm" else merge(last)
        return outputs, final

    def extra_repr(self) -> str:
        return (
            f"cell={self.cell!r}, bidirectional={self.bidirectional}, output_dim={self.output_dim}"
        )


RNNEncoder.forward = checked_too(_check_encoder)(RNNEncoder.forward)


# --------------------------------------------------------------------------------------------
# vanishing gradients, measured
# --------------------------------------------------------------------------------------------


def gradient_by_distance(encoder: RNNEncoder, src: torch.Tensor) -> torch.Tensor:
    """How much the final state ``h_S`` depends on each input, by distance from the end.

    For a unidirectional :class:`RNNEncoder` and ``src (B, S)`` (token ids, no padding),
    returns ``norms (S,)`` with ``norms[d]`` the Frobenius norm of the Jacobian
    ``d h_S / d e_{S-d}`` (``e_t`` is the embedding of input ``t``, 1-based), averaged over the
    ``B`` rows: ``d = 0`` is the last input, ``d = S - 1`` the first. This is the factor by
    which a change in an input reaches the context vector ``C = h_S``, and so (by the chain
    rule) the factor that scales every gradient flowing back from the decoder to that input.
    For an LSTM ``h_S`` is the hidden state ``h`` (not the cell state ``c``).

    The encoder is run without dropout and its parameters get no gradient. The Jacobian
    takes ``H`` backward passes (one per unit of ``h_S``).
    """
    if not isinstance(encoder, RNNEncoder):
        raise TypeError(f"encoder must be an attnbook.rnn.RNNEncoder, got {type(encoder).__name__}")
    if encoder.bidirectional:
        raise ValueError(
            "encoder must be unidirectional (bidirectional=False): a bidirectional "
            "encoder's final state mixes the last and the first input, so "
            "'distance from the end' has no single meaning"
        )
    _check_ids("src", src, encoder.vocab_size, "(B, S) of token ids")
    if (src == encoder.pad_id).any():
        row = int((src == encoder.pad_id).any(1).nonzero()[0])
        raise ValueError(
            f"src must hold no padding (pad_id={encoder.pad_id}), so that every "
            f"row has the same distances; row {row} has some: {src[row].tolist()}"
        )
    emb = encoder.embedding(src).detach().requires_grad_(True)  # (B, S, E)
    with torch.enable_grad():
        _, last = encoder.rnn(emb)  # no dropout: last (1, B, H) or (h, c)
        h_final = (last[0] if encoder.cell == "lstm" else last)[0]  # (B, H)
        squares = torch.zeros(src.shape, dtype=emb.dtype, device=emb.device)  # (B, S)
        for k in range(h_final.shape[1]):  # row k of the Jacobian, for every b and t
            (g,) = torch.autograd.grad(h_final[:, k].sum(), emb, retain_graph=True)
            squares += g.pow(2).sum(-1)  # (B, S)
    norms = squares.sqrt().mean(0)  # (S,), by position t
    return norms.flip(0).detach()  # by distance d
