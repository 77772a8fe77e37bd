"""Every page of the built book is whole with no network: math typeset, every explorer drawn.

conftest.py refuses every request off localhost, so MathJax, RequireJS and the widget manager
must come from the book's own vendor/ folder (tests/book_js.py, `make book`). Each page of the
book is loaded in Chromium until MathJax has typeset and the widget manager has drawn every
saved widget view; then:
- every math element (inline and display math in the prose, LaTeX that a cell printed) holds
  MathJax's rendering, and the text a reader sees (code left out) has no TeX delimiter left;
- every saved widget view is drawn, visible and without an error message;
- chapter 13's live block shows its example (its script ran, with no runtime loaded);
- no page asked for anything off this machine.
"""

import pytest

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the tests skip (conftest.py)
    PlaywrightTimeout = TimeoutError

# Ready: loaded, MathJax finished its first typesetting (when the page loads it), and every
# saved widget view drawn (html-manager fills a div.widget-subarea before each view's script).
READY = r"""
async () => {
  await new Promise(r => document.readyState === 'complete' ? r() :
                    window.addEventListener('load', r));
  if (document.querySelector('script[src*="mathjax"]')) {
    for (let i = 0; i < 600 && !(window.MathJax && MathJax.startup && MathJax.startup.promise);
         i++) await new Promise(r => setTimeout(r, 50));
    if (!(window.MathJax && MathJax.startup)) return 'MathJax did not start';
    await MathJax.startup.promise;
  }
  const views = [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')];
  const drawn = () => views.every(s => s.previousElementSibling &&
    s.previousElementSibling.classList.contains('widget-subarea') &&
    s.previousElementSibling.childElementCount > 0);
  for (let i = 0; i < 600 && !drawn(); i++) await new Promise(r => setTimeout(r, 50));
  return drawn() ? 'ready' : 'widgets not drawn';
}
"""

CHECK = r"""
() => {
  const article = document.querySelector('article') || document.body;
  const math = [...article.querySelectorAll('.math, .output.text_latex')];
  const raw = math.filter(e => !e.querySelector('mjx-container'))
    .map(e => e.textContent.trim().slice(0, 60));
  const prose = article.cloneNode(true);
  for (const e of prose.querySelectorAll('pre, code, .highlight, script, mjx-container'))
    e.remove();
  const text = prose.textContent;
  const delimiters = ['\\(', '\\)', '\\[', '\\]', '$$', '\\begin{', '\\frac']
    .filter(d => text.includes(d))
    .map(d => text.substr(Math.max(0, text.indexOf(d) - 40), 100).replace(/\s+/g, ' '));
  const views = [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')].map(s => {
      const box = s.previousElementSibling;
      const r = box ? box.getBoundingClientRect() : {width: 0, height: 0};
      return {drawn: !!box && box.classList.contains('widget-subarea') &&
                     box.childElementCount > 0,
              visible: r.width > 0 && r.height > 0,
              error: box ? /error/i.test(box.innerText) : false};
    });
  const live = [...document.querySelectorAll('.attnbook-live')]
    .map(e => e.dataset.state || 'not drawn');
  return {math: math.length, typeset: article.querySelectorAll('mjx-container').length,
          raw, delimiters, views, live};
}
"""


def pages(book_html):
    return sorted(p.relative_to(book_html).as_posix() for p in (book_html / "book").glob("*.html"))


@pytest.fixture(scope="module")
def checked(new_page, book_url, book_html, blocked):
    """What each page of the book shows with no network, loaded once for the module's tests."""
    assert (book_html / "vendor").is_dir(), (
        f"{book_html} has no vendor/ folder: build the book with `make book`, which copies in "
        "the scripts its pages load (tests/book_js.py)"
    )
    page = new_page({"width": 1200, "height": 900})
    results = {}
    for name in pages(book_html):
        before = len(blocked)
        page.goto(f"{book_url}/{name}")
        try:
            state = page.evaluate(READY)
        except PlaywrightTimeout:
            state = "timed out"
        result = page.evaluate(CHECK)
        result["state"] = state
        result["blocked"] = blocked[before:]
        results[name] = result
    page.close()
    return results


def test_every_page_loads_nothing_from_off_this_machine(checked):
    offenders = {name: r["blocked"] for name, r in checked.items() if r["blocked"]}
    assert not offenders, f"pages asked for URLs off localhost: {offenders}"


def test_every_page_typesets_its_math_with_the_books_own_mathjax(checked):
    assert len(checked) >= 20, sorted(checked)
    chapters = [n for n in checked if n.split("/")[-1][:2].isdigit()]
    assert len(chapters) >= 16, chapters
    no_math = [n for n in chapters if checked[n]["math"] == 0]
    assert not no_math, f"chapter pages without any math: {no_math}"
    problems = [
        f"  {name}: {r['state']}; {len(r['raw'])} of {r['math']} math elements not typeset "
        f"{r['raw'][:3]}; TeX left in the text: {r['delimiters']}"
        for name, r in checked.items()
        if r["state"] != "ready" or r["raw"] or r["delimiters"]
    ]
    assert not problems, "math left as raw LaTeX:\n" + "\n".join(problems)


def test_every_explorer_renders_with_no_network(checked):
    with_views = {name: r["views"] for name, r in checked.items() if r["views"]}
    assert len(with_views) >= 8, f"widget views found on only {sorted(with_views)}"
    problems = [
        f"  {name} view {i}: {v}"
        for name, views in with_views.items()
        for i, v in enumerate(views)
        if not (v["drawn"] and v["visible"]) or v["error"]
    ]
    assert not problems, "widget views not drawn, hidden or showing an error:\n" + "\n".join(
        problems
    )


def test_the_live_block_shows_its_example_with_no_network(checked):
    live = {name: r["live"] for name, r in checked.items() if r["live"]}
    assert "book/13_transformer.html" in live, f"live blocks found only on {sorted(live)}"
    problems = {name: states for name, states in live.items() if set(states) != {"example"}}
    assert not problems, f"live blocks not showing their example: {problems}"
