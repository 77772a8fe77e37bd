"""attnbook: the code behind the book "Attention, from the ground up".

One concept per module:

- :mod:`attnbook.attention`: score functions, masks, scaled dot-product and multi-head attention
- :mod:`attnbook.rnn`: the RNN encoder, the fixed-context and attention decoders, ``Seq2Seq``
- :mod:`attnbook.data`: vocabularies, the synthetic tasks, your own TSV corpus, batching
- :mod:`attnbook.languages`: dates between real languages (CLDR), with their alignment
- :mod:`attnbook.pretrained`: small trained models shipped in the package, with the command
  that trains each (``python -m attnbook.pretrained retrain NAME``)
- :mod:`attnbook.train`: the trainer (AMP, schedules, checkpoints, DDP) and its losses
- :mod:`attnbook.runs`: a training run in a run folder (refused, resumed, written atomically),
  and evaluating, decoding and exporting it, from Python (``attnbook.runs.train_run``)
- :mod:`attnbook.cli`: ``python -m attnbook train | evaluate | translate | export``, on ``runs``
- :mod:`attnbook.transformer`: the encoder-decoder Transformer and its parts
- :mod:`attnbook.seq2seq`: the protocol the RNN ``Seq2Seq`` and the ``Transformer`` share
- :mod:`attnbook.decode`: greedy decoding and beam search for any seq2seq model
- :mod:`attnbook.evaluate`: exact match, per-length accuracy, perplexity, BLEU and chrF
- :mod:`attnbook.positional`: sinusoidal and learned positional encodings
- :mod:`attnbook.worked`: the worked matrix examples of the source notes, computed
- :mod:`attnbook.viz`: heatmaps and matrix rendering shared by every chapter
- :mod:`attnbook.widgets`: explorers that keep working on the static page
- :mod:`attnbook.diagrams`: the book's concept figures, SVG drawn by code
- :mod:`attnbook.exercises`: ``check``, which the exercises' check cells call
- :mod:`attnbook.utils`: seeding, device choice, the chapters' setup cell
"""

# First: the command line (python -m attnbook, the attnbook script) records Ctrl-C and SIGTERM
# from here until its imports are done (torch swallows a KeyboardInterrupt raised while it
# imports numpy); see attnbook._signals. A library import changes nothing.
from . import _signals  # noqa: F401  (guards the signals when imported: keep it first)
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
from .data import TASKS, Vocab, length_controlled, load_tsv, make_loader, make_task
from .decode import beam_search, greedy_decode, sequence_log_prob
from .exercises import check
from .positional import PositionalEncoding, sinusoidal_encoding
from .rnn import AttentionDecoder, ContextDecoder, RNNEncoder, Seq2Seq
from .seq2seq import Seq2SeqModel
from .train import (
    CheckpointError,
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    label_smoothed_loss,
    noam_lr,
    train_model,
)
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
from .utils import best_time, get_device, glue, seed_everything, setup_notebook, show_source

__version__ = "0.1.0"

__all__ = [
    "TASKS",
    "AttentionDecoder",
    "CheckpointError",
    "ContextDecoder",
    "NonFiniteLossError",
    "RNNEncoder",
    "Seq2Seq",
    "Seq2SeqModel",
    "TrainConfig",
    "Trainer",
    "Vocab",
    "label_smoothed_loss",
    "length_controlled",
    "load_tsv",
    "make_loader",
    "make_task",
    "noam_lr",
    "train_model",
    "AdditiveAttention",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "SublayerConnection",
    "Transformer",
    "beam_search",
    "best_time",
    "check",
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
    "glue",
    "make_attention",
    "masked_softmax",
    "padding_mask",
    "scaled_dot_product_attention",
    "scaled_dot_score",
    "seed_everything",
    "sequence_log_prob",
    "setup_notebook",
    "show_source",
    "sinusoidal_encoding",
]
