"""Explorers that keep working on the static page of the book.

Readers mostly meet the book as rendered HTML, where no Python kernel runs, so ``observe``
callbacks never fire there. Every discrete choice (a decoder step, a stage of a computation,
a token) is therefore built the static way: each view is computed in advance, the views sit
in an ``ipywidgets.Stack``, and the control is tied to the stack with ``jslink``. The saved
widget state carries both, and the page's widget manager runs the link in the browser.

Edits that need Python (typing a new matrix entry) are live only with a kernel; those
widgets say so and show the default result on the static page.

``Stack`` is new in ipywidgets 8. Colab still ships ipywidgets 7.7, so there a ``Tab`` (which
has the same ``selected_index``) stands in for it, with its tab bar hidden by a style rule:
the same explorers, driven by the same controls.

The package: :mod:`~attnbook.widgets.static` (the static views and their controls),
:mod:`~attnbook.widgets.explorers` (the chapters' explorers) and
:mod:`~attnbook.widgets.worked_example` (the worked single-head example, stage by stage).
"""

from .explorers import (
    attention_explorer,
    decoder_steps_explorer,
    positional_encoding_explorer,
    temperature_explorer,
)
from .static import (
    STACK,
    as_view,
    shown_view,
    static_grid,
    static_selector,
    static_stepper,
    static_views,
)
from .worked_example import STAGES, WorkedExampleEditor, worked_stage_explorer, worked_stages

__all__ = [
    "as_view",
    "static_stepper",
    "static_selector",
    "static_grid",
    "static_views",
    "shown_view",
    "decoder_steps_explorer",
    "positional_encoding_explorer",
    "attention_explorer",
    "temperature_explorer",
    "worked_stages",
    "worked_stage_explorer",
    "WorkedExampleEditor",
    "STACK",
    "STAGES",
]
