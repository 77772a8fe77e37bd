"""Sphinx extension: the book's Chinese is drawn with a font the book serves itself.

Key terms carry their Chinese name, the glossary and notation pages list them, and chapter 16
prints Chinese dates. A reader's machine without a CJK font (a minimal Linux, a headless
browser) would show each of those characters as an empty box. The package already ships a
subset of Noto Sans SC for its figures (``src/attnbook/fonts``, SIL Open Font License); after
the build this extension cuts from it the characters the built pages hold and writes them,
as a WOFF file of about 120 KB, to ``_static/fonts/`` with the license beside it.
``_static/attnbook.css`` declares it with ``@font-face`` and the ``unicode-range`` below, and
adds it to the end of the theme's font stacks, so a browser downloads it only for a page that
shows such a character (and uses the reader's own font for every other character).
``tests/check_built_book.py`` checks that it holds every such character of every page.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

FONT_DIR = Path(__file__).resolve().parents[2] / "src" / "attnbook" / "fonts"
SOURCE_FONT = FONT_DIR / "NotoSansSC-attnbook.otf"
SERVED_FONT = Path("_static") / "fonts" / "attnbook-cjk.woff"  # in the built book
# The characters the served font is for; _static/attnbook.css gives the same unicode-range
# (tests/test_book_fonts.py checks that the two agree).
CJK_RANGES = (
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation: 、。「」
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3400, 0x4DBF),  # CJK unified ideographs, extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFE30, 0xFE4F),  # CJK compatibility forms
    (0xFF00, 0xFFEF),  # full-width forms: ，（）：
)
_ESCAPED = re.compile(r"\\u([0-9a-fA-F]{4})")  # characters inside JSON (widget state)


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in CJK_RANGES)


def cjk_characters(text: str) -> set[str]:
    """The characters of ``text`` that the served font is for, JSON escapes included."""
    text += "".join(chr(int(h, 16)) for h in _ESCAPED.findall(text))
    return {c for c in set(text) if is_cjk(c)}


def edition_pages(root: Path) -> list[Path]:
    """The HTML pages of the book built at ``root``, without those of another build placed in
    one of its folders (the Chinese edition in ``zh_CN/``, which serves its own font)."""
    root = Path(root)
    nested = {d for d in root.iterdir() if d.is_dir() and (d / ".buildinfo").is_file()}
    return [p for p in sorted(root.rglob("*.html")) if not nested & set(p.parents)]


def book_characters(root: Path) -> set[str]:
    """Every such character of the built pages under ``root`` (of its own edition)."""
    found: set[str] = set()
    for page in edition_pages(root):
        found |= cjk_characters(page.read_text(encoding="utf-8"))
    return found


def write_font(characters: set[str], out: Path) -> int:
    """Write the subset of the package's font that draws ``characters`` to ``out`` (WOFF);
    returns its size in bytes."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.flavor = "woff"  # zlib: no brotli needed, and every browser reads it
    options.layout_features = ["*"]
    options.notdef_outline = True
    font = TTFont(SOURCE_FONT)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(map(ord, characters)))
    subsetter.subset(font)
    out.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = "woff"
    font.save(out)
    shutil.copyfile(FONT_DIR / "OFL.txt", out.parent / "OFL.txt")
    return out.stat().st_size


def serve_font(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.outdir)
    characters = book_characters(root)
    size = write_font(characters, root / SERVED_FONT)
    logger.info(f"attnbook_fonts: {len(characters)} CJK characters, {SERVED_FONT} {size} bytes")


def setup(app):
    app.connect("build-finished", serve_font)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
