"""Your own corpus: a file of ``source<TAB>target`` sentence pairs, read and checked.

- :func:`load_tsv`: the pairs tokenised, filtered by length, split by source sentence, with
  vocabularies from the training split; bytes that are not valid in the file's encoding are a
  ``ValueError`` naming the file, line and column;
- :func:`file_sha256`: the file's content identified (a checkpoint stores it).
"""

from __future__ import annotations

import codecs
import hashlib
import io
import random
from collections.abc import Iterator
from pathlib import Path

from .._checks import check_bool, check_positive_int
from .._files import check_path, open_input_file
from .tasks import TaskData
from .vocab import LEVELS, Vocab, _check_choice, normalise_text

__all__ = ["load_tsv", "file_sha256", "MAX_TSV_BYTES", "MAX_LINE_CHARS"]

#: the largest file :func:`load_tsv` reads whole (its pairs are held in memory); a larger one
#: is refused unless ``max_pairs`` says to read only its first pairs
MAX_TSV_BYTES = 1 << 30
#: the longest line :func:`load_tsv` reads (a sentence pair is far shorter; a longer "line" is
#: a file with no line breaks, or not text)
MAX_LINE_CHARS = 100_000
_TSV_WANTS = "a regular file of source<TAB>target lines"


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex): a checkpoint stores it to notice a changed corpus."""
    digest = hashlib.sha256()
    with open_input_file("path", path, "a regular file", allow_empty=True) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _decode_error(path: Path, encoding: str) -> ValueError | None:
    """Where ``path`` stops being valid ``encoding``: file, line and column (1-based) and the
    bytes; None if it decodes. (A decoding error's own offset counts from the start of the
    chunk being read, not of the file, and says nothing of lines.) Read a block at a time."""
    decoder = codecs.getincrementaldecoder(encoding)()
    lines, column = 0, 0  # line breaks before the error, characters since the last one
    with open_input_file("path", path, _TSV_WANTS) as f:
        while True:
            block = f.read(1 << 20)
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as e:
                text = e.object[: e.start].decode(encoding, errors="replace")
                bad = e.object[e.start : e.end]
            else:
                bad = None
            n = text.count("\n")
            lines += n
            column = len(text) - (text.rfind("\n") + 1) + (0 if n else column)
            if bad is not None:
                return ValueError(
                    f"{path}, line {lines + 1}, column {column + 1}: not valid {encoding} "
                    f"(bytes {bad!r:.40}); give the file's encoding (on the command line: "
                    "--encoding, e.g. latin-1 or cp1252)"
                )
            if not block:
                return None


def _numbered_lines(path: Path, encoding: str, max_bytes: int | None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a text file, a UTF-8 byte-order mark skipped; bytes that are
    not valid ``encoding`` are a ``ValueError`` naming the file, line and column, and so are a
    NUL character (a binary file, or UTF-16 read as another encoding) and a line longer than
    ``attnbook.data.corpus.MAX_LINE_CHARS``."""
    raw = open_input_file(
        "path",
        path,
        _TSV_WANTS,
        max_bytes=max_bytes,
        too_big=" whole: give max_pairs (--max-pairs) to read its first pairs, or split it",
    )
    with io.TextIOWrapper(raw, encoding=encoding, newline="") as f:
        try:
            number = 0
            while line := f.readline(MAX_LINE_CHARS + 2):  # + its line break
                number += 1
                if "\0" in line:
                    raise ValueError(
                        f"{path}, line {number}: holds a NUL character (\\0): not a text file, "
                        f"or not {encoding} (a UTF-16 file? on the command line: --encoding)"
                    )
                if len(line.rstrip("\r\n")) > MAX_LINE_CHARS:
                    raise ValueError(
                        f"{path}, line {number}: longer than {MAX_LINE_CHARS} characters; it "
                        "wants one source<TAB>target pair a line (is it a text file?)"
                    )
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
    (``level="word"``: :func:`~attnbook.data.vocab.tokenize_words`, stored space-separated;
    ``level="char"``: whitespace collapsed), optionally lower-cased, and pairs whose sides have
    fewer than ``min_len`` or more than ``max_len`` tokens are dropped. The file is read as
    ``encoding``
    (a UTF-8 byte-order mark is skipped); bytes not valid in it are a ``ValueError`` naming
    the file, the line and the column. The first ``max_pairs`` kept pairs
    are split at random (``seed``) by *source sentence*, so that a sentence with several
    translations lands in one split only. Vocabularies come from the training split alone
    (symbols seen ``min_freq`` times), with ``unknown="unk"`` for what the other splits hold.

    ``path`` must be a regular, readable, non-empty file (a folder, a FIFO, a device such as
    ``/dev/zero``, a link to nothing is a one-line error, and a FIFO is never waited on) of at
    most ``attnbook.data.corpus.MAX_TSV_BYTES`` bytes unless ``max_pairs`` is given; a line
    longer than ``attnbook.data.corpus.MAX_LINE_CHARS`` characters or holding a NUL character
    is a ``ValueError`` naming the file and the line.
    """
    path = check_path("path", path)
    _check_choice("level", level, LEVELS)
    check_bool("lower", lower)
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

    pairs: list[tuple[str, str]] = []
    n_lines = n_too_short = n_too_long = 0
    limit = MAX_TSV_BYTES if max_pairs is None else None  # max_pairs: read its first pairs
    for number, line in _numbered_lines(path, encoding, limit):
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
