"""Pictures and matrix renderings shared by every chapter (matplotlib, LaTeX, HTML).

No chapter writes its own plotting helper: heatmaps of attention weights with token labels,
the per-step picture of the three attention steps, and matrices rendered as LaTeX (for the
prose, typeset by MathJax) or as HTML tables (for widgets, which MathJax does not reach).

The package: :mod:`~attnbook.viz.base` (the CJK font, arrays), :mod:`~attnbook.viz.figures`
(matplotlib figures), :mod:`~attnbook.viz.markup` (LaTeX and HTML) and
:mod:`~attnbook.viz.views` (PNG images for the explorers).
"""

from .base import CJK_FONT, Cells, to_numpy, use_cjk_font
from .figures import (
    BOTTLENECK_METRICS,
    BOTTLENECK_MODELS,
    attention_grid,
    attention_step_figure,
    attention_types_figure,
    bottleneck_figure,
    heatmap,
    positional_encoding_figure,
)
from .markup import _fmt as _fmt  # private, but the tests format numbers with it
from .markup import matrix_to_html, matrix_to_latex, token_weights_html
from .views import VIEW_TEXT_PX, VIEW_WIDTH, figure_to_png, smallest_text_px, view_dpi, view_png

__all__ = [
    "to_numpy",
    "heatmap",
    "attention_step_figure",
    "matrix_to_latex",
    "matrix_to_html",
    "figure_to_png",
    "view_png",
    "use_cjk_font",
    "CJK_FONT",
    "VIEW_WIDTH",
    "VIEW_TEXT_PX",
    "view_dpi",
    "smallest_text_px",
    "bottleneck_figure",
    "token_weights_html",
    "Cells",
    "attention_grid",
    "attention_types_figure",
    "positional_encoding_figure",
    "BOTTLENECK_MODELS",
    "BOTTLENECK_METRICS",
]
