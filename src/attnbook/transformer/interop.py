"""PyTorch's own ``torch.nn.Transformer``, holding the weights of an attnbook Transformer.

The tests and the book compare the two: with the weights copied, both compute the same logits.
"""

from __future__ import annotations

import torch
from torch import nn

from ..attention import MultiHeadAttention, to_torch_multihead
from .model import Transformer

__all__ = [
    "to_torch_transformer",
]


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
