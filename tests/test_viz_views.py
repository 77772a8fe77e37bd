"""Explorer views are legible at the page's width, and Chinese labels are drawn, not boxes.

The book's text column is 768 px wide at a 1280 px window. Every explorer's picture is drawn
``viz.VIEW_WIDTH`` (720) px wide, with its smallest label between 11 and 15 px high, whatever
the figure's size; the browser test (tests/browser/test_layout.py) measures the same views on
the built pages.
"""

import re
import struct
import warnings
from pathlib import Path

import ipywidgets as W
import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from fontTools.ttLib import TTFont  # noqa: E402

from attnbook import viz, widgets  # noqa: E402
from attnbook.positional import sinusoidal_encoding  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def images(widget):
    if isinstance(widget, W.Image):
        yield widget
    for child in getattr(widget, "children", ()):
        yield from images(child)


@pytest.fixture
def drawn_text_px(monkeypatch):
    """The smallest text of every figure view_png renders, in pixels, as it renders it."""
    seen = []
    render = viz.figure_to_png

    def spy(fig, dpi=80, close=True):
        seen.append(viz.smallest_text_px(fig, dpi))
        return render(fig, dpi=dpi, close=close)

    monkeypatch.setattr(viz.views, "figure_to_png", spy)  # where view_png finds it
    return seen


@pytest.mark.parametrize("figsize", [(2.5, 2.5), (7, 2.2), (16, 3)])
def test_view_png_draws_any_figure_the_width_of_the_column_with_readable_text(
    figsize, drawn_text_px
):
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot([0, 1, 2], [1, 0, 1])
    ax.set_title("a title", fontsize=9)
    ax.set_xlabel("position", fontsize=7)
    width, _ = png_size(viz.view_png(fig))
    assert abs(width - viz.VIEW_WIDTH) <= 3
    low, high = viz.VIEW_TEXT_PX
    assert low - 1 <= drawn_text_px[-1] <= high + 1


@pytest.mark.parametrize("width", [0, 100, 2.5, True, 5000])
def test_view_png_refuses_a_width_it_cannot_draw(width):
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="width must be an int number of pixels"):
        viz.view_png(fig, width)
    plt.close(fig)


def _attention(layers, heads, n):
    tokens = [f"t{i}" for i in range(n)]
    w = torch.rand(layers, heads, n, n).softmax(-1)
    return [{"name": "x", "attention": {"self": (w, tokens, tokens)}}]


EXPLORERS = {
    "decoder steps": lambda: widgets.decoder_steps_explorer(
        list("abcdef"),
        ["猫", "坐在", "垫子", "上"],
        torch.rand(4, 6),
        torch.rand(4, 6),
        torch.rand(4, 3),
    ),
    "attention, 1 head": lambda: widgets.attention_explorer(_attention(1, 1, 5)),
    "attention, 8 heads": lambda: widgets.attention_explorer(_attention(2, 8, 12)),
    "positional encoding": lambda: widgets.positional_encoding_explorer(
        sinusoidal_encoding(50, 64)
    ),
    "temperature": lambda: widgets.temperature_explorer((1, 64)),
    "selector over figures": lambda: widgets.static_selector(
        [plt.subplots(figsize=(3, 2))[0], plt.subplots(figsize=(12, 3))[0]], ["small", "wide"]
    ),
}


@pytest.mark.parametrize("kind", EXPLORERS)
def test_every_explorer_view_is_at_least_600_px_wide_with_labels_at_least_10_px(
    kind, drawn_text_px
):
    views = list(images(EXPLORERS[kind]()))
    assert views
    widths = [png_size(v.value)[0] for v in views]
    assert min(widths) >= 600, f"{kind}: views {widths} px wide"
    assert all(v.layout.max_width == "100%" for v in views)  # narrower screens scale it down
    assert min(drawn_text_px) >= 10, f"{kind}: smallest text {min(drawn_text_px):.1f} px"


def test_eight_heads_wrap_into_two_rows_of_four():
    fig = viz.attention_grid(torch.rand(8, 5, 5), max_cols=4)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 8
    assert {round(ax.get_position().y0, 2) for ax in shown}.__len__() == 2
    assert [ax.get_title() for ax in shown][4] == "layer 1, head 5"
    with pytest.raises(ValueError, match="max_cols must be a positive int"):
        viz.attention_grid(torch.rand(2, 5, 5), max_cols=0)
    plt.close("all")


# ---- Chinese labels -------------------------------------------------------------------------

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def test_chinese_labels_are_drawn_with_the_shipped_font_without_missing_glyphs():
    assert viz.CJK_FONT in plt.rcParams["font.family"]
    fig, ax = plt.subplots(figsize=(3, 1))
    ax.set_xticks([0, 1, 2], ["猫", "学生", "术语表"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        viz.figure_to_png(fig)


def test_the_font_has_every_chinese_character_the_book_uses():
    font = TTFont(Path(viz.__file__).parent.with_name("fonts") / "NotoSansSC-attnbook.otf")
    cmap = font.getBestCmap()
    used = {
        c
        for f in [*ROOT.glob("book/*.ipynb"), *ROOT.glob("src/**/*.py")]
        for c in CJK.findall(f.read_text(encoding="utf-8"))
    }
    missing = sorted(c for c in used if ord(c) not in cmap)
    assert not missing, f"run tests/make_cjk_font.py: the font lacks {''.join(missing)}"
    assert (
        Path(viz.__file__).parent.with_name("fonts") / "OFL.txt"
    ).exists()  # its license ships too
