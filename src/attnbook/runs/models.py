"""The model of a run: built from the run's options, or rebuilt from its checkpoint.

:func:`build_model` makes one of :data:`MODELS` from constructor arguments;
:func:`model_kwargs_from` turns a run's options (``d_model``, ``heads``, ``hidden``, ...) into
those arguments, which a checkpoint stores, so that :func:`model_from_checkpoint` can rebuild
the same model. :func:`check_lengths_fit` refuses data that the model's positional table
cannot hold, before the first step.
"""

from __future__ import annotations

import torch

from ..data import Vocab
from ..train import CheckpointError

__all__ = [
    "MODELS",
    "model_kwargs_from",
    "build_model",
    "model_from_checkpoint",
    "position_limit",
    "check_lengths_fit",
]

MODELS = ("rnn", "rnn-attention", "transformer")


def model_kwargs_from(o: dict) -> dict:
    """The constructor arguments of the model that the run options ``o`` describe."""
    if o["model"] == "transformer":
        return {
            "d_model": o["d_model"],
            "n_heads": o["heads"],
            "n_layers": o["layers"],
            "d_ff": o["d_ff"],
            "dropout": o["dropout"],
            "norm_first": o["norm_first"],
            "max_len": 512,
        }
    return {
        "emb_dim": o["emb"],
        "hidden_dim": o["hidden"],
        "cell": o["cell"],
        "bidirectional": o["bidirectional"],
        "dropout": o["dropout"],
        "attention": o["score"] if o["model"] == "rnn-attention" else None,
    }


def build_model(kind: str, src_vocab_size: int, tgt_vocab_size: int, kwargs: dict):
    """The model ``kind`` (one of :data:`MODELS`) with constructor arguments ``kwargs``."""
    if kind not in MODELS:
        raise ValueError(f"kind must be one of {MODELS}, got {kind!r}")
    if kind == "transformer":
        from ..transformer import Transformer

        return Transformer(src_vocab_size, tgt_vocab_size, **kwargs)
    from ..rnn import Seq2Seq

    return Seq2Seq(src_vocab_size, tgt_vocab_size, **kwargs)


def model_from_checkpoint(ckpt: dict, path, device: torch.device):
    """The model a run's checkpoint ``ckpt`` (read from ``path``) holds, on ``device`` and in
    eval mode, with its source and target vocabularies and the run's ``meta``."""
    meta = ckpt.get("meta") or {}
    if "model" not in meta or "model_kwargs" not in meta:
        raise CheckpointError(
            f"{path} was not written by 'python -m attnbook train' (it does "
            "not say which model it holds)"
        )
    src_vocab = Vocab.from_dict(ckpt["vocab"]["src"])
    tgt_vocab = Vocab.from_dict(ckpt["vocab"]["tgt"])
    model = build_model(meta["model"], len(src_vocab), len(tgt_vocab), meta["model_kwargs"])
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as err:
        raise CheckpointError(
            f"{path}: its weights do not fit a {meta['model']} with {meta['model_kwargs']}"
        ) from err
    return model.to(device).eval(), src_vocab, tgt_vocab, meta


def position_limit(model) -> int | None:
    """How many positions the model can read or write (its positional table); None: any."""
    return model.max_len


def check_lengths_fit(task, model, options: dict) -> None:
    """Every source, and every target with its BOS, must fit the model's positional table."""
    limit = position_limit(model)
    if limit is None:
        return
    split = [p for part in (task.train, task.val, task.test) for p in part]
    src = max(len(task.src_vocab.tokenize(s)) for s, _ in split)
    tgt = max(len(task.tgt_vocab.tokenize(t)) for _, t in split) + 1
    if max(src, tgt) > limit:
        side = "source" if src >= tgt else "target (+1 for <bos>)"
        raise ValueError(
            f"--max-len {options['max_len']}: the data hold a {side} of "
            f"{max(src, tgt)} tokens, but a {options['model']} reads at most "
            f"{limit} positions; use --max-len {limit - 1} or less"
        )
