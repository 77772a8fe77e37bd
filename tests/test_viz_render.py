"""The fast way views are drawn gives the same pictures as the plain one.

``view_png`` draws a figure once: it measures the tight crop itself instead of letting
``savefig(bbox_inches="tight")`` draw twice, and ``attention_explorer`` redraws one figure with
each next layer's weights instead of building and laying out a new one. These tests hold the
fast paths to the pictures the plain ones draw, byte for byte, at the width and text size an
explorer's view must have (benchmarks/render_speed.py records how much faster they are).
"""

import io
import struct

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attnbook import viz, widgets  # noqa: E402
from attnbook.viz.figures import _redraw_attention_grid  # noqa: E402
from attnbook.widgets import explorers  # noqa: E402


def png_width(data: bytes) -> int:
    assert bytes(data[:8]) == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">I", bytes(data[16:20]))[0]


def dates_map(seed: int, shape=(4, 11, 20)) -> np.ndarray:
    """Attention-like rows (each sums to 1), the size of chapter 14's cross-attention."""
    return np.random.default_rng(seed).dirichlet(np.ones(shape[-1]), size=shape[:-1])


KEYS, QUERIES = list("Wednesday 9 May 2018"), [*"2018-05-09", "<eos>"]

FIGURES = {
    "grid of heads": lambda: viz.attention_grid(
        dates_map(0), KEYS, QUERIES, layer_names=["cross, layer 1"], max_cols=4
    ),
    "labelled plot": lambda: _plot(),
    "constrained layout": lambda: _plot(layout="constrained"),
}


def _plot(**kw):
    fig, ax = plt.subplots(figsize=(6, 2.5), **kw)
    ax.plot([0, 1, 2], [1, 0, 1])
    ax.set_title("a title", fontsize=9)
    ax.set_xlabel("position")
    ax.set_ylabel("")
    return fig


def savefig_tight(fig, dpi) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


@pytest.mark.parametrize("kind", FIGURES)
def test_figure_to_png_draws_what_savefig_tight_draws(kind):
    fig = FIGURES[kind]()
    expected = savefig_tight(fig, 47.5)
    assert viz.figure_to_png(fig, dpi=47.5, close=False) == expected
    assert viz.figure_to_png(fig, dpi=47.5) == expected  # twice: nothing left changed


def test_a_view_of_a_grid_is_drawn_once(monkeypatch):
    draws = []
    draw = Figure.draw

    def counted(self, renderer):
        draws.append(self)
        return draw(self, renderer)

    monkeypatch.setattr(Figure, "draw", counted)
    fig = FIGURES["grid of heads"]()
    data = viz.view_png(fig)
    assert draws == [fig]  # savefig(bbox_inches="tight") alone would draw it twice
    assert abs(png_width(data) - viz.VIEW_WIDTH) <= 1


def test_an_empty_axis_label_stays_put_only_while_drawing():
    fig = _plot()
    viz.figure_to_png(fig, close=False)
    fig.axes[0].set_ylabel("a label set afterwards")  # placed beside the tick labels as usual
    fresh = _plot()
    fresh.axes[0].set_ylabel("a label set afterwards")
    assert savefig_tight(fig, 60) == savefig_tight(fresh, 60)
    plt.close("all")


def attention(layers, heads, keys, queries, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(layers, heads, len(queries), len(keys), generator=g).softmax(-1)


def test_attention_explorer_redraws_each_layer_as_a_new_figure_would(monkeypatch):
    grids = []
    grid = viz.attention_grid

    def counted(*args, **kwargs):
        grids.append(kwargs["layer_names"])
        return grid(*args, **kwargs)

    monkeypatch.setattr(viz, "attention_grid", counted)  # where the explorer finds it
    types = {  # a long name, wider than its map at the view's size, and a short one
        "decoder self (masked)": (attention(2, 4, QUERIES, QUERIES, 1), QUERIES, QUERIES),
        "cross": (attention(2, 4, KEYS, QUERIES, 2), KEYS, QUERIES),
    }
    box = widgets.attention_explorer([{"name": "d", "attention": types}])
    assert grids == [["decoder self (masked), layer 1"], ["cross, layer 1"]]  # one per type
    monkeypatch.setattr(viz, "attention_grid", grid)
    low, high = viz.VIEW_TEXT_PX
    for t, (name, (w, keys, queries)) in enumerate(types.items()):
        for layer in range(2):
            box.controls[1].index, box.controls[2].value = t, layer
            shown = bytes(widgets.shown_view(box).value)
            cols = explorers._columns(4, len(keys), f"{name}, layer 2, head 4", viz.VIEW_WIDTH)
            fig = viz.attention_grid(
                w[layer], keys, queries, layer_names=[f"{name}, layer {layer + 1}"], max_cols=cols
            )
            fresh, dpi = viz.views._render_view(fig, close=False)
            assert low - 0.25 <= viz.smallest_text_px(fig, dpi) <= high + 0.25
            plt.close(fig)
            assert shown == fresh, f"{name}, layer {layer + 1}"
            assert abs(png_width(shown) - viz.VIEW_WIDTH) <= 1


def test_a_title_that_changes_size_gets_a_new_figure():
    tokens = list("abc")
    w = attention(10, 2, tokens, tokens)
    box = widgets.attention_explorer([{"name": "x", "attention": {"self": (w, tokens, tokens)}}])
    for layer in (8, 9):  # "layer 10" is wider than "layer 9": laid out anew
        box.controls[2].value = layer
        fresh = viz.view_png(
            viz.attention_grid(
                w[layer], tokens, tokens, layer_names=[f"self, layer {layer + 1}"], max_cols=4
            )
        )
        assert bytes(widgets.shown_view(box).value) == fresh


def test_redraw_attention_grid_checks_the_figure_and_the_titles():
    fig = viz.attention_grid(attention(1, 2, "abc", "abc")[0], layer_names=["self, layer 9"])
    assert not _redraw_attention_grid(
        fig, attention(1, 2, "abc", "abc")[0], layer_names=["self, layer 10"]
    )
    assert [ax.get_title() for ax in fig.axes] == ["self, layer 9, head 1", "self, layer 9, head 2"]
    new = attention(1, 2, "abc", "abc", seed=5)[0]
    assert _redraw_attention_grid(fig, new, layer_names=["self, layer 8"])
    assert [ax.get_title() for ax in fig.axes] == ["self, layer 8, head 1", "self, layer 8, head 2"]
    assert np.array_equal(fig.axes[1].images[0].get_array(), new[1].numpy())
    with pytest.raises(ValueError, match="weights must have the grid's shape"):
        _redraw_attention_grid(fig, attention(1, 2, "abcd", "abc")[0])
    with pytest.raises(ValueError, match="fig must hold a 1 x 3 grid"):
        _redraw_attention_grid(fig, attention(1, 3, "abc", "abc")[0])
    plt.close(fig)


def test_an_explorers_maps_keep_their_labels_apart():
    """Four heads in a row where each map gives every key 15 px and its title room, else a
    2 x 2 grid: chapter 14's 20-character dates in a row of four drew 9 px rows whose labels
    overlapped, and "decoder self (masked), layer 1, head 1" ran into the next title."""
    width = viz.VIEW_WIDTH
    assert explorers._columns(4, 6, "self, layer 1, head 4", width) == 4
    assert explorers._columns(8, 6, "self, layer 1, head 8", width) == 4
    assert explorers._columns(4, 20, "cross, layer 1, head 4", width) == 2  # long dates
    assert explorers._columns(4, 8, "decoder self (masked), layer 1, head 4", width) == 2
    assert explorers._columns(2, 6, "self, layer 1, head 2", width) == 2
    assert explorers._columns(1, 30, "rnn, layer 1, head 1", width) == 1
