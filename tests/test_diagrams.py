"""The concept figures: valid, accessible, legible SVG, the same bytes on every run."""

import re
import xml.etree.ElementTree as ET

import pytest

from attnbook import diagrams
from attnbook.diagrams import DIAGRAMS, MIN_FONT_PX, WIDTH, Diagram, canvas, diagram

SVG = "{http://www.w3.org/2000/svg}"

# The names the book's chapters insert; the registry may hold more.
NAMES = {
    "rnn_encoder_decoder",
    "attention_three_steps",
    "rnn_with_attention",
    "score_functions",
    "qkv_projections",
    "self_vs_cross",
    "multi_head",
    "masks",
    "positional_encoding",
    "add_and_norm",
    "feed_forward",
    "transformer",
    "kv_cache",
}


def test_the_registry_holds_every_figure_the_book_uses():
    assert NAMES <= set(DIAGRAMS)
    assert len(DIAGRAMS) >= 12
    assert len(DIAGRAMS) == len(set(DIAGRAMS))


@pytest.mark.parametrize("bad", ["mask", "", "MASKS", None, 3])
def test_a_bad_name_raises_and_lists_the_valid_ones(bad):
    with pytest.raises(ValueError, match="masks") as info:
        diagram(bad)
    for name in DIAGRAMS:
        assert name in str(info.value)


@pytest.fixture(params=DIAGRAMS)
def fig(request) -> Diagram:
    return diagram(request.param)


def test_it_is_byte_identical_on_every_call(fig):
    again = diagram(fig.name)
    assert again.svg == fig.svg
    assert repr(again) == repr(fig) == f"<Diagram {fig.name!r}: {fig.title}>"


def test_jupyter_shows_it_as_svg(fig):
    assert fig._repr_svg_() == fig.svg
    assert fig.svg.startswith("<svg ") and fig.svg.endswith("</svg>\n")
    # nothing that changes between runs or machines
    assert not re.search(r"\d{4}-\d{2}-\d{2}|0x[0-9a-f]{6,}", fig.svg)


def test_it_parses_and_has_a_view_box_sized_for_the_column(fig):
    root = ET.fromstring(fig.svg)
    assert root.tag == SVG + "svg"
    x, y, w, h = (float(v) for v in root.get("viewBox").split())
    assert (x, y) == (0, 0) and w == WIDTH and h > 0
    assert float(root.get("width")) == WIDTH and float(root.get("height")) == h


def test_it_has_a_title_and_alt_text(fig):
    root = ET.fromstring(fig.svg)
    assert root.get("role") == "img"
    assert root.get("aria-label") == fig.alt
    title = root.find(SVG + "title")
    assert title is not None and title.text == fig.title and len(fig.title) > 10
    assert root.find(SVG + "desc").text == fig.alt
    # at least a sentence: several words, ending with a full stop
    assert len(fig.alt.split()) >= 12 and fig.alt.endswith(".")


def test_no_text_is_smaller_than_13_px_at_the_display_width(fig):
    root = ET.fromstring(fig.svg)
    scale = float(root.get("width")) / float(root.get("viewBox").split()[2])
    sizes = [float(root.get("font-size"))]
    for el in root.iter():
        if el.tag in (SVG + "text", SVG + "tspan") and el.get("font-size"):
            sizes.append(float(el.get("font-size")))
    texts = list(root.iter(SVG + "text"))
    assert texts, "a figure without labels"
    assert all(t.get("font-size") for t in texts), "every label names its size"
    assert min(sizes) * scale >= MIN_FONT_PX


def test_one_font_family(fig):
    root = ET.fromstring(fig.svg)
    assert root.get("font-family").endswith("sans-serif")
    assert not [el for el in root.iter() if el.get("font-family") and el is not root]


def test_labels_do_not_overlap_or_leave_the_figure(fig):
    """On estimated text extents (generous widths), no two labels collide and none is cut."""
    _, drawn = canvas._build(fig.name)
    assert_labels_inside_and_apart(drawn)


def assert_labels_inside_and_apart(drawn) -> None:
    """Every label of a drawn canvas lies inside the figure, and no two labels overlap (the
    Chinese figures are held to it too: tests/test_diagrams_i18n.py)."""
    boxes = drawn.labels
    for x0, y0, w, h, text in boxes:
        assert 0 <= x0 and x0 + w <= drawn.width, f"{text!r} leaves the figure sideways"
        assert 0 <= y0 and y0 + h <= drawn.height, f"{text!r} leaves the figure"
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = (
                a[0] + a[2] <= b[0]
                or b[0] + b[2] <= a[0]
                or a[1] + a[3] <= b[1]
                or b[1] + b[3] <= a[1]
            )
            assert apart, f"labels {a[4]!r} and {b[4]!r} overlap"


def test_arrow_markers_are_defined_and_named_for_the_figure(fig):
    root = ET.fromstring(fig.svg)
    ids = {m.get("id") for m in root.iter(SVG + "marker")}
    assert all(i.startswith(fig.name + "-") for i in ids)
    used = set(re.findall(r"url\(#([^)]+)\)", fig.svg))
    assert used <= ids


def test_colours_come_from_the_palette():
    allowed = {c.upper() for c in diagrams.PALETTE.values()}
    for name in DIAGRAMS:
        svg = diagram(name).svg
        strokes = {c.upper() for c in re.findall(r'stroke="(#[0-9A-Fa-f]{6})"', svg)}
        # strokes are palette colours, their darker versions, or the greys of frames and grids
        extra = (
            strokes - allowed - {"#FFFFFF", "#DDDDDD", "#CCCCCC", "#A89B00", "#B07A00", "#2B8CC4"}
        )
        assert not extra, (name, extra)


def test_markup_becomes_sub_and_superscripts():
    assert canvas._runs("α_{t,i} W^Q x") == [
        ("", "α"),
        ("_", "t,i"),
        ("", " W"),
        ("^", "Q"),
        ("", " x"),
    ]
    assert canvas._runs(r"norm\_first") == [("", "norm_first")]
    assert canvas._text_width("h_S", 15) > canvas._text_width("h", 15)


def test_alt_text_is_plain_text():
    assert canvas._plain("s_{t-1}, α_{t,i}, x_S, d_{model}, W^Q") == "sₜ₋₁, αₜ,ᵢ, x_S, d_model, W^Q"
    for name in DIAGRAMS:
        assert "{" not in diagram(name).alt and "}" not in diagram(name).alt
