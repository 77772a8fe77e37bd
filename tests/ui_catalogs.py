"""What the scripts that keep the book's own interface catalogs share (tests/diagram_catalog.py:
the concept figures' labels; tests/live_catalog.py: chapter 13's live block): the catalog with
today's messages and the translations kept, and writing it, and what is compiled from it, or
checking that both are up to date."""

from __future__ import annotations

from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]


def metadata(language: str) -> dict[str, str]:
    return {
        "Project-Id-Version": "attnbook",
        "Language": language,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=utf-8",
        "Content-Transfer-Encoding": "8bit",
        "Plural-Forms": "nplurals=1; plural=0;",
    }


def updated(
    old: polib.POFile | None, messages: dict[str, list[str]], header: str, language: str
) -> polib.POFile:
    """The catalog of ``messages`` (message -> where it is used, in order), the translations
    and flags of ``old`` kept: a new message is untranslated, one no longer used is dropped."""
    kept = {e.msgid: e for e in old or [] if not e.obsolete}
    po = polib.POFile(wrapwidth=0)
    po.header = header
    po.metadata = metadata(language)
    for msgid, places in messages.items():
        entry = polib.POEntry(msgid=msgid, msgstr="")
        if msgid in kept:
            entry.msgstr = kept[msgid].msgstr
            entry.flags = list(kept[msgid].flags)
        entry.occurrences = [(place, "") for place in places]
        po.append(entry)
    return po


def translated(po: polib.POFile) -> list[polib.POEntry]:
    """The messages a compiled catalog holds: translated, not fuzzy, not obsolete."""
    return [e for e in po if e.msgstr and "fuzzy" not in e.flags and not e.obsolete]


def write_or_check(files: list[tuple[Path, bytes]], check: bool, command: str) -> int:
    """Write each (path, content); with ``check``, write nothing and return 1, saying so, when
    a file is not ``content`` (0 when all are)."""
    if check:
        stale = [
            p.relative_to(ROOT).as_posix()
            for p, want in files
            if not p.is_file() or p.read_bytes() != want
        ]
        if stale:
            print(f"not up to date: {', '.join(stale)}: run {command}")
            return 1
        return 0
    for path, content in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return 0


def po_text(po: polib.POFile) -> bytes:
    text = str(po)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def main(argv, doc: str, command: str, po_path: Path, updated_po, compiled_files, report) -> int:
    """A catalog script's command line (``command`` runs it): ``updated_po(old)`` is today's
    catalog, ``compiled_files(po)`` what is compiled from it ([(path, bytes)]), ``report(po)``
    the line said after writing; ``--check`` writes nothing and fails when a file is stale."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a file is not up to date")
    args = parser.parse_args(argv)
    old = polib.pofile(str(po_path), wrapwidth=0) if po_path.is_file() else None
    po = updated_po(old)
    done = write_or_check([(po_path, po_text(po)), *compiled_files(po)], args.check, command)
    if not args.check:
        print(report(po))
    return done
