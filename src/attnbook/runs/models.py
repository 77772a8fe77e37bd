"""The model of a run: built from the run's options, or rebuilt from its checkpoint.

:func:`build_model` makes one of :data:`MODELS` from constructor arguments;
:func:`model_kwargs_from` turns a run's options (``d_model``, ``heads``, ``hidden``, ...) into
those arguments, which a checkpoint stores, so that :func:`model_from_checkpoint` can rebuild
the same model. :func:`check_lengths_fit` refuses data that the model's positional table
cannot hold, and a model whose training (:func:`training_parts`) this machine cannot hold,
before the first step.
"""

from __future__ import annotations

import torch

from .._limits import (
    TRAIN_BYTES_PER_PARAMETER,
    check_parts,
    rnn_activation_bytes,
    rnn_parameters,
    transformer_activation_bytes,
    transformer_parameters,
)
from ..data import Vocab
from ..train import CheckpointError
from ..utils import get_device

__all__ = [
    "MODELS",
    "model_kwargs_from",
    "build_model",
    "model_from_checkpoint",
    "position_limit",
    "check_lengths_fit",
    "POSITIONS",
    "training_parts",
    "training_device",
]

MODELS = ("rnn", "rnn-attention", "transformer")
# the positions a run's Transformer reads and writes (its max_len): sources, and targets with
# their <bos>
POSITIONS = 512


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
            "max_len": POSITIONS,
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
    """Every source, and every target with its BOS, must fit the model's positional table;
    and the model's training, on a batch of the longest pairs, this machine's memory (the
    options ``options`` describe the run; :mod:`attnbook._limits`)."""
    limit = position_limit(model)
    split = [p for part in (task.train, task.val, task.test) for p in part]
    src = max(len(task.src_vocab.tokenize(s)) for s, _ in split)
    tgt = max(len(task.tgt_vocab.tokenize(t)) for _, t in split) + 1
    if limit is not None and max(src, tgt) > limit:
        side = "source" if src >= tgt else "target (+1 for <bos>)"
        raise ValueError(
            f"--max-len {options['max_len']}: the data hold a {side} of "
            f"{max(src, tgt)} tokens, but a {options['model']} reads at most "
            f"{limit} positions; use --max-len {limit - 1} or less"
        )
    batch = min(options["batch_size"], len(task.train))
    n_params = sum(p.numel() for p in model.parameters())
    parts = training_parts(
        options, len(task.src_vocab), len(task.tgt_vocab), batch, src, tgt, n_params
    )
    check_parts("", parts, device=training_device(options["device"]))


def training_device(name: str) -> torch.device | None:
    """The device a run named ``name`` (``auto``, ``cuda``, ...) trains on; None where that
    device is not available (the run says so itself)."""
    try:
        return get_device(name)
    except (ValueError, TypeError):
        return None


def training_parts(
    o: dict,
    src_vocab: int,
    tgt_vocab: int,
    batch: int,
    src_len: int,
    tgt_len: int,
    n_params: int | None = None,
) -> list[tuple[str, dict, int]]:
    """What training the model of the run options ``o`` needs, as
    :func:`attnbook._limits.check_parts` takes it: the weights with their gradients and Adam's
    moments, and a batch of ``batch`` pairs of ``src_len`` and ``tgt_len`` tokens' activations.
    ``n_params``: the model's count, if it is built (else estimated from ``o``)."""
    if o["model"] == "transformer":
        sizes = {"--layers": o["layers"], "--d-model": o["d_model"], "--d-ff": o["d_ff"]}
        if n_params is None:
            n_params = sum(
                transformer_parameters(
                    src_vocab,
                    tgt_vocab,
                    o["d_model"],
                    o["layers"],
                    o["d_ff"],
                    POSITIONS,
                    norm_first=bool(o["norm_first"]),
                ).values()
            )
        activations = transformer_activation_bytes(
            batch,
            src_len,
            tgt_len,
            d_model=o["d_model"],
            n_heads=o["heads"],
            n_layers=o["layers"],
            d_ff=o["d_ff"],
            vocab=tgt_vocab,
        )
    else:
        sizes = {"--hidden": o["hidden"], "--emb": o["emb"]}
        shape = {
            "cell": o["cell"],
            "bidirectional": bool(o["bidirectional"]),
            "attention": o["score"] if o["model"] == "rnn-attention" else None,
        }
        if n_params is None:
            n_params = sum(
                rnn_parameters(src_vocab, tgt_vocab, o["emb"], o["hidden"], **shape).values()
            )
        activations = rnn_activation_bytes(
            batch,
            src_len,
            tgt_len,
            emb_dim=o["emb"],
            hidden_dim=o["hidden"],
            vocab=tgt_vocab,
            **shape,
        )
    return [
        (
            f"its {n_params:,} parameters in training (weights, gradients and Adam's two "
            f"moments: {TRAIN_BYTES_PER_PARAMETER} bytes each)",
            sizes,
            TRAIN_BYTES_PER_PARAMETER * n_params,
        ),
        (
            f"the activations of a batch of {batch} pairs of up to {max(src_len, tgt_len)} tokens",
            {"--batch-size": o["batch_size"], **sizes},
            activations,
        ),
    ]
