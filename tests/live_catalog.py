"""The catalog of the live block's words: extract, update, compile.

Every word chapter 13's live block shows is written in ``src/attnbook/assets/live.js`` as a
string literal inside ``_("...")`` (shown translated) or ``N_("...")`` (a message translated
where it is shown); ``{name}`` in a message marks a value the script puts in. This script finds
those messages (in the order of the file), updates ``locale/zh_CN/LC_MESSAGES/live.po`` (a new
message is added untranslated, a message the script no longer has is removed, the translations
of the others are kept) and compiles the catalog into the package,
``src/attnbook/assets/locale/zh_CN.json``, which ``attnbook.live`` puts in the block's
configuration: the block shows it on a page whose ``<html lang>`` is Chinese (the Chinese
edition), English everywhere else. A translation keeps every ``{name}`` of its message.

Usage: python tests/live_catalog.py [--check]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import polib
import ui_catalogs

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_CN"
SCRIPT = ROOT / "src" / "attnbook" / "assets" / "live.js"
PO = ROOT / "locale" / LANGUAGE / "LC_MESSAGES" / "live.po"
COMPILED = ROOT / "src" / "attnbook" / "assets" / "locale" / f"{LANGUAGE}.json"
HEADER = (
    "The words of chapter 13's live block (src/attnbook/assets/live.js), one message per\n"
    "_(...) or N_(...) string there. tests/live_catalog.py extracts them and compiles this\n"
    "catalog into src/attnbook/assets/locale/zh_CN.json. {name} is a value: keep each one."
)
# _("...") or N_("...") with a double- or single-quoted literal (a message is one literal)
CALL = re.compile(r"""\bN?_\(\s*(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)')\s*[,)]""")
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _unquote(double: str | None, single: str | None) -> str:
    if double is not None:
        return json.loads(f'"{double}"')
    return json.loads('"' + single.replace("\\'", "'").replace('"', '\\"') + '"')


def messages(script: str | None = None) -> list[str]:
    """The messages of live.js, in the order they first appear."""
    text = SCRIPT.read_text(encoding="utf-8") if script is None else script
    found = [_unquote(*m.groups()) for m in CALL.finditer(text)]
    return list(dict.fromkeys(found))


def placeholders(text: str) -> list[str]:
    return sorted(PLACEHOLDER.findall(text))


def updated(old: polib.POFile | None) -> polib.POFile:
    places = {m: ["src/attnbook/assets/live.js"] for m in messages()}
    return ui_catalogs.updated(old, places, HEADER, LANGUAGE)


def compiled(po: polib.POFile) -> str:
    """The translated, not fuzzy messages as JSON (sorted: the same text every time)."""
    table = {e.msgid: e.msgstr for e in ui_catalogs.translated(po)}
    return json.dumps(table, ensure_ascii=False, indent=0, sort_keys=True) + "\n"


def problems(po: polib.POFile) -> list[str]:
    """Messages untranslated or fuzzy, and translations that lost or added a {name}."""
    out = []
    for e in po:
        if not e.msgstr or "fuzzy" in e.flags:
            out.append(f"not translated: {e.msgid!r}")
        elif placeholders(e.msgstr) != placeholders(e.msgid):
            out.append(f"{e.msgid!r}: the translation has {placeholders(e.msgstr)}")
    return out


def report(po: polib.POFile) -> str:
    return f"{PO.relative_to(ROOT)}: {len(po)} messages, {len(problems(po))} to translate or fix"


def main(argv: list[str]) -> int:
    return ui_catalogs.main(
        argv, __doc__, "python tests/live_catalog.py", PO, updated,
        lambda po: [(COMPILED, compiled(po).encode("utf-8"))], report,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
