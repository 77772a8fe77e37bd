"""The data a trainer reads: its datasets, checked, and the resumable order of its batches."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..data import Batch, BucketBatchSampler, Seq2SeqDataset
from .checkpoint import CheckpointError

__all__ = ["BatchOrder", "PaddedData"]


# --------------------------------------------------------------------------------------------
# the order of the batches: resumable
# --------------------------------------------------------------------------------------------


class BatchOrder:
    """Global batches of example indices, epoch after epoch, from a seeded generator.

    Epoch ``e``'s batches come from ``BucketBatchSampler`` (length-bucketed, shuffled) seeded
    by ``(seed, e)``, so the whole order is fixed by ``seed``; :meth:`state_dict` is the
    epoch and the position within it, all a checkpoint needs to continue with the very next
    batch. Partial batches are dropped (unless the data are smaller than one batch).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, bucket: bool = True):
        self.lengths, self.batch_size, self.seed = list(lengths), batch_size, seed
        self.bucket = bucket
        self.epoch, self.position = 0, 0
        self._cache: tuple[int, list[list[int]]] | None = None

    def _batches(self, epoch: int) -> list[list[int]]:
        if self._cache is None or self._cache[0] != epoch:
            drop_last = len(self.lengths) >= self.batch_size
            if self.bucket:
                sampler = BucketBatchSampler(
                    self.lengths, self.batch_size, seed=self.seed, drop_last=drop_last
                )
                sampler.set_epoch(epoch)
                batches = list(sampler)
            else:
                g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
                order = torch.randperm(len(self.lengths), generator=g).tolist()
                batches = [
                    order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)
                ]
                if drop_last:
                    batches = [b for b in batches if len(b) == self.batch_size]
            self._cache = (epoch, batches)
        return self._cache[1]

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._batches(0))

    def peek(self) -> list[int]:
        """The next batch's indices (not consumed until :meth:`advance`)."""
        batches = self._batches(self.epoch)
        if self.position >= len(batches):
            self.epoch, self.position = self.epoch + 1, 0
            batches = self._batches(self.epoch)
        return batches[self.position]

    def advance(self) -> None:
        self.position += 1

    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "n_examples": len(self.lengths),
            "bucket": self.bucket,
        }

    def load_state_dict(self, state: dict) -> None:
        for key, mine in (
            ("n_examples", len(self.lengths)),
            ("batch_size", self.batch_size),
            ("seed", self.seed),
            ("bucket", self.bucket),
        ):
            if state.get(key) != mine:
                raise CheckpointError(
                    f"the checkpoint's batch order has {key}={state.get(key)}"
                    f" but this run has {key}={mine}; resume with the same "
                    "data, batch size and seed"
                )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


class PaddedData:
    """A dataset padded once into two matrices, so that a batch is two row gathers rather
    than :func:`attnbook.data.collate` of its items (a loop in Python at every step).

    ``batch(indices)`` is the :class:`attnbook.data.Batch` that ``collate`` gives for those
    items, to the bit: the rows cut to the batch's longest source and target, the padding
    ``pad_id``.
    """

    def __init__(self, data: Seq2SeqDataset, pad_id: int):
        srcs, tgts = zip(*data.items, strict=True)
        self.src_len = [len(s) for s in srcs]
        self.tgt_len = [len(t) for t in tgts]
        pad = torch.nn.utils.rnn.pad_sequence
        self.src = pad(list(srcs), batch_first=True, padding_value=pad_id)  # (N, S_max)
        self.tgt = pad(list(tgts), batch_first=True, padding_value=pad_id)  # (N, T_max + 2)

    def batch(self, indices: Sequence[int]) -> Batch:
        rows = torch.tensor(indices, dtype=torch.long)
        s = max(self.src_len[i] for i in indices)
        t = max(self.tgt_len[i] for i in indices)
        src = self.src[:, :s].index_select(0, rows)  # (B, S), contiguous
        tgt = self.tgt[:, :t].index_select(0, rows)  # (B, T + 1)
        lengths = torch.tensor([self.src_len[i] for i in indices], dtype=torch.long)
        return Batch(src, tgt[:, :-1], tgt[:, 1:], lengths)


def _as_dataset(name: str, data, src_vocab, tgt_vocab) -> Seq2SeqDataset:
    if isinstance(data, Seq2SeqDataset):
        return data
    if isinstance(data, (list, tuple)):
        if src_vocab is None or tgt_vocab is None:
            raise ValueError(
                f"{name} is a list of (source, target) pairs: pass src_vocab and "
                "tgt_vocab to encode it (or give a Seq2SeqDataset)"
            )
        return Seq2SeqDataset(data, src_vocab, tgt_vocab)
    raise TypeError(
        f"{name} must be a Seq2SeqDataset or a list of (source, target) pairs, got "
        f"{type(data).__name__}"
    )


def _check_vocab_fits(model: nn.Module, datasets: dict) -> None:
    """The model's vocabularies must hold every id the data's vocabularies give out, and its
    padding id must be theirs (the padding positions are masked by it)."""
    for name, data in datasets.items():
        if data is None:
            continue
        sizes = getattr(model, "src_vocab_size", None), getattr(model, "tgt_vocab_size", None)
        for side, vocab, size in zip(
            ("src", "tgt"), (data.src_vocab, data.tgt_vocab), sizes, strict=True
        ):
            if isinstance(size, int) and size < len(vocab):
                raise ValueError(
                    f"model has {side}_vocab_size={size}, but the {side} vocabulary of "
                    f"{name} has {len(vocab)} tokens; build the model with "
                    f"{side}_vocab_size={len(vocab)}"
                )
            pad = getattr(model, "pad_id", None)
            if isinstance(pad, int) and pad != vocab.pad_id:
                raise ValueError(
                    f"model has pad_id={pad}, but the {side} vocabulary of {name} pads with "
                    f"id {vocab.pad_id}; build the model with pad_id={vocab.pad_id}"
                )


def _check_fits(model: nn.Module, datasets: dict) -> None:
    """A model with a positional table (``max_len``) must be able to read every example:
    sources of up to ``max_len`` tokens, targets of up to ``max_len`` tokens after BOS."""
    _check_vocab_fits(model, datasets)
    limit = model.max_len  # None: any length (an RNN)
    if limit is None:
        return
    for name, data in datasets.items():
        if data is None:
            continue
        longest_src = max(len(src) for src, _ in data.items)
        longest_tgt = max(len(tgt) - 1 for _, tgt in data.items)  # BOS + target
        for side, n in (("source", longest_src), ("target (with BOS)", longest_tgt)):
            if n > limit:
                raise ValueError(
                    f"{name} holds a {side} of {n} tokens, but the model reads "
                    f"at most max_len={limit} positions (its positional table); "
                    "drop longer pairs or build the model with a larger max_len"
                )
