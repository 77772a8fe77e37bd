"""What the browser tests share: the built book served on localhost, and Chromium.

The tests run after `make book` (make test builds it first). The book is served from
_build/html (or $BOOK_HTML) on localhost, with the scripts its pages load (RequireJS, the
widget manager, MathJax) in its own vendor/ folder (tests/book_js.py puts them there), and
every request off localhost is refused and recorded (`blocked`): the pages must work with no
network. Every test here is skipped, with the reason printed, when Chromium, Playwright or the
built book are missing.
"""

import functools
import http.server
import importlib.util
import os
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
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
    return None


@pytest.fixture(scope="session", autouse=True)
def _browser_tests_need_the_toolchain():
    """Skips every test here (before any other fixture runs) when something is missing."""
    reason = missing()
    if reason:
        pytest.skip(reason)


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
def blocked() -> list[str]:
    """Every URL off localhost that a page asked for (and did not get), in order."""
    return []


@pytest.fixture(scope="session")
def new_page(browser, book_url, blocked):
    """``new_page(viewport)``: a page whose requests stay on this machine."""

    def route(r):
        if r.request.url.startswith(book_url):
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()  # nothing may leave this machine

    def make(viewport):
        page = browser.new_page(viewport=viewport)
        page.route("**/*", route)
        return page

    return make
