"""Vocabularies and tokenizing: the special symbols, :class:`Vocab`, words and their spacing.

- ``PAD, BOS, EOS, UNK`` (ids 0..3) and ``SPECIALS``, their symbols; ``LEVELS``, the two
  kinds of vocabulary;
- :class:`Vocab`: character- or word-level vocabulary, ``encode``/``decode`` and their batch
  forms; an unseen symbol is an error or ``<unk>``, by option;
- :func:`tokenize_words` and :func:`normalise_text`: one side of a sentence pair prepared as
  the TSV loader prepares it.

Character-level vocabularies treat every character (space included) as a symbol; word-level
ones split on whitespace, so a corpus is tokenised first and stored as space-separated tokens.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

from .._checks import check_bool, check_positive_int, check_tensor

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
            if symbol in SPECIALS:
                raise ValueError(
                    f"symbols[{i}] = {symbol!r} is a special symbol, which every Vocab holds "
                    f"first; it wants the other symbols only"
                )
            if symbol in seen:
                raise ValueError(
                    f"symbols[{i}] = {symbol!r} is a duplicate (symbols[{symbols.index(symbol)}])"
                )
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
        if isinstance(texts, (bytes, Mapping)) or not isinstance(texts, Iterable):
            raise TypeError(f"texts must be an iterable of str, got {type(texts).__name__}")
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
        check_bool("add_bos", add_bos)
        check_bool("add_eos", add_eos)
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
        check_bool("strip_special", strip_special)
        if isinstance(ids, torch.Tensor):
            check_tensor("ids", ids, ndim=1, integer=True, shape_hint="(L,)")
            ids = ids.tolist()
        elif not isinstance(ids, (list, tuple, range)):
            raise TypeError(
                f"ids must be a list of token ids or a 1-D integer tensor, got "
                f"{type(ids).__name__} {ids!r:.40}"
            )
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
        """The vocabulary :meth:`to_dict` described: ``{"symbols": [...], "level": "char" or
        "word", "unknown": "error" or "unk"}`` (``unknown`` may be left out). A missing or
        unknown key, a value of the wrong type, a duplicate or special symbol is a
        ``ValueError`` or ``TypeError`` naming the key (a checkpoint's vocabulary edited by hand,
        or a file of another program)."""
        wants = (
            "{'symbols': [str, ...], 'level': 'char' or 'word', 'unknown': 'error' or 'unk'} "
            "as Vocab.to_dict() returns"
        )
        if not isinstance(d, Mapping):
            raise TypeError(f"d must be a dict {wants}, got {type(d).__name__} {d!r:.60}")
        missing = [k for k in ("symbols", "level") if k not in d]
        if missing:
            raise ValueError(f"d has no key {', '.join(map(repr, missing))}; it wants {wants}")
        unknown_keys = [k for k in d if k not in ("symbols", "level", "unknown")]
        if unknown_keys:
            raise ValueError(
                f"d has the key(s) {', '.join(map(repr, unknown_keys))}, which Vocab.to_dict() "
                f"does not write; it wants {wants}"
            )
        symbols = d["symbols"]
        if not isinstance(symbols, (list, tuple)):
            raise TypeError(
                f"d['symbols'] must be a list of str, got {type(symbols).__name__} {symbols!r:.60}"
            )
        if list(symbols[: len(SPECIALS)]) == list(SPECIALS):
            raise ValueError(
                f"d['symbols'] starts with the special symbols {SPECIALS}; it wants the symbols "
                "after them, as Vocab.to_dict() writes them (itos[4:])"
            )
        for key, choices in (("level", LEVELS), ("unknown", _UNKNOWN)):
            if key in d and (not isinstance(d[key], str) or d[key] not in choices):
                raise ValueError(f"d[{key!r}] must be one of {choices}, got {d[key]!r:.60}")
        try:
            return cls(symbols, level=d["level"], unknown=d.get("unknown", "error"))
        except (TypeError, ValueError) as err:  # a symbol of the wrong kind: named, as d's
            raise type(err)(f"d['symbols']: {err}") from None


_WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")


def tokenize_words(text: str, lower: bool = False) -> list[str]:
    """Words and punctuation marks as separate tokens: ``"Hi, you!" -> ["Hi", ",", "you", "!"]``.

    Apostrophes inside a word stay (``"don't"``); ``lower`` lower-cases first.
    """
    _check_text("text", text)
    check_bool("lower", lower)
    return _WORD.findall(text.lower() if lower else text)


def normalise_text(text: str, level: str = "word", lower: bool = False) -> str:
    """Prepare one side of a sentence pair as :func:`~attnbook.data.corpus.load_tsv` does (and
    so a typed input for a model trained on such a corpus): ``level="word"`` tokenises with
    :func:`tokenize_words` and joins the tokens with single spaces; ``level="char"`` collapses
    runs of whitespace. ``lower`` lower-cases."""
    _check_text("text", text)
    _check_choice("level", level, LEVELS)
    check_bool("lower", lower)
    if level == "word":
        return " ".join(tokenize_words(text, lower))
    text = " ".join(text.split())  # collapse runs of whitespace
    return text.lower() if lower else text
