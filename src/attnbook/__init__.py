"""attnbook: the code behind the book "Attention, from the ground up".

One concept per module:

- :mod:`attnbook.attention`: score functions, masks, scaled dot-product and multi-head attention
- :mod:`attnbook.transformer`: the encoder-decoder Transformer and its parts
- :mod:`attnbook.decode`: greedy decoding and beam search for any seq2seq model
- :mod:`attnbook.positional`: sinusoidal and learned positional encodings
- :mod:`attnbook.worked`: the worked matrix examples of the source notes, computed
- :mod:`attnbook.viz`: heatmaps and matrix rendering shared by every chapter
- :mod:`attnbook.widgets`: explorers that keep working on the static page
- :mod:`attnbook.utils`: seeding, device choice, the chapters' setup cell
"""

from .attention import (
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    MultiHeadAttention,
    additive_score,
    causal_mask,
    dot_score,
    general_score,
    make_attention,
    masked_softmax,
    padding_mask,
    scaled_dot_product_attention,
    scaled_dot_score,
)
from .decode import beam_search, greedy_decode
from .positional import PositionalEncoding, sinusoidal_encoding
from .transformer import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    SublayerConnection,
    Transformer,
    count_parameters,
    parameter_breakdown,
    to_torch_transformer,
)
from .utils import get_device, seed_everything, setup_notebook

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "SublayerConnection",
    "Transformer",
    "beam_search",
    "count_parameters",
    "greedy_decode",
    "parameter_breakdown",
    "to_torch_transformer",
    "DotAttention",
    "GeneralAttention",
    "MultiHeadAttention",
    "PositionalEncoding",
    "additive_score",
    "causal_mask",
    "dot_score",
    "general_score",
    "get_device",
    "make_attention",
    "masked_softmax",
    "padding_mask",
    "scaled_dot_product_attention",
    "scaled_dot_score",
    "seed_everything",
    "setup_notebook",
    "sinusoidal_encoding",
]
