"""Data for sequence-to-sequence models: vocabularies, synthetic tasks, your own corpus, batches.

Public names (the chapters use them):

- ``PAD, BOS, EOS, UNK`` (ids 0..3) and ``SPECIALS``, their symbols;
- :class:`Vocab`: character- or word-level vocabulary, ``encode``/``decode`` and their batch
  forms; an unseen symbol is an error or ``<unk>``, by option;
- ``TASKS`` (name -> description) and :func:`make_task`: the synthetic tasks ``copy``,
  ``reverse``, ``sort`` and ``dates``, generated deterministically from a seed into
  train/validation/test splits that share no source (:class:`TaskData`);
- :func:`length_controlled`: fresh examples of a sequence task at chosen input lengths, to
  measure accuracy against length, beyond the training lengths too;
- :func:`load_tsv`: your own parallel corpus, one ``source<TAB>target`` pair a line
  (:func:`normalise_text` prepares a new input the same way; :func:`file_sha256` identifies
  the file's content);
- :class:`Seq2SeqDataset` (a ``torch.utils.data.Dataset``), :func:`collate` (padding, into a
  :class:`Batch`), :class:`BucketBatchSampler` (length bucketing) and :func:`make_loader`
  (all three in one ``DataLoader``).

Every example is a pair of strings ``(source, target)``. Character-level vocabularies treat
every character (space included) as a symbol; word-level ones split on whitespace, so a
corpus is tokenised first (:func:`tokenize_words`) and stored as space-separated tokens.
"""

from __future__ import annotations

import codecs
import datetime
import functools
import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, Sampler

from ._checks import check_bool, check_positive_int, check_tensor

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

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
LEVELS = ("char", "word")
_UNKNOWN = ("error", "unk")


def _check_choice(name: str, value, choices: Sequence) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


def _check_text(name: str, text) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__} {text!r:.60}")
    return text


# --------------------------------------------------------------------------------------------
# vocabulary
# --------------------------------------------------------------------------------------------


class Vocab:
    """A vocabulary (词表): the four special symbols, then ``symbols`` in the order given.

    ``level="char"``: every character is a symbol (``symbols`` are single characters, or one
    str of them: ``Vocab("abc")``);
    ``level="word"``: text is split on whitespace (``symbols`` are words without whitespace).
    ``unknown`` says what :meth:`encode` does with a symbol it does not know: ``"error"``
    (a ``ValueError`` naming the symbol and its position) or ``"unk"`` (the ``<unk>`` id).
    """

    def __init__(self, symbols: Iterable[str], level: str = "char", unknown: str = "error"):
        _check_choice("level", level, LEVELS)
        _check_choice("unknown", unknown, _UNKNOWN)
        if isinstance(symbols, str) and level == "word":
            raise TypeError(
                "symbols must be a list of words for level='word'; a single str "
                f"was given: {symbols!r:.60}"
            )
        if isinstance(symbols, (bytes, dict)) or not isinstance(symbols, Iterable):
            raise TypeError(f"symbols must be an iterable of str, got {type(symbols).__name__}")
        symbols = list(symbols)
        seen = set()
        for i, symbol in enumerate(symbols):
            if not isinstance(symbol, str):
                raise TypeError(f"symbols[{i}] must be a str, got {type(symbol).__name__}")
            if level == "char" and len(symbol) != 1:
                raise ValueError(
                    f"symbols[{i}] must be one character for level='char', got {symbol!r}"
                )
            if level == "word" and (not symbol or any(c.isspace() for c in symbol)):
                raise ValueError(
                    f"symbols[{i}] must be a non-empty word without whitespace for "
                    f"level='word', got {symbol!r}"
                )
            if symbol in SPECIALS or symbol in seen:
                raise ValueError(f"symbols[{i}] = {symbol!r} is a special symbol or a duplicate")
            seen.add(symbol)
        self.level, self.unknown = level, unknown
        self.itos: list[str] = list(SPECIALS) + symbols  # id -> symbol
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(self.itos)}  # symbol -> id

    pad_id, bos_id, eos_id, unk_id = PAD, BOS, EOS, UNK

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        level: str = "char",
        min_freq: int = 1,
        max_size: int | None = None,
        unknown: str = "error",
    ) -> Vocab:
        """The vocabulary of ``texts``: symbols seen at least ``min_freq`` times, the most
        frequent first (ties alphabetically, so the result does not depend on text order),
        at most ``max_size`` of them (specials not counted)."""
        _check_choice("level", level, LEVELS)
        check_positive_int("min_freq", min_freq)
        if max_size is not None:
            check_positive_int("max_size", max_size)
        if isinstance(texts, str):
            raise TypeError("texts must be an iterable of str, got a single str")
        counts: Counter[str] = Counter()
        for i, text in enumerate(texts):
            _check_text(f"texts[{i}]", text)
            counts.update(list(text) if level == "char" else text.split())
        for special in SPECIALS:
            counts.pop(special, None)
        ranked = sorted(
            (s for s, n in counts.items() if n >= min_freq), key=lambda s: (-counts[s], s)
        )
        return cls(ranked[:max_size], level=level, unknown=unknown)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, symbol) -> bool:
        return symbol in self.stoi

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos and self.level == other.level

    def __repr__(self) -> str:
        head = ", ".join(repr(s) for s in self.itos[4:12])
        more = ", ..." if len(self) > 12 else ""
        return f"Vocab(level={self.level!r}, size={len(self)}, symbols=[{head}{more}])"

    def tokenize(self, text: str) -> list[str]:
        """Split ``text`` into this vocabulary's symbols (characters, or whitespace words)."""
        _check_text("text", text)
        return list(text) if self.level == "char" else text.split()

    def encode(
        self, text: str, add_bos: bool = False, add_eos: bool = False, unknown: str | None = None
    ) -> list[int]:
        """``text`` -> token ids; ``unknown`` overrides the vocabulary's setting."""
        unknown = self.unknown if unknown is None else unknown
        _check_choice("unknown", unknown, _UNKNOWN)
        ids = []
        for position, symbol in enumerate(self.tokenize(text)):
            i = self.stoi.get(symbol)
            if i is None or i < len(SPECIALS):  # a literal "<pad>" in text is unknown too
                if unknown == "error":
                    raise ValueError(
                        f"unknown symbol {symbol!r} at position {position} of {text!r:.80}; it "
                        f"is not in this {self.level}-level vocabulary of {len(self)} symbols "
                        "(build the vocabulary from more text, or pass unknown='unk')"
                    )
                i = UNK
            ids.append(i)
        return [BOS] * add_bos + ids + [EOS] * add_eos

    def decode(self, ids, strip_special: bool = True) -> str:
        """Token ids (a list or a 1-D tensor) -> text.

        With ``strip_special`` (the default) the text ends at the first ``<eos>`` and
        ``<bos>``/``<pad>`` are dropped, which is what a model's output needs; ``<unk>`` stays
        visible. ``decode(encode(text, add_bos=True, add_eos=True)) == text``.
        """
        if isinstance(ids, torch.Tensor):
            check_tensor("ids", ids, ndim=1, integer=True, shape_hint="(L,)")
            ids = ids.tolist()
        symbols = []
        for position, i in enumerate(ids):
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"ids[{position}] must be an int, got {type(i).__name__}")
            if not 0 <= i < len(self):
                raise ValueError(
                    f"ids[{position}] = {i} is not a token id of this vocabulary "
                    f"(0..{len(self) - 1})"
                )
            if strip_special:
                if i == EOS:
                    break
                if i in (PAD, BOS):
                    continue
            symbols.append(self.itos[i])
        return ("" if self.level == "char" else " ").join(symbols)

    def encode_batch(
        self,
        texts: Sequence[str],
        add_bos: bool = False,
        add_eos: bool = False,
        unknown: str | None = None,
    ) -> torch.Tensor:
        """A list of texts -> ``(B, L)`` LongTensor, right-padded with ``<pad>``."""
        if isinstance(texts, str) or len(texts) == 0:
            raise ValueError("texts must be a non-empty list of str")
        rows = [
            torch.tensor(self.encode(t, add_bos, add_eos, unknown), dtype=torch.long) for t in texts
        ]
        return pad_sequence(rows, batch_first=True, padding_value=PAD)

    def decode_batch(self, ids: torch.Tensor, strip_special: bool = True) -> list[str]:
        """``(B, L)`` token ids -> a list of ``B`` texts."""
        check_tensor("ids", ids, ndim=2, integer=True, shape_hint="(B, L)")
        return [self.decode(row, strip_special) for row in ids]

    def to_dict(self) -> dict:
        """A JSON-friendly description (for checkpoints); :meth:`from_dict` inverts it."""
        return {"symbols": self.itos[len(SPECIALS) :], "level": self.level, "unknown": self.unknown}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        return cls(d["symbols"], level=d["level"], unknown=d.get("unknown", "error"))


_WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def tokenize_words(text: str, lower: bool = False) -> list[str]:
    """Words and punctuation marks as separate tokens: ``"Hi, you!" -> ["Hi", ",", "you", "!"]``.

    Apostrophes inside a word stay (``"don't"``); ``lower`` lower-cases first.
    """
    _check_text("text", text)
    return _WORD.findall(text.lower() if lower else text)


# --------------------------------------------------------------------------------------------
# synthetic tasks
# --------------------------------------------------------------------------------------------

#: The tasks :func:`make_task` can generate: each name with a one-line description.
TASKS = {
    "copy": "output the input sequence unchanged, e.g. 'cab' -> 'cab'",
    "reverse": "output the input sequence backwards, e.g. 'cab' -> 'bac'",
    "sort": "output the input symbols in alphabetical order, e.g. 'cab' -> 'abc'",
    "dates": "a date written in one of many human ways -> ISO, e.g. 'Wednesday 9 May 2018' -> "
    "'2018-05-09'",
}
_SEQUENCE_TASKS = ("copy", "reverse", "sort")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_SEQUENCE_OPTIONS = {"min_len": 3, "max_len": 10, "n_symbols": 10}
_DATE_OPTIONS = {"start_year": 1900, "end_year": 2099}


@dataclass
class TaskData:
    """The splits of a task and its vocabularies.

    ``train``, ``val`` and ``test`` are lists of ``(source, target)`` string pairs; no source
    is in two splits. ``options`` records how the data was made (task options, or the file
    and its filtering counts for :func:`load_tsv`).
    """

    name: str
    train: list[tuple[str, str]]
    val: list[tuple[str, str]]
    test: list[tuple[str, str]]
    src_vocab: Vocab
    tgt_vocab: Vocab
    options: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"TaskData(name={self.name!r}, train={len(self.train)}, val={len(self.val)}, "
            f"test={len(self.test)}, src_vocab={len(self.src_vocab)}, "
            f"tgt_vocab={len(self.tgt_vocab)}, options={self.options})"
        )


def _sequence_target(name: str, source: str) -> str:
    if name == "copy":
        return source
    if name == "reverse":
        return source[::-1]
    return "".join(sorted(source))  # sort


def _sequence_options(options: dict) -> dict:
    unknown = set(options) - set(_SEQUENCE_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown option(s) {sorted(unknown)} for a sequence task; the options "
            f"are {sorted(_SEQUENCE_OPTIONS)}"
        )
    opts = {**_SEQUENCE_OPTIONS, **options}
    check_positive_int("min_len", opts["min_len"])
    check_positive_int("max_len", opts["max_len"])
    check_positive_int("n_symbols", opts["n_symbols"])
    if opts["min_len"] > opts["max_len"]:
        raise ValueError(
            f"min_len must be <= max_len, got min_len={opts['min_len']} and "
            f"max_len={opts['max_len']}"
        )
    if opts["n_symbols"] > len(_ALPHABET):
        raise ValueError(
            f"n_symbols must be <= {len(_ALPHABET)} (the letters a-z), got {opts['n_symbols']}"
        )
    return opts


def _draw_distinct(
    rng: random.Random, alphabet: str, lengths: Sequence[int], n: int, exclude: set[str]
) -> list[str]:
    """``n`` distinct random strings over ``alphabet``, each of a length drawn from
    ``lengths``, none in ``exclude``. Fails clearly when there are not that many."""
    wanted = set(lengths)
    taken = sum(1 for s in exclude if len(s) in wanted and set(s) <= set(alphabet))
    available = sum(len(alphabet) ** length for length in wanted) - taken
    if n > available:
        raise ValueError(
            f"cannot draw {n} distinct sequences: only {available} sequences of "
            f"lengths {min(lengths)}..{max(lengths)} over {len(alphabet)} symbols "
            f"are left{' after the excluded ones' if taken else ''}; lower the "
            "number of examples or raise max_len / n_symbols"
        )
    drawn: list[str] = []
    seen = set(exclude)
    attempts = 0
    while len(drawn) < n:
        attempts += 1
        if attempts > 200 * n + 10_000:
            raise ValueError(
                f"could only draw {len(drawn)} of {n} distinct sequences; nearly "
                "every possible sequence is taken: lower the number of examples "
                "or raise max_len / n_symbols"
            )
        length = rng.choice(lengths)
        s = "".join(rng.choice(alphabet) for _ in range(length))
        if s not in seen:
            seen.add(s)
            drawn.append(s)
    return drawn


# ---- dates ----------------------------------------------------------------------------------

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# Each format: (weekday part or None, the date part). Numeric formats are always day first, so
# every input has one right answer. {W} weekday, {w} its 3-letter form, {M} month, {m} 3-letter
# month, {d} day, {dd} 2-digit day, {o} ordinal day, {n} month number, {nn} 2-digit, {y} year.
_DATE_FORMATS = (
    "{d} {M} {y}",
    "{d} {m} {y}",
    "{o} {M} {y}",
    "{o} of {M} {y}",
    "the {o} of {M}, {y}",
    "{M} {d}, {y}",
    "{M} {o}, {y}",
    "{m} {d}, {y}",
    "{m} {o} {y}",
    "{d}-{m}-{y}",
    "{d}.{n}.{y}",
    "{dd}.{nn}.{y}",
    "{d}/{n}/{y}",
    "{dd}/{nn}/{y}",
    "{dd}-{nn}-{y}",
    "{y}-{nn}-{dd}",
)
_WEEKDAY_PREFIXES = ("{W} ", "{W}, ", "{w} ", "{w}, ")


def _format_date(date: datetime.date, template: str) -> str:
    """Write ``date`` with one of the task's templates (see ``_DATE_FORMATS``)."""
    return template.format(
        W=_WEEKDAYS[date.weekday()],
        w=_WEEKDAYS[date.weekday()][:3],
        M=_MONTHS[date.month - 1],
        m=_MONTHS[date.month - 1][:3],
        d=date.day,
        dd=f"{date.day:02d}",
        o=_ordinal(date.day),
        n=date.month,
        nn=f"{date.month:02d}",
        y=date.year,
    )


def _human_date(rng: random.Random, date: datetime.date) -> str:
    template = rng.choice(_DATE_FORMATS)
    if not template.startswith("{y}") and rng.random() < 0.4:  # ISO input keeps no weekday
        template = rng.choice(_WEEKDAY_PREFIXES) + template
    text = _format_date(date, template)
    case = rng.random()
    return text.lower() if case < 0.3 else text.upper() if case < 0.45 else text


def _date_charset() -> str:
    names = " ".join(_MONTHS + _WEEKDAYS) + " st nd rd th of the"
    chars = set(names) | set(names.lower()) | set(names.upper()) | set("0123456789 ,.-/")
    return "".join(sorted(chars))


def _date_options(options: dict) -> dict:
    unknown = set(options) - set(_DATE_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown option(s) {sorted(unknown)} for task 'dates'; the options "
            f"are {sorted(_DATE_OPTIONS)}"
        )
    opts = {**_DATE_OPTIONS, **options}
    for name in ("start_year", "end_year"):
        check_positive_int(name, opts[name])
        if opts[name] > 9999:
            raise ValueError(f"{name} must be <= 9999, got {opts[name]}")
    if opts["start_year"] > opts["end_year"]:
        raise ValueError(
            f"start_year must be <= end_year, got {opts['start_year']} and {opts['end_year']}"
        )
    return opts


def make_task(
    name: str, n_train: int = 1000, n_val: int = 200, n_test: int = 200, *, seed: int = 0, **options
) -> TaskData:
    """Generate a synthetic task, deterministically from ``seed``.

    ``copy``, ``reverse``, ``sort``: sources are strings over the first ``n_symbols`` letters
    (default 10: ``a``..``j``) of lengths ``min_len``..``max_len`` (default 3..10), lengths
    drawn uniformly; character-level vocabularies of those letters.

    ``dates``: a date between ``start_year`` and ``end_year`` (default 1900..2099) written in
    one of many human ways (``"9 May 2018"``, ``"may 9th, 2018"``, ``"9.5.2018"``,
    ``"WEDNESDAY, 09/05/2018"``; numbers always day first; the weekday, when written, is the
    true one) -> ``"2018-05-09"``. Each *date* belongs to one split, so a test date was never
    seen in training in any spelling.

    Sources are distinct within and across the splits. Unknown options are a ``TypeError``.
    """
    _check_choice("name", name, tuple(TASKS))
    for arg, value in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        check_positive_int(arg, value, minimum=0)
    check_positive_int("seed", seed, minimum=0)
    if n_train == 0:
        raise ValueError("n_train must be >= 1")
    n_total = n_train + n_val + n_test
    rng = random.Random(seed)
    if name == "dates":
        opts = _date_options(options)
        first = datetime.date(opts["start_year"], 1, 1).toordinal()
        last = datetime.date(opts["end_year"], 12, 31).toordinal()
        if n_total > last - first + 1:
            raise ValueError(
                f"cannot draw {n_total} distinct dates from {last - first + 1} days "
                f"({opts['start_year']}..{opts['end_year']})"
            )
        days = rng.sample(range(first, last + 1), n_total)
        dates = [datetime.date.fromordinal(d) for d in days]
        pairs = [(_human_date(rng, d), d.isoformat()) for d in dates]
        src_vocab = Vocab(_date_charset(), level="char")
        tgt_vocab = Vocab("0123456789-", level="char")
    else:
        opts = _sequence_options(options)
        alphabet = _ALPHABET[: opts["n_symbols"]]
        lengths = list(range(opts["min_len"], opts["max_len"] + 1))
        sources = _draw_distinct(rng, alphabet, lengths, n_total, set())
        pairs = [(s, _sequence_target(name, s)) for s in sources]
        src_vocab = Vocab(alphabet, level="char")
        tgt_vocab = Vocab(alphabet, level="char")
    return TaskData(
        name,
        pairs[:n_train],
        pairs[n_train : n_train + n_val],
        pairs[n_train + n_val :],
        src_vocab,
        tgt_vocab,
        {"seed": seed, **opts},
    )


def length_controlled(
    task: str | TaskData,
    lengths: Iterable[int],
    n_per_length: int = 100,
    *,
    seed: int = 0,
    n_symbols: int | None = None,
    exclude: Iterable[str] = (),
) -> dict[int, list[tuple[str, str]]]:
    """Fresh examples of ``copy``/``reverse``/``sort`` at each input length in ``lengths``.

    ``task`` is a task name or a :class:`TaskData` from :func:`make_task`; given the latter,
    its ``n_symbols`` is used and none of its sources (train, val or test) is drawn again.
    ``exclude`` lists further sources to leave out. Returns ``{length: [(source, target),
    ...]}`` with ``n_per_length`` distinct pairs per length. Each length has its own random
    stream, so adding a length does not change the others.
    """
    if isinstance(task, TaskData):
        name = task.name
        if n_symbols is None:
            n_symbols = task.options.get("n_symbols")
        exclude = set(exclude) | {
            s for split in (task.train, task.val, task.test) for s, _ in split
        }
    else:
        name, exclude = task, set(exclude)
    if name not in _SEQUENCE_TASKS:
        raise ValueError(
            f"length_controlled works for the sequence tasks {_SEQUENCE_TASKS}, got {name!r}"
        )
    n_symbols = _SEQUENCE_OPTIONS["n_symbols"] if n_symbols is None else n_symbols
    check_positive_int("n_symbols", n_symbols)
    if n_symbols > len(_ALPHABET):
        raise ValueError(f"n_symbols must be <= {len(_ALPHABET)}, got {n_symbols}")
    check_positive_int("n_per_length", n_per_length)
    check_positive_int("seed", seed, minimum=0)
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Iterable):
        raise TypeError(f"lengths must be an iterable of ints, got {type(lengths).__name__}")
    lengths = list(lengths)
    if not lengths:
        raise ValueError("lengths must name at least one length")
    out = {}
    for length in lengths:
        check_positive_int("lengths[...]", length)
        rng = random.Random(seed * 1_000_003 + length)
        sources = _draw_distinct(rng, _ALPHABET[:n_symbols], [length], n_per_length, exclude)
        out[length] = [(s, _sequence_target(name, s)) for s in sources]
    return out


# --------------------------------------------------------------------------------------------
# your own corpus
# --------------------------------------------------------------------------------------------


def normalise_text(text: str, level: str = "word", lower: bool = False) -> str:
    """Prepare one side of a sentence pair as :func:`load_tsv` does (and so a typed input
    for a model trained on such a corpus): ``level="word"`` tokenises with
    :func:`tokenize_words` and joins the tokens with single spaces; ``level="char"`` collapses
    runs of whitespace. ``lower`` lower-cases."""
    _check_text("text", text)
    _check_choice("level", level, LEVELS)
    if level == "word":
        return " ".join(tokenize_words(text, lower))
    text = " ".join(text.split())  # collapse runs of whitespace
    return text.lower() if lower else text


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex): a checkpoint stores it to notice a changed corpus."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _decode_error(path: Path, encoding: str) -> ValueError | None:
    """Where ``path`` stops being valid ``encoding``: file, line and column (1-based) and the
    bytes; None if it decodes. (A decoding error's own offset counts from the start of the
    chunk being read, not of the file, and says nothing of lines.)"""
    raw = path.read_bytes()
    try:
        raw.decode(encoding)
    except UnicodeDecodeError as e:
        before = raw[: e.start].decode(encoding, errors="replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        return ValueError(
            f"{path}, line {line}, column {column}: not valid {encoding} (bytes "
            f"{raw[e.start : e.end]!r:.40}); give the file's encoding (on the "
            "command line: --encoding, e.g. latin-1 or cp1252)"
        )
    return None


def _numbered_lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text file, a UTF-8 byte-order mark skipped; bytes that are
    not valid ``encoding`` are a ``ValueError`` naming the file, line and column."""
    with path.open(encoding=encoding, newline="") as f:
        try:
            for number, line in enumerate(f, start=1):
                yield number, (line[1:] if number == 1 and line.startswith("\ufeff") else line)
        except UnicodeDecodeError:
            error = _decode_error(path, encoding)
            if error is None:
                raise
            raise error from None


def load_tsv(
    path: str | Path,
    *,
    level: str = "word",
    lower: bool = False,
    min_len: int = 1,
    max_len: int = 50,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    min_freq: int = 1,
    max_pairs: int | None = None,
    encoding: str = "utf-8",
) -> TaskData:
    """Load a parallel corpus: one ``source<TAB>target`` pair a line.

    Columns after the second are ignored (e.g. the attribution column of the Tatoeba files);
    blank lines are skipped; a line with fewer than two fields or an empty side is a
    ``ValueError`` naming the file and the line number. Each side is tokenised
    (``level="word"``: :func:`tokenize_words`, stored space-separated; ``level="char"``:
    whitespace collapsed), optionally lower-cased, and pairs whose sides have fewer than
    ``min_len`` or more than ``max_len`` tokens are dropped. The file is read as ``encoding``
    (a UTF-8 byte-order mark is skipped); bytes not valid in it are a ``ValueError`` naming
    the file, the line and the column. The first ``max_pairs`` kept pairs
    are split at random (``seed``) by *source sentence*, so that a sentence with several
    translations lands in one split only. Vocabularies come from the training split alone
    (symbols seen ``min_freq`` times), with ``unknown="unk"`` for what the other splits hold.
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or a pathlib.Path, got {type(path).__name__}")
    path = Path(path)
    _check_choice("level", level, LEVELS)
    check_positive_int("min_len", min_len)
    check_positive_int("max_len", max_len)
    if min_len > max_len:
        raise ValueError(f"min_len must be <= max_len, got {min_len} and {max_len}")
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a float in [0, 1), got {type(value).__name__}")
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}")
    if val_fraction + test_fraction >= 1.0:
        raise ValueError(
            f"val_fraction + test_fraction must be < 1 to leave training data, got "
            f"{val_fraction} + {test_fraction}"
        )
    check_positive_int("seed", seed, minimum=0)
    if max_pairs is not None:
        check_positive_int("max_pairs", max_pairs)
    if not isinstance(encoding, str):
        raise TypeError(f"encoding must be a str such as 'utf-8', got {type(encoding).__name__}")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(
            f"encoding must be a text encoding Python knows (utf-8, latin-1, "
            f"cp1252, ...), got {encoding!r}"
        ) from None
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a file of sentence pairs")

    pairs: list[tuple[str, str]] = []
    n_lines = n_too_short = n_too_long = 0
    for number, line in _numbered_lines(path, encoding):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        n_lines += 1
        fields = line.split("\t")
        if len(fields) < 2:
            raise ValueError(
                f"{path}, line {number}: expected at least 2 tab-separated "
                f"fields (source<TAB>target), got {len(fields)}: {line!r:.80}"
            )
        src = normalise_text(fields[0], level, lower)
        tgt = normalise_text(fields[1], level, lower)
        if not src or not tgt:
            side = "source" if not src else "target"
            raise ValueError(f"{path}, line {number}: the {side} is empty: {line!r:.80}")
        n_src = len(src.split()) if level == "word" else len(src)
        n_tgt = len(tgt.split()) if level == "word" else len(tgt)
        if min(n_src, n_tgt) < min_len:
            n_too_short += 1
        elif max(n_src, n_tgt) > max_len:
            n_too_long += 1
        else:
            pairs.append((src, tgt))
            if max_pairs is not None and len(pairs) == max_pairs:
                break
    if not pairs:
        raise ValueError(
            f"{path}: no sentence pair left ({n_lines} lines read, {n_too_short} "
            f"shorter than min_len={min_len}, {n_too_long} longer than "
            f"max_len={max_len})"
        )

    by_source: dict[str, list[tuple[str, str]]] = {}
    for pair in pairs:
        by_source.setdefault(pair[0], []).append(pair)
    sources = list(by_source)
    random.Random(seed).shuffle(sources)
    n_val = round(len(sources) * val_fraction)
    n_test = round(len(sources) * test_fraction)
    if len(sources) - n_val - n_test < 1:
        raise ValueError(
            f"{path}: {len(sources)} distinct sources are too few to split with "
            f"val_fraction={val_fraction} and test_fraction={test_fraction}"
        )

    def gather(chunk):
        return [pair for s in chunk for pair in by_source[s]]

    val = gather(sources[:n_val])
    test = gather(sources[n_val : n_val + n_test])
    train = gather(sources[n_val + n_test :])
    src_vocab = Vocab.build((s for s, _ in train), level, min_freq, unknown="unk")
    tgt_vocab = Vocab.build((t for _, t in train), level, min_freq, unknown="unk")
    return TaskData(
        path.stem,
        train,
        val,
        test,
        src_vocab,
        tgt_vocab,
        {
            "path": str(path),
            "level": level,
            "lower": lower,
            "n_lines": n_lines,
            "n_too_short": n_too_short,
            "n_too_long": n_too_long,
            "seed": seed,
        },
    )


# --------------------------------------------------------------------------------------------
# batching
# --------------------------------------------------------------------------------------------


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
        self.shuffle, self.drop_last, self.epoch = bool(shuffle), bool(drop_last), 0

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
