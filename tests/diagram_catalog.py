"""The catalog of the concept figures' labels: extract, update, compile.

Every label a figure draws goes through ``attnbook.diagrams.canvas._`` (the label as the English
figure draws it is the message). This script draws every figure of the registry in English,
collects each label with a letter in it (numbers and symbols alone are not messages), and
updates ``locale/zh_CN/LC_MESSAGES/diagrams.po``: a new label is added untranslated, a label no
figure draws any more is removed, the translations of the others are kept. It then compiles the
catalog into the package, ``src/attnbook/diagrams/locale/zh_CN.mo``, which ``diagram(name,
lang="zh_CN")`` reads (the package works without the repository: Colab, Binder).

A label that is only math or a name (``h_1``, ``Attention(Q, K, V)``, ``LayerNorm``) is
translated as the same text. Terms are the glossary's (book/glossary.md). After translating,
run the script again (it compiles), then ``python tests/translate_notebooks.py`` (the Chinese
notebooks show the Chinese figures) and ``python tests/make_cjk_font.py`` if a character is new.

Usage: python tests/diagram_catalog.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

import polib
import ui_catalogs

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_CN"
PO = ROOT / "locale" / LANGUAGE / "LC_MESSAGES" / "diagrams.po"
MO = ROOT / "src" / "attnbook" / "diagrams" / "locale" / f"{LANGUAGE}.mo"
HEADER = (
    "The labels of the concept figures (attnbook.diagrams), one message per label as the English\n"
    "figure draws it. tests/diagram_catalog.py extracts them and compiles this catalog into\n"
    "src/attnbook/diagrams/locale/zh_CN.mo. Math and names are translated as the same text."
)


def messages() -> dict[str, list[str]]:
    """Every label of every figure -> the figures that draw it, in the book's order."""
    sys.path.insert(0, str(ROOT / "src"))
    from attnbook.diagrams import DIAGRAMS, canvas

    found: dict[str, list[str]] = {}
    for name in DIAGRAMS:
        for msgid in canvas._messages(name):
            found.setdefault(msgid, []).append(name)
    return found


def updated(old: polib.POFile | None) -> polib.POFile:
    """The catalog with today's labels, the translations of ``old`` kept."""
    places = {m: [f"diagram:{name}" for name in figures] for m, figures in messages().items()}
    return ui_catalogs.updated(old, places, HEADER, LANGUAGE)


def compiled(po: polib.POFile) -> bytes:
    """The catalog as a .mo file: its translated, not fuzzy messages (sorted: the same bytes
    every time)."""
    out = polib.POFile()
    out.metadata = ui_catalogs.metadata(LANGUAGE)
    for e in ui_catalogs.translated(po):
        out.append(polib.POEntry(msgid=e.msgid, msgstr=e.msgstr))
    tmp = MO.with_suffix(".tmp")
    out.save_as_mofile(str(tmp))
    data = tmp.read_bytes()
    tmp.unlink()
    return data


def report(po: polib.POFile) -> str:
    todo = sum(1 for e in po if not e.msgstr or "fuzzy" in e.flags)
    return f"{PO.relative_to(ROOT)}: {len(po)} labels, {todo} to translate; wrote {MO.name}"


def main(argv: list[str]) -> int:
    return ui_catalogs.main(
        argv, __doc__, "python tests/diagram_catalog.py", PO, updated,
        lambda po: [(MO, compiled(po))], report,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
