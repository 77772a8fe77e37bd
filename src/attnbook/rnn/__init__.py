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

The package: :mod:`~attnbook.rnn.common` (the cells, the state layout, the checks, and the
embedding-plus-RNN that the encoder and the decoders share), :mod:`~attnbook.rnn.encoder`
(:class:`RNNEncoder`, :func:`gradient_by_distance`), :mod:`~attnbook.rnn.decoders`
(:class:`ContextDecoder`, :class:`AttentionDecoder`) and :mod:`~attnbook.rnn.model`
(:class:`Seq2Seq`).

Public names: ``CELLS``, ``RNNEncoder``, ``ContextDecoder``, ``AttentionDecoder``,
``Seq2Seq``, ``gradient_by_distance``.
"""

from .common import CELLS, State
from .decoders import AttentionDecoder, ContextDecoder
from .encoder import RNNEncoder, gradient_by_distance
from .model import Seq2Seq

__all__ = [
    "CELLS",
    "RNNEncoder",
    "ContextDecoder",
    "AttentionDecoder",
    "Seq2Seq",
    "gradient_by_distance",
    "State",
]
