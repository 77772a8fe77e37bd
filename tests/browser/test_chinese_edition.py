"""The Chinese edition (_build/html/zh_CN) in Chromium with no network.

Its pages are one folder deeper than the English ones and share the English edition's vendor/
and live/ folders (tests/book_i18n.py): on a chapter with math, widgets and chapter 13's live
block, MathJax typesets, every saved widget view is drawn, and the live block runs the model
(onnxruntime-web and the model file found one folder up); nothing is asked of the network. The
language switch leads to the same page in English and back; the theme speaks Chinese; and the
search finds a Chinese word (Sphinx's Chinese search, with jieba's words in the index).
"""

import re
from pathlib import Path

import pytest
from test_offline import CHECK, READY

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PAGES = ["zh_CN/book/04_query_key_value.html", "zh_CN/book/13_transformer.html"]
STATE = "document.querySelector('.attnbook-live').dataset.state"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def zh_page(new_page, book_html):
    assert (book_html / "zh_CN" / "book").is_dir(), (
        f"{book_html} has no Chinese edition (zh_CN/): build the book with make book"
    )
    page = new_page({"width": 1200, "height": 900})
    yield page
    page.close()


@pytest.mark.parametrize("name", PAGES)
def test_a_chinese_chapter_is_whole_with_no_network(zh_page, book_url, blocked, name):
    before = len(blocked)
    zh_page.goto(f"{book_url}/{name}")
    assert zh_page.evaluate(READY) == "ready"
    result = zh_page.evaluate(CHECK)
    assert zh_page.evaluate("document.documentElement.lang") == "zh-CN"
    assert result["typeset"] > 0 and not result["raw"] and not result["delimiters"], result
    assert result["views"] and all(v["drawn"] and v["visible"] for v in result["views"])
    assert not blocked[before:], f"asked for URLs off localhost: {blocked[before:]}"


def test_the_live_block_runs_the_shared_model_on_a_chinese_page(zh_page, book_url, blocked):
    before = len(blocked)
    asked = []
    zh_page.on("request", lambda r: asked.append(r.url))
    zh_page.goto(f"{book_url}/zh_CN/book/13_transformer.html")
    zh_page.wait_for_function(f"{STATE} === 'example'", timeout=30_000)
    zh_page.fill(".al-input", "the 1st of March, 2031")
    zh_page.click(".al-button")
    zh_page.wait_for_function(f"['done', 'refused', 'error'].includes({STATE})", timeout=60_000)
    state = zh_page.evaluate(STATE)
    message = zh_page.evaluate("document.querySelector('.attnbook-live .al-message').textContent")
    assert state == "done", message
    # and it speaks Chinese: its title, controls, step sentence and status (live.po)
    words = zh_page.evaluate(
        """() => { const r = document.querySelector('.attnbook-live');
        const t = (s) => r.querySelector(s).textContent;
        return { title: t('.al-title'), button: t('.al-button'), step: t('.al-steptext'),
                 status: t('.al-status'), axis: t('.al-axis'), play: t('.al-play'),
                 kind: r.querySelector('.al-kind').selectedOptions[0].textContent,
                 head: r.querySelector('.al-head').selectedOptions[0].textContent }; }"""
    )
    for name, text in words.items():
        assert CJK.search(text), (name, text)
    assert words["step"].startswith("第 ") and "onnxruntime-web" in words["status"], words
    loaded = [u.removeprefix(book_url) for u in asked if "onnxruntime" in u or "/live/" in u]
    assert loaded and all(u.startswith(("/vendor/", "/live/")) for u in loaded), loaded
    ARTIFACTS.mkdir(exist_ok=True)
    zh_page.locator(".attnbook-live").screenshot(path=str(ARTIFACTS / "live-zh_CN.png"))
    assert not blocked[before:]


def test_the_language_switch_leads_to_the_same_page_and_back(zh_page, book_url):
    zh_page.goto(f"{book_url}/book/03_attention_three_steps.html")
    switch = zh_page.locator(".attnbook-language a")
    assert switch.inner_text().strip() == "中文"
    here, buttons = switch.bounding_box(), zh_page.locator(".article-header-buttons").bounding_box()
    assert abs((here["y"] + here["height"] / 2) - (buttons["y"] + buttons["height"] / 2)) < 8, (
        f"the switch is not on the header buttons' line: {here} {buttons}"
    )
    switch.click()
    zh_page.wait_for_load_state()
    assert zh_page.url == f"{book_url}/zh_CN/book/03_attention_three_steps.html"
    back = zh_page.locator(".attnbook-language a")
    assert back.inner_text().strip() == "English"
    back.click()
    zh_page.wait_for_load_state()
    assert zh_page.url == f"{book_url}/book/03_attention_three_steps.html"


def test_the_theme_speaks_chinese(zh_page, book_url):
    zh_page.goto(f"{book_url}/zh_CN/book/03_attention_three_steps.html")
    titles = zh_page.evaluate(
        "[...document.querySelectorAll('[title], [aria-label]')]"
        ".map(e => e.getAttribute('title') || e.getAttribute('aria-label'))"
    )
    assert {"下载此页面", "全屏模式"} <= set(titles), titles
    placeholder = zh_page.evaluate("document.querySelector('input[name=q]').placeholder")
    assert placeholder == "在本书中搜索……"


@pytest.mark.parametrize("word", ["注意力", "编码器"])
def test_the_search_finds_a_chinese_word(zh_page, book_url, word):
    zh_page.goto(f"{book_url}/zh_CN/search.html?q={word}")
    zh_page.wait_for_function(
        "document.querySelectorAll('#search-results li').length > 0", timeout=30_000
    )
    hits = zh_page.evaluate(
        "[...document.querySelectorAll('#search-results li a')].map(a => a.getAttribute('href'))"
    )
    assert any("book/" in h for h in hits), hits
