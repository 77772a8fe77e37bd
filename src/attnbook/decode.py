"""Decoding (解码): turning a trained seq2seq model into output sequences.

The functions work for any :class:`attnbook.seq2seq.Seq2SeqModel` (the Transformer, the RNN
``Seq2Seq``, or a model of your own with that protocol). They use four of its members:

- ``model.pad_id``: the padding token id;
- ``model.init_decoder(src (B, S), use_cache) -> state``: run the encoder once;
- ``model.decode_step(tokens (B, t), state) -> (logits (B, V), state, attention)``: the scores
  of the next token given the whole prefix so far (starting with BOS); ``attention`` holds the
  newest position's weights, ``{name: (B, n_layers, H, K)}`` (may be empty);
- ``model.reorder_state(state, index (B',)) -> state``: pick batch rows (beam search uses it
  to copy and reorder beams).

``use_cache`` (default True) picks how the model computes a step, not the decoding loop: the
Transformer then keeps a key/value cache, so that each ``decode_step`` runs only the newest
token through the decoder; ``use_cache=False`` re-runs the whole prefix every step (the plain
definition, for teaching and comparison). The ids are the same either way. The flag changes
nothing for the RNN ``Seq2Seq``: it already feeds one token a step, its hidden state being all
it keeps of the prefix.

Greedy decoding takes the most likely token at every step. Beam search (束搜索) keeps the
``beam_size`` best prefixes and ranks them by the log-probability divided by GNMT's length
penalty ``((5 + length) / 6) ^ alpha`` (Wu et al., 2016), so that longer sentences are not
penalised just for having more factors below 1.

The functions move ``src`` to the model's device (CUDA, MPS or the CPU) and return their
results on ``src``'s device, so CPU tensors work with a model on a GPU.

Both return ``(B, L)`` token ids *after* BOS, ``L <= max_len``: a sequence stops at its EOS
(kept) and is padded with ``pad_id`` to the longest one. With ``return_attention=True`` they
also return the attention of every generated token, stacked over steps:
``{name: (B, L, n_layers, H, K)}``, the last axis padded with zeros to the widest step; the
rows of padding positions are zero. That is ``"cross": (B, L, n_layers, H, S)`` (an RNN with
attention: ``(B, L, 1, 1, S)``) and, for the Transformer, ``"decoder_self": (B, L, n_layers,
H, L)`` (step ``i`` attends over BOS and the ``i`` tokens before it: a lower-triangular map).
:func:`attnbook.seq2seq.attention_map` turns either into one ``(B, L, K)`` map.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import check_bool, check_positive_int, check_tensor, checked_too
from ._limits import check_decoding_memory as _check_decoding_memory
from .seq2seq import check_seq2seq
from .utils import model_device

__all__ = ["greedy_decode", "beam_search", "length_penalty_factor", "sequence_log_prob"]


# --------------------------------------------------------------------------------------------
# checks and shared helpers
# --------------------------------------------------------------------------------------------


def _check_target_id(model, name: str, value: int) -> None:
    """A special id (BOS, EOS) must be a token of the model's target vocabulary."""
    size = getattr(model, "tgt_vocab_size", None)
    if isinstance(size, int) and not 0 <= value < size:
        raise ValueError(
            f"{name}={value} is not a token of the model's target vocabulary: ids must be in "
            f"[0, {size - 1}] (tgt_vocab_size={size})"
        )


def _check_decoding(model, src, *, who, beam_size, return_attention=False, **options) -> None:
    """What the decoders' shared check (:func:`_check_arguments`) does not cover: the
    length penalty, and whether the decoding fits in memory (:func:`_check_decoding_memory`)."""
    check_bool("return_attention", return_attention)
    alpha = options.get("length_penalty", 0.0)
    if isinstance(alpha, float) and not math.isfinite(alpha):
        raise ValueError(f"length_penalty must be a finite number >= 0 (GNMT's alpha), got {alpha}")
    if isinstance(src, torch.Tensor) and src.dim() == 2:
        sizes = {"max_len": options.get("max_len")}
        if who == "beam_search":
            sizes = {"beam_size": beam_size, **sizes}
        _check_decoding_memory(
            who,
            sizes,
            model,
            src.shape[0],
            src.shape[1],
            options.get("max_len"),
            beam_size,
            return_attention=return_attention is True,
            use_cache=options.get("use_cache", True) is not False,
        )


def _check_greedy(model, src, **options) -> None:
    _check_decoding(model, src, who="greedy_decode", beam_size=1, **options)


def _check_beam(model, src, *, beam_size=4, **options) -> None:
    _check_decoding(model, src, who="beam_search", beam_size=beam_size, **options)


def _check_arguments(model, src, bos_id, eos_id, max_len, use_cache) -> None:
    check_seq2seq(model)
    check_tensor("src", src, ndim=2, integer=True, shape_hint="(B, S) of token ids")
    if src.shape[0] == 0 or src.shape[1] == 0:
        raise ValueError(
            f"src must hold at least one sequence of at least one token, got shape "
            f"{tuple(src.shape)}"
        )
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        check_positive_int(name, value, minimum=0)
        _check_target_id(model, name, value)
    check_positive_int("max_len", max_len)
    if not isinstance(use_cache, bool):
        raise TypeError(
            f"use_cache must be a bool (True: key/value cache, False: re-run the whole "
            f"prefix each step), got {type(use_cache).__name__} {use_cache!r}"
        )


class _EvalNoGrad:
    """``with _EvalNoGrad(model):`` eval mode and no autograd inside, the old mode restored."""

    def __init__(self, model):
        self.model, self.no_grad = model, torch.no_grad()

    def __enter__(self):
        self.was_training = getattr(self.model, "training", False)
        if hasattr(self.model, "eval"):
            self.model.eval()
        self.no_grad.__enter__()

    def __exit__(self, *exc):
        self.no_grad.__exit__(*exc)
        if hasattr(self.model, "train"):
            self.model.train(self.was_training)
        return False


def _stack_steps(
    steps: list[dict[str, torch.Tensor]], alive: list[torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Stack per-step attention dicts into ``{name: (B, steps, ...)}``.

    The last axis is padded with zeros to the widest step (the decoder self-attention grows by
    one key per step); steps where a sequence had already finished (``alive[i]`` False) are
    zeroed.
    """
    if not steps or not steps[0]:
        return {}
    out = {}
    for name in steps[0]:
        width = max(step[name].shape[-1] for step in steps)
        rows = []
        for step, keep in zip(steps, alive, strict=True):
            w = F.pad(step[name], (0, width - step[name].shape[-1]))  # (B, ..., width)
            keep = keep.view(-1, *([1] * (w.dim() - 1)))
            rows.append(w * keep.to(w.dtype))
        out[name] = torch.stack(rows, dim=1)  # (B, steps, ...)
    return out


def _to(attention: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {name: w.to(device) for name, w in attention.items()}


def length_penalty_factor(length: torch.Tensor | int, alpha: float) -> torch.Tensor | float:
    """GNMT's length penalty ``lp(Y) = ((5 + |Y|) / 6) ^ alpha``; scores are ``log P / lp``."""
    return ((5.0 + length) / 6.0) ** alpha


def sequence_log_prob(model, src: torch.Tensor, ids: torch.Tensor, *, bos_id: int) -> torch.Tensor:
    """``log P(Y | X)`` of given outputs, by one teacher-forced pass: how likely the model
    finds them (for instance to compare greedy decoding, beam search and the right answer).

    src ``(B, S)``; ids ``(B, L)`` the tokens after BOS, as :func:`greedy_decode` and
    :func:`beam_search` return them (EOS included, then ``model.pad_id``). Returns ``(B,)``:
    the sum over the non-padding positions of ``log P(y_t | y_<t, X)``. The model needs
    ``pad_id`` and ``model(src, tgt_in) -> logits (B, L, V)`` of the seq2seq protocol; it runs
    in eval mode under ``torch.no_grad()``.
    """
    check_seq2seq(model)
    check_tensor("src", src, ndim=2, integer=True, shape_hint="(B, S) of token ids")
    check_tensor("ids", ids, ndim=2, integer=True, shape_hint="(B, L) of token ids after BOS")
    if ids.shape[0] != src.shape[0] or ids.shape[1] == 0:
        raise ValueError(
            f"ids must be (B={src.shape[0]}, L >= 1) to match src "
            f"{tuple(src.shape)}, got {tuple(ids.shape)}"
        )
    check_positive_int("bos_id", bos_id, minimum=0)
    _check_target_id(model, "bos_id", bos_id)
    home, device = src.device, model_device(model)
    src, ids = src.to(device), ids.to(device)
    bos = torch.full((ids.shape[0], 1), bos_id, dtype=ids.dtype, device=device)
    with _EvalNoGrad(model):
        logits = model(src, torch.cat([bos, ids[:, :-1]], dim=1))  # (B, L, V)
        step = F.log_softmax(logits.float(), dim=-1).gather(-1, ids[..., None])[..., 0]
    return (step * (ids != model.pad_id)).sum(dim=1).to(home)


# --------------------------------------------------------------------------------------------
# greedy decoding
# --------------------------------------------------------------------------------------------


def greedy_decode(
    model,
    src: torch.Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    return_attention: bool = False,
    use_cache: bool = True,
):
    """Greedy decoding (贪心解码): at every step take the most likely next token.

    src ``(B, S)`` -> ids ``(B, L)``, ``L <= max_len``, the tokens after BOS; a sequence that
    produced ``eos_id`` keeps it and is padded with ``model.pad_id`` afterwards. With
    ``return_attention`` returns ``(ids, attention)``, attention stacked as the module
    docstring describes. The encoder runs once; the model is put in eval mode under
    ``torch.no_grad()`` and its training mode restored afterwards. ``use_cache=False`` turns
    the Transformer's key/value cache off (module docstring): the same ids, computed slower.
    """
    _check_arguments(model, src, bos_id, eos_id, max_len, use_cache)
    home, src = src.device, src.to(model_device(model))
    with _EvalNoGrad(model):
        state = model.init_decoder(src, use_cache=use_cache)
        b = src.shape[0]
        tokens = torch.full((b, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        finished = torch.zeros(b, dtype=torch.bool, device=src.device)
        steps, alive = [], []
        for _ in range(max_len):
            logits, state, attention = model.decode_step(tokens, state)  # (B, V)
            next_token = logits.argmax(dim=-1)  # (B,)
            next_token = next_token.masked_fill(finished, model.pad_id)
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t + 1)
            if return_attention:
                steps.append(attention)
                alive.append(~finished)
            finished = finished | (next_token == eos_id)
            if finished.all():
                break
        ids = tokens[:, 1:]
    if not return_attention:
        return ids.to(home)
    return ids.to(home), _to(_stack_steps(steps, alive), home)


# --------------------------------------------------------------------------------------------
# beam search
# --------------------------------------------------------------------------------------------


def beam_search(
    model,
    src: torch.Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    return_attention: bool = False,
    use_cache: bool = True,
):
    """Beam search: keep the ``beam_size`` best hypotheses per example, return the best.

    Hypotheses are ranked by ``log P(y) / lp(|y|)`` with GNMT's length penalty
    ``lp = ((5 + |y|) / 6) ^ length_penalty`` (``length_penalty=0`` ranks by ``log P``; the
    length counts the generated tokens, EOS included). A hypothesis that ends with EOS stays in
    the beam with its score frozen and competes with the growing ones; the search stops when
    every beam of every example has ended, or after ``max_len`` tokens. With ``beam_size=1``
    this is exactly greedy decoding.

    The batch is decoded together (``B * beam_size`` rows). Returns ids ``(B, L)`` as
    :func:`greedy_decode` does, or ``(ids, attention)`` with the attention of the chosen
    hypothesis at every step. ``use_cache`` as in :func:`greedy_decode`; the key/value cache is
    part of the state, so it moves with the beams.
    """
    _check_arguments(model, src, bos_id, eos_id, max_len, use_cache)
    check_positive_int("beam_size", beam_size)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
        raise TypeError(
            f"length_penalty must be a float >= 0 (GNMT's alpha), got "
            f"{type(length_penalty).__name__} {length_penalty!r}"
        )
    if not length_penalty >= 0:
        raise ValueError(f"length_penalty must be >= 0 (GNMT's alpha), got {length_penalty}")
    home, device = src.device, model_device(model)
    src = src.to(device)
    b, k = src.shape[0], beam_size
    with _EvalNoGrad(model):
        state = model.init_decoder(src, use_cache=use_cache)
        rows = torch.arange(b, device=device).repeat_interleave(k)  # (B*K,)
        state = model.reorder_state(state, rows)  # K copies each
        tokens = torch.full((b * k, 1), bos_id, dtype=torch.long, device=device)
        # log P of each hypothesis; at the start only beam 0 is live (the others are copies)
        log_p = torch.full((b, k), float("-inf"), device=device)
        log_p[:, 0] = 0.0
        score = log_p.clone()  # log P / lp
        finished = torch.zeros(b, k, dtype=torch.bool, device=device)
        history: list[dict[str, torch.Tensor]] = []  # per step
        alive_history: list[torch.Tensor] = []
        for t in range(1, max_len + 1):
            logits, state, attention = model.decode_step(tokens, state)  # (B*K, V)
            v = logits.shape[-1]
            step_log_p = F.log_softmax(logits.float(), dim=-1).view(b, k, v)
            # candidates: a live beam extended by each token; an ended beam by pad only,
            # with its score unchanged
            cand_log_p = log_p[:, :, None] + step_log_p  # (B, K, V)
            cand_score = cand_log_p / length_penalty_factor(t, length_penalty)
            ended = finished[:, :, None]
            pad_column = F.one_hot(torch.tensor(model.pad_id, device=device), v).bool()
            cand_log_p = torch.where(
                ended, torch.where(pad_column, log_p[:, :, None], float("-inf")), cand_log_p
            )
            cand_score = torch.where(
                ended, torch.where(pad_column, score[:, :, None], float("-inf")), cand_score
            )
            score, flat = cand_score.view(b, k * v).topk(k, dim=-1)  # (B, K)
            beam, token = flat // v, flat % v  # (B, K)
            log_p = cand_log_p.view(b, k * v).gather(1, flat)
            was_finished = finished.gather(1, beam)
            finished = was_finished | (token == eos_id)
            index = (beam + torch.arange(b, device=device)[:, None] * k).view(-1)  # (B*K,)
            tokens = torch.cat([tokens.index_select(0, index), token.view(-1, 1)], dim=1)
            state = model.reorder_state(state, index)
            if return_attention:
                history = [{n: w.index_select(0, index) for n, w in h.items()} for h in history]
                alive_history = [a.index_select(0, index) for a in alive_history]
                history.append({n: w.index_select(0, index) for n, w in attention.items()})
                alive_history.append(~was_finished.view(-1))
            if (finished | torch.isneginf(log_p)).all():
                break
        best = score.argmax(dim=-1)  # (B,)
        chosen = best + torch.arange(b, device=device) * k  # rows in B*K
        ids = tokens.index_select(0, chosen)[:, 1:]  # (B, steps)
        # drop the columns that are padding after EOS in every chosen hypothesis
        width = int(_before_or_at_eos(ids, eos_id).sum(dim=1).max())
        ids = ids[:, :width].to(home)
        if not return_attention:
            return ids
        steps = [{n: w.index_select(0, chosen) for n, w in h.items()} for h in history]
        alive = [a.index_select(0, chosen) for a in alive_history]
        return ids, _to(_stack_steps(steps[:width], alive[:width]), home)


def _before_or_at_eos(ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """``(B, L)`` bool: True up to and including each row's first EOS (all True if none)."""
    is_eos = (ids == eos_id).long()
    return (is_eos.cumsum(dim=1) - is_eos) == 0


# the functions above are printed by the book as they read; the checks they do not make
# themselves run first, at the edge
greedy_decode = checked_too(_check_greedy)(greedy_decode)
beam_search = checked_too(_check_beam)(beam_search)
