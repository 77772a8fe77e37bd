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

import argparse
import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_CN"
PO = ROOT / "locale" / LANGUAGE / "LC_MESSAGES" / "diagrams.po"
MO = ROOT / "src" / "attnbook" / "diagrams" / "locale" / f"{LANGUAGE}.mo"
HEADER = (
    "The labels of the concept figures (attnbook.diagrams), one message per label as the English\n"
    "figure draws it. tests/diagram_catalog.py extracts them and compiles this catalog into\n"
    "src/attnbook/diagrams/locale/zh_CN.mo. Math and names are translated as the same text."
)
METADATA = {
    "Project-Id-Version": "attnbook",
    "Language": LANGUAGE,
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=utf-8",
    "Content-Transfer-Encoding": "8bit",
    "Plural-Forms": "nplurals=1; plural=0;",
}


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
    kept = {e.msgid: e for e in old or [] if not e.obsolete}
    po = polib.POFile(wrapwidth=0)
    po.header = HEADER
    po.metadata = dict(METADATA)
    for msgid, figures in messages().items():
        entry = polib.POEntry(msgid=msgid, msgstr="")
        if msgid in kept:
            entry.msgstr = kept[msgid].msgstr
            entry.flags = list(kept[msgid].flags)
        entry.occurrences = [(f"diagram:{name}", "") for name in figures]
        po.append(entry)
    return po


def compiled(po: polib.POFile) -> bytes:
    """The catalog as a .mo file: its translated, not fuzzy messages (sorted: the same bytes
    every time)."""
    out = polib.POFile()
    out.metadata = dict(METADATA)
    for e in po:
        if e.msgstr and "fuzzy" not in e.flags and not e.obsolete:
            out.append(polib.POEntry(msgid=e.msgid, msgstr=e.msgstr))
    tmp = MO.with_suffix(".tmp")
    out.save_as_mofile(str(tmp))
    data = tmp.read_bytes()
    tmp.unlink()
    return data


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a file is not up to date")
    args = parser.parse_args(argv)
    old = polib.pofile(str(PO), wrapwidth=0) if PO.is_file() else None
    po = updated(old)
    text = str(po) + "\n" if not str(po).endswith("\n") else str(po)
    MO.parent.mkdir(parents=True, exist_ok=True)
    mo = compiled(po)
    if args.check:
        stale = [
            p.relative_to(ROOT).as_posix()
            for p, want in ((PO, text.encode()), (MO, mo))
            if not p.is_file() or p.read_bytes() != want
        ]
        if stale:
            print(f"not up to date: {', '.join(stale)}: run python tests/diagram_catalog.py")
            return 1
        return 0
    PO.write_text(text, encoding="utf-8")
    MO.write_bytes(mo)
    todo = sum(1 for e in po if not e.msgstr or "fuzzy" in e.flags)
    print(f"{PO.relative_to(ROOT)}: {len(po)} labels, {todo} to translate; wrote {MO.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
