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

The package, in the order the book builds it:

- :mod:`~attnbook.transformer.layers`: the two sublayers (:class:`FeedForward`,
  :class:`SublayerConnection`), :class:`EncoderLayer` and :class:`DecoderLayer`, and their
  stacks :class:`Encoder` and :class:`Decoder`;
- :mod:`~attnbook.transformer.model`: :class:`Transformer`, from token ids to logits, with its
  masks and its step-by-step decoding (the key/value cache);
- :mod:`~attnbook.transformer.parameters`: :func:`count_parameters`, :func:`parameter_breakdown`;
- :mod:`~attnbook.transformer.interop`: :func:`to_torch_transformer`, the same weights in
  ``torch.nn.Transformer``;
- :mod:`~attnbook.transformer.checks`: the argument checks the layers and the model run at the
  API edge (the book prints the classes as they read, without them).
"""

from .interop import to_torch_transformer
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer, FeedForward, SublayerConnection
from .model import POSITIONAL_KINDS, Transformer
from .parameters import count_parameters, parameter_breakdown

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
