"""Figures as PNG images for the explorers: drawn the column's width, with labels readable."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
from matplotlib import cbook
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.text import Text

from .base import _empty_axis_labels_fixed

__all__ = [
    "figure_to_png",
    "VIEW_WIDTH",
    "view_dpi",
    "smallest_text_px",
    "VIEW_TEXT_PX",
    "view_png",
]


# the margin around a view's tight crop, in inches: savefig's default (:rc:`savefig.pad_inches`)
_PAD_INCHES = 0.1


def _lays_out_when_drawn(fig) -> bool:
    """Whether a layout engine (constrained layout, figure.autolayout) moves the axes of ``fig``
    when it is drawn. After ``fig.tight_layout()`` the figure holds a placeholder engine,
    which moves nothing."""
    engine = fig.get_layout_engine()
    return engine is not None and not isinstance(engine, PlaceHolderLayoutEngine)


def figure_to_png(fig, dpi: int = 80, close: bool = True) -> bytes:
    """Render a matplotlib figure to PNG bytes (small by default, for embedded widget views)."""
    buf = io.BytesIO()
    with _empty_axis_labels_fixed(fig):
        _save_png(fig, buf, dpi)
    if close:
        plt.close(fig)
    return buf.getvalue()


def _save_png(fig, buf, dpi: float) -> None:
    if _lays_out_when_drawn(fig):
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    else:
        # The crop savefig(bbox_inches="tight") takes, measured at the same resolution without
        # its extra draw: savefig draws once to lay out and measure, then again to render.
        # Measuring with get_tightbbox lays the text out without drawing, and without an
        # engine savefig skips its layout draw, so the figure is drawn once, the same pixels.
        with cbook._setattr_cm(fig, dpi=dpi):
            bbox = fig.get_tightbbox(fig._get_renderer())
        bbox = bbox.padded(plt.rcParams["savefig.pad_inches"])
        engine = fig.get_layout_engine()
        with plt.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)  # only a placeholder; savefig would draw to run it
        try:
            fig.savefig(buf, format="png", dpi=dpi, bbox_inches=bbox)
        finally:
            if engine is not None:
                fig.set_layout_engine(engine)


# An explorer's picture is drawn this many pixels wide: the book's text column is 768 px at a
# 1280 px window, so a view fills most of it and stays legible (the issue asks for >= 600 px).
VIEW_WIDTH = 720


def view_dpi(fig, width: int = VIEW_WIDTH) -> float:
    """The resolution at which ``fig``, cropped tight as :func:`view_png` crops it, is ``width``
    pixels wide."""
    # get_tightbbox lays the text out itself (ticks, titles, aspect): no draw is needed to
    # measure, and skipping it saves a quarter of an explorer's rendering. A layout engine
    # (constrained layout, figure.autolayout) only moves the axes when the figure is drawn,
    # so such a figure is drawn first, with the pixels skipped.
    if _lays_out_when_drawn(fig):
        fig.draw_without_rendering()
    inches = fig.get_tightbbox(fig._get_renderer()).padded(_PAD_INCHES).width
    return width / inches


def smallest_text_px(fig, dpi: float) -> float:
    """The size in pixels of the smallest visible text of ``fig`` drawn at ``dpi``."""
    sizes = [
        t.get_fontsize()
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_figure() is not None
    ]
    return min(sizes, default=float("inf")) * dpi / 72


# The smallest text of an explorer's picture is drawn this many pixels high, give or take: the
# page's own text is 16 px, and a label under 11 px is hard to read.
VIEW_TEXT_PX = (11.0, 15.0)


def view_png(fig, width: int = VIEW_WIDTH, close: bool = True) -> bytes:
    """Render ``fig`` to a PNG ``width`` pixels wide (give or take a pixel), for an explorer.

    The resolution is chosen from the figure's size, so every explorer's views come out as
    wide as the column whatever ``figsize`` drew them. Where that would draw the smallest label
    under 11 px (a wide figure) or over 15 px (a small one), every text is scaled by the same
    factor first and the layout redone, so labels stay readable and in proportion.
    """
    return _render_view(fig, width, close)[0]


def _render_view(fig, width: int = VIEW_WIDTH, close: bool = True) -> tuple[bytes, float]:
    """:func:`view_png`'s picture and the resolution it drew it at: a figure redrawn with new
    data and the same layout (an explorer's next view) is drawn at that resolution again."""
    if isinstance(width, bool) or not isinstance(width, int) or not 200 <= width <= 2000:
        raise ValueError(f"width must be an int number of pixels from 200 to 2000, got {width!r}")
    with _empty_axis_labels_fixed(fig):
        dpi = _fit_text(fig, width)
    return figure_to_png(fig, dpi=dpi, close=close), dpi


def _fit_text(fig, width: int) -> float:
    """Scale the text of ``fig`` to :data:`VIEW_TEXT_PX` at the resolution that draws it
    ``width`` pixels wide; returns that resolution."""
    low, high = VIEW_TEXT_PX
    dpi = view_dpi(fig, width)
    for _ in range(4):  # larger labels widen the figure a little, so settle in a few rounds
        smallest = smallest_text_px(fig, dpi)
        if smallest == float("inf") or low - 0.25 <= smallest <= high + 0.25:
            break
        scale = min(max(smallest, low), high) / smallest
        for text in fig.findobj(Text):
            text.set_fontsize(text.get_fontsize() * scale)
        fig.tight_layout()
        dpi = view_dpi(fig, width)
    return dpi
