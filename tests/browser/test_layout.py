"""Every chapter reads without sideways scrolling: code and outputs fit the column at 1280x800.

Each chapter page of the built book is loaded in Chromium at 1280x800 (a common laptop window)
with its scripts (MathJax, the widget manager) served as conftest.py serves them, and waits
until MathJax has typeset and every saved widget is drawn. Collapsed blocks are opened first
(hide-output cells, the solutions' dropdowns): a reader who opens one meets the same lines.

Measured, one block each, when visible (removed cells are not in the page):
- every `div.highlight > pre`: code cells, printed output and text results, the package
  source that a chapter shows, and code in the prose and in admonitions;
- every other child of a cell's output (HTML tables, LaTeX rendered by MathJax, widgets,
  Markdown that a cell displays), with every scroll box inside it.
A block fails when it scrolls sideways (scrollWidth > clientWidth + 1), when a scroll box
inside it does, or when its right edge lies beyond the article's text column.

Not measured: display math and Markdown tables in the prose. They are text, not code or
output; the theme gives both a scroll box of their own by design (`div.math mjx-container`,
`.pst-scrollable-table-container`), and the issue is about the code the book teaches with
and what it prints. (LaTeX that a cell outputs is measured.)

All offenders of all chapters are reported together, each with its chapter, index and kind,
its first line and how many pixels it overflows.
"""

import re
import time
from pathlib import Path

import pytest

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the tests skip (conftest.py)
    PlaywrightTimeout = TimeoutError

VIEWPORT = {"width": 1280, "height": 800}
ROOT = Path(__file__).resolve().parents[2]

# Everything happens in the page; one call returns what was measured.
MEASURE = r"""
() => {
  // A reader can open every collapsed block: measure them open.
  for (const d of document.querySelectorAll('article details')) d.open = true;
  for (const e of document.querySelectorAll('.toggle-hidden')) e.classList.remove('toggle-hidden');

  const article = document.querySelector('article.bd-article');
  const right = article.getBoundingClientRect().right
                - parseFloat(getComputedStyle(article).paddingRight);
  const visible = e => e.getClientRects().length > 0 && e.getBoundingClientRect().width > 0;
  const scrolls = e => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX);

  const blocks = [...article.querySelectorAll('div.highlight > pre')];
  for (const out of article.querySelectorAll('.cell_output')) {
    for (const child of out.children) {
      if (child.tagName === 'SCRIPT' || child.querySelector('div.highlight > pre')) continue;
      blocks.push(child);
    }
  }

  const kind = e => {
    if (e.closest('.cell_input')) return 'code cell';
    const out = e.closest('.cell_output');
    if (out) {
      const o = e.closest('.output');
      if (e.classList.contains('widget-subarea')) return 'widget';
      if (o && o.classList.contains('stream')) return 'printed output';
      if (o && o.classList.contains('text_plain')) return 'text output';
      if (o && o.classList.contains('text_html')) return 'HTML output';
      if (o && o.classList.contains('text_latex')) return 'LaTeX output';
      return e.tagName === 'PRE' ? 'source shown by a cell' : 'Markdown output';
    }
    const box = e.closest('.admonition');
    if (box) {
      const title = box.querySelector('.admonition-title');
      return `code in "${title ? title.textContent.trim() : 'admonition'}"`;
    }
    return 'code in the text';
  };

  const result = [];
  blocks.filter(visible).forEach((e, index) => {
    const r = e.getBoundingClientRect();
    let px = Math.max(e.scrollWidth - e.clientWidth, r.right - right);
    if (e.tagName !== 'PRE') {
      for (const d of e.querySelectorAll('*')) {
        if (d.clientWidth > 0 && scrolls(d)) px = Math.max(px, d.scrollWidth - d.clientWidth);
      }
    }
    const text = e.innerText || '';
    const lines = text.split('\n');
    result.push({index, kind: kind(e), px: Math.round(px),
                 first: (lines.find(l => l.trim()) || '').trim(),
                 longest: e.tagName === 'PRE' ? Math.max(...lines.map(l => l.length)) : null});
  });

  // How many characters of the code font a code cell's line holds (the first code cell).
  let fits = null;
  const pre = article.querySelector('.cell_input div.highlight > pre');
  if (pre) {
    const cs = getComputedStyle(pre);
    const probe = document.createElement('span');
    probe.textContent = 'x'.repeat(200);
    pre.appendChild(probe);
    const char = probe.getBoundingClientRect().width / 200;
    probe.remove();
    const inner = pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    fits = {chars: Math.floor(inner / char + 1e-6), font: cs.fontSize, char: char};
  }
  // Every picture an explorer shows (the views of the stacks that are on screen).
  const views = [...article.querySelectorAll('.cell_output .widget-subarea img')].filter(visible)
    .map(i => ({px: Math.round(i.getBoundingClientRect().width), natural: i.naturalWidth}));
  return {blocks: result, fits, views, column: Math.round(right - article.getBoundingClientRect().left
    - parseFloat(getComputedStyle(article).paddingLeft))};
}
"""

# Ready when the page has loaded, MathJax has started (the caller then awaits its first
# typesetting) and every saved widget view is drawn (html-manager puts a div.widget-subarea
# before each view's script and fills it).
READY = r"""
() => document.readyState === 'complete' &&
      (!document.querySelector('script[src*="mathjax"]') ||
       (window.MathJax && MathJax.startup && MathJax.startup.promise)) &&
      [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
        .every(s => s.previousElementSibling &&
                    s.previousElementSibling.classList.contains('widget-subarea') &&
                    s.previousElementSibling.childElementCount > 0)
"""


def chapters(book_html):
    return sorted(p.stem for p in (book_html / "book").glob("[0-9][0-9]_*.html"))


@pytest.fixture(scope="module")
def measured(new_page, book_url, book_html):
    """What each chapter page holds at 1280x800, measured once for the module's tests.

    Two tabs load side by side (each page spends most of its time in MathJax and the widget
    manager, in a renderer process of its own).
    """
    names = chapters(book_html)
    assert names, f"no chapter pages (book/NN_*.html) in {book_html}"
    tabs = [new_page(VIEWPORT) for _ in range(2)]
    results, start = {}, time.monotonic()
    for i in range(0, len(names), len(tabs)):
        batch = list(zip(tabs, names[i : i + len(tabs)], strict=False))
        for page, name in batch:
            page.goto(f"{book_url}/book/{name}.html", wait_until="commit")
        for page, name in batch:
            try:
                page.wait_for_function(READY, timeout=30_000)
            except PlaywrightTimeout:
                pytest.fail(
                    f"{name}: MathJax or the saved widgets were not drawn within 30 s",
                    pytrace=False,
                )
            page.evaluate(
                "async () => { if (window.MathJax && MathJax.startup)"
                " await MathJax.startup.promise; }"
            )
            results[name] = page.evaluate(MEASURE)
    for page in tabs:
        page.close()
    print(f"measured {len(names)} chapter pages in {time.monotonic() - start:.1f} s")
    return results


def describe(name, block):
    first = block["first"]
    first = first if len(first) <= 60 else first[:57] + "..."
    longest = f", longest line {block['longest']} chars" if block["longest"] else ""
    return (
        f"  {name} block {block['index']} ({block['kind']}): {block['px']} px too wide"
        f"{longest}: {first!r}"
    )


def test_code_and_outputs_fit_the_column_at_1280(measured):
    too_wide = {name: [b for b in page["blocks"] if b["px"] > 1] for name, page in measured.items()}
    offenders = sum(len(v) for v in too_wide.values())
    total = sum(len(page["blocks"]) for page in measured.values())
    summary = ", ".join(
        f"{name[:2]}: {len(v)}/{len(measured[name]['blocks'])}" for name, v in too_wide.items() if v
    )
    lines = [describe(name, b) for name, blocks in too_wide.items() for b in blocks]
    if offenders:
        pytest.fail(
            f"{offenders} of {total} visible code and output blocks are wider than the column "
            f"at 1280x800 (per chapter, too wide/visible: {summary}):\n" + "\n".join(lines),
            pytrace=False,
        )


def ruff_line_length():
    text = (ROOT / "pyproject.toml").read_text()
    section = re.search(r"^\[tool\.ruff\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    m = section and re.search(r"^line-length\s*=\s*(\d+)", section.group(1), re.M)
    return int(m.group(1)) if m else 88  # ruff's default


def test_the_column_holds_a_formatted_line_of_code(measured):
    """A code line as long as ruff formats them fits a code cell on every chapter page."""
    length = ruff_line_length()
    narrow = {
        name: page["fits"]
        for name, page in measured.items()
        if page["fits"] and page["fits"]["chars"] < length
    }
    if narrow:
        pytest.fail(
            f"ruff formats code to {length} characters (pyproject.toml), but at 1280x800 a "
            "code cell holds only "
            + ", ".join(f"{f['chars']} on {name}" for name, f in narrow.items())
            + f" (code font {next(iter(narrow.values()))['font']})",
            pytrace=False,
        )


def test_every_explorer_view_is_at_least_600_px_wide(measured):
    """The explorers' pictures are legible at 1280x800: at least 600 px wide on the page and
    drawn at least as wide as they are shown (so not a small PNG stretched)."""
    views = {name: page["views"] for name, page in measured.items() if page["views"]}
    assert len(views) >= 8, f"explorer pictures found on only {sorted(views)}"
    narrow = [
        f"  {name} view {i}: {v['px']} px on the page, drawn {v['natural']} px wide"
        for name, page in views.items()
        for i, v in enumerate(page)
        if v["px"] < 600 or v["natural"] < v["px"] - 2
    ]
    assert not narrow, "explorer pictures too small to read:\n" + "\n".join(narrow)
