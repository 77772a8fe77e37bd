"""The Chinese edition (issue 41): its catalogs, its notebooks, its configuration and the checks
of its built pages.

Completeness is checked page by page: a page listed in ``locale/zh_CN/translated.txt`` (the
translators add a page there when they have finished it) must have every message translated and
none fuzzy; until every page is listed, ``test_pages_still_to_translate`` is skipped and names
the rest. What any translation must keep (formulas, code, roles' targets, link targets), the
glossary's terms, and obsolete messages are checked on every catalog, listed or not.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import polib
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import attnbook_i18n  # noqa: E402
import book_i18n  # noqa: E402
import check_built_book  # noqa: E402
import i18n_check  # noqa: E402
import translate_notebooks  # noqa: E402

CATALOGS = sorted((ROOT / "locale" / "zh_CN" / "LC_MESSAGES" / "book").rglob("*.po"))
# the themes' interface strings (book/_ext/attnbook_i18n.py)
UI_CATALOGS = sorted((ROOT / "locale" / "zh_CN" / "LC_MESSAGES").glob("*.po"))
TRANSLATED = ROOT / "locale" / "zh_CN" / "translated.txt"


def declared_pages() -> list[str]:
    lines = TRANSLATED.read_text(encoding="utf-8").splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def page_of(po: Path) -> str:
    return po.relative_to(ROOT / "locale" / "zh_CN" / "LC_MESSAGES").with_suffix("").as_posix()


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]
    for part in toc["parts"]:
        pages += [c["file"] for c in part["chapters"]]
    return pages


# --- the catalogs --------------------------------------------------------------------------


def test_there_is_one_catalog_per_page_of_the_book():
    assert sorted(map(page_of, CATALOGS)) == sorted(toc_pages())


def test_the_declared_pages_are_pages_of_the_book():
    unknown = set(declared_pages()) - set(toc_pages())
    assert not unknown, f"{TRANSLATED.name} lists pages the book does not have: {unknown}"


@pytest.mark.parametrize("po", CATALOGS, ids=page_of)
def test_catalog(po):
    """No obsolete message (the English it translated is gone: make catalogs removes it from
    the lists, the translators delete it); every translation keeps the formulas, code, roles'
    targets and link targets of its English, and names the glossary's terms in Chinese; a page
    declared translated has every message translated and none fuzzy."""
    declared = page_of(po) in declared_pages()
    terms = i18n_check.glossary_terms()
    problems = [
        p
        for p in i18n_check.check(po) + i18n_check.check_blocks(po)
        if declared or not (": untranslated: " in p or ": fuzzy: " in p)
    ]
    for entry in polib.pofile(str(po)).translated_entries():
        problems += [
            f"{po.name}:{entry.linenum}: {p}"
            for p in i18n_check.term_problems(entry.msgid, entry.msgstr, terms)
        ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("po", UI_CATALOGS, ids=lambda p: p.stem)
def test_the_interface_catalogs_are_complete(po):
    # diagrams: the concept figures' labels (tests/diagram_catalog.py, test_diagrams_i18n.py);
    # live: the words of chapter 13's live block (tests/live_catalog.py, test_live.py)
    assert [p.stem for p in UI_CATALOGS] == ["booktheme", "diagrams", "live", "sphinx"]
    assert not i18n_check.check(po)


def test_pages_still_to_translate():
    rest = sorted(set(toc_pages()) - set(declared_pages()))
    if rest:
        pytest.skip(f"{len(rest)} pages not declared translated yet: {' '.join(rest)}")


def test_kept_parts_see_code_before_roles():
    """`{term}` written as inline code is code, not the start of a role."""
    parts = i18n_check.kept("the `{term}` role; {ref}`notation <notation>`, $d_k$ [a](b.md)")
    assert parts == {"`{term}`": 1, "{ref} -> notation": 1, "$d_k$": 1, "link -> b.md": 1}
    assert i18n_check.kept("{ref}`符号 <notation>`") == i18n_check.kept(
        "{ref}`the notation <notation>`"
    )
    assert i18n_check.kept("{ref}`符号 <notation2>`") != i18n_check.kept("{ref}`x <notation>`")


@pytest.mark.parametrize(
    "msgid,msgstr,bad",
    [
        (
            "The {term}`attention weights (注意力权重) <Attention weights (注意力权重)>` sum to 1.",
            "{term}`注意力权重 <Attention weights (注意力权重)>` 之和为 1。",
            False,
        ),
        (
            "The {term}`attention weights (注意力权重) <Attention weights (注意力权重)>` sum to 1.",
            "{term}`权重 <Attention weights (注意力权重)>` 之和为 1。",
            True,
        ),
        ("Layer normalisation rescales each position.", "层归一化对每个位置重新缩放。", False),
        ("Layer normalisation rescales each position.", "层规范化对每个位置重新缩放。", True),
        ("The look-ahead mask hides the future.", "因果掩码遮住未来。", False),
        ("A key and a value.", "一个 key 和一个 value。", False),  # single words: not checked
        ("$x$", "$x$", False),
    ],
)
def test_glossary_terms_in_translations(msgid, msgstr, bad):
    problems = i18n_check.term_problems(msgid, msgstr, i18n_check.glossary_terms())
    assert bool(problems) == bad, problems


def test_the_glossary_gives_every_term_a_chinese_name():
    terms = i18n_check.glossary_terms()
    assert len(terms) >= 80
    assert terms["Look-ahead mask"] == ["前瞻掩码", "因果掩码"]


def test_an_edited_english_sentence_makes_its_page_fail(tmp_path):
    """After the English changes, `make catalogs` (sphinx-intl update) marks the message fuzzy
    (or leaves it untranslated), and a page declared translated then fails its check."""
    from sphinx_intl import basic

    page = "book/10_feed_forward"
    source = ROOT / "locale" / "zh_CN" / "LC_MESSAGES" / f"{page}.po"
    catalog = polib.pofile(str(source))
    for entry in catalog:  # a complete translation, as the translators' will be
        entry.msgstr = i18n_check.pseudo_translate(entry.msgid, i18n_check.is_docstring(entry))
        entry.flags = [f for f in entry.flags if f != "fuzzy"]
    locale = tmp_path / "locale"
    po = locale / "zh_CN" / "LC_MESSAGES" / f"{page}.po"
    po.parent.mkdir(parents=True)
    catalog.save(str(po))
    assert not i18n_check.check(po)
    # the template the gettext builder would write after one sentence of the page changed
    template = polib.POFile()
    template.metadata = dict(catalog.metadata)
    edited = next(e for e in catalog if len(e.msgid.split()) > 12)
    for entry in catalog:
        msgid = entry.msgid
        if entry is edited:
            msgid = msgid.replace(msgid.split()[3], msgid.split()[3] + " very", 1)
        template.append(polib.POEntry(msgid=msgid, occurrences=entry.occurrences))
    pot = tmp_path / "gettext" / f"{page}.pot"
    pot.parent.mkdir(parents=True)
    template.save(str(pot))
    basic.update(str(locale), str(tmp_path / "gettext"), ("zh_CN",))
    problems = i18n_check.check(po)
    assert problems, "the edited message passed as translated"
    assert any(": fuzzy: " in p or ": untranslated: " in p for p in problems), problems


# --- the Chinese notebooks ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pseudo_locale(tmp_path_factory):
    """Every catalog translated by i18n_check.pseudo_translate (no English word left)."""
    locale = tmp_path_factory.mktemp("locale")
    for po in CATALOGS:
        catalog = polib.pofile(str(po))
        for entry in catalog:
            rst = i18n_check.is_docstring(entry)
            entry.msgstr = i18n_check.pseudo_translate(entry.msgid, rst)
            entry.flags = [f for f in entry.flags if f != "fuzzy"]
        out = locale / "zh_CN" / "LC_MESSAGES" / po.relative_to(CATALOGS[0].parents[1])
        out.parent.mkdir(parents=True, exist_ok=True)
        catalog.save(str(out))
    return locale


CHAPTERS = translate_notebooks.chapters()


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_every_message_of_a_chapter_is_replaced_in_its_notebook(notebook, pseudo_locale):
    """With every message translated, the Chinese notebook has no English prose left in its
    Markdown, and its code cells, outputs and metadata are the English notebook's."""
    result = translate_notebooks.translate(notebook, pseudo_locale)
    assert not result.missing, "\n".join(result.missing)
    english = json.loads(notebook.read_text(encoding="utf-8"))
    assert_same_but_markdown(english, result.notebook)
    for i, cell in enumerate(result.notebook["cells"]):
        if cell["cell_type"] == "markdown":
            prose = markdown_prose(translate_notebooks.source_text(cell))
            assert not i18n_check.english_runs(prose), (i, i18n_check.english_runs(prose))


@pytest.mark.parametrize(
    "page", ["intro", "how_to_run", "notation", "glossary", "api", "references"]
)
def test_every_message_of_a_markdown_page_is_replaced_in_its_source(page, pseudo_locale):
    """The Chinese pages' download button gives the page's source translated (book_i18n.py
    place writes it)."""
    po = pseudo_locale / "zh_CN" / "LC_MESSAGES" / "book" / f"{page}.po"
    source = (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")
    text, result = translate_notebooks.translate_markdown(
        source, polib.pofile(str(po)), f"{page}.md"
    )
    assert not result.missing, "\n".join(result.missing)
    assert result.replaced >= 2 and text != source
    assert not i18n_check.english_runs(markdown_prose(text))


def markdown_prose(text: str) -> str:
    """A Markdown cell's text without what stays English: code, math, roles, targets, labels,
    directive options."""
    import re

    held: list[str] = []
    text = translate_notebooks.mask_fences(text, held)
    text = i18n_check._PART.sub(" ", text)
    text = re.sub(
        r"\]\([^)]*\)|<[^<>\n]*>|^\s*:[\w-]+:.*$|^\(.*\)=$|\{[\w:-]+\}", " ", text, flags=re.M
    )
    return text


def assert_same_but_markdown(english: dict, chinese: dict) -> None:
    assert {k: v for k, v in chinese.items() if k != "cells"} == {
        k: v for k, v in english.items() if k != "cells"
    }, "the notebook's metadata differ"
    assert len(chinese["cells"]) == len(english["cells"])
    for i, (en, zh) in enumerate(zip(english["cells"], chinese["cells"], strict=True)):
        if en["cell_type"] == "markdown":
            assert {k: v for k, v in zh.items() if k != "source"} == {
                k: v for k, v in en.items() if k != "source"
            }, f"Markdown cell {i}: more than its text differs"
        elif name := attnbook_i18n.diagram_name(en):
            # a concept figure: its SVG output is the Chinese drawing, the rest the English cell's
            from attnbook.diagrams import diagram

            svg = attnbook_i18n.SVG
            zh_svgs = ["".join(o["data"][svg]) for o in zh["outputs"] if svg in o.get("data", {})]
            assert zh_svgs == [diagram(name, lang="zh_CN").svg], f"cell {i}: figure {name}"
            # and its alt text is the Chinese figure's
            assert attnbook_i18n.image_alt(zh) == diagram(name, lang="zh_CN").alt, f"cell {i}"
            back = copy.deepcopy(zh)
            back["metadata"]["mystnb"]["image"]["alt"] = attnbook_i18n.image_alt(en)
            for out_zh, out_en in zip(back["outputs"], en["outputs"], strict=True):
                if svg in out_zh.get("data", {}):
                    out_zh["data"][svg] = out_en["data"][svg]
            assert back == en, f"cell {i} (code, figure {name}): more than its SVG differs"
        else:
            assert zh == en, f"cell {i} ({en['cell_type']}) differs"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_the_committed_chinese_notebooks_are_up_to_date(notebook):
    """locale/zh_CN/book/ holds each chapter as the catalogs translate it today (make
    zh-notebooks writes them), with the English notebook's code, outputs and metadata."""
    committed = translate_notebooks.OUT / notebook.name
    assert committed.is_file(), f"{committed} is missing: run make zh-notebooks"
    result = translate_notebooks.translate(notebook)
    assert not result.missing, "\n".join(result.missing)
    fresh = translate_notebooks.write_notebook(result.notebook)
    up_to_date = committed.read_text(encoding="utf-8") == fresh  # not compared by pytest: huge
    assert up_to_date, f"{committed.relative_to(ROOT)} is not up to date: run make zh-notebooks"
    assert_same_but_markdown(
        json.loads(notebook.read_text(encoding="utf-8")),
        json.loads(committed.read_text(encoding="utf-8")),
    )


def test_a_message_the_generator_cannot_find_is_reported():
    notebook = ROOT / "book" / "10_feed_forward.ipynb"
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    catalog = polib.pofile(str(translate_notebooks.catalog_for(notebook)))
    entry = next(e for e in catalog if len(e.msgid.split()) > 8 and e.occurrences[0][1])
    cell = translate_notebooks.cell_of(entry.occurrences[0][1])
    broken = copy.deepcopy(nb)
    text = translate_notebooks.source_text(broken["cells"][cell])
    first = entry.msgid.split()[2]
    broken["cells"][cell]["source"] = text.replace(f" {first} ", f" {first}x ", 1)
    result = translate_notebooks.translate_notebook(broken, catalog, notebook.name)
    assert any(entry.msgid[:40] in m for m in result.missing), result.missing
    assert not translate_notebooks.translate_notebook(nb, catalog, notebook.name).missing


def test_a_short_message_is_replaced_only_where_it_is_a_whole_block():
    catalog = polib.POFile()
    for msgid, msgstr in [("Solution 2", "答案 2"), ("yes", "是"), ("A table cell", "表格")]:
        catalog.append(polib.POEntry(msgid=msgid, msgstr=msgstr, occurrences=[("x.ipynb", "")]))
    cell = (
        "```{admonition} Solution 2\n:class: dropdown\nSee Solution 2 above: yes.\n```\n\n"
        "| A table cell | yes |\n|---|---|\n\n```python\nyes\n```\n"
    )
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": cell}]}
    result = translate_notebooks.translate_notebook(nb, catalog, "x.ipynb")
    assert not result.missing
    assert "".join(result.notebook["cells"][0]["source"]) == (
        "```{admonition} 答案 2\n:class: dropdown\nSee Solution 2 above: yes.\n```\n\n"
        "| 表格 | 是 |\n|---|---|\n\n```python\nyes\n```\n"
    )


# --- the Chinese edition's configuration and its links ----------------------------------------


def english_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def test_the_chinese_configuration_is_the_english_one_with_its_changes():
    english = english_config()
    chinese = book_i18n.chinese_config(english, where=ROOT / "_build" / "zh_CN")
    sphinx = chinese["sphinx"]["config"]
    assert sphinx["language"] == "zh_CN" and sphinx["gettext_compact"] is False
    assert sphinx["html_extra_path"] == []  # the English edition's vendor/ and live/, shared
    # from zh_CN/_static/, ../../vendor/ is the site's vendor/
    assert sphinx["mathjax_path"] == "../" + english["sphinx"]["config"]["mathjax_path"]
    assert list(sphinx["nb_ipywidgets_js"]) == [
        k if k == "" else "../" + k for k in english["sphinx"]["config"]["nb_ipywidgets_js"]
    ], "the scripts, in the English order (require.js first)"
    assert chinese["html"]["baseurl"] == english["html"]["baseurl"] + "zh_CN/"
    assert chinese["repository"]["path_to_book"] == "locale/zh_CN"
    same = {k for k in english if k not in ("sphinx", "html", "repository")}
    assert {k: chinese[k] for k in same} == {k: english[k] for k in same}


def test_the_translators_may_set_only_what_is_text():
    book_i18n.chinese_config(english_config(), overlay={"html": {"extra_footer": "许可"}})
    with pytest.raises(SystemExit, match="may set only"):
        book_i18n.chinese_config(
            english_config(), overlay={"execute": {"execute_notebooks": "force"}}
        )


@pytest.mark.parametrize(
    "language,page,url",
    [
        ("en", "book/03_attention_three_steps", "../zh_CN/book/03_attention_three_steps.html"),
        ("zh_CN", "book/03_attention_three_steps", "../../book/03_attention_three_steps.html"),
        ("en", "search", "zh_CN/search.html"),
        ("zh_CN", "genindex", "../genindex.html"),
    ],
)
def test_the_language_switch_links_to_the_same_page(language, page, url):
    (link,) = attnbook_i18n.switch_links(language, page)
    assert link["url"] == url
    assert link["label"] == ("中文" if language == "en" else "English")


def test_the_live_block_finds_the_shared_files_one_folder_up():
    body = '{"model":"live/d.onnx","sidecar":"live/d.json","runtime":"vendor/ort/","x":"live/"}'
    ctx = {"body": body}

    class App:
        class config:
            language = "zh_CN"
            attnbook_shared_root = "../"

    attnbook_i18n.add_switch(App, "book/13_transformer", "page.html", ctx, doctree=object())
    assert ctx["body"] == (
        '{"model":"../live/d.onnx","sidecar":"../live/d.json","runtime":"../vendor/ort/",'
        '"x":"live/"}'
    )


# --- the checks of the built pages (tests/check_built_book.py) -------------------------------


def page(body: str, switch: str | None) -> str:
    nav = (
        f'<nav class="attnbook-language"><a class="attnbook-language-link" href="{switch}">x</a></nav>'
        if switch is not None
        else ""
    )
    return f"<html><body><div class='header'>{nav}</div><article>{body}</article></body></html>"


def make_site(root: Path, en_body: str = "<p>An English page.</p>", zh_body: str = "<p>中文。</p>"):
    for name in ("book/a", "index2"):
        depth = "../" * name.count("/")
        for folder, other, body in (
            ("", f"{depth}zh_CN/", en_body),
            ("zh_CN/", f"{depth}../", zh_body),
        ):
            path = root / folder / f"{name}.html"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page(body, f"{other}{name}.html"), encoding="utf-8")
    (root / "zh_CN" / ".buildinfo").write_text("")


def test_the_switch_walk_passes_on_a_good_site(tmp_path):
    make_site(tmp_path)
    assert check_built_book.language_switch_problems(tmp_path) == []


def test_the_switch_walk_finds_a_missing_or_wrong_switch(tmp_path):
    make_site(tmp_path)
    (tmp_path / "book" / "a.html").write_text(page("<p>x</p>", "../zh_CN/index2.html"))
    (tmp_path / "zh_CN" / "index2.html").write_text(page("<p>x</p>", None))
    problems = check_built_book.language_switch_problems(tmp_path)
    assert any("book/a.html" in p and "leads to" in p for p in problems), problems
    assert any("zh_CN/index2.html" in p and "no language switch" in p for p in problems), problems


@pytest.mark.parametrize(
    "body,bad",
    [
        ("<p>注意力把每个查询与每个键比较。</p>", False),
        ("<p>注意力 compares every query with every key here.</p>", True),
        ("<h2>The decoder and its attention weights</h2>", True),
        ("<li>见 <code>the code is not prose at all</code>。</li>", False),
        ('<p>论文 <span class="math">\\text{one two three four five}</span>。</p>', False),
        ("<p>引自论文：“Attention is all you need, they said.”</p>", False),
        ('<p>值为 <span class="pasted-text">not a translation of any text</span>。</p>', False),
        ('<div class="cell_output"><p>printed by the code in English words</p></div>', False),
        ("<p>Bahdanau 等人（2014）提出。</p>", False),
        ("<p>把 <em>The cat sat on the mat</em> 译成中文。</p>", False),  # an example, quoted
        ("<p>把 <em>这句 and the rest of it in English</em> 译成中文。</p>", True),
    ],
)
def test_english_left_in_a_chinese_page(tmp_path, body, bad):
    html = tmp_path / "p.html"
    html.write_text(page(body, "x.html"), encoding="utf-8")
    assert bool(check_built_book.english_left(html)) == bad


def test_the_config_generator_runs_on_the_real_config(tmp_path):
    out = book_i18n.write_config(out=tmp_path / "_config.yml")
    cfg = yaml.safe_load(out.read_text(encoding="utf-8"))
    for name, path in cfg["sphinx"]["local_extensions"].items():
        assert (tmp_path / path / f"{name}.py").resolve().is_file()
