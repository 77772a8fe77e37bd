"""Batches: encoded pairs, padding, length bucketing and the ``DataLoader`` of them all.

:class:`Seq2SeqDataset` (a ``torch.utils.data.Dataset``), :func:`collate` (padding, into a
:class:`Batch`), :class:`BucketBatchSampler` (length bucketing) and :func:`make_loader` (all
three in one ``DataLoader``).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, Sampler

from .._checks import check_bool, check_positive_int, check_tensor
from .vocab import PAD, Vocab

__all__ = ["Seq2SeqDataset", "Batch", "collate", "BucketBatchSampler", "make_loader"]


class Seq2SeqDataset(Dataset):
    """Encoded ``(source, target)`` pairs, a ``torch.utils.data.Dataset``.

    Item ``i`` is ``(src (S,), tgt (T + 2,))`` LongTensors: the source ids (plus EOS when
    ``src_eos``) and the target ids between BOS and EOS. Everything is encoded once, up front,
    so an unknown symbol fails here rather than in the middle of training.
    """

    def __init__(
        self,
        pairs: Sequence[tuple[str, str]],
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        src_eos: bool = False,
    ):
        if not isinstance(src_vocab, Vocab) or not isinstance(tgt_vocab, Vocab):
            raise TypeError(
                f"src_vocab and tgt_vocab must be Vocab, got "
                f"{type(src_vocab).__name__} and {type(tgt_vocab).__name__}"
            )
        if isinstance(pairs, str) or len(pairs) == 0:
            raise ValueError("pairs must be a non-empty list of (source, target) pairs")
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.pairs = list(pairs)
        self.items = []
        for i, pair in enumerate(self.pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(f"pairs[{i}] must be a (source, target) pair, got {pair!r:.80}")
            src, tgt = pair
            if not src_vocab.tokenize(src):
                raise ValueError(f"pairs[{i}] has an empty source")
            self.items.append(
                (
                    torch.tensor(src_vocab.encode(src, add_eos=src_eos), dtype=torch.long),
                    torch.tensor(
                        tgt_vocab.encode(tgt, add_bos=True, add_eos=True), dtype=torch.long
                    ),
                )
            )

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.items[i]

    @property
    def lengths(self) -> list[int]:
        """Source lengths in tokens, for :class:`BucketBatchSampler`."""
        return [len(src) for src, _ in self.items]


class Batch(NamedTuple):
    """A padded batch. ``src (B, S)``, ``tgt_in (B, T)`` = BOS + target, ``tgt_out (B, T)`` =
    target + EOS (what the logits are trained against; padding is ``pad_id``), ``src_lengths
    (B,)``."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_lengths: torch.Tensor

    def to(self, device) -> Batch:
        return Batch(*(t.to(device) for t in self))


def collate(batch: Sequence[tuple[torch.Tensor, torch.Tensor]], pad_id: int = PAD) -> Batch:
    """Pad a list of ``(src, tgt)`` items (as :class:`Seq2SeqDataset` gives) into a Batch."""
    if len(batch) == 0:
        raise ValueError("batch is empty")
    check_positive_int("pad_id", pad_id, minimum=0)
    srcs, tgts = zip(*batch, strict=True)
    for name, seqs in (("source", srcs), ("target", tgts)):
        for i, t in enumerate(seqs):
            check_tensor(f"batch[{i}] {name}", t, ndim=1, integer=True, shape_hint="(L,)")
    if any(len(t) < 2 for t in tgts):
        raise ValueError("every target must hold at least BOS and EOS (length >= 2)")
    src = pad_sequence(list(srcs), batch_first=True, padding_value=pad_id)  # (B, S)
    tgt = pad_sequence(list(tgts), batch_first=True, padding_value=pad_id)  # (B, T + 1)
    lengths = torch.tensor([len(s) for s in srcs], dtype=torch.long)
    return Batch(src, tgt[:, :-1], tgt[:, 1:], lengths)


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of indices whose sequences have similar lengths (length bucketing).

    Indices are shuffled, cut into pools of ``batch_size * pool_batches``, each pool sorted by
    length and cut into batches, and the batches shuffled: little padding, yet random batches.
    Deterministic from ``seed`` and the epoch; the epoch advances by one at every pass (or is
    set with :meth:`set_epoch`). ``shuffle=False`` gives batches in length order.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        pool_batches: int = 50,
    ):
        if len(lengths) == 0:
            raise ValueError("lengths is empty: nothing to batch")
        self.lengths = list(lengths)
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.pool_batches = check_positive_int("pool_batches", pool_batches)
        self.seed = check_positive_int("seed", seed, minimum=0)
        self.shuffle = check_bool("shuffle", shuffle)
        self.drop_last, self.epoch = check_bool("drop_last", drop_last), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = check_positive_int("epoch", epoch, minimum=0)

    def __iter__(self) -> Iterator[list[int]]:
        # a generator: nothing runs (and the epoch does not advance) until the first batch is
        # drawn. A DataLoader with workers calls iter() twice and draws from the second only.
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        self.epoch += 1
        order = list(range(len(self.lengths)))
        if self.shuffle:
            rng.shuffle(order)
        pool = self.batch_size * self.pool_batches if self.shuffle else len(order)
        batches = []
        for start in range(0, len(order), pool):
            chunk = sorted(order[start : start + pool], key=lambda i: self.lengths[i])
            batches += [
                chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size)
            ]
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        if self.shuffle:
            rng.shuffle(batches)
        yield from batches

    def __len__(self) -> int:
        n = len(self.lengths)
        pool = self.batch_size * self.pool_batches if self.shuffle else n
        sizes = [min(pool, n - start) for start in range(0, n, pool)]  # pool sizes
        if self.drop_last:
            return sum(size // self.batch_size for size in sizes)
        return sum(-(-size // self.batch_size) for size in sizes)


def make_loader(
    data: Sequence[tuple[str, str]] | Seq2SeqDataset,
    src_vocab: Vocab | None = None,
    tgt_vocab: Vocab | None = None,
    batch_size: int = 64,
    *,
    shuffle: bool = True,
    bucket: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    src_eos: bool = False,
    num_workers: int = 0,
    multiprocessing_context: str | None = None,
) -> DataLoader:
    """A ``DataLoader`` of padded :class:`Batch` es from pairs (or a :class:`Seq2SeqDataset`).

    ``bucket=True`` batches sequences of similar length together (:class:`BucketBatchSampler`);
    otherwise batches are drawn as a plain shuffled (or ordered) ``DataLoader`` would. Either
    way the order is deterministic from ``seed``.

    With ``num_workers > 0`` the batches are padded in worker processes. Everything the
    workers receive pickles (the collate function is :func:`collate` itself, with its
    ``pad_id`` bound), so this works under the ``"spawn"`` start method too (the default on
    macOS and Windows; ``multiprocessing_context="spawn"`` asks for it elsewhere).
    """
    for name, flag in (
        ("shuffle", shuffle),
        ("bucket", bucket),
        ("drop_last", drop_last),
        ("src_eos", src_eos),
    ):
        check_bool(name, flag)
    if isinstance(data, Seq2SeqDataset):
        dataset = data
    else:
        if isinstance(data, (str, bytes)) or not isinstance(data, Sequence):
            raise TypeError(
                "data must be a list of (source, target) pairs of str or a Seq2SeqDataset, "
                f"got {type(data).__name__}"
            )
        if not data:
            raise ValueError("data must hold at least one (source, target) pair, got none")
        for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
            if vocab is not None and not isinstance(vocab, Vocab):
                raise TypeError(f"{name} must be a Vocab, got {type(vocab).__name__}")
        if src_vocab is None or tgt_vocab is None:
            raise ValueError("src_vocab and tgt_vocab are needed to encode a list of pairs")
        dataset = Seq2SeqDataset(data, src_vocab, tgt_vocab, src_eos=src_eos)
    check_positive_int("batch_size", batch_size)
    check_positive_int("num_workers", num_workers, minimum=0)
    # a module-level function with its argument bound: it pickles, a closure would not
    workers = {
        "collate_fn": functools.partial(collate, pad_id=PAD),
        "num_workers": num_workers,
        "multiprocessing_context": multiprocessing_context if num_workers else None,
    }
    if bucket:
        sampler = BucketBatchSampler(
            dataset.lengths, batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last
        )
        return DataLoader(dataset, batch_sampler=sampler, **workers)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        generator=generator,
        **workers,
    )
