"""Recurrent encoder-decoder models (循环编码器-解码器), with and without attention.

The code follows notes 03, Parts 1 and 2:

- :class:`RNNEncoder` reads the source ``x_1..x_S`` and keeps *every* hidden state
  ``h_1..h_S`` (the "memory" the attention decoder looks at) and the final one ``h_S``.
- :class:`ContextDecoder` is the classic decoder of Part 1. Its only link to the source is the
  fixed context vector (上下文向量) ``C = h_S``, used as its initial state ``s_0 = C``::

      s_t = f(e(y_{t-1}), s_{t-1}),    P(y_t | y_<t, x) = softmax(W_o s_t)

- :class:`AttentionDecoder` is the decoder of Part 2. At every step its state ``s_t`` is
  scored against every encoder state (alignment scores, 对齐分数), the scores become weights
  by a softmax over the real source tokens, and the weighted sum of the encoder states is the
  step's own context vector ``c_t``::

      s_t = f(e(y_{t-1}), s_{t-1})
      a_t = softmax_s(score(s_t, h_s))               (padding gets weight 0)
      c_t = sum_s a_ts h_s
      P(y_t | y_<t, x) = softmax(W_o tanh(W_c [c_t; s_t]))

  The score function is chosen by name, as :func:`attnbook.attention.make_attention` builds
  it: ``"additive"`` (Bahdanau, ``v^T tanh(W_a [s; h])``), ``"dot"``, ``"general"`` (Luong,
  ``s^T W_a h``) or ``"scaled_dot"``.
- :class:`Seq2Seq` joins an encoder and one of the two decoders, trains with teacher forcing
  (``forward(src, tgt_in)``) and is a :class:`attnbook.seq2seq.Seq2SeqModel`, as the
  Transformer is: greedy decoding, beam search and the evaluator work for both alike.

Because ``s_t`` depends only on the previous tokens (the context vector is not fed back into
the recurrence, as in the notes and in Luong et al. 2015), a teacher-forced decoder runs its
RNN over the whole target at once and then attends from all ``T`` states in one batched call.

Shapes: ``B`` batch, ``S`` source length, ``T`` target length, ``E`` embedding size, ``H``
hidden size, ``D`` encoder state size (``H``, or ``2H`` when bidirectional), ``V`` vocabulary
size. Sources are right-padded with ``pad_id`` (every row has at least one real token).

Recurrent states: a GRU or plain RNN state is one tensor ``(B, H)``; an LSTM state is the
pair ``(h, c)`` of two such tensors, as ``torch.nn.LSTM`` has it.

:func:`gradient_by_distance` measures vanishing gradients (梯度消失): how strongly the
encoder's final state still depends on each input, against the input's distance from the end.

Public names: ``CELLS``, ``RNNEncoder``, ``ContextDecoder``, ``AttentionDecoder``,
``Seq2Seq``, ``gradient_by_distance``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

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
    checked_too,
    checks_active,
)
from .attention import SCORE_FUNCTIONS, make_attention, padding_mask

__all__ = [
    "CELLS",
    "RNNEncoder",
    "ContextDecoder",
    "AttentionDecoder",
    "Seq2Seq",
    "gradient_by_distance",
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
# the encoder
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


# --------------------------------------------------------------------------------------------
# the two decoders
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# the whole model
# --------------------------------------------------------------------------------------------


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


# the checks the modules above add at their edge (the book prints them as they read)


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


RNNEncoder.forward = checked_too(_check_encoder)(RNNEncoder.forward)
ContextDecoder.forward = checked_too(_check_context_decoder)(ContextDecoder.forward)
AttentionDecoder.forward = checked_too(_check_attention_decoder)(AttentionDecoder.forward)
Seq2Seq.forward = checked_too(_check_seq2seq)(Seq2Seq.forward)
Seq2Seq.decode_step = checked_too(_check_seq2seq_step)(Seq2Seq.decode_step)


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
