"""The languages of the concept figures: every label a figure draws goes through :func:`_`,
which looks it up in the current language's catalog; :func:`language` sets that language, and
:func:`_font_face` embeds the CJK glyphs a Chinese figure draws. English is the source: with it,
nothing here changes a byte of a figure."""

from __future__ import annotations

import base64
import contextlib
import gettext
import io
import re
from contextvars import ContextVar
from pathlib import Path

__all__ = ["LANGUAGES", "language"]

# -------------------------------------------

LANGUAGES = ("en", "zh_CN")
"""The languages the figures are drawn in: English (the source) and Simplified Chinese."""

_CATALOGS = Path(__file__).resolve().parent / "locale"  # <lang>.mo, compiled from the book's
# locale/<lang>/LC_MESSAGES/diagrams.po by tests/diagram_catalog.py
_LANGUAGE: ContextVar[str] = ContextVar("attnbook_diagrams_language", default="en")
_SEEN: ContextVar[list | None] = ContextVar("attnbook_diagrams_seen", default=None)
_TABLES: dict[str, dict[str, str]] = {}

# The font that draws the Chinese labels: the package's subset of Noto Sans SC, embedded in a
# Chinese figure (only the glyphs it uses), so that it shows the same wherever it is shown as an
# image, with or without a CJK font on the reader's machine.
_CJK_FONT = Path(__file__).resolve().parents[1] / "fonts" / "NotoSansSC-attnbook.otf"
_CJK_FAMILY = "attnbook CJK"
_CJK = re.compile(
    r"[\u2e80-\u2fdf\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]"
)


def _table(lang: str) -> dict[str, str]:
    if lang not in _TABLES:
        with open(_CATALOGS / f"{lang}.mo", "rb") as f:
            catalog = gettext.GNUTranslations(f)
        _TABLES[lang] = {k: v for k, v in catalog._catalog.items() if isinstance(k, str) and k}
    return _TABLES[lang]


def _translatable(text: str) -> bool:
    """A label is a message when it has a letter (numbers and symbols alone are not)."""
    return any(ch.isalpha() for ch in text)


def _(text: str) -> str:
    """``text`` (a label, as the English figure draws it) in the current language: the one
    function every drawn word goes through. English is the source and comes back unchanged;
    another language looks the label up in its catalog (a label with no translation stays
    English). While the messages are being collected (:func:`_messages`), records it."""
    seen = _SEEN.get()
    if seen is not None and _translatable(text):
        seen.append(text)
    lang = _LANGUAGE.get()
    if lang == "en" or not _translatable(text):
        return text
    return _table(lang).get(text, text)


def _check_language(lang: str) -> str:
    if lang not in LANGUAGES:
        raise ValueError(f"diagram: unknown language {lang!r}; the languages are {LANGUAGES}")
    return lang


@contextlib.contextmanager
def language(lang: str):
    """Within ``with language("zh_CN"):`` the figures are drawn in that language."""
    token = _LANGUAGE.set(_check_language(lang))
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


def _font_face(text: str) -> str:
    """A CSS ``@font-face`` with the glyphs of the CJK characters of ``text``, from the package's
    font, as a data URL (WOFF); empty when ``text`` has none."""
    chars = sorted(set(_CJK.findall(text)))
    if not chars:
        return ""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = []
    options.name_IDs = [0, 1, 2, 13, 14]  # the copyright and the license (SIL OFL) stay
    options.notdef_outline = True
    font = TTFont(_CJK_FONT, recalcTimestamp=False)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in chars])
    subsetter.subset(font)
    font.flavor = "woff"
    buf = io.BytesIO()
    font.save(buf)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (
        f"<style>@font-face{{font-family:'{_CJK_FAMILY}';"
        f"src:url(data:font/woff;base64,{data}) format('woff');"
        f"unicode-range:{','.join(f'U+{ord(c):X}' for c in chars)}}}</style>"
    )
