"""The synthetic tasks: ``copy``, ``reverse``, ``sort`` and ``dates``, split and checked.

- ``TASKS`` (name -> description) and :func:`make_task`: each task generated deterministically
  from a seed into train/validation/test splits that share no source (:class:`TaskData`);
- :func:`length_controlled`: fresh examples of a sequence task at chosen input lengths, to
  measure accuracy against length, beyond the training lengths too.

The dates task's spellings are in :mod:`attnbook.data.dates`.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .._checks import check_positive_int
from .dates import _date_charset, _date_options, _human_date
from .vocab import Vocab, _check_choice

__all__ = ["TASKS", "TaskData", "make_task", "length_controlled"]

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


@dataclass
class TaskData:
    """The splits of a task and its vocabularies.

    ``train``, ``val`` and ``test`` are lists of ``(source, target)`` string pairs; no source
    is in two splits. ``options`` records how the data was made (task options, or the file
    and its filtering counts for :func:`~attnbook.data.corpus.load_tsv`).
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


def make_task(
    name: str, n_train: int = 1000, n_val: int = 200, n_test: int = 200, *, seed: int = 0, **options
) -> TaskData:
    """Generate a synthetic task, deterministically from ``seed``.

    ``copy``, ``reverse``, ``sort``: sources are strings over the first ``n_symbols`` letters
    (default 10: ``a`` to ``j``) of lengths ``min_len`` to ``max_len`` (default 3 to 10), lengths
    drawn uniformly; character-level vocabularies of those letters.

    ``dates``: a date between ``start_year`` and ``end_year`` (default 1900..2099) written in
    one of many human ways (``"9 May 2018"``, ``"may 9th, 2018"``, ``"9.5.2018"``,
    ``"WEDNESDAY, 09/05/2018"``; numeric dates put the day before the month, except the ISO
    form; the weekday, when written, is the true one) -> ``"2018-05-09"``. Each *date* belongs
    to one split, so a test date was never seen in training in any spelling.

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
