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

from bs4 import BeautifulSoup, Comment, Doctype

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
from attnbook_fonts import SERVED_FONT, book_characters  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from i18n_check import english_runs  # noqa: E402

EDITIONS = ("zh_CN",)  # the other editions' folders (tests/book_i18n.py places them)
ROOT = Path(__file__).resolve().parents[1]
TRANSLATED = ROOT / "locale" / "zh_CN" / "translated.txt"  # the pages declared translated

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


def edition_of(root: Path, page: Path) -> str:
    rel = page.relative_to(root).parts
    return rel[0] if rel[0] in EDITIONS else ""


def language_switch_problems(root: Path) -> list[str]:
    """Every page of each edition links (book/_ext/attnbook_i18n.py) to the same page of the
    other edition, and that page exists."""
    root = Path(root).resolve()
    problems = []
    for page in sorted(root.rglob("*.html")):
        rel = page.relative_to(root)
        if "_static" in rel.parts or "_sources" in rel.parts or rel.name == "index.html":
            continue  # theme macros; index.html: a redirect to the first page
        edition = edition_of(root, page)
        name = rel.relative_to(edition).as_posix() if edition else rel.as_posix()
        links = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").select(
            ".attnbook-language a[href]"
        )
        if not links:
            problems.append(f"{rel}: no language switch")
            continue
        for link in links:
            target = (page.parent / link["href"]).resolve()
            try:
                target_rel = target.relative_to(root.resolve())
            except ValueError:
                problems.append(f"{rel}: the language switch leads off the site: {link['href']}")
                continue
            other = edition_of(root, target)
            other_name = (
                target_rel.relative_to(other).as_posix() if other else target_rel.as_posix()
            )
            if other == edition or other_name != name or not target.is_file():
                problems.append(
                    f"{rel}: the language switch leads to {target_rel.as_posix()}"
                    + ("" if target.is_file() else ", which does not exist")
                )
    return problems


# what stays English on a Chinese page: code, math, outputs, glued values, citations, names of
# the API, the source's quotations
NOT_PROSE = (
    "pre, code, kbd, script, style, .math, mjx-container, .cell_output, .output, .pasted-text, "
    ".pasted-inline, .sig, .headerlink, .footnote, .citation, [role=doc-biblioref], "
    ".bibliography, .docutils.literal, .attnbook-live"
)


CJK_CHAR = re.compile(r"[\u3400-\u9fff]")
BLOCKS = [
    "p",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "dt",
    "dd",
    "th",
    "td",
    "caption",
    "figcaption",
    "summary",
]


def english_left(page: Path, words: int = 5) -> list[str]:
    """Runs of ``words`` English words or more in the prose of a page's article."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    article = soup.find("article") or soup
    for e in article.select(NOT_PROSE):
        e.decompose()
    for e in article.find_all(["em", "i", "cite", "q"]):  # an English example or title, quoted
        if not CJK_CHAR.search(e.get_text()):
            e.decompose()
    runs = []
    for e in article.find_all(BLOCKS):
        # its own text, inline markup included, nested blocks (a list in a list item) left
        # to themselves
        text = "".join(t for t in e.find_all(string=True) if t.find_parent(BLOCKS) is e)
        runs += english_runs(text, words)
    return runs


# The interface around a Chinese page's text (the theme's buttons, tooltips and labels for
# screen readers, the table of contents): Chinese, but for these names, which both editions
# keep (the language switch says "English"; chapter 13 is "Transformer").
INTERFACE_ATTRIBUTES = ("title", "aria-label", "alt", "placeholder")
INTERFACE_NAMES = {
    "English", "Binder", "Colab", "Ctrl", "K", "attnbook", "Transformer", "RNN", "API",
    "Add", "Norm", "PDF", "pdf", "ipynb", "md", "GitHub", "CC", "BY",
}  # fmt: skip
LATIN_WORD = re.compile(r"[A-Za-z]+")
FILE_NAME = re.compile(r"^[\w./-]+\.(?:png|svg|jpe?g|gif|ipynb|md|pdf)$")


def interface_english(page: Path) -> list[str]:
    """The interface strings of a page with an English word in them: the text outside its
    article, and every element's title, label, alt text and placeholder (a figure's alt text
    included). Not: code and math; a cross-reference's title (the name of a work cited or of
    a function); a file name given as alt text; what only a printout shows (.onlyprint)."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    for e in soup(["script", "style", "noscript", "template"]):
        e.decompose()
    for e in soup.select(".onlyprint"):
        e.decompose()
    for c in soup.find_all(string=lambda s: isinstance(s, (Comment, Doctype))):
        c.extract()
    found = []
    for e in soup.find_all(True):
        for name in INTERFACE_ATTRIBUTES:
            value = e.get(name)
            if name == "title" and e.name == "a" and "reference" in e.get("class", []):
                continue
            if isinstance(value, str) and not FILE_NAME.match(value.strip()):
                found.append(f"{name}={value.strip()!r}")
    article = soup.find("article")
    if article is not None:
        article.decompose()
    for e in soup.select(NOT_PROSE):
        e.decompose()
    found += [repr(t.strip()) for t in soup.find_all(string=True) if t.strip()]
    return [
        s
        for s in found
        if not CJK_CHAR.search(s) and set(LATIN_WORD.findall(s.split("=", 1)[-1])) - INTERFACE_NAMES
    ]


def declared_translated() -> list[str]:
    if not TRANSLATED.is_file():
        return []
    lines = TRANSLATED.read_text(encoding="utf-8").splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


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
    editions = [Path(root) / e for e in EDITIONS if (Path(root) / e / "book").is_dir()]
    for edition in [Path(root), *editions]:
        problems += [f"{edition}: {p}" for p in font_problems(edition)]
    if editions:
        problems += language_switch_problems(Path(root))
        for name in declared_translated():
            for edition in editions:
                page = edition / f"{name}.html"
                problems += [f"{page}: English left: {r!r}" for r in english_left(page)]
        for edition in editions:
            for page in sorted(edition.rglob("*.html")):
                if "_static" not in page.relative_to(edition).parts:
                    problems += [f"{page}: English interface: {s}" for s in interface_english(page)]
    for name, n, kb in rows:
        print(f"{str(name):45s} {n:3d} widget views  {kb:8.1f} KiB")
    for p in problems:
        print("ERROR:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "_build/html"))
