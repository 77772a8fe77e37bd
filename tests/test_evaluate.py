"""attnbook.evaluate: exact match, per-length accuracy, perplexity, BLEU and chrF, on numbers
that can be checked by hand."""

import math
import sys

import pytest
import torch
from torch import nn

import attnbook.train
from attnbook.attention import padding_mask
from attnbook.data import EOS, PAD, Vocab
from attnbook.evaluate import (
    corpus_bleu,
    corpus_chrf,
    exact_match,
    exact_match_by_length,
    perplexity,
    translation_scores,
)

# ------------------------------------------------------------------------------ exact match


def test_exact_match_on_padded_batches():
    targets = torch.tensor([[5, 6, EOS, PAD], [7, EOS, PAD, PAD], [5, 6, 7, EOS]])
    predictions = torch.tensor(
        [
            [5, 6, EOS],  # right (narrower than the targets: padded)
            [7, 8, EOS],  # one token too many
            [5, 6, 7],  # no EOS: wrong
        ]
    )
    assert exact_match(predictions, targets, PAD).tolist() == [True, False, False]
    wider = torch.tensor([[5, 6, EOS, PAD, PAD, PAD], [7, EOS, PAD, PAD, PAD, PAD]])
    assert exact_match(wider, targets[:2], PAD).tolist() == [True, True]
    with pytest.raises(ValueError, match="same batch size"):
        exact_match(predictions[:2], targets, PAD)


def test_the_trainer_uses_the_one_exact_match():
    assert attnbook.train.exact_match is exact_match


# ------------------------------------------------------------------------------ models of the protocol


class Oracle(nn.Module):
    """Copies its source (then EOS): a seq2seq model of the protocol that is always right on
    the copy task. ``wrong=True`` writes the source reversed instead."""

    max_len = None

    def __init__(self, lookup, wrong=False):
        super().__init__()
        self.pad_id, self.wrong = PAD, wrong
        self.register_buffer("lookup", lookup)  # source id -> target id
        self.vocab = int(lookup.max()) + 1

    def src_mask(self, src):
        return padding_mask(src, PAD)

    def encode(self, src):
        return self.lookup[src].float()[..., None]

    def _next(self, src, t):  # the token after t tokens have been written
        lengths = (src != PAD).sum(1)
        out = self.lookup[src]
        if self.wrong:
            idx = (lengths[:, None] - 1 - torch.arange(src.shape[1])).clamp(min=0)
            out = out.gather(1, idx)
        column = out[:, min(t, src.shape[1] - 1)]
        return torch.where(t < lengths, column, torch.full_like(column, EOS))

    def forward(self, src, tgt, *, return_attention=False):
        steps = [nn.functional.one_hot(self._next(src, t), self.vocab) for t in range(tgt.shape[1])]
        return 10.0 * torch.stack(steps, 1).float()

    def init_decoder(self, src, use_cache=False):
        return {"src": src}

    def decode_step(self, tokens, state):
        nxt = self._next(state["src"], tokens.shape[1] - 1)
        return 10.0 * nn.functional.one_hot(nxt, self.vocab).float(), state, {}

    def reorder_state(self, state, index):
        return {k: v.index_select(0, index) for k, v in state.items()}


class Uniform(Oracle):
    """Every token equally likely: perplexity = the vocabulary size."""

    def forward(self, src, tgt, *, return_attention=False):
        return torch.zeros(*tgt.shape, self.vocab)


VOCAB = Vocab(["the", "cat", "sat", "on", "a", "mat", "dog"], level="word")
COPY_PAIRS = {  # by length in words; the palindromes "a dog a" and "the dog dog the"
    3: [(t, t) for t in ("the cat sat", "a dog a", "on the mat")],
    4: [(t, t) for t in ("the cat sat on", "the dog dog the", "on a mat the", "cat sat on a")],
    5: [],
}


def oracle(wrong=False):
    return Oracle(torch.arange(len(VOCAB)), wrong=wrong)


def test_exact_match_by_length():
    groups = exact_match_by_length(oracle(), COPY_PAIRS, VOCAB, VOCAB, batch_size=2)
    assert groups == {3: 1.0, 4: 1.0, 5: None}
    wrong = exact_match_by_length(oracle(wrong=True), COPY_PAIRS, VOCAB, VOCAB, beam=3)
    assert wrong == {3: 1 / 3, 4: 1 / 4, 5: None}  # reversed: right on the palindromes


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    model = Uniform(torch.arange(7))
    src = torch.tensor([[3, 4, 5], [3, PAD, PAD]])
    targets = torch.tensor([[3, 4, EOS], [EOS, PAD, PAD]])
    assert perplexity(model, src, targets) == pytest.approx(7.0, rel=1e-6)  # float32 log_softmax


def test_perplexity_is_exp_of_the_mean_token_nll_over_real_tokens():
    model = oracle()  # logits 10 on the right token, 0 on the 8 others
    src = VOCAB.encode_batch(["the cat sat", "dog"])
    targets = VOCAB.encode_batch(["the cat sat", "dog"], add_eos=True)  # 4 + 2 real tokens
    nll = -math.log(math.exp(10) / (math.exp(10) + len(VOCAB) - 1))  # the same for each
    assert perplexity(model, src, targets) == pytest.approx(math.exp(nll), rel=1e-6)
    with pytest.raises(ValueError, match="no token but padding"):
        perplexity(model, src, torch.zeros_like(targets))


# ------------------------------------------------------------------------------ BLEU and chrF


def test_bleu_and_chrf_of_identical_corpora_are_100():
    texts = ["the cat sat on the mat", "a dog", "attention is all you need"]
    assert corpus_bleu(texts, texts) == pytest.approx(100.0)
    assert corpus_chrf(texts, texts) == pytest.approx(100.0)


def test_bleu_by_hand():
    # 1- to 4-gram precisions 5/6, 3/5, 2/4, 1/3 ("the" counted once), equal lengths (BP = 1)
    hyp, ref = ["the cat sat on the mat"], ["the cat sat on a mat"]
    expected = 100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
    assert corpus_bleu(hyp, ref) == pytest.approx(expected, rel=1e-9)
    assert corpus_bleu(["x y z w"], ["a b c d"]) == 0.0
    assert 0 < corpus_chrf(hyp, ref) < 100


def test_corpus_arguments_are_checked():
    with pytest.raises(ValueError, match="equally long"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(TypeError, match="list of strings"):
        corpus_chrf("a b", "a b")


def test_without_sacrebleu_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sacrebleu", None)  # import sacrebleu now fails
    with pytest.raises(ImportError, match="pip install sacrebleu"):
        corpus_bleu(["a"], ["a"])
    with pytest.raises(ImportError, match="pip install sacrebleu"):
        translation_scores(oracle(), COPY_PAIRS[3], VOCAB, VOCAB)


def test_translation_scores_of_a_perfect_and_of_a_wrong_model():
    pairs = COPY_PAIRS[3] + COPY_PAIRS[4]
    right = translation_scores(oracle(), pairs, VOCAB, VOCAB, batch_size=3)
    assert right["hypotheses"] == [t for _, t in pairs]
    assert right["bleu"] == pytest.approx(100.0) and right["chrf"] == pytest.approx(100.0)
    assert right["exact_match"] == 1.0 and right["examples"] == 7
    assert 1.0 < right["perplexity"] < 1.01
    wrong = translation_scores(oracle(wrong=True), pairs, VOCAB, VOCAB)
    assert wrong["exact_match"] == pytest.approx(2 / 7)
    assert wrong["bleu"] < right["bleu"] and wrong["chrf"] < right["chrf"]
    # 16 of the 32 target tokens wrong, each with log P = -log(e^10 + 10), the others
    # -log(1 + 10 e^-10): perplexity (e^10 + 10) / e^5
    assert wrong["perplexity"] == pytest.approx((math.exp(10) + 10) / math.exp(5), rel=1e-6)
