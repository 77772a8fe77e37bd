"""The book's concept figures, drawn as SVG by hand-written code.

``diagram(name)`` returns a :class:`Diagram`; a notebook cell that ends with it shows the
figure (``_repr_svg_``) in Jupyter Book, JupyterLab and Colab alike. Every figure is drawn for
the book's text column, about 700 px wide, with text of at least 13 px, one sans-serif font,
the colour-blind-safe Okabe-Ito palette and math as plain Unicode. The output is pure string
building: no randomness, no timestamps, byte-identical on every run and machine.

>>> from attnbook.diagrams import diagram
>>> diagram("masks")            # doctest: +SKIP
>>> diagram("masks", lang="zh_CN")  # doctest: +SKIP

The labels are translated (the Chinese edition shows ``lang="zh_CN"``): every drawn label goes
through one function, ``canvas._``, which looks it up in the language's catalog
(``locale/zh_CN/LC_MESSAGES/diagrams.po``, compiled into ``diagrams/locale/zh_CN.mo``);
``with language("zh_CN"):`` draws every figure in that language. A Chinese figure embeds the
glyphs it uses from the package's CJK font. The English figures are unchanged by all this.
"""

# isort: off
# Each module registers its figures when imported, in the book's order: keep this order.
from . import rnn as _rnn  # noqa: F401
from . import attention as _attention  # noqa: F401
from . import transformer as _transformer  # noqa: F401

# isort: on
from .canvas import (
    _REGISTRY,
    FONT_FAMILY,
    LANGUAGES,
    MIN_FONT_PX,
    PALETTE,
    WIDTH,
    Diagram,
    diagram,
    language,
)

__all__ = [
    "DIAGRAMS",
    "FONT_FAMILY",
    "LANGUAGES",
    "MIN_FONT_PX",
    "PALETTE",
    "WIDTH",
    "Diagram",
    "diagram",
    "language",
]

DIAGRAMS = tuple(_REGISTRY)
"""The names of the concept figures, in the book's order."""
