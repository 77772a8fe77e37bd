"""Dates between real languages, made offline from CLDR, with the alignment that made them.

CLDR, Unicode's locale data, writes one date in each language's own words, order and script:
9 May 2018 is ``Wednesday, May 9, 2018`` in en_US, ``2018年5月9日星期三`` in zh_CN (year first,
weekday last), ``Mittwoch, 9. Mai 2018`` in de_DE (day before month) and ``среда, 9 мая
2018 г.`` in ru_RU (the month in the genitive). :func:`make_dates_between` turns that into a
translation task between any two of :data:`LOCALES`, and because the generator knows which
field of the date (weekday, day, month, year) wrote each character on both sides,
:func:`alignment_accuracy` can measure how much of a model's attention falls on the right
source field: an alignment score that real corpora cannot give.

The CLDR data is read from a snapshot in the package (``cldr/dates.json``, written by
``tests/make_cldr_snapshot.py`` from Babel), so the pairs are the same on every machine
whatever Babel a reader has, and installing the package needs no Babel at all.
"""

from __future__ import annotations

import datetime
import json
import random
import re
import unicodedata
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import torch

from ._checks import check_positive_int
from .data import TaskData, Vocab
from .data.dates import (
    _DATE_FORMATS,
    _MONTHS,
    _WEEKDAY_PREFIXES,
    _WEEKDAYS,
    _date_options,
    _ordinal,
)
from .data.vocab import _check_choice

__all__ = [
    "FIELDS",
    "LOCALES",
    "STYLES",
    "DatesBetween",
    "Spelled",
    "alignment_accuracy",
    "alignment_scores",
    "cross_attention",
    "field_marks",
    "format_date",
    "human_english",
    "make_dates_between",
]

STYLES = ("full", "long", "medium", "short")
FIELDS = ("weekday", "day", "month", "year")


@cache
def _cldr() -> dict:
    text = resources.files("attnbook").joinpath("cldr", "dates.json").read_text("utf-8")
    return json.loads(text)["locales"]


LOCALES = tuple(_cldr())
"""The locales the package's CLDR snapshot holds (``en_US``, ``zh_CN``, ``de_DE`` ...)."""


@dataclass(frozen=True)
class Spelled:
    """A date written out: ``text`` and, for each of its characters, the field of the date
    that wrote it (one of :data:`FIELDS`) or ``""`` for punctuation and words of the pattern."""

    text: str
    fields: tuple[str, ...]

    def __add__(self, other: Spelled) -> Spelled:
        return Spelled(self.text + other.text, self.fields + other.fields)


def _spelled(pieces: list[tuple[str, str]]) -> Spelled:
    """``(text, field)`` pieces joined into one :class:`Spelled` (one string and one tuple built,
    not one per piece: making a task spells some 20,000 dates)."""
    fields = []
    for text, name in pieces:
        fields += [name] * len(text)
    return Spelled("".join(text for text, _ in pieces), tuple(fields))


# A CLDR pattern: runs of one letter are fields, text in single quotes is literal, '' is a quote.
_TOKEN = re.compile(r"'((?:[^']|'')*)'|([A-Za-z])\2*|([^A-Za-z']+)")


def _field(letters: str, date: datetime.date, names: dict) -> tuple[str, str]:
    kind, n = letters[0], len(letters)
    if kind == "y":
        year = f"{date.year % 100:02d}" if n == 2 else f"{date.year:0{n}d}"
        return year, "year"
    if kind == "M":
        if n >= 3:
            width = "wide" if n == 4 else "abbreviated"
            return names["months"][width][date.month - 1], "month"
        return f"{date.month:0{n}d}", "month"
    if kind == "d":
        return f"{date.day:0{n}d}", "day"
    if kind == "E":
        width = "wide" if n == 4 else "abbreviated"
        return names["days"][width][date.weekday()], "weekday"
    raise ValueError(f"the CLDR pattern field {letters!r} is not supported")


@cache
def _pattern(locale: str, style: str) -> tuple[tuple[str, str], ...]:
    """The CLDR pattern of ``locale`` and ``style``, read once: ``("field", letters)`` for a
    field, ``("text", text)`` for what it writes as it is."""
    parts = []
    for m in _TOKEN.finditer(_cldr()[locale]["patterns"][style]):
        quoted, letter, literal = m.groups()
        if letter:
            parts.append(("field", m.group(0)))
        elif literal is not None:
            parts.append(("text", literal))
        else:
            parts.append(("text", quoted.replace("''", "'") if quoted else "'"))
    return tuple(parts)


def format_date(date: datetime.date, locale: str = "en_US", style: str = "full") -> Spelled:
    """``date`` as CLDR writes it in ``locale`` with ``style`` (one of :data:`STYLES`), with
    the field of every character. Equal to ``babel.dates.format_date(date, style, locale)``
    for the Babel that wrote the snapshot (tested).

    >>> format_date(datetime.date(2018, 5, 9), "de_DE", "full").text
    'Mittwoch, 9. Mai 2018'
    """
    if not isinstance(date, datetime.date):
        raise TypeError(f"date must be a datetime.date, got {type(date).__name__}")
    _check_choice("locale", locale, LOCALES)
    _check_choice("style", style, STYLES)
    return _format(date, locale, style)


def _format(date: datetime.date, locale: str, style: str) -> Spelled:
    names = _cldr()[locale]
    return _spelled(
        [
            _field(part, date, names) if kind == "field" else (part, "")
            for kind, part in _pattern(locale, style)
        ]
    )


# The English dates task's spellings (attnbook.data.dates), with the field of every placeholder.
_HUMAN_FIELDS = {
    "W": "weekday",
    "w": "weekday",
    "M": "month",
    "m": "month",
    "n": "month",
    "nn": "month",
    "d": "day",
    "dd": "day",
    "o": "day",
    "y": "year",
}


def _human_values(date: datetime.date) -> dict[str, str]:
    return {
        "W": _WEEKDAYS[date.weekday()],
        "w": _WEEKDAYS[date.weekday()][:3],
        "M": _MONTHS[date.month - 1],
        "m": _MONTHS[date.month - 1][:3],
        "d": str(date.day),
        "dd": f"{date.day:02d}",
        "o": _ordinal(date.day),
        "n": str(date.month),
        "nn": f"{date.month:02d}",
        "y": str(date.year),
    }


def human_english(date: datetime.date, template: str, weekday: bool) -> Spelled:
    """``date`` in one of the English dates task's templates (``attnbook.data.dates``'s
    ``"{d} {M} {y}"`` and the rest), with a weekday in front when ``weekday``."""
    values = _human_values(date)
    if weekday:
        template = _WEEKDAY_PREFIXES[1] + template  # "{W}, "
    pieces = []
    for literal, name in _template(template):
        pieces.append((literal, ""))
        if name:
            pieces.append((values[name], _HUMAN_FIELDS[name]))
    return _spelled(pieces)


@cache
def _template(template: str) -> tuple[tuple[str, str], ...]:
    """An English template's ``(literal text, placeholder)`` pairs, read once."""
    return tuple(re.findall(r"([^{]*)(?:\{(\w+)\})?", template))


@dataclass
class DatesBetween(TaskData):
    """A :class:`~attnbook.data.tasks.TaskData` of dates between two languages, which also knows
    the field of every character: ``fields[text]`` is the tuple of fields of ``text``, for
    every source and target in the splits."""

    fields: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)


def _unambiguous(pattern: str, with_weekday: bool) -> bool:
    """Whether ``pattern`` shows the weekday exactly when asked, and the year in full (a
    two-digit year, as in en_US's ``M/d/yy``, leaves the century to guess)."""
    two_digit_year = re.search(r"(?<!y)yy(?!y)", re.sub(r"'[^']*'", "", pattern))
    return ("E" in pattern) == with_weekday and not two_digit_year


def _spellings(date, locale: str, styles, rng, with_weekday: bool) -> Spelled:
    """One source spelling of ``date``: a style drawn from ``styles`` that shows the weekday
    exactly when ``with_weekday`` (``"human"`` is the English task's own spellings)."""
    choices = _choices(locale, tuple(styles), with_weekday)
    style, template = choices[rng.randrange(len(choices))]
    if style == "human":
        return human_english(date, template, with_weekday)
    return _format(date, locale, style)


@cache
def _choices(locale: str, styles: tuple[str, ...], with_weekday: bool) -> tuple:
    """The ``(style, English template or None)`` spellings :func:`_spellings` draws from."""
    choices = []
    for style in styles:
        if style == "human":
            choices += [("human", t) for t in _DATE_FORMATS if not t.startswith("{y}")]
        elif _unambiguous(_cldr()[locale]["patterns"][style], with_weekday):
            choices.append((style, None))
    if not choices:
        raise ValueError(
            f"styles {styles} of {locale} have no spelling "
            f"{'with' if with_weekday else 'without'} a weekday"
        )
    return tuple(choices)


def _vocab(locale: str, human: bool) -> Vocab:
    names = _cldr()[locale]
    text = " ".join(sum((v for part in ("months", "days") for v in names[part].values()), []))
    text += "".join(re.sub(r"[A-Za-z]", "", p) for p in names["patterns"].values())
    text += "0123456789'"
    if human:
        text += " ".join(_MONTHS + _WEEKDAYS) + " st nd rd th of the ,.-/"
    return Vocab(sorted(set(text)), level="char")


def make_dates_between(
    src: str = "en_US",
    tgt: str = "zh_CN",
    n_train: int = 4000,
    n_val: int = 300,
    n_test: int = 300,
    *,
    seed: int = 0,
    src_styles: tuple[str, ...] | None = None,
    weekday_share: float = 0.5,
    **options,
) -> DatesBetween:
    """A translation task: a date written in ``src`` -> the same date written in ``tgt``.

    The source is drawn from ``src_styles`` (default: CLDR's four styles, plus ``"human"``,
    the English dates task's own spellings, when ``src`` is ``en_US``). The target is CLDR's
    ``full`` style when the source shows the weekday (a share ``weekday_share`` of the
    examples) and ``long`` when it does not, so every source has exactly one right answer that
    it fully determines. ``options`` are the dates task's (``start_year``, ``end_year``).
    Each *date* belongs to one split, as in the dates task, so no test date was seen in
    training in any spelling or language.
    """
    _check_choice("src", src, LOCALES)
    _check_choice("tgt", tgt, LOCALES)
    if src == tgt:
        raise ValueError(f"src and tgt must differ, got {src!r} for both")
    for arg, value in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        check_positive_int(arg, value, minimum=0 if arg != "n_train" else 1)
    check_positive_int("seed", seed, minimum=0)
    if isinstance(weekday_share, bool) or not isinstance(weekday_share, (int, float)):
        raise TypeError(
            f"weekday_share must be a float in [0, 1], got {type(weekday_share).__name__}"
        )
    if not 0.0 <= weekday_share <= 1.0:
        raise ValueError(f"weekday_share must be in [0, 1], got {weekday_share}")
    if src_styles is None:
        src_styles = STYLES + (("human",) if src == "en_US" else ())
    for style in src_styles:
        _check_choice("src_styles", style, STYLES + (("human",) if src == "en_US" else ()))
    opts = _date_options(options)
    first = datetime.date(opts["start_year"], 1, 1).toordinal()
    last = datetime.date(opts["end_year"], 12, 31).toordinal()
    n_total = n_train + n_val + n_test
    if n_total > last - first + 1:
        raise ValueError(f"cannot draw {n_total} distinct dates from {last - first + 1} days")
    rng = random.Random(seed)
    pairs, fields = [], {}
    for day in rng.sample(range(first, last + 1), n_total):
        date = datetime.date.fromordinal(day)
        with_weekday = rng.random() < weekday_share
        source = _spellings(date, src, src_styles, rng, with_weekday)
        target = _format(date, tgt, "full" if with_weekday else "long")
        pairs.append((source.text, target.text))
        fields[source.text], fields[target.text] = source.fields, target.fields
    return DatesBetween(
        f"dates-{src}-{tgt}",
        pairs[:n_train],
        pairs[n_train : n_train + n_val],
        pairs[n_train + n_val :],
        _vocab(src, "human" in src_styles),
        _vocab(tgt, False),
        {"seed": seed, "src": src, "tgt": tgt, "src_styles": list(src_styles), **opts},
        fields,
    )


def alignment_accuracy(
    weights: torch.Tensor, src_fields: tuple[str, ...], tgt_fields: tuple[str, ...]
) -> float:
    """The share of attention on the right source field, averaged over the target characters
    that a field wrote (punctuation and pattern words are left out).

    ``weights`` ``(T, S)`` are one example's attention weights, row ``t`` the query that
    predicts target character ``t`` (teacher forcing), column ``j`` source character ``j``;
    extra rows and columns (``<eos>``, padding) are allowed and count as off-field. A model
    that attends only to the field it is writing scores 1; uniform attention scores the
    fields' average share of the source.
    """
    if not isinstance(weights, torch.Tensor) or weights.dim() != 2:
        got = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must be a 2-D tensor (T, S), got {got}")
    t_len, s_len = len(tgt_fields), len(src_fields)
    if weights.shape[0] < t_len or weights.shape[1] < s_len:
        raise ValueError(
            f"weights must cover {t_len} target and {s_len} source characters, "
            f"got shape {tuple(weights.shape)}"
        )
    w = weights.detach().float().cpu()[:t_len]
    shares = []
    for t, name in enumerate(tgt_fields):
        if not name:
            continue
        on = [j for j, f in enumerate(src_fields) if f == name]
        if on:
            shares.append(float(w[t, on].sum()))
    if not shares:
        raise ValueError("no target character has a field that the source also shows")
    return sum(shares) / len(shares)


_MARKS = {"weekday": "W", "day": "D", "month": "M", "year": "Y", "": "·"}


def field_marks(spelled: Spelled) -> str:
    """``spelled`` over a line that marks the field of each character (``W`` weekday, ``D``
    day, ``M`` month, ``Y`` year, ``·`` pattern), aligned in a monospace font (a wide
    character, such as a Chinese one, gets a mark and a space)."""
    if not isinstance(spelled, Spelled):
        raise TypeError(f"spelled must be a Spelled (format_date's), got {type(spelled).__name__}")
    marks = "".join(
        _MARKS[f] + (" " if unicodedata.east_asian_width(c) in "WF" else "")
        for c, f in zip(spelled.text, spelled.fields, strict=True)
    )
    return f"{spelled.text}\n{marks}"


@torch.no_grad()
def cross_attention(model, task: DatesBetween, pairs) -> list[torch.Tensor]:
    """The cross-attention of ``model`` on each ``(source, target)`` of ``pairs`` under
    teacher forcing: one tensor ``(layers, heads, T + 1, S)`` per pair, row ``t`` the query
    that predicts target character ``t`` (the last row predicts ``<eos>``), column ``j``
    source character ``j``, padding cut off. An RNN with attention has one layer and one
    head; the fixed-context RNN has no attention (an error says so)."""
    from .data import Seq2SeqDataset, collate

    if getattr(model, "attention", "") is None:
        raise ValueError("model has no attention to read (a fixed-context RNN)")
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs must hold at least one (source, target) pair")
    batch = collate(list(Seq2SeqDataset(pairs, task.src_vocab, task.tgt_vocab)))
    was = model.training
    model.eval()
    try:
        _, attention = model(batch.src, batch.tgt_in, return_attention=True)
    finally:
        model.train(was)
    cross = torch.stack(attention["cross"], dim=1)  # (B, layers, heads, T, S)
    return [
        cross[i, :, :, : len(task.tgt_vocab.tokenize(t)) + 1, : len(task.src_vocab.tokenize(s))]
        for i, (s, t) in enumerate(pairs)
    ]


def alignment_scores(model, task: DatesBetween, pairs) -> dict:
    """Mean :func:`alignment_accuracy` of ``model`` over ``pairs``: ``"per_head"``
    ``(layers, heads)``, each head alone; ``"heads_averaged"`` ``(layers,)``, the average of a
    layer's heads (what the layer's output mixes, taken as one map); and ``"per_field"``,
    for each of :data:`FIELDS`, the heads-averaged share ``(layers,)`` over the target
    characters that field wrote (pooled over the pairs)."""
    maps = cross_attention(model, task, pairs)
    layers, heads = maps[0].shape[:2]
    per_head = torch.zeros(layers, heads, dtype=torch.float64)
    field_sum = {name: torch.zeros(layers, dtype=torch.float64) for name in FIELDS}
    field_n = dict.fromkeys(FIELDS, 0)
    for w, (s, t) in zip(maps, pairs, strict=True):
        fs, ft = task.fields[s], task.fields[t]
        on = torch.tensor([[bool(b) and a == b for a in fs] for b in ft], dtype=w.dtype)  # (T, S)
        rows = on.any(-1)  # the target characters whose field the source shows
        if not bool(rows.any()):
            raise ValueError(f"no target character of {t!r} has a field that {s!r} shows")
        share = (w[:, :, : len(ft)] * on).sum(-1)[..., rows].double()  # (layers, heads, rows)
        per_head += share.mean(-1)
        averaged = share.mean(1)  # (layers, rows)
        names = [f for f, r in zip(ft, rows.tolist(), strict=True) if r]
        for name in set(names):
            pick = torch.tensor([n == name for n in names])
            field_sum[name] += averaged[:, pick].sum(-1)
            field_n[name] += int(pick.sum())
    per_head /= len(maps)
    return {
        "per_head": per_head,
        "heads_averaged": per_head.mean(-1),
        "per_field": {n: field_sum[n] / field_n[n] for n in FIELDS if field_n[n]},
    }
