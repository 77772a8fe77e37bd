"""The RNN encoder-decoder, :class:`Seq2Seq`: an encoder and one of the two decoders.

It trains with teacher forcing (``forward(src, tgt_in)``) and decodes step by step as a
:class:`attnbook.seq2seq.Seq2SeqModel`, as the Transformer does.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from .._checks import (
    check_positive_int,
    check_same_size,
    check_tensor,
    checked_too,
)
from .._limits import FLOAT_BYTES, check_parts, is_size, rnn_parameters
from ..attention import SCORE_FUNCTIONS, padding_mask
from .common import (
    State,
    _check_cell,
    _check_ids,
    _check_pad_id,
    _check_seq2seq,
    _check_seq2seq_step,
)
from .decoders import AttentionDecoder, ContextDecoder
from .encoder import RNNEncoder

__all__ = [
    "Seq2Seq",
]


class Seq2Seq(nn.Module):
    """An RNN encoder-decoder, without attention (``attention=None``) or with it.

    ``attention`` names the score function: ``None`` gives the fixed-context model of notes
    03 Part 1 (:class:`ContextDecoder`), ``"additive"``, ``"dot"``, ``"general"`` or
    ``"scaled_dot"`` the attention model of Part 2 (:class:`AttentionDecoder`).

    Encoder and decoder share ``cell`` (``"gru"``, ``"lstm"`` or ``"rnn"``), ``emb_dim``,
    ``hidden_dim``, ``dropout`` (on the embeddings and before the output layer) and ``pad_id``
    (the padding id of both vocabularies); ``attn_dim`` is the size of the additive score's
    hidden layer (default ``hidden_dim``). The decoder starts from
    the encoder's final state: ``s_0 = C = h_S`` unchanged when the encoder is unidirectional.
    A bidirectional encoder's final state ``[->h_S; <-h_1]`` has size ``2H``, so it is
    projected to the decoder's size, ``s_0 = tanh(W_s [->h_S; <-h_1])`` (Bahdanau et al. use
    ``<-h_1`` alone); an LSTM's cell state gets its own linear map, without the tanh. The
    attention model attends over the ``2H``-sized annotations (so the ``"dot"`` score, which
    needs equal sizes, is not available with a bidirectional encoder).

    It is a :class:`attnbook.seq2seq.Seq2SeqModel`, with that protocol's shapes, masks and
    attention layout (the attention model is one layer with one head):

    - ``forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V)``, teacher forcing (``tgt_in``
      = BOS + target, the logits score target + EOS); with ``return_attention=True`` also
      ``{"cross": [weights (B, 1, T, S)]}``, the weights of every step.
    - ``encode(src) -> memory (B, S, D)``, the encoder states ``h_1..h_S``.
    - ``init_decoder(src) -> state`` runs the encoder once; ``decode_step(tokens (B, t), state)
      -> (logits (B, V), state, attention)`` feeds ``tokens[:, -1]`` (an RNN keeps the rest of
      the prefix in its state); ``attention`` is ``{"cross": (B, 1, 1, S)}`` for the attention
      model and ``{}`` without; ``reorder_state(state, index)`` picks batch rows. The state is
      a dict of tensors, batch first: ``"hidden"`` ``(B, H)`` (and ``"cell"`` for an LSTM),
      plus ``"memory"`` ``(B, S, D)`` and ``"src_mask"`` ``(B, S)`` for the attention model.
      The fixed-context model's state holds nothing from the source but ``s_0 = C``.
    """

    max_len = None  # any length: an RNN has no table of positions

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int = 64,
        hidden_dim: int = 128,
        cell: str = "gru",
        bidirectional: bool = False,
        attention: str | None = None,
        pad_id: int = 0,
        dropout: float = 0.0,
        attn_dim: int | None = None,
    ):
        super().__init__()
        check_positive_int("src_vocab_size", src_vocab_size)
        check_positive_int("tgt_vocab_size", tgt_vocab_size)
        _check_pad_id(pad_id, src_vocab_size, "src_vocab_size")
        _check_pad_id(pad_id, tgt_vocab_size, "tgt_vocab_size")
        if attention is not None and attention not in SCORE_FUNCTIONS:
            raise ValueError(
                f"attention must be None (fixed context vector) or one of "
                f"{SCORE_FUNCTIONS}, got {attention!r}"
            )
        if attention in ("dot", "scaled_dot") and bidirectional:
            raise ValueError(
                f"attention={attention!r} needs the decoder state and the encoder "
                f"states to have the same size, but a bidirectional encoder's "
                f"states have 2 * hidden_dim = {2 * hidden_dim}; use "
                "'general' or 'additive', or bidirectional=False"
            )
        if attn_dim is not None and attention != "additive":
            raise ValueError(
                f"attn_dim is the hidden size of the additive score; it has no "
                f"use with attention={attention!r}"
            )
        self.pad_id, self.attention = pad_id, attention
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.cell, self.hidden_dim = _check_cell(cell), hidden_dim
        self.encoder = RNNEncoder(
            src_vocab_size, emb_dim, hidden_dim, cell, bidirectional, dropout, pad_id
        )
        d = self.encoder.output_dim
        self.bridge = nn.Linear(d, hidden_dim) if bidirectional else None  # W_s
        self.bridge_cell = nn.Linear(d, hidden_dim) if bidirectional and cell == "lstm" else None
        if attention is None:
            self.decoder = ContextDecoder(
                tgt_vocab_size, emb_dim, hidden_dim, cell, dropout, pad_id
            )
        else:
            self.decoder = AttentionDecoder(
                tgt_vocab_size, emb_dim, hidden_dim, d, attention, attn_dim, cell, dropout, pad_id
            )

    @property
    def has_attention(self) -> bool:
        return self.attention is not None

    # ---------------------------------------------------------------- encoder -> decoder

    def initial_state(self, final: State) -> State:
        """``s_0`` from the encoder's final state: ``C`` itself, or its projection."""
        if self.bridge is None:
            return final
        if self.cell == "lstm":
            h, c = final
            return torch.tanh(self.bridge(h)), self.bridge_cell(c)
        return torch.tanh(self.bridge(final))

    def decoder_state(
        self, memory: torch.Tensor, final: State, src_mask: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The decoder's starting state from the encoder's results.

        ``memory`` ``(B, S, D)`` and ``final`` are :class:`RNNEncoder`'s outputs, ``src_mask``
        ``(B, S)`` is True at real tokens. The fixed-context model keeps only ``s_0``.
        """
        s0 = self.initial_state(final)
        state = {"hidden": s0[0], "cell": s0[1]} if self.cell == "lstm" else {"hidden": s0}
        if self.has_attention:
            state["memory"], state["src_mask"] = memory, src_mask
        return state

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        """Padding mask of the source, ``(B, 1, S)``: True at real tokens."""
        return padding_mask(src, self.pad_id)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """``src (B, S)`` -> memory ``(B, S, D)``: the encoder states ``h_1..h_S``."""
        return self.encoder(src)[0]

    def init_decoder(self, src: torch.Tensor, use_cache: bool = False) -> dict[str, torch.Tensor]:
        """Run the encoder once: ``src (B, S)`` -> the decoder state (a dict, batch first).

        ``use_cache`` changes nothing: the state already is all the decoder keeps of the prefix.
        """
        memory, final = self.encoder(src)  # (B, S, D); checks src as well
        return self.decoder_state(memory, final, self.src_mask(src)[:, 0])  # mask (B, S)

    # ---------------------------------------------------------------- decoding

    def decode(self, tgt_in: torch.Tensor, state: dict[str, torch.Tensor]):
        """Run the decoder over ``tgt_in (B, T)`` from ``state``.

        Returns ``(logits (B, T, V), new_state, weights (B, T, S) or None)``.
        """
        if not isinstance(state, dict) or "hidden" not in state:
            raise TypeError(
                f"state must be the dict that init_decoder returns, got {type(state).__name__}"
            )
        s0 = (state["hidden"], state["cell"]) if self.cell == "lstm" else state["hidden"]
        if self.has_attention:
            logits, last, weights = self.decoder(tgt_in, s0, state["memory"], state["src_mask"])
        else:
            (logits, last), weights = self.decoder(tgt_in, s0), None
        new_state = dict(state)
        if self.cell == "lstm":
            new_state["hidden"], new_state["cell"] = last
        else:
            new_state["hidden"] = last
        return logits, new_state, weights

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, return_attention: bool = False):
        """Teacher forcing: ``src (B, S)``, ``tgt_in (B, T)`` (BOS first) -> logits (B, T, V).

        With ``return_attention=True`` returns ``(logits, {"cross": [weights (B, 1, T, S)]})``
        (attention models only): one layer, one head, as :mod:`attnbook.seq2seq` lays it out.
        """
        if return_attention and not self.has_attention:
            raise ValueError(
                "return_attention=True needs an attention model; this Seq2Seq has "
                "attention=None (the fixed context vector has no weights)"
            )
        _check_ids("tgt_in", tgt_in, self.tgt_vocab_size, "(B, T) of token ids, BOS first")
        check_tensor("src", src, ndim=2, integer=True, shape_hint="(B, S) of token ids")
        check_same_size("src", src.shape[0], "tgt_in", tgt_in.shape[0], "batch size")
        state = self.init_decoder(src)
        logits, _, weights = self.decode(tgt_in, state)
        return (logits, {"cross": [weights[:, None]]}) if return_attention else logits

    def decode_step(self, tokens: torch.Tensor, state: dict[str, torch.Tensor]):
        """One step: the prefix ``tokens (B, t)`` (BOS first) -> ``(logits (B, V), state,
        attention)``, attention ``{"cross": (B, 1, 1, S)}`` (one layer, one head) or ``{}``.
        Only ``tokens[:, -1]`` is read; the state carries the rest."""
        _check_ids("tokens", tokens, self.tgt_vocab_size, "(B, t) of token ids, BOS first")
        logits, state, weights = self.decode(tokens[:, -1:], state)  # (B, 1, V)
        attention = {} if weights is None else {"cross": weights[:, None]}  # (B, 1, 1, S)
        return logits[:, 0], state, attention

    def reorder_state(
        self, state: dict[str, torch.Tensor], index: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Pick (and repeat) batch rows of every tensor in ``state``: beam search uses it."""
        check_tensor("index", index, ndim=1, integer=True, shape_hint="(B',)")
        return {name: t.index_select(0, index) for name, t in state.items()}

    def extra_repr(self) -> str:
        return f"attention={self.attention!r}, pad_id={self.pad_id}"


_INIT = inspect.signature(Seq2Seq.__init__)
_SIZES = ("src_vocab_size", "tgt_vocab_size", "emb_dim", "hidden_dim")


def _check_seq2seq_sizes(self, *args, **kwargs) -> None:
    """The memory the model's weights need (:mod:`attnbook._limits`), before any is made."""
    try:
        given = _INIT.bind(self, *args, **kwargs)
    except TypeError:  # Python's own message comes from the call
        return
    given.apply_defaults()
    a = given.arguments
    if not all(is_size(a[name]) for name in _SIZES) or a["cell"] not in ("gru", "lstm", "rnn"):
        return  # the constructor says what is wrong
    attn_dim = a["attn_dim"] if is_size(a["attn_dim"]) else None
    params = rnn_parameters(
        a["src_vocab_size"],
        a["tgt_vocab_size"],
        a["emb_dim"],
        a["hidden_dim"],
        cell=a["cell"],
        bidirectional=a["bidirectional"] is True,
        attention=a["attention"] if isinstance(a["attention"], str) else None,
        attn_dim=attn_dim,
    )
    check_parts(
        "Seq2Seq",
        [
            (
                f"the weights of its {a['cell'].upper()} encoder and decoder",
                {"hidden_dim": a["hidden_dim"], "emb_dim": a["emb_dim"]}
                | ({"attn_dim": attn_dim} if attn_dim else {}),
                FLOAT_BYTES * params["recurrence"],
            ),
            (
                "its embeddings and output layer",
                {
                    "src_vocab_size": a["src_vocab_size"],
                    "tgt_vocab_size": a["tgt_vocab_size"],
                    "emb_dim": a["emb_dim"],
                    "hidden_dim": a["hidden_dim"],
                },
                FLOAT_BYTES * params["embeddings"],
            ),
        ],
    )


Seq2Seq.__init__ = checked_too(_check_seq2seq_sizes)(Seq2Seq.__init__)
Seq2Seq.forward = checked_too(_check_seq2seq)(Seq2Seq.forward)
Seq2Seq.decode_step = checked_too(_check_seq2seq_step)(Seq2Seq.decode_step)
