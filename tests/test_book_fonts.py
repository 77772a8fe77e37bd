"""The book's CJK web font (book/_ext/attnbook_fonts.py and _static/attnbook.css)."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
fonts = pytest.importorskip("attnbook_fonts")


def css_ranges() -> list[tuple[int, int]]:
    css = (ROOT / "_static" / "attnbook.css").read_text()
    face = re.search(r'@font-face\s*{[^}]*"attnbook CJK"[^}]*}', css)
    assert face, "_static/attnbook.css declares no @font-face for the attnbook CJK font"
    declared = re.search(r"unicode-range:([^;]*);", face.group(0)).group(1)
    return [
        (int(a, 16), int(b, 16)) for a, b in re.findall(r"U\+([0-9A-F]+)-([0-9A-F]+)", declared)
    ]


def test_the_css_unicode_range_is_the_extensions():
    assert css_ranges() == list(fonts.CJK_RANGES)
    css = (ROOT / "_static" / "attnbook.css").read_text()
    assert f'url("{fonts.SERVED_FONT.relative_to("_static").as_posix()}")' in css
    for stack in ("base", "heading", "monospace"):  # the font joins each of the theme's stacks
        assert re.search(rf"--pst-font-family-{stack}: \"attnbook CJK\", var\(", css), stack


def test_cjk_characters_finds_text_and_json_escapes_and_nothing_else():
    text = 'Attention (注意力)，“self” <b>自注意力</b> {"label": "\\u7f16\\u7801\\u5668"} é ␣ ü'
    assert fonts.cjk_characters(text) == set("注意力，自编码器")


def test_the_served_font_draws_every_character_it_was_cut_for(tmp_path):
    from fontTools.ttLib import TTFont

    wanted = set("注意力机制编码器解码器多头自注意力，。、（）：")
    out = tmp_path / "_static" / "fonts" / "attnbook-cjk.woff"
    size = fonts.write_font(wanted, out)
    assert 0 < size == out.stat().st_size < 100_000  # a few characters, a small file
    font = TTFont(out)
    assert font.flavor == "woff"
    drawn = set(font.getBestCmap())
    assert {ord(c) for c in wanted} <= drawn and ord("德") not in drawn  # only what is asked
    assert (out.parent / "OFL.txt").read_text() == (fonts.FONT_DIR / "OFL.txt").read_text()


def test_the_check_of_the_built_book_names_characters_the_font_lacks(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from check_built_book import font_problems

    (tmp_path / "page.html").write_text("<p>注意力 (attention) 与 编码器</p>", encoding="utf-8")
    assert "is missing" in font_problems(tmp_path)[0]
    fonts.write_font(set("注意力与"), tmp_path / fonts.SERVED_FONT)
    (problem,) = font_problems(tmp_path)
    assert "cannot draw 3 character(s)" in problem and problem.endswith("器码编")
    fonts.write_font(set("注意力与编码器"), tmp_path / fonts.SERVED_FONT)
    assert font_problems(tmp_path) == []
