"""Attention: score functions, masks, scaled dot-product attention and multi-head attention.

Every attention mechanism in this book is the same three steps (notes 03, Part 2):

1. score every key against the query (the *alignment score*, 对齐分数),
2. turn the scores into weights with a softmax over the keys,
3. return the weighted sum of the values (the *context vector*, 上下文向量).

Only step 1 differs between Bahdanau, Luong and Vaswani. This module holds the four score
functions, the masked softmax of step 2, and the modules built from them.

Mask convention (as in ``torch.nn.functional.scaled_dot_product_attention``): a mask is a
boolean tensor, **True where attention is allowed**. A query whose keys are all masked gets
zero weights and a zero output, never NaN.

Shapes: ``B`` batch, ``H`` heads, ``L_q`` query positions, ``L_k`` key positions,
``d_k`` query/key size, ``d_v`` value size.

The package, in the order the book builds it:

- :mod:`~attnbook.attention.functional`: the three steps as functions: the score functions
  (step 1), :func:`masked_softmax` (step 2), and :func:`scaled_dot_product_attention` (all
  three);
- :mod:`~attnbook.attention.masks`: :func:`padding_mask` and :func:`causal_mask`;
- :mod:`~attnbook.attention.rnn_era`: the attention modules of the RNN decoders (Bahdanau's
  additive, Luong's dot and general), one query vector per decoder step;
- :mod:`~attnbook.attention.multihead`: :class:`MultiHeadAttention`, its twin in PyTorch
  (:func:`to_torch_multihead`), and :class:`SelfAttentionHead`.
"""

from .functional import (
    additive_score,
    dot_score,
    general_score,
    masked_softmax,
    scaled_dot_product_attention,
    scaled_dot_score,
    softmax_saturation,
)
from .masks import causal_mask, padding_mask
from .multihead import MultiHeadAttention, SelfAttentionHead, to_torch_multihead
from .rnn_era import (
    SCORE_FUNCTIONS,
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    make_attention,
)

__all__ = [
    "masked_softmax",
    "softmax_saturation",
    "dot_score",
    "scaled_dot_score",
    "general_score",
    "additive_score",
    "scaled_dot_product_attention",
    "padding_mask",
    "causal_mask",
    "AdditiveAttention",
    "DotAttention",
    "GeneralAttention",
    "make_attention",
    "SCORE_FUNCTIONS",
    "MultiHeadAttention",
    "to_torch_multihead",
    "SelfAttentionHead",
]
