"""Evaluation (评估): how good a trained seq2seq model's outputs are, in one place.

Every score here takes the model through the seq2seq protocol (:mod:`attnbook.seq2seq`), so it
is the same for the RNN ``Seq2Seq``, the ``Transformer`` and any model of your own.

- :func:`exact_match`: per sequence, is the decoded output the target, token for token up to
  and including EOS? The score of the synthetic tasks (copy, reverse, sort, dates), where there
  is one right answer.
- :func:`exact_match_by_length`: the fraction of exact matches for each group of inputs (by
  input length, to see where a model stops generalising).
- :func:`perplexity` (困惑度): ``exp`` of the mean negative log-likelihood per target token,
  by teacher forcing, over the non-padding tokens (EOS included): ``exp(-(1/N) sum_t log P(y_t
  | y_<t, x))``. A model that spreads its probability evenly over ``V`` tokens has perplexity
  ``V``; a perfect one has 1.
- :func:`corpus_bleu` and :func:`corpus_chrf`: the field's standard translation scores, from
  sacrebleu (Post, 2018), so that the numbers compare with published ones. BLEU (Papineni et
  al., 2002) is the geometric mean of the 1- to 4-gram precisions times a brevity penalty;
  chrF (Popović, 2015) is a character n-gram F-score, kinder to small vocabularies and
  morphology. Both are on a 0-100 scale and need ``pip install sacrebleu`` (or
  ``pip install "attnbook[eval]"``); the package itself does not depend on it.
- :func:`translation_scores`: decode a list of (source, target) pairs and report all of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F

from ._checks import check_tensor
from .data import BOS, EOS, Vocab
from .decode import beam_search, greedy_decode, sequence_log_prob
from .seq2seq import check_seq2seq
from .utils import model_device

__all__ = [
    "exact_match",
    "exact_match_by_length",
    "perplexity",
    "corpus_bleu",
    "corpus_chrf",
    "translation_scores",
    "generate",
]


def exact_match(predictions: torch.Tensor, targets: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """``(B,)`` bool: True where the prediction equals the target up to and including EOS.

    ``predictions (B, L)`` are decoded ids after BOS (as :func:`attnbook.decode.greedy_decode`
    gives them: padded with ``pad_id`` after EOS); ``targets (B, T)`` is ``tgt_out`` (target +
    EOS, padded). Widths may differ: the shorter is padded.
    """
    check_tensor("predictions", predictions, ndim=2, integer=True, shape_hint="(B, L)")
    check_tensor("targets", targets, ndim=2, integer=True, shape_hint="(B, T)")
    if predictions.shape[0] != targets.shape[0]:
        raise ValueError(
            f"predictions and targets must have the same batch size, got "
            f"{tuple(predictions.shape)} and {tuple(targets.shape)}"
        )
    width = max(predictions.shape[1], targets.shape[1])
    p = F.pad(predictions, (0, width - predictions.shape[1]), value=pad_id)  # (B, W)
    t = F.pad(targets, (0, width - targets.shape[1]), value=pad_id)  # (B, W)
    return (p == t).all(dim=1)


def generate(model, src: torch.Tensor, *, max_len: int, beam: int = 1, return_attention=False):
    """Greedy decoding (``beam=1``) or beam search of ``src (B, S)`` with the package's
    BOS and EOS ids: ids ``(B, L <= max_len)``, or ``(ids, attention)``."""
    if beam == 1:
        return greedy_decode(
            model, src, bos_id=BOS, eos_id=EOS, max_len=max_len, return_attention=return_attention
        )
    return beam_search(
        model,
        src,
        bos_id=BOS,
        eos_id=EOS,
        max_len=max_len,
        beam_size=beam,
        return_attention=return_attention,
    )


def _chunks(pairs: Sequence, batch_size: int, src_vocab: Vocab, tgt_vocab: Vocab, device):
    """``(chunk, src (B, S), tgt_out (B, T))`` for consecutive chunks of ``pairs``."""
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        src = src_vocab.encode_batch([s for s, _ in chunk]).to(device)  # (B, S)
        tgt = tgt_vocab.encode_batch([t for _, t in chunk], add_eos=True).to(device)  # (B, T)
        yield chunk, src, tgt


@torch.no_grad()
def exact_match_by_length(
    model,
    groups: Mapping,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam: int = 1,
    batch_size: int = 256,
    tokenize: str = "13a",
) -> dict:
    """Exact-match accuracy of each group of ``(source, target)`` pairs: ``{key: fraction}``,
    None for an empty group. Each batch is decoded to the length of its longest target (EOS
    included), all an exact match can use."""
    check_seq2seq(model)
    device = model_device(model)
    scores = {}
    for key, pairs in groups.items():
        right = 0
        for _, src, tgt in _chunks(pairs, batch_size, src_vocab, tgt_vocab, device):
            ids = generate(model, src, max_len=tgt.shape[1], beam=beam)  # (B, <=T)
            right += int(exact_match(ids, tgt, model.pad_id).sum())
        scores[key] = right / len(pairs) if pairs else None
    return scores


def perplexity(model, src: torch.Tensor, targets: torch.Tensor) -> float:
    """``exp`` of the mean negative log-likelihood per target token: src ``(B, S)``, targets
    ``(B, T)`` the tokens after BOS (``tgt_out``: target + EOS, padded with ``model.pad_id``).
    Padding is not counted; every other token (EOS included) is. One teacher-forced pass,
    in eval mode (:func:`attnbook.decode.sequence_log_prob`)."""
    log_p, n = _log_prob_and_count(model, src, targets)
    return math.exp(-log_p / n)


def _log_prob_and_count(model, src: torch.Tensor, targets: torch.Tensor) -> tuple[float, int]:
    log_p = sequence_log_prob(model, src, targets, bos_id=BOS)  # (B,)
    n = int((targets != model.pad_id).sum())
    if n == 0:
        raise ValueError("targets hold no token but padding: perplexity needs at least one")
    return float(log_p.double().sum()), n


def _sacrebleu(what: str):
    try:
        import sacrebleu
    except ImportError as err:
        raise ModuleNotFoundError(
            f"{what} comes from sacrebleu, which is not installed: pip install sacrebleu "
            '(or pip install "attnbook[eval]")'
        ) from err
    return sacrebleu


def _check_corpus(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"{name} must be a list of strings, one sentence each")
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(
            f"hypotheses and references must be two equally long, non-empty lists, got "
            f"{len(hypotheses)} and {len(references)} sentences"
        )


def corpus_bleu(
    hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a"
) -> float:
    """Corpus BLEU (0-100) of the hypotheses against one reference each, by sacrebleu with
    its defaults (4-grams, no smoothing beyond its ``exp`` default) and its ``tokenize``
    (``"13a"`` for space-separated languages, ``"zh"`` for Chinese: one token per character)."""
    _check_corpus(hypotheses, references)
    bleu = _sacrebleu("BLEU")
    if tokenize not in bleu.BLEU.TOKENIZERS:
        raise ValueError(
            f"tokenize must be one of {sorted(bleu.BLEU.TOKENIZERS)}, got {tokenize!r}"
        )
    return float(bleu.corpus_bleu(list(hypotheses), [list(references)], tokenize=tokenize).score)


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus chrF (0-100) of the hypotheses against one reference each, by sacrebleu with
    its defaults (character 6-grams, beta 2)."""
    _check_corpus(hypotheses, references)
    return float(_sacrebleu("chrF").corpus_chrf(list(hypotheses), [list(references)]).score)


@torch.no_grad()
def translation_scores(
    model,
    pairs: Sequence[tuple[str, str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam: int = 1,
    batch_size: int = 256,
    tokenize: str = "13a",
) -> dict:
    """Decode the sources of ``pairs`` and score the outputs against the targets.

    Returns ``{"bleu", "chrf", "perplexity", "exact_match", "examples", "hypotheses"}``: corpus
    BLEU and chrF of the decoded texts (sacrebleu), the perplexity of the targets (teacher
    forcing), the fraction of outputs that equal their target and the decoded texts (BLEU
    with sacrebleu's ``tokenize``: ``"zh"`` for a Chinese target, see :func:`corpus_bleu`). An input
    of ``S`` tokens is decoded to at most ``2 S + 10`` tokens (within the model's ``max_len``).
    """
    check_seq2seq(model)
    if not pairs:
        raise ValueError("pairs must hold at least one (source, target) pair")
    _sacrebleu("BLEU")  # before any decoding
    device = model_device(model)
    hypotheses, right, log_p, n_tokens = [], 0, 0.0, 0
    for _, src, tgt in _chunks(pairs, batch_size, src_vocab, tgt_vocab, device):
        max_len = 2 * src.shape[1] + 10
        if model.max_len is not None:
            max_len = min(max_len, model.max_len)
        ids = generate(model, src, max_len=max_len, beam=beam)  # (B, L)
        hypotheses += [tgt_vocab.decode(row) for row in ids.tolist()]
        right += int(exact_match(ids, tgt, model.pad_id).sum())
        chunk_log_p, chunk_n = _log_prob_and_count(model, src, tgt)
        log_p, n_tokens = log_p + chunk_log_p, n_tokens + chunk_n
    references = [t for _, t in pairs]
    return {
        "bleu": corpus_bleu(hypotheses, references, tokenize),
        "chrf": corpus_chrf(hypotheses, references),
        "perplexity": math.exp(-log_p / n_tokens),
        "exact_match": right / len(pairs),
        "examples": len(pairs),
        "hypotheses": hypotheses,
    }
