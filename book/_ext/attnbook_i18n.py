"""Sphinx extension: the book's two editions, English and Simplified Chinese, link to each other.

The English edition is the site's root, the Chinese one its ``zh_CN/`` folder, with the same
page names (tests/book_i18n.py builds and places it). Every page gets, in its header next to
the download and launch buttons, a plain link to the same page in the other edition: relative
(``../zh_CN/book/03_attention_three_steps.html`` from an English chapter,
``../../book/03_attention_three_steps.html`` back), so it works from ``file://``, offline and
at any address, and with no script. The link says the other language's name in that language
(English / 中文) and carries its ``hreflang``.

For the Chinese edition (``language: zh_CN``), also:

- ``attnbook_shared_root`` (``../``): the edition shares the English edition's ``vendor/`` and
  ``live/`` folders. The stored output of chapter 13's live block names its files relative to
  the book's root (``vendor/onnxruntime-web@1.30.0/``, ``live/dates-transformer.onnx``); on
  the Chinese pages they are named from one folder up.
- ``attnbook_search_bar_text``: the search box's placeholder (Jupyter Book sets an English one).
- glue in translations: Sphinx parses each translated message as a small document of its own
  (its source ends with ``<translated>``); myst-nb parses it as Markdown, and its glue roles
  (``{glue:text}`name```) then find no notebook to take the value from and fail ("No key ...
  found in glue data"). They are given the notebook being read (``_patch_glue``).
- the table of contents' captions are translated (``translate_captions``), and the themes'
  interface strings that their catalogs lack come from ``LC_MESSAGES/sphinx.po`` and
  ``booktheme.po`` (``add_theme_catalogs``).
- speed: the nodes of a translation are given back to their page (``_forget``), and Sphinx's
  Chinese search looks its Latin words up in a set (``_TermSet``).
- myst-nb's words around a folded code cell ("Show code cell source", and its summary's
  label for screen readers) come from ``LC_MESSAGES/sphinx.po`` too (``translate_folded_cells``,
  ``translate_fold_label``); the theme's components that hard-code their tooltips and labels
  are given translatable copies (``templates/``).
- block markup at the start of a translation is escaped: the numbered headings ("1. Work per
  layer") would otherwise be read as lists and stay English (``escape_leading_markup``).
- the concept figures are drawn in Chinese: a code cell whose source is a ``diagram("name")``
  call shows ``diagram("name", lang="zh_CN")`` instead of its stored English SVG (the code
  cell, its other outputs and metadata stay the English notebook's; ``chinese_diagrams``, which
  tests/translate_notebooks.py applies to the Chinese notebooks too).
"""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"
COMPONENT = "attnbook-language.html"

# (language, folder of its edition in the site, name of the language in that language)
EDITIONS = (("en", "", "English"), ("zh_CN", "zh_CN/", "中文"))
HREFLANG = {"en": "en", "zh_CN": "zh-Hans"}

# the live block's configuration (attnbook.live): file paths relative to the book's root
LIVE_PATHS = re.compile(r'("(?:runtime|model|sidecar)":")((?:vendor|live)/)')


def edition(language: str | None) -> tuple[str, str, str]:
    for e in EDITIONS:
        if e[0] == (language or "en"):
            return e
    raise ValueError(f"attnbook_i18n: no edition for language {language!r}: {EDITIONS}")


def switch_links(language: str | None, pagename: str) -> list[dict]:
    """The links from page ``pagename`` of the ``language`` edition to the other editions."""
    this = edition(language)
    to_site_root = "../" * pagename.count("/") + "../" * this[1].count("/")
    return [
        {
            "language": lang,
            "hreflang": HREFLANG[lang],
            "label": label,
            "url": f"{to_site_root}{folder}{pagename}.html",
        }
        for lang, folder, label in EDITIONS
        if lang != this[0]
    ]


def add_switch(app, pagename, templatename, context, doctree) -> None:
    context["attnbook_languages"] = switch_links(app.config.language, pagename)
    shared = app.config.attnbook_shared_root
    if shared and doctree is not None and "body" in context:
        body = context["body"]
        context["body"] = LIVE_PATHS.sub(lambda m: m.group(1) + shared + m.group(2), body)


_READING: dict[str, object] = {}  # docname -> its notebook's renderer, while it is being read


class _KeepRenderer(dict):
    """A document's attributes that keep its notebook renderer when myst-nb drops it at the
    end of the parse (the translations are parsed after)."""

    docname = ""

    def pop(self, key, *default):
        if key == "nb_renderer" and key in self:
            _READING[self.docname] = self[key]
        return super().pop(key, *default)


def _patch_glue() -> None:
    """Let the glue roles and directives of a translated message find its notebook's data."""
    from myst_nb import sphinx_
    from myst_nb.ext.glue import directives, roles, utils

    if getattr(utils.retrieve_glue_data, "attnbook_i18n", False):
        return
    original = utils.retrieve_glue_data
    parse = sphinx_.Parser.parse

    def retrieve_glue_data(document, key):
        if "nb_renderer" not in document:
            env = getattr(document.settings, "env", None)
            renderer = _READING.get(env.docname) if env is not None else None
            if renderer is not None:
                return original({"nb_renderer": renderer}, key)
        return original(document, key)

    def parse_keeping_renderer(self, inputstring, document):
        if not (document.current_source or "").endswith("<translated>"):
            document.attributes = _KeepRenderer(document.attributes)
            document.attributes.docname = self.env.docname
        parse(self, inputstring, document)

    retrieve_glue_data.attnbook_i18n = True
    for module in (utils, roles, directives):
        module.retrieve_glue_data = retrieve_glue_data
    sphinx_.Parser.parse = parse_keeping_renderer


def _forget(app, doctree) -> None:
    _READING.pop(app.env.docname, None)
    # A node parsed from a translation still names the small document Sphinx parsed it in;
    # pickled with the page, each such document came along (chapter 13's doctree: 3.4 MB
    # instead of 0.44, and unpickling them cost the Chinese build half a minute)
    for node in doctree.findall(include_self=False):
        if node._document is not None and node._document is not doctree:
            node._document = doctree


class _TermSet(set):
    """Sphinx's Chinese search keeps the Latin words it met in a list and looks each word up in
    it (``in``): quadratic, 47 s of the Chinese build's 83. A set answers the same."""

    def extend(self, words) -> None:
        self.update(words)


def _patch_chinese_search() -> None:
    from sphinx.search import zh

    if getattr(zh.SearchChinese, "attnbook_i18n", False):
        return
    init = zh.SearchChinese.init

    def init_with_a_set(self, options):
        init(self, options)
        self.latin_terms = _TermSet()

    zh.SearchChinese.init = init_with_a_set
    zh.SearchChinese.attnbook_i18n = True


# block markup at the start of a translation: Sphinx parses a message on its own, so the
# heading "1. Work per layer" translated as "1. 每层的计算量" would be read as a list, and the
# heading kept in English
LEADING_MARKUP = re.compile(r"^(?:(\d+)([.)])(?=\s)|([-*+>#])(?=\s|$))")


def escape_leading_markup(msgstr: str) -> str:
    """``msgstr`` with block markup at its start escaped (``1\\.``, ``\\-``): a message is the
    inline text of its block, never a block of its own."""
    return LEADING_MARKUP.sub(
        lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"\\{m.group(3)}", msgstr
    )


def _patch_translations() -> None:
    from sphinx.transforms import i18n

    if getattr(i18n.publish_msgstr, "attnbook_i18n", False):
        return
    publish = i18n.publish_msgstr

    def publish_msgstr(app, source, *args, **kwargs):
        return publish(app, escape_leading_markup(source), *args, **kwargs)

    publish_msgstr.attnbook_i18n = True
    i18n.publish_msgstr = publish_msgstr


def translate_captions(app, doctree) -> None:
    """The table of contents' captions ("Getting started", "Part I: Before attention"): the
    root page's catalog has them, but Jupyter Book's toctrees enter the page after Sphinx has
    translated it (sphinx-external-toc's transform, priority 100; Sphinx's, 20), so the
    sidebar kept the English. They are translated here, from the same catalog."""
    if app.config.language in (None, "en"):
        return
    from sphinx import addnodes
    from sphinx.locale import init as init_locale
    from sphinx.util.i18n import docname_to_domain

    toctrees = [t for t in doctree.findall(addnodes.toctree) if t.get("caption")]
    if not toctrees:
        return
    domain = docname_to_domain(app.env.docname, app.config.gettext_compact)
    dirs = [str(Path(app.srcdir, d)) for d in app.config.locale_dirs]
    catalog, found = init_locale(dirs, app.config.language, domain)
    if not found:
        return
    for toctree in toctrees:
        caption = catalog.gettext(toctree["caption"])
        if caption and caption != toctree["caption"]:
            toctree["caption"] = toctree["rawcaption"] = caption


# The themes' interface strings that their own catalogs lack, in the book's catalogs: Sphinx
# reads LC_MESSAGES/sphinx.po itself (before its own and pydata-sphinx-theme's); these
# domains' catalogs are compiled here and added behind the theme's.
THEME_DOMAINS = ("booktheme",)


def add_theme_catalogs(app, config) -> None:
    if config.language in (None, "en"):
        return
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    out = Path(app.doctreedir).parent / "attnbook_i18n_locale"
    for domain in THEME_DOMAINS:
        for d in config.locale_dirs:
            po = Path(app.srcdir, d) / config.language / "LC_MESSAGES" / f"{domain}.po"
            if po.is_file():
                mo = out / config.language / "LC_MESSAGES" / f"{domain}.mo"
                mo.parent.mkdir(parents=True, exist_ok=True)
                with po.open("rb") as f:
                    catalog = read_po(f)
                with mo.open("wb") as f:
                    write_mo(f, catalog)
                app.add_message_catalog(domain, str(out))
                break


# myst-nb's words around a folded code cell: its prompts ("Show code cell source", made from
# nb_code_prompt_show's "{type}") and its summary's label, which its HTML writer writes as it is
FOLD_LABEL = 'aria-label="Toggle hidden content"'


def translate_folded_cells(app, doctree, docname) -> None:
    """doctree-resolved: the prompts of a folded code cell in the page's language (from
    LC_MESSAGES/sphinx.po: the whole prompt is the message)."""
    if app.config.language in (None, "en"):
        return
    from myst_nb.sphinx_ import HideCodeCellNode
    from sphinx.locale import _

    for node in doctree.findall(HideCodeCellNode):
        for key in ("prompt_show", "prompt_hide"):
            node[key] = str(_(node[key]))


def translate_fold_label(app, pagename, templatename, context, doctree) -> None:
    if app.config.language in (None, "en") or "body" not in context:
        return
    from html import escape

    from sphinx.locale import _

    label = f'aria-label="{escape(_("Toggle hidden content"))}"'
    context["body"] = context["body"].replace(FOLD_LABEL, label)


# a code cell that shows a concept figure (the chapters' cells: the import, then the call)
DIAGRAM_CELL = re.compile(r'\s*(?:from attnbook\.diagrams import diagram\s*)?diagram\("(\w+)"\)\s*')
SVG = "image/svg+xml"


def diagram_name(cell: dict) -> str | None:
    """The figure a code cell shows, when its source is a ``diagram("name")`` call."""
    if cell.get("cell_type") != "code":
        return None
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    m = DIAGRAM_CELL.fullmatch(source)
    return m.group(1) if m else None


def image_alt(cell: dict) -> str | None:
    """The alt text a code cell gives its image output (myst-nb's ``mystnb.image.alt``)."""
    return cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")


def chinese_diagrams(notebook: dict, lang: str = "zh_CN") -> int:
    """Replace, in ``notebook`` (nbformat's JSON, changed in place), the SVG output of every
    ``diagram("name")`` cell by the figure drawn in ``lang``, and the cell's alt text, when it
    is the figure's own (``Diagram.alt``), by the figure's in ``lang``; returns how many."""
    from attnbook.diagrams import diagram

    count = 0
    for cell in notebook.get("cells", []):
        name = diagram_name(cell)
        if name is None:
            continue
        figure = diagram(name, lang=lang)
        for output in cell.get("outputs", []):
            if SVG in output.get("data", {}):
                output["data"][SVG] = figure.svg.splitlines(keepends=True)
                count += 1
        if image_alt(cell) == diagram(name, lang="en").alt:
            cell["metadata"]["mystnb"]["image"]["alt"] = figure.alt
    return count


def draw_diagrams_in_chinese(app, docname: str, source: list[str]) -> None:
    """source-read: a chapter notebook of the Chinese edition shows its figures in Chinese."""
    if app.config.language != "zh_CN" or not source[0].lstrip().startswith("{"):
        return
    import json

    try:
        notebook = json.loads(source[0])
    except ValueError:
        return
    if isinstance(notebook, dict) and chinese_diagrams(notebook, app.config.language):
        source[0] = json.dumps(notebook, ensure_ascii=False)


def configure(app, config) -> None:
    options = config.html_theme_options
    end = list(options.get("article_header_end") or ["article-header-buttons.html"])
    if COMPONENT not in end:
        options["article_header_end"] = [COMPONENT, *end]
    if config.attnbook_search_bar_text:
        options["search_bar_text"] = config.attnbook_search_bar_text
    if str(TEMPLATES) not in config.templates_path:  # first: its copies of the theme's
        config.templates_path.insert(0, str(TEMPLATES))  # components replace them


def setup(app):
    app.add_config_value("attnbook_shared_root", "", "html")
    app.add_config_value("attnbook_search_bar_text", "", "html")
    app.connect("config-inited", configure)
    app.connect("config-inited", add_theme_catalogs)
    app.connect("doctree-read", translate_captions)
    _patch_glue()  # only translated messages need these; harmless otherwise
    _patch_translations()
    _patch_chinese_search()
    app.connect("doctree-read", _forget)
    app.connect("html-page-context", add_switch)
    app.connect("doctree-resolved", translate_folded_cells)
    app.connect("html-page-context", translate_fold_label)
    app.connect("source-read", draw_diagrams_in_chinese)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
