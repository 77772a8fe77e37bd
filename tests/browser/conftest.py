"""What the browser tests share: the built book served on localhost, and Chromium.

The tests run after `jupyter-book build` (make test does that first). The book is served from
_build/html (or $BOOK_HTML) on localhost; the scripts the pages load from CDNs (RequireJS, the
widget manager, MathJax) are served from npm packages in .cache/js (make js-assets), since
these machines reach no CDN, and every other request off localhost is refused. Every test here
is skipped, with the reason printed, when Chromium, Playwright, the JS packages or the built
book are missing.
"""

import functools
import http.server
import importlib.util
import os
import re
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
JS = ROOT / ".cache" / "js"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed"
    if not CHROMIUM:
        return "Chromium is not installed (apt-get install chromium)"
    if not (HTML / "book").is_dir():
        return f"the book is not built at {HTML} (make book)"
    if not (JS / ".done").exists():
        return f"the page's JS packages are not in {JS} (make js-assets)"
    return None


@pytest.fixture(scope="session", autouse=True)
def _browser_tests_need_the_toolchain():
    """Skips every test here (before any other fixture runs) when something is missing."""
    reason = missing()
    if reason:
        pytest.skip(reason)


def local_file(url: str) -> Path | None:
    """The npm file that stands in for a CDN URL."""
    if "require.min.js" in url:
        return JS / "requirejs" / "require.js"
    for pattern, folder in (
        (r"html-manager@[\d.]+/dist/(.*)$", "html-manager/dist"),
        (r"mathjax@3[\d.]*/(.*)$", "mathjax"),
    ):
        m = re.search(pattern, url)
        if m:
            return JS / folder / m.group(1).split("?")[0]
    return None


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def book_html() -> Path:
    """The folder of the built book."""
    return HTML


@pytest.fixture(scope="session")
def book_url():
    """The base URL of the built book, served on localhost."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(HTML))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole session."""
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def new_page(browser, book_url):
    """``new_page(viewport)``: a page whose requests stay on this machine."""

    def route(r):
        url = r.request.url
        if url.startswith(book_url):
            if url.endswith(".html"):  # the npm require.js differs from the CDN's
                resp = r.fetch()  # minified file: drop the SRI hash
                return r.fulfill(
                    response=resp, body=re.sub(r'\sintegrity="[^"]*"', "", resp.text())
                )
            return r.continue_()
        path = local_file(url)
        if path is not None and path.is_file():
            return r.fulfill(path=str(path))
        return r.abort()  # nothing else may leave this machine

    def make(viewport):
        page = browser.new_page(viewport=viewport)
        page.route("**/*", route)
        return page

    return make
