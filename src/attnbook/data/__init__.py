"""Data for sequence-to-sequence models: vocabularies, synthetic tasks, your own corpus, batches.

One module per concern; every public name is importable from here (``from attnbook.data
import make_task``):

- :mod:`attnbook.data.vocab`: ``PAD, BOS, EOS, UNK`` (ids 0..3) and ``SPECIALS``, their
  symbols; :class:`~attnbook.data.vocab.Vocab`, a character- or word-level vocabulary,
  ``encode``/``decode`` and their batch forms (an unseen symbol is an error or ``<unk>``, by
  option); :func:`~attnbook.data.vocab.tokenize_words` and
  :func:`~attnbook.data.vocab.normalise_text`;
- :mod:`attnbook.data.tasks`: ``TASKS`` (name -> description) and
  :func:`~attnbook.data.tasks.make_task`: the synthetic tasks ``copy``, ``reverse``, ``sort``
  and ``dates``, generated deterministically from a seed into train/validation/test splits
  that share no source (:class:`~attnbook.data.tasks.TaskData`);
  :func:`~attnbook.data.tasks.length_controlled`: fresh examples of a sequence task at chosen
  input lengths, to measure accuracy against length, beyond the training lengths too;
- :mod:`attnbook.data.dates`: the dates task's spellings (month and weekday names, templates);
- :mod:`attnbook.data.corpus`: :func:`~attnbook.data.corpus.load_tsv`, your own parallel
  corpus, one ``source<TAB>target`` pair a line, and
  :func:`~attnbook.data.corpus.file_sha256`, which identifies the file's content;
- :mod:`attnbook.data.batching`: :class:`~attnbook.data.batching.Seq2SeqDataset` (a
  ``torch.utils.data.Dataset``), :func:`~attnbook.data.batching.collate` (padding, into a
  :class:`~attnbook.data.batching.Batch`), :class:`~attnbook.data.batching.BucketBatchSampler`
  (length bucketing) and :func:`~attnbook.data.batching.make_loader` (all three in one
  ``DataLoader``).

Every example is a pair of strings ``(source, target)``. Character-level vocabularies treat
every character (space included) as a symbol; word-level ones split on whitespace, so a
corpus is tokenised first (:func:`~attnbook.data.vocab.tokenize_words`) and stored as
space-separated tokens.
"""

from .batching import Batch, BucketBatchSampler, Seq2SeqDataset, collate, make_loader
from .corpus import file_sha256, load_tsv
from .dates import _DATE_FORMATS  # noqa: F401  (chapter 14 counts the layouts from here)
from .tasks import TASKS, TaskData, length_controlled, make_task
from .vocab import (
    BOS,
    EOS,
    LEVELS,
    PAD,
    SPECIALS,
    UNK,
    Vocab,
    normalise_text,
    tokenize_words,
)

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "SPECIALS",
    "LEVELS",
    "Vocab",
    "tokenize_words",
    "normalise_text",
    "TASKS",
    "TaskData",
    "make_task",
    "length_controlled",
    "load_tsv",
    "file_sha256",
    "Seq2SeqDataset",
    "Batch",
    "collate",
    "BucketBatchSampler",
    "make_loader",
]
