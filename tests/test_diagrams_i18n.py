"""The concept figures in Chinese (issue 41): every label translated by the catalog
``locale/zh_CN/LC_MESSAGES/diagrams.po``, the English figures unchanged, the Chinese labels
inside their boxes, the glyphs embedded, and the Chinese notebooks showing the Chinese figures."""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
import sys
from pathlib import Path

import polib
import pytest

from attnbook.diagrams import DIAGRAMS, LANGUAGES, canvas, diagram, language

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import attnbook_i18n  # noqa: E402
import diagram_catalog  # noqa: E402
import i18n_check  # noqa: E402
from test_diagrams import assert_labels_inside_and_apart  # noqa: E402

# The English figures as the chapters stored them before the labels became translatable (and
# rnn_encoder_decoder's since its alt text was corrected: the first decoder step reads <s>).
ENGLISH_SHA256 = {
    "add_and_norm": "1595dbf899bbd3edf90e20a612311bb2925fa71bf5698e77d952397d9a37d099",
    "attention_three_steps": "89b17b7c309e11e8850117d10b46ce3a681f413045ba3d09e77a1c8a0a0155af",
    "feed_forward": "84d6fd9487245767c00fb3d6cb0b37b4bb4b06564b6eff5d355046249ab95f7c",
    "kv_cache": "582fe29897ab8115bd0d9735b330839630c306113c409385408880d43f9d2f06",
    "masks": "b363962d3a0d3197df12cd62bed60dcca9986a0344cf5f5f2aa5f66cf4daa1eb",
    "multi_head": "fb7f6af067e548a2142c55136a69cae02db48454ba7df1cecfdcedebc2cd256a",
    "positional_encoding": "504097e41d569b1db7825ded84200ceb0bb5addf0bbdb5546e7c39878ac45aee",
    "qkv_projections": "e47f1aecf96fd1db047fb13db826fb735ab9c4172f9d0708fbd7eb79eb413479",
    "rnn_encoder_decoder": "819580a5fa6189a8a60eeca063ec44ccafc4667a47ad3d040eb67f4999383d6e",
    "rnn_with_attention": "4382bf001f36e07db80689369cf3d624f94528341adf8538cc4a01a821043ee4",
    "score_functions": "7b11ae4b0ccfd062af991f8b7602f09f375a5753f764a03b06900c4af89d0538",
    "self_vs_cross": "d297bc5274bf32253a5b657467c185c07db6bf5a790791697f959da2858900ef",
    "transformer": "cd3dd3330fa7dc49eef9c9d3e236e5c15ddb3aa7a3f76872b7535e2b98491074",
}
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
PO = diagram_catalog.PO


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("name", DIAGRAMS)
def test_the_english_figure_is_byte_identical(name):
    assert sha(diagram(name).svg) == ENGLISH_SHA256[name]
    assert diagram(name, lang="en").svg == diagram(name).svg
    with language("en"):
        assert sha(diagram(name).svg) == ENGLISH_SHA256[name]


def diagram_cells(path: Path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        name = attnbook_i18n.diagram_name(cell)
        if name:
            svgs = [o["data"][attnbook_i18n.SVG] for o in cell["outputs"] if "data" in o]
            yield name, cell, ["".join(s) for s in svgs if s]


CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def test_the_chapters_stored_english_outputs_are_todays_figures():
    seen = set()
    for path in CHAPTERS:
        for name, cell, svgs in diagram_cells(path):
            assert svgs == [diagram(name).svg], f"{path.name}: {name}"
            # the page's alt text is the figure's own (the Chinese page gets its translation)
            assert attnbook_i18n.image_alt(cell) == diagram(name).alt, f"{path.name}: {name}"
            seen.add(name)
    assert seen == set(DIAGRAMS)


def test_the_chinese_notebooks_show_the_chinese_figures():
    seen = set()
    for path in CHAPTERS:
        zh = diagram_catalog.ROOT / "locale" / "zh_CN" / "book" / path.name
        for name, cell, svgs in diagram_cells(zh):
            assert svgs == [diagram(name, lang="zh_CN").svg], f"{zh.name}: {name}"
            assert attnbook_i18n.image_alt(cell) == diagram(name, lang="zh_CN").alt, zh.name
            seen.add(name)
    assert seen == set(DIAGRAMS)


def test_the_catalog_holds_every_label_and_is_compiled():
    """Every label every figure draws is a message (none missing, none left over), and the
    package's .mo is the catalog compiled (python tests/diagram_catalog.py)."""
    assert diagram_catalog.main(["--check"]) == 0
    po = polib.pofile(str(PO))
    assert [e.msgid for e in po] == list(diagram_catalog.messages())


def test_every_label_is_translated_with_the_glossary_terms():
    assert not i18n_check.check(PO)  # no message untranslated, fuzzy or obsolete
    terms = i18n_check.glossary_terms()
    problems = []
    for e in polib.pofile(str(PO)):
        problems += [
            f"{e.msgid!r}: {p}" for p in i18n_check.term_problems(e.msgid, e.msgstr, terms)
        ]
        # a label that keeps its English is math or a name: no English word of 4 letters or more
        # outside the names the book keeps
        if e.msgstr == e.msgid:
            words = set(re.findall(r"(?<![_\w^{])[A-Za-z]{4,}", e.msgid))
            assert words <= {"Attention", "LayerNorm", "Sublayer", "Norm", "Softmax", "softmax",
                             "tanh", "head", "score", "ReLU"}, e.msgid  # fmt: skip
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", DIAGRAMS)
def test_the_chinese_figure_has_a_chinese_title_and_alt_text(name):
    """What a screen reader says of a Chinese figure (its title, and its description: the SVG's
    aria-label and desc, and the page's alt text) is the catalog's translation, plain text."""
    en, zh = diagram(name), diagram(name, lang="zh_CN")
    table = {e.msgid: e.msgstr for e in polib.pofile(str(PO))}
    assert (zh.title, zh.alt) == (table[en.title], table[en.alt])
    for text in (zh.title, zh.alt):
        assert CJK.search(text) and "{" not in text and "}" not in text, text
    assert zh.alt.endswith("。"), zh.alt
    assert f'aria-label="{html.escape(zh.alt)}"' in zh.svg
    assert f"<title>{html.escape(zh.title, quote=False)}</title>" in zh.svg


@pytest.mark.parametrize("name", DIAGRAMS)
def test_the_chinese_figure_draws_only_translations(name):
    table = {e.msgid: e.msgstr for e in polib.pofile(str(PO))}
    _, drawn = canvas._build(name, "zh_CN")
    lines = {line for m in canvas._messages(name) for line in table[m].split("\n")}
    for *_, text in drawn.labels:
        assert text in lines or not canvas._translatable(text), text


@pytest.mark.parametrize("name", DIAGRAMS)
def test_chinese_labels_fit_their_boxes_and_the_figure(name):
    """On the canvas's text widths (CJK one em), every label of a box lies inside it, no two
    labels overlap and none leaves the figure."""
    _, drawn = canvas._build(name, "zh_CN")
    for b, labels in drawn.boxed:
        for x0, y0, w, h, text in labels:
            assert b.x + 2 <= x0 and x0 + w <= b.x + b.w - 2, f"{text!r} is wider than its box"
            assert b.y <= y0 and y0 + h <= b.y + b.h, f"{text!r} is taller than its box"
    assert_labels_inside_and_apart(drawn)


def test_cjk_is_measured_one_em_wide():
    assert canvas._text_width("编码器", 15) == 45
    assert canvas._text_width("（：）", 10) == 30
    assert canvas._text_width("编码器", 15) > canvas._text_width("Enc", 15)


@pytest.mark.parametrize("name", DIAGRAMS)
def test_the_chinese_figure_embeds_the_glyphs_it_draws(name):
    from fontTools.ttLib import TTFont

    svg = diagram(name, lang="zh_CN").svg
    assert svg == diagram(name, lang="zh_CN").svg  # the same bytes every time
    text = "".join(re.findall(r">([^<>]*)<", svg.split("</defs>", 1)[1]))
    chars = set(CJK.findall(text))
    assert chars, "no Chinese label"
    data = re.search(r"url\(data:font/woff;base64,([A-Za-z0-9+/=]+)\)", svg).group(1)
    cmap = TTFont(io.BytesIO(base64.b64decode(data))).getBestCmap()
    assert {ord(c) for c in chars} <= set(cmap)
    assert 'font-family="&#x27;attnbook CJK&#x27;, ' in svg


def test_the_package_font_covers_every_chinese_label():
    from fontTools.ttLib import TTFont

    cmap = TTFont(canvas._CJK_FONT).getBestCmap()
    chars = {c for e in polib.pofile(str(PO)) for c in CJK.findall(e.msgstr)}
    missing = sorted(c for c in chars if ord(c) not in cmap)
    assert not missing, f"run python tests/make_cjk_font.py: {''.join(missing)}"


def test_languages_and_the_context():
    assert LANGUAGES == ("en", "zh_CN")
    with language("zh_CN"):
        assert diagram("masks").svg == diagram("masks", lang="zh_CN").svg
        assert sha(diagram("masks", lang="en").svg) == ENGLISH_SHA256["masks"]
    assert sha(diagram("masks").svg) == ENGLISH_SHA256["masks"]
    with pytest.raises(ValueError, match="zh_CN"):
        diagram("masks", lang="fr")
    with pytest.raises(ValueError, match="zh_CN"), language("de"):
        pass  # pragma: no cover


def test_the_chinese_build_draws_the_figures_in_chinese():
    """book/_ext/attnbook_i18n.py's source-read hook: a chapter read for the Chinese edition has
    its figure cells' SVG replaced, and nothing else; the English edition's is left alone."""
    path = ROOT / "book" / "11_masking.ipynb"
    english = path.read_text(encoding="utf-8")

    class App:
        class config:  # noqa: N801
            language = "zh_CN"

    source = [english]
    attnbook_i18n.draw_diagrams_in_chinese(App, "book/11_masking", source)
    zh, en = json.loads(source[0]), json.loads(english)
    changed = [i for i, (a, b) in enumerate(zip(en["cells"], zh["cells"], strict=True)) if a != b]
    (i,) = changed
    assert attnbook_i18n.diagram_name(en["cells"][i]) == "masks"
    assert (
        "".join(zh["cells"][i]["outputs"][0]["data"][attnbook_i18n.SVG])
        == diagram("masks", lang="zh_CN").svg
    )
    assert attnbook_i18n.image_alt(zh["cells"][i]) == diagram("masks", lang="zh_CN").alt
    App.config.language = "en"
    source = [english]
    attnbook_i18n.draw_diagrams_in_chinese(App, "book/11_masking", source)
    assert source == [english]
