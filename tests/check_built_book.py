"""Check the built HTML: every page that shows a widget embeds its state, every script and
stylesheet a page loads is a file of the book itself (no CDN), the book's own CJK font draws
every Chinese character of every page; report page weight.

`jupyter-book build -W` does not notice a widget whose state was not saved (the page then
shows a blank space), nor a page that loads a script from elsewhere (it then breaks without
the network: raw LaTeX, no explorer). Usage: python tests/check_built_book.py _build/html
"""

import json
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
from attnbook_fonts import SERVED_FONT, book_characters  # noqa: E402

VIEW = re.compile(r'<script type="application/vnd.jupyter.widget-view\+json">(.*?)</script>', re.S)
STATE = re.compile(
    r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', re.S
)

# What a page loads: scripts, stylesheets, preloads and icons (links to read elsewhere are
# <a href>, not checked).
LOADS = re.compile(
    r'<script\b[^>]*\bsrc="([^"]*)"|<link\b(?=[^>]*\brel="(?:stylesheet|preload|modulepreload'
    r'|icon)")[^>]*\bhref="([^"]*)"'
)


def foreign_loads(page: Path, text: str, root: Path) -> list[str]:
    """What ``page`` loads from off the book, or from a book file that is not there."""
    problems = []
    for m in LOADS.finditer(text):
        url = m.group(1) or m.group(2)
        parts = urlsplit(url)
        if parts.scheme or parts.netloc:
            problems.append(f"loads {url} from off the book")
            continue
        target = (page.parent / parts.path).resolve()
        if root.resolve() not in target.parents or not target.is_file():
            problems.append(f"loads {url}, which the built book does not hold")
    return problems


def font_problems(root: Path) -> list[str]:
    """The Chinese characters of the pages that the served font (book/_ext/attnbook_fonts.py)
    does not draw, or that it is missing."""
    from fontTools.ttLib import TTFont

    font = root / SERVED_FONT
    if not font.is_file():
        return [f"{SERVED_FONT} is missing: the CJK text would depend on the reader's fonts"]
    drawn = set(TTFont(font).getBestCmap())
    missing = sorted(c for c in book_characters(root) if ord(c) not in drawn)
    if missing:
        return [
            f"{SERVED_FONT} cannot draw {len(missing)} character(s) of the pages: {''.join(missing)}"
        ]
    return []


def main(root: str) -> int:
    pages = sorted(Path(root).rglob("*.html"))
    if not pages:
        print(f"no HTML pages under {root}: build the book first")
        return 1
    problems, rows = [], []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        if "_static" not in page.relative_to(root).parts:  # not the theme's Jinja macros
            problems += [f"{page}: {p}" for p in foreign_loads(page, text, Path(root))]
        views = [json.loads(v)["model_id"] for v in VIEW.findall(text)]
        if not views:
            continue
        states = STATE.findall(text)
        state = json.loads(states[0])["state"] if states else {}
        missing = [v for v in views if v not in state]
        if missing:
            problems.append(f"{page}: {len(missing)} widget view(s) without embedded state")
        rows.append((page.relative_to(root), len(views), len(text.encode()) / 1024))
    problems += font_problems(Path(root))
    for name, n, kb in rows:
        print(f"{str(name):45s} {n:3d} widget views  {kb:8.1f} KiB")
    for p in problems:
        print("ERROR:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "_build/html"))
