"""The seq2seq protocol (序列到序列接口): what every encoder-decoder model of the package offers.

The RNN :class:`attnbook.rnn.Seq2Seq` and the :class:`attnbook.transformer.Transformer` are
two answers to one question, "given the source tokens ``x_1 .. x_S``, score the target tokens
``y_1 .. y_T`` one after the other". :class:`Seq2SeqModel` writes that shared shape down, so
that the decoders (:mod:`attnbook.decode`), the evaluator (:mod:`attnbook.evaluate`), the
command line and the widgets work with either model, and with any other model that has it,
without asking which one they hold.

Shapes: ``B`` batch, ``S`` source length, ``T`` target length, ``t`` the prefix decoded so far,
``V`` target vocabulary, ``D`` the width of the memory (the encoder's states).

- ``pad_id``: the padding token of both vocabularies. Sources and targets are right-padded with
  it; every mask the model builds from it is **boolean, True where attention is allowed** (a
  real token), as in ``torch.nn.functional.scaled_dot_product_attention``.
- ``max_len``: the most positions the model reads or writes (a Transformer's positional
  table), or None when any length goes (an RNN).
- ``src_mask(src (B, S)) -> (B, 1, S)``: the source padding mask, True at real tokens; it
  broadcasts over the query positions of the cross-attention.
- ``encode(src (B, S)) -> memory (B, S, D)``: the encoder's states ``h_1 .. h_S``, the memory
  the decoder attends to.
- ``forward(src (B, S), tgt (B, T)) -> logits (B, T, V)``: teacher forcing. ``tgt`` starts
  with BOS and ``logits[:, t]`` scores ``y_{t+1}``. With ``return_attention=True`` it returns
  ``(logits, attention)``, attention ``{name: [per layer (B, H, T, K)]}``.
- ``init_decoder(src (B, S), use_cache=False) -> state``: run the encoder once. The state is a
  dict of tensors (or lists of tensors), batch first; what it holds is the model's business.
  ``use_cache=True`` asks for a key/value cache where the model has one (the Transformer); a
  model that already feeds one token a step (the RNN, whose state is its summary of the
  prefix) accepts the flag and ignores it.
- ``decode_step(tokens (B, t), state) -> (logits (B, V), state, attention)``: the scores of the
  next token given the prefix so far (BOS first); ``attention`` holds the newest position's
  weights, ``{name: (B, n_layers, H, K)}`` (empty for a model without attention).
- ``reorder_state(state, index (B',)) -> state``: pick (and repeat) batch rows of a state;
  beam search moves and copies its beams with it.
- optional, ``src_vocab_size`` and ``tgt_vocab_size``: the sizes of the vocabularies. Where a
  model has them (both of the package's do), decoding checks that ``bos_id`` and ``eos_id``
  are target tokens and the trainer that the data's vocabularies fit the model.

The attention layout is one for every model: per layer, per head, queries, keys, with the
names ``"cross"`` (decoder over the source, ``K = S``), ``"decoder_self"`` (``K = T`` or
``t``) and ``"encoder_self"`` (``K = S``). An RNN with Bahdanau or Luong attention is a model of
one layer and one head: its weights ``alpha_{t,i}`` are ``attention["cross"][0][:, 0]`` in
:meth:`forward`'s result and ``attention["cross"][:, 0, 0]`` in :meth:`decode_step`'s.
:func:`attention_map` reduces any of them to one ``(..., K)`` map (a layer, heads averaged).

``isinstance(model, Seq2SeqModel)`` checks that the names are there (a ``runtime_checkable``
protocol does not check signatures); :func:`check_seq2seq` raises a ``TypeError`` naming the
missing ones.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["Seq2SeqModel", "DecoderState", "check_seq2seq", "attention_map"]

DecoderState = dict[str, Any]  # what init_decoder returns: tensors (or lists of them), batch first


@runtime_checkable
class Seq2SeqModel(Protocol):
    """An encoder-decoder model the decoders, the evaluator and the widgets accept (module
    docstring: the shapes, the mask convention and the attention layout)."""

    pad_id: int
    max_len: int | None

    def src_mask(self, src: torch.Tensor) -> torch.Tensor: ...

    def encode(self, src: torch.Tensor) -> torch.Tensor: ...

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, /, *, return_attention: bool = False):
        """Teacher forcing: logits ``(B, T, V)``, or ``(logits, attention)``."""
        ...

    def init_decoder(self, src: torch.Tensor, use_cache: bool = False) -> DecoderState: ...

    def decode_step(
        self, tokens: torch.Tensor, state: DecoderState
    ) -> tuple[torch.Tensor, DecoderState, dict[str, torch.Tensor]]: ...

    def reorder_state(self, state: DecoderState, index: torch.Tensor) -> DecoderState: ...


_MEMBERS = (
    "pad_id",
    "max_len",
    "src_mask",
    "encode",
    "forward",
    "init_decoder",
    "decode_step",
    "reorder_state",
)


def check_seq2seq(model, name: str = "model") -> None:
    """Raise a ``TypeError`` naming what ``model`` lacks of :class:`Seq2SeqModel`."""
    missing = [m for m in _MEMBERS if not hasattr(model, m)]
    if missing:
        raise TypeError(
            f"{name} must be a seq2seq model (attnbook.seq2seq.Seq2SeqModel: "
            f"{', '.join(_MEMBERS)}); {type(model).__name__} lacks {missing}"
        )


def attention_map(weights: torch.Tensor, layer: int = -1) -> torch.Tensor:
    """One attention map from weights in the protocol's layout: ``(..., n_layers, H, K)`` ->
    ``(..., K)``, the weights of one ``layer`` (default the last) averaged over the heads.

    For a model of one layer and one head (an RNN with attention) it is the weights themselves.
    Decoded attention, ``(B, L, n_layers, H, S)``, gives ``(B, L, S)``.
    """
    if weights.dim() < 3:
        raise ValueError(f"weights must be (..., n_layers, H, K), got shape {tuple(weights.shape)}")
    return weights.select(-3, layer).mean(dim=-2)
