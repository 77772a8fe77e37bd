"""The Chinese on the pages is drawn with the book's own font (book/_ext/attnbook_fonts.py), so
it shows on a machine without a CJK font, as this test's headless Chromium is: without it, each
character would be an empty box."""

import re

import pytest

FONT_STATE = r"""
async () => {
  await document.fonts.ready;
  const faces = [...document.fonts].filter(f => f.family.replace(/"/g, '') === 'attnbook CJK');
  const probe = document.querySelector('article') || document.body;
  return {
    faces: faces.map(f => f.status),
    family: getComputedStyle(probe).fontFamily,
    code: getComputedStyle(document.querySelector('pre') || probe).fontFamily,
  };
}
"""

# Every element whose own text (its direct text nodes) holds a CJK character: its selector
# path is not needed, so each gets a data attribute the test finds it by.
MARK = r"""
() => {
  const cjk = /[\u2E80-\u2FDF\u3000-\u303F\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\uFE30-\uFE4F\uFF00-\uFFEF]/g;
  const found = [];
  for (const e of document.querySelectorAll('body *')) {
    if (['SCRIPT', 'STYLE'].includes(e.tagName) || !e.getClientRects().length) continue;
    const own = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
    const n = (own.match(cjk) || []).length;
    if (n) { e.dataset.cjkProbe = found.length; found.push([own.trim().slice(0, 40), n]); }
  }
  return found;
}
"""

PAGES = ["book/glossary.html", "book/16_real_languages.html", "book/03_attention_three_steps.html"]


@pytest.mark.parametrize("path", PAGES)
def test_every_chinese_character_on_the_page_is_drawn_by_the_books_font(new_page, book_url, path):
    page = new_page({"width": 1280, "height": 800})
    page.goto(f"{book_url}/{path}")
    state = page.evaluate(FONT_STATE)
    assert state["faces"] == ["loaded"], state  # fetched from the book itself
    assert "attnbook CJK" in state["family"] and "attnbook CJK" in state["code"], state
    marked = page.evaluate(MARK)
    assert marked, f"{path} shows no Chinese"
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    empty = []  # elements with CJK characters drawn by a system font (its empty boxes)
    for i, (text, n) in enumerate(marked):
        node = cdp.send(
            "DOM.querySelector", {"nodeId": root, "selector": f'[data-cjk-probe="{i}"]'}
        )
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})["fonts"]
        ours = sum(f["glyphCount"] for f in fonts if f["isCustomFont"])
        if ours < n:
            empty.append((text, n, [(f["postScriptName"], f["glyphCount"]) for f in fonts]))
    assert not empty, f"{path}: {len(empty)} of {len(marked)} elements, e.g. {empty[:3]}"
    page.close()


def test_the_font_stays_on_the_book(blocked):
    assert not [u for u in blocked if re.search(r"\.(woff2?|otf|ttf)\b", u)]
