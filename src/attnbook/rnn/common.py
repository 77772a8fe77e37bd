"""What the RNN encoder and decoders share: the cells, the state layout, and the checks.

``CELLS`` names the recurrent cells (GRU, LSTM, plain RNN); ``State`` is a recurrent state,
one ``(B, H)`` tensor or an LSTM's pair ``(h, c)``. :class:`_Recurrent` is the embedding,
dropout and RNN that every module of :mod:`attnbook.rnn` starts from. The ``_check_*``
functions at the end are the checks the modules add at their edge (the book prints the
modules as they read).
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import (
    check_bool,
    check_device,
    check_module_input,
    check_nonempty,
    check_positive_int,
    check_probability,
    check_tensor,
    check_token_ids,
    checks_active,
)

__all__ = [
    "CELLS",
    "State",
]

CELLS = ("gru", "lstm", "rnn")
_RNN_CLASSES = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


# --------------------------------------------------------------------------------------------
# checks and small helpers
# --------------------------------------------------------------------------------------------


def _check_cell(cell) -> str:
    if cell not in CELLS:
        raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
    return cell


def _check_pad_id(pad_id, vocab_size: int, name: str = "vocab_size") -> int:
    check_positive_int("pad_id", pad_id, minimum=0)
    if pad_id >= vocab_size:
        raise ValueError(f"pad_id must be a token id below {name}={vocab_size}, got {pad_id}")
    return pad_id


def _check_ids(name: str, ids, vocab_size: int, shape_hint: str) -> torch.Tensor:
    if not checks_active():  # the range check reads the ids: a host sync on a GPU
        return ids
    check_token_ids(name, ids, ndim=2, shape_hint=shape_hint)
    if ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(
            f"{name} must hold at least one sequence of at least one token "
            f"{shape_hint}, got shape {tuple(ids.shape)}"
        )
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name} holds token ids in [{low}, {high}], but the vocabulary has "
            f"{vocab_size} tokens (ids 0..{vocab_size - 1})"
        )
    return ids


def _to_torch_state(state: State) -> State:
    """``(B, H)`` (or a pair of them) -> ``(1, B, H)``, the layout ``nn.GRU``/``nn.LSTM`` want."""
    if isinstance(state, tuple):
        return tuple(s.unsqueeze(0).contiguous() for s in state)
    return state.unsqueeze(0).contiguous()


def _from_torch_state(state: State) -> State:
    """``(1, B, H)`` (or a pair) -> ``(B, H)``."""
    if isinstance(state, tuple):
        return tuple(s.squeeze(0) for s in state)
    return state.squeeze(0)


def _check_state(name: str, state, cell: str, batch: int, hidden_dim: int) -> State:
    """A decoder state: ``(B, H)`` for GRU/RNN, a pair ``(h, c)`` of ``(B, H)`` for LSTM."""
    parts = state if isinstance(state, tuple) else (state,)
    want = 2 if cell == "lstm" else 1
    if len(parts) != want:
        what = "a pair (h, c) of (B, H) tensors" if cell == "lstm" else "one (B, H) tensor"
        raise TypeError(f"{name} for cell={cell!r} must be {what}, got {len(parts)} tensors")
    for part in parts:
        check_tensor(name, part, ndim=2, floating=True, shape_hint="(B, H)")
        if tuple(part.shape) != (batch, hidden_dim):
            raise ValueError(
                f"{name} must have shape (B, H) = ({batch}, {hidden_dim}), got {tuple(part.shape)}"
            )
    return state


# --------------------------------------------------------------------------------------------
# what the encoder and the decoders share
# --------------------------------------------------------------------------------------------


class _Recurrent(nn.Module):
    """Embedding, dropout and a GRU, LSTM or plain RNN: what the encoder and the decoders share."""

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        cell: str,
        dropout: float,
        pad_id: int,
        bidirectional: bool = False,
    ):
        super().__init__()
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("emb_dim", emb_dim)
        check_positive_int("hidden_dim", hidden_dim)
        self.cell = _check_cell(cell)
        self.pad_id = _check_pad_id(pad_id, vocab_size)
        self.vocab_size, self.hidden_dim = vocab_size, hidden_dim
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.rnn = _RNN_CLASSES[cell](
            emb_dim, hidden_dim, batch_first=True, bidirectional=self.bidirectional
        )


# the checks the encoder, the decoders and Seq2Seq add at their edge (the book prints them as they
# read; each module attaches its own)


def _check_recurrent_input(self, name: str, ids, state: State, state_name: str) -> None:
    if isinstance(ids, torch.Tensor):
        check_device(name, ids, self.embedding.weight.device, f"the {type(self).__name__}")
    for part in state if isinstance(state, tuple) else (state,):
        if isinstance(part, torch.Tensor) and part.is_floating_point():
            check_module_input(state_name, part, self)


def _check_context_decoder(self, tgt_in, context) -> None:
    _check_recurrent_input(self, "tgt_in", tgt_in, context, "context")


def _check_attention_decoder(self, tgt_in, state, memory, src_mask) -> None:
    check_token_ids("tgt_in", tgt_in, ndim=2, shape_hint="(B, T) of token ids")
    _check_recurrent_input(self, "tgt_in", tgt_in, state, "state")
    if isinstance(memory, torch.Tensor):
        check_tensor("memory", memory, ndim=3, floating=True, shape_hint="(B, S, D)")
        check_nonempty("memory", memory, "(B, S, D)")
        check_module_input("memory", memory, self)


def _check_encoder(self, src) -> None:
    _check_recurrent_input(self, "src", src, (), "")


def _check_seq2seq(self, src, tgt_in, return_attention=False) -> None:
    check_bool("return_attention", return_attention)
    _check_recurrent_input(self.encoder, "src", src, (), "")
    _check_recurrent_input(self.decoder, "tgt_in", tgt_in, (), "")


def _check_seq2seq_step(self, tokens, state) -> None:
    if isinstance(tokens, torch.Tensor):
        check_device("tokens", tokens, self.encoder.embedding.weight.device, "the Seq2Seq")
