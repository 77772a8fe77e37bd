"""The Chinese notebooks: each chapter with its Markdown translated from its catalog.

The Chinese edition's pages are built by Sphinx from the English notebooks and the catalogs
(tests/book_i18n.py); its download, Colab and Binder buttons open a notebook, which must be
Chinese too. This script writes ``locale/zh_CN/book/NN_name.ipynb`` for every chapter
``book/NN_name.ipynb``: the same notebook (code cells, outputs, metadata, cell ids and
attachments identical), whose Markdown cells have each message of the chapter's catalog
(``locale/zh_CN/LC_MESSAGES/book/NN_name.po``) replaced by its translation. The files are
committed, because Colab and Binder open notebooks from the repository; the Chinese edition's
launch buttons point there (``repository.path_to_book`` in its configuration), and
``tests/test_i18n.py`` checks that they are up to date.

A message is a paragraph, heading, list item, table cell, caption or directive title of the
MyST source, with its line breaks turned into spaces (Sphinx's gettext builder). Each is
found in the Markdown cell its location names (myst-nb numbers lines as
``10000 * (cell + 1) + line``; a table cell's message has no line and is looked for in every
Markdown cell) as a whole block: only markup (``#``, ``-``, ``1.``, ``>``, ``|``, a directive's
name) may stand before it on its line, and only the end of the line or ``|`` after it. A
message that is not found where its location says is an error (the notebook would keep
English there): the script says which, and writes nothing for that chapter. An untranslated
or fuzzy message keeps its English, as on the built page.

The concept figures are the one output that changes: a code cell whose source is a
``diagram("name")`` call gets, as its SVG output, ``diagram("name", lang="zh_CN")`` (the labels
translated by ``locale/zh_CN/LC_MESSAGES/diagrams.po``), as on the built Chinese page
(``chinese_diagrams`` in book/_ext/attnbook_i18n.py).

Usage: python tests/translate_notebooks.py [--locale DIR] [--check] [NOTEBOOK ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from attnbook_i18n import chinese_diagrams  # noqa: E402

BOOK = ROOT / "book"
LOCALE = ROOT / "locale"
LANGUAGE = "zh_CN"
OUT = LOCALE / LANGUAGE / "book"

# what may stand before a message on its line: block markup only
PREFIX = re.compile(
    r"(?:[ \t>]*(?:(?:[-*+]|\d+[.)]|#{1,6}|:)[ \t]+)*"  # quote, list item, heading, definition
    r"|[ \t]*\|(?:[^|\n]*\|)*[ \t]*"  # a table row's earlier cells
    r"|[ \t]*(?:`{3,}|:{3,})\{[\w:-]+\}[ \t]*"  # a directive's name, before its title
    r"|[ \t]*\$\$)$"  # a display formula (its message starts with the line break)
)
SUFFIX = re.compile(r"[ \t]*(?:\||\n|\$\$|$)")
# a line break inside a message: the source may break the line there (and indent, or quote)
BREAK = r"(?:[ \t]*\n[ \t>]*|[ \t]+)"
FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
HOLD = "\x00{}\x00"  # a replaced or masked span, while the other messages are looked for
HELD = re.compile("\x00(\\d+)\x00")


@dataclass
class Result:
    notebook: dict
    replaced: int = 0
    translated: int = 0  # replaced by a translation (not kept English)
    missing: list[str] = field(default_factory=list)
    # messages of Markdown that a code cell displays: the page translates them, the notebook's
    # outputs stay the English edition's
    in_outputs: list[str] = field(default_factory=list)


def message_pattern(msgid: str) -> re.Pattern:
    words = msgid.split(" ")
    return re.compile(BREAK.join(re.escape(w) for w in words if w) or re.escape(msgid))


def cell_of(line: int | str | None) -> int | None:
    """The notebook cell that a location's line number names (myst-nb's numbering)."""
    if line in (None, ""):
        return None
    return int(line) // 10000 - 1


def mask_fences(text: str, held: list[str]) -> str:
    """``text`` with its fenced code blocks held out of reach (they are not messages); a
    directive's fence (```` ```{note} ````) is markup around messages, and stays."""
    out, block, code, directives = [], [], None, []
    for line in text.split("\n"):
        m = FENCE.match(line)
        if code is not None:  # inside a code block
            block.append(line)
            if (
                m
                and m.group(2)[0] == code[0]
                and len(m.group(2)) >= len(code)
                and not m.group(3).strip()
            ):
                held.append("\n".join(block))
                out.append(HOLD.format(len(held) - 1))
                code = None
            continue
        if m and m.group(3).lstrip().startswith("{"):
            directives.append(m.group(2))
        elif (
            m
            and not m.group(3).strip()
            and directives
            and m.group(2)[0] == directives[-1][0]
            and len(m.group(2)) >= len(directives[-1])
        ):
            directives.pop()
        elif m:
            code, block = m.group(2), [line]
            continue
        out.append(line)
    if code is not None:  # an unclosed fence runs to the end
        held.append("\n".join(block))
        out.append(HOLD.format(len(held) - 1))
    return "\n".join(out)


def replace_message(text: str, msgid: str, msgstr: str, held: list[str]) -> tuple[str, int]:
    """Replace every whole-block occurrence of ``msgid`` in ``text`` (held, so that a shorter
    message is not found inside it); returns the text and the number replaced."""
    count = 0
    pattern = message_pattern(msgid)

    def whole(m: re.Match) -> bool:
        line_start = text.rfind("\n", 0, m.start()) + 1
        return bool(PREFIX.fullmatch(text[line_start : m.start()])) and bool(
            SUFFIX.match(text, m.end())
        )

    out, last = [], 0
    for m in pattern.finditer(text):
        if not whole(m):
            continue
        out.append(text[last : m.start()])
        held.append(msgstr)
        out.append(HOLD.format(len(held) - 1))
        last = m.end()
        count += 1
    out.append(text[last:])
    return "".join(out), count


def release(text: str, held: list[str]) -> str:
    while HELD.search(text):
        text = HELD.sub(lambda m: held[int(m.group(1))], text)
    return text


def source_text(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def translate_notebook(notebook: dict, catalog: polib.POFile, name: str) -> Result:
    """The notebook with its Markdown cells translated from ``catalog`` (``name``: the
    notebook's file name, as the catalog's locations write it)."""
    nb = copy.deepcopy(notebook)
    cells = nb["cells"]
    held: list[str] = []
    texts = {
        i: mask_fences(source_text(c), held)
        for i, c in enumerate(cells)
        if c["cell_type"] == "markdown"
    }
    result = Result(nb)
    # the longest first: a short message (a table cell, "Solution") may also be part of a longer
    entries = sorted(
        (e for e in catalog if not e.obsolete and e.msgid),
        key=lambda e: len(e.msgid),
        reverse=True,
    )
    for entry in entries:
        use = entry.msgstr and "fuzzy" not in entry.flags
        msgstr = entry.msgstr if use else entry.msgid
        wanted = {cell_of(line) for path, line in entry.occurrences if path.endswith(name)}
        outputs = {i for i in wanted - {None} if i not in texts}  # a code cell's output
        if outputs:
            result.in_outputs.append(entry.msgid)
        lined = wanted - {None} - outputs
        found_in: set[int] = set()

        def look(cells, msgid=entry.msgid, msgstr=msgstr, use=use, found_in=found_in) -> None:
            for i in cells:
                texts[i], n = replace_message(texts[i], msgid, msgstr, held)
                if n:
                    found_in.add(i)
                    result.replaced += n
                    result.translated += n if use else 0

        look(sorted(lined))
        # a table cell's message has no line, or a line that names the wrong cell (myst-nb
        # counts a table's lines from the notebook's first cell): every other Markdown cell
        if len(found_in) < len(lined) or (not lined and not outputs):
            look(i for i in sorted(texts) if i not in lined)
        lost: list[int | None] = sorted(lined - found_in)[: max(0, len(lined) - len(found_in))]
        if not lined and not outputs and not found_in:
            lost.append(None)
        for i in lost:
            place = "any Markdown cell" if i is None else f"cell {i} (nor elsewhere)"
            result.missing.append(f"{name}: not found in {place}: {entry.msgid[:80]!r}")
    for i, text in texts.items():
        new = release(text, held)
        old = source_text(cells[i])
        if new != old:
            cells[i]["source"] = new.splitlines(keepends=True)
    chinese_diagrams(nb, LANGUAGE)
    return result


def toc_captions() -> set[str]:
    """The captions of _toc.yml's parts: messages of the root page that its source lacks."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return {part["caption"] for part in toc.get("parts", []) if part.get("caption")}


def translate_markdown(text: str, catalog: polib.POFile, name: str) -> tuple[str, Result]:
    """A Markdown page (``intro.md``) translated as one cell: its text and the result. The
    messages of a file it includes, and the table of contents' captions, are not in it."""
    own = polib.POFile()
    captions = toc_captions()
    for entry in catalog:
        if entry.obsolete or entry.msgid in captions:
            continue
        if any(path.endswith(f"/{name}") or path == name for path, _ in entry.occurrences):
            e = copy.copy(entry)
            e.occurrences = [(name, "")]
            own.append(e)
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": text}]}
    result = translate_notebook(nb, own, name)
    return source_text(result.notebook["cells"][0]), result


def write_notebook(nb: dict) -> str:
    """The notebook as the English ones are written (nbformat's JSON: indent 1, sorted keys,
    characters unescaped), so that the Chinese files differ from them only in the text."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def chapters() -> list[Path]:
    return sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


def catalog_for(notebook: Path, locale: Path = LOCALE) -> Path:
    return locale / LANGUAGE / "LC_MESSAGES" / "book" / f"{notebook.stem}.po"


def translate(notebook: Path, locale: Path = LOCALE) -> Result:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    catalog = polib.pofile(str(catalog_for(notebook, locale)))
    return translate_notebook(nb, catalog, notebook.name)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter")
    parser.add_argument("--locale", type=Path, default=LOCALE, help="the catalogs' folder")
    parser.add_argument("--out", type=Path, default=OUT, help="where the notebooks go")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; fail when a file is not up to date"
    )
    args = parser.parse_args(argv)
    status = 0
    for notebook in args.notebooks or chapters():
        notebook = notebook.resolve()
        result = translate(notebook, args.locale)
        if result.missing:
            print("\n".join(result.missing))
            status = 1
            continue
        text = write_notebook(result.notebook)
        out = args.out / notebook.name
        total = result.replaced
        if args.check:
            if not out.is_file() or out.read_text(encoding="utf-8") != text:
                print(f"{out.relative_to(ROOT)} is not up to date: run make zh-notebooks")
                status = 1
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.is_file() or out.read_text(encoding="utf-8") != text:
            out.write_text(text, encoding="utf-8")
        print(f"{out}: {result.translated} of {total} messages translated")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
