"""The book's second edition, in Simplified Chinese: its configuration, and its place in the site.

The Chinese edition is the English sources built again with ``language: zh_CN`` and the
catalogs of ``locale/zh_CN/LC_MESSAGES`` (docs/i18n/translating.md). Its configuration is not
kept by hand: ``config`` writes it from ``_config.yml``, so the two cannot drift, with these
changes only (each one asserted, so a change to ``_config.yml`` that this script does not
understand stops the build instead of giving a broken edition):

- ``language: zh_CN``, ``locale_dirs`` (``locale/``, or ``--locale DIR`` to build with other
  catalogs, as the tests do), ``gettext_compact: false`` (one catalog per page);
- the address: ``html.baseurl`` + ``zh_CN/``; the launch buttons (Colab, Binder) open the
  Chinese notebooks of ``locale/zh_CN/book/`` (tests/translate_notebooks.py writes them);
- the scripts are shared with the English edition, one folder up: ``html_extra_path`` is empty
  and MathJax, RequireJS and the widget manager are named ``../`` deeper (the live block's
  files too: book/_ext/attnbook_i18n.py);
- the title: the root page's translation of the English title (``intro.po``);
- ``locale/zh_CN/_config.yml``: what the translators write that is configuration, not a page
  (the footer, the search box's text).

``place`` copies the built Chinese HTML to ``_build/html/zh_CN/``, under the English edition
(the pages then find ``../vendor/``, ``../live/``), with the Chinese notebooks over the English
ones that Sphinx copied to ``_sources/`` (the pages' download button), and the Markdown pages'
sources there translated from the catalogs (tests/translate_notebooks.py).

``catalogs`` extracts the English messages again (Sphinx's gettext builder, one template per
page) and updates the catalogs with sphinx-intl: a message whose English changed becomes fuzzy
(its old translation kept as a hint), a new one empty, a removed one obsolete. (The API page's
docstrings are reStructuredText, but their translations are MyST: Sphinx parses a translation
with its page's parser; tests/i18n_check.py compares the two forms.)

Usage: python tests/book_i18n.py config [--locale DIR] [--out FILE]
       python tests/book_i18n.py place [--built DIR] [--html DIR] [--locale DIR]
       python tests/book_i18n.py catalogs
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_CN"
BUILD = ROOT / "_build" / LANGUAGE  # --path-output of the Chinese build
CONFIG = BUILD / "_config.yml"
BUILT = BUILD / "_build" / "html"
SITE = ROOT / "_build" / "html"  # the English edition; the Chinese one goes to SITE/zh_CN
LOCALE = ROOT / "locale"
OVERLAY = LOCALE / LANGUAGE / "_config.yml"  # the translators' part of the configuration
NOTEBOOKS = LOCALE / LANGUAGE  # the Chinese notebooks: locale/zh_CN/book/NN_name.ipynb
# what the translators' file may set: top-level keys, and keys of html: and of sphinx: config:
OVERLAY_KEYS = {"author", "html.extra_footer", "sphinx.config.attnbook_search_bar_text"}
UP = "../"  # from the Chinese edition's root to the English edition's


def _deeper(path: str, what: str) -> str:
    if not path.startswith("../vendor/"):
        raise SystemExit(
            f"book_i18n.py: _config.yml's {what} is {path!r}; expected a path starting with "
            "'../vendor/' (relative to _static/): update tests/book_i18n.py"
        )
    return UP + path


def overlay_items(overlay: dict) -> dict[str, object]:
    """The translators' settings, flattened to dotted keys; refuses keys it does not know."""
    flat: dict[str, object] = {}

    def walk(d: dict, prefix: str) -> None:
        for key, value in d.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(value, name + ".")
            else:
                flat[name] = value

    walk(overlay or {}, "")
    unknown = set(flat) - OVERLAY_KEYS
    if unknown:
        raise SystemExit(
            f"{OVERLAY.relative_to(ROOT)} sets {sorted(unknown)}; it may set only "
            f"{sorted(OVERLAY_KEYS)}"
        )
    return flat


def moved_config(english: dict, where: Path) -> dict:
    """A copy of the configuration for a file in folder ``where``: Jupyter Book finds local
    extensions relative to the configuration file."""
    cfg = copy.deepcopy(english)
    for name, path in cfg["sphinx"].get("local_extensions", {}).items():
        cfg["sphinx"]["local_extensions"][name] = os.path.relpath(ROOT / path, where)
    return cfg


def chinese_config(
    english: dict, locale: Path = LOCALE, overlay: dict | None = None, where: Path = BUILD
) -> dict:
    """The Chinese edition's configuration, from the English one (a deep copy is changed), for
    a file in folder ``where``."""
    cfg = moved_config(english, where)
    sphinx = cfg["sphinx"]["config"]
    for key in ("language", "locale_dirs"):
        if key in sphinx:
            raise SystemExit(f"book_i18n.py: _config.yml already sets sphinx.config.{key}")
    sphinx["language"] = LANGUAGE
    sphinx["locale_dirs"] = [str(Path(locale).resolve())]
    sphinx["gettext_compact"] = False
    # shared with the English edition (one folder up): not copied again
    if sorted(sphinx.get("html_extra_path", [])) != [".cache/js/site", ".cache/live/site"]:
        raise SystemExit(
            "book_i18n.py: _config.yml's html_extra_path changed: decide whether the Chinese "
            "edition shares the new folder (tests/book_i18n.py)"
        )
    sphinx["html_extra_path"] = []
    sphinx["mathjax_path"] = _deeper(sphinx["mathjax_path"], "mathjax_path")
    widgets = {}
    for key, attrs in sphinx["nb_ipywidgets_js"].items():
        if key == "":
            body = attrs["body"]
            marker = 'content_root + "vendor/'
            if marker not in body:
                raise SystemExit(f"book_i18n.py: nb_ipywidgets_js's script lacks {marker!r}")
            attrs = dict(attrs, body=body.replace(marker, f'content_root + "{UP}vendor/'))
            widgets[key] = attrs
        else:
            widgets[_deeper(key, f"nb_ipywidgets_js {key!r}")] = attrs
    sphinx["nb_ipywidgets_js"] = widgets
    sphinx["attnbook_shared_root"] = UP  # the live block's files (book/_ext/attnbook_i18n.py)
    cfg["html"]["baseurl"] = cfg["html"]["baseurl"].rstrip("/") + f"/{LANGUAGE}/"
    cfg["repository"]["path_to_book"] = NOTEBOOKS.relative_to(ROOT).as_posix()
    cfg["exclude_patterns"] = list(cfg.get("exclude_patterns", []))
    for name, value in overlay_items(overlay or {}).items():
        *parents, last = name.split(".")
        d = cfg
        for p in parents:
            d = d.setdefault(p, {})
        d[last] = value
    return cfg


def translated_title(title: str, locale: Path = LOCALE) -> str | None:
    """The root page's translation of the book's title, if it has one (not fuzzy)."""
    import polib

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    po = locale / LANGUAGE / "LC_MESSAGES" / f"{toc['root']}.po"
    if po.is_file():
        entry = polib.pofile(str(po)).find(title)
        if entry is not None and entry.msgstr and "fuzzy" not in entry.flags:
            return entry.msgstr
    return None


def write_config(locale: Path = LOCALE, out: Path = CONFIG) -> Path:
    english = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    overlay = yaml.safe_load(OVERLAY.read_text(encoding="utf-8")) if OVERLAY.is_file() else {}
    cfg = chinese_config(english, locale, overlay, out.parent.resolve())
    cfg["title"] = translated_title(english["title"], locale) or english["title"]
    out.parent.mkdir(parents=True, exist_ok=True)
    header = "# Generated by tests/book_i18n.py from _config.yml: do not edit.\n"
    out.write_text(
        header + yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False, width=100),
        encoding="utf-8",
    )
    return out


def place(built: Path = BUILT, site: Path = SITE, locale: Path = LOCALE) -> Path:
    """Copy the Chinese HTML under the English edition, with the Chinese notebooks as the pages'
    downloadable sources, and the Markdown pages' sources translated from ``locale``."""
    if not (built / "book").is_dir():
        raise SystemExit(f"no Chinese build at {built}: run the Chinese build first (make book)")
    if not (site / "book").is_dir():
        raise SystemExit(f"no English build at {site}: run the English build first (make book)")
    target = site / LANGUAGE
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(built, target)
    for notebook in sorted((NOTEBOOKS / "book").glob("*.ipynb")):
        source = target / "_sources" / "book" / notebook.name
        if source.is_file():
            shutil.copyfile(notebook, source)
    import polib
    from translate_notebooks import translate_markdown

    for source in sorted((target / "_sources").rglob("*.md")):
        page = source.relative_to(target / "_sources").with_suffix("")
        po = locale / LANGUAGE / "LC_MESSAGES" / f"{page}.po"
        if po.is_file():
            text, _ = translate_markdown(
                source.read_text(encoding="utf-8"), polib.pofile(str(po)), source.name
            )
            source.write_text(text, encoding="utf-8")
    return target


GETTEXT = ROOT / "_build" / "gt"  # inside the repository: the locations stay relative


def update_catalogs(locale: Path = LOCALE) -> None:
    from sphinx_intl import basic

    english = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    cfg = moved_config(english, GETTEXT.resolve())
    cfg["sphinx"]["config"].update(gettext_compact=False, gettext_uuid=False)
    GETTEXT.mkdir(parents=True, exist_ok=True)
    config = GETTEXT / "_config.yml"
    config.write_text(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False), encoding="utf-8")
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    subprocess.run(
        [str(jupyter_book), "build", ".", "--config", str(config.relative_to(ROOT)), "--builder",
         "custom", "--custom-builder", "gettext", "--path-output", str(GETTEXT.relative_to(ROOT))],
        cwd=ROOT, check=True,
    )  # fmt: skip
    # the interface catalog (LC_MESSAGES/sphinx.po) is kept by hand: it holds what the catalogs
    # of Sphinx and the themes lack, not messages of the book; the gettext builder's sphinx.pot
    # (the words of the templates in book/_ext/templates) would mark the rest of it obsolete
    templates = GETTEXT / "_build" / "gettext"
    (templates / "sphinx.pot").unlink(missing_ok=True)
    basic.update(str(locale), str(templates), (LANGUAGE,))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("config", help="write the Chinese edition's configuration")
    c.add_argument("--locale", type=Path, default=LOCALE, help="the catalogs' folder (locale/)")
    c.add_argument("--out", type=Path, default=CONFIG)
    p = sub.add_parser("place", help="copy the Chinese build to _build/html/zh_CN")
    p.add_argument("--built", type=Path, default=BUILT)
    p.add_argument("--html", type=Path, default=SITE)
    p.add_argument("--locale", type=Path, default=LOCALE, help="the catalogs' folder (locale/)")
    sub.add_parser("catalogs", help="extract the messages again and update the catalogs")
    args = parser.parse_args(argv)
    if args.command == "config":
        print(f"wrote {write_config(args.locale, args.out)}")
    elif args.command == "catalogs":
        update_catalogs()
    else:
        print(f"placed the Chinese edition at {place(args.built, args.html, args.locale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
