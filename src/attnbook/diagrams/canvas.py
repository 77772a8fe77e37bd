"""The drawing canvas of the concept figures: palette, text measuring, boxes and arrows, the
registry of figures (``_figure``) and :class:`Diagram`. The figures themselves live by part in
``rnn.py``, ``attention.py`` and ``transformer.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

from .lang import (  # noqa: F401 (tests and tests/diagram_catalog.py use them from here)
    _CJK,
    _CJK_FAMILY,
    _CJK_FONT,
    _LANGUAGE,
    _SEEN,
    LANGUAGES,
    _,
    _check_language,
    _font_face,
    _translatable,
    language,
)
from .text import _TEXT, MIN_FONT_PX, _num, _runs, _small, _text_width, _tspans  # noqa: F401

__all__ = [
    "FONT_FAMILY",
    "LANGUAGES",
    "MIN_FONT_PX",
    "PALETTE",
    "WIDTH",
    "Diagram",
    "diagram",
    "language",
]

WIDTH = 700
"""The width, in px, every figure is drawn for (the book's text column)."""


FONT_FAMILY = "'Helvetica Neue', Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif"

PALETTE = {
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "ink": "#222222",
    "grey": "#6E6E6E",
}
"""The Okabe-Ito colours (colour-blind safe), plus the ink and grey of the text and lines."""

_INK = PALETTE["ink"]
_GREY = PALETTE["grey"]

# What each kind of box is: (stroke, fill). Fills are light tints, so black text stays legible.
_ROLES = {
    "enc": ("blue", 0.82),
    "dec": ("vermillion", 0.82),
    "attn": ("purple", 0.75),
    "ffn": ("sky", 0.7),
    "norm": ("yellow", 0.55),
    "emb": ("orange", 0.75),
    "ctx": ("green", 0.78),
    "q": ("vermillion", 0.8),
    "k": ("blue", 0.8),
    "v": ("green", 0.8),
    "plain": ("grey", 0.9),
}
_HEAD_COLOURS = ("orange", "sky", "green", "purple")


def _tint(colour: str, amount: float) -> str:
    """``colour`` mixed with white: ``amount`` 0 keeps it, 1 gives white."""
    hexa = PALETTE.get(colour, colour).lstrip("#")
    rgb = [int(hexa[i : i + 2], 16) for i in (0, 2, 4)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02X}" for c in rgb)


def _dark(colour: str) -> str:
    """A stroke colour for ``colour`` that stands out on white (yellow is too pale)."""
    return {"yellow": "#A89B00", "orange": "#B07A00", "sky": "#2B8CC4"}.get(
        colour, PALETTE.get(colour, colour)
    )


def _role(role: str) -> tuple[str, str]:
    colour, amount = _ROLES[role]
    return _dark(colour), _tint(colour, amount)


# --- the canvas ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def top(self) -> tuple[float, float]:
        return (self.cx, self.y)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.cx, self.y + self.h)

    @property
    def left(self) -> tuple[float, float]:
        return (self.x, self.cy)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w, self.cy)

    def at(self, fx: float, fy: float) -> tuple[float, float]:
        """The point at fractions ``fx``, ``fy`` of the width and height."""
        return (self.x + fx * self.w, self.y + fy * self.h)


class _Canvas:
    """Collects SVG elements; the figure functions draw on one."""

    def __init__(self, name: str, height: float):
        self.name = name
        self.width = WIDTH
        self.height = height
        self.parts: list[str] = []
        self.markers: dict[str, str] = {}  # colour -> marker id
        self.labels: list[tuple[float, float, float, float, str]] = []  # text boxes, for tests
        self.boxed: list[tuple[_Box, list]] = []  # a box and the text boxes of its label (tests)

    # text
    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: float = _TEXT,
        anchor: str = "middle",
        colour: str = _INK,
        bold: bool = False,
        italic: bool = False,
    ) -> None:
        """Label ``s`` (lines split at newlines) centred vertically on ``y``, in the current
        language (the whole label is one message: a translation breaks its own lines)."""
        lines = _(s).split("\n")
        step = size * 1.25
        first = y - step * (len(lines) - 1) / 2
        for k, line in enumerate(lines):
            cy = first + k * step
            attrs = f'x="{_num(x)}" y="{_num(cy + 0.35 * size)}" font-size="{_num(size)}"'
            if anchor != "start":
                attrs += f' text-anchor="{anchor}"'
            if colour != _INK:
                attrs += f' fill="{PALETTE.get(colour, colour)}"'
            if bold:
                attrs += ' font-weight="bold"'
            if italic:
                attrs += ' font-style="italic"'
            self.parts.append(f"<text {attrs}>{_tspans(line, size)}</text>")
            w = _text_width(line, size)
            x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
            self.labels.append((x0, cy - 0.5 * size, w, size, line))

    # shapes
    def rect(self, x, y, w, h, *, fill="none", stroke=_INK, rx=6, dashed=False, width=1.5) -> _Box:
        """A rectangle with rounded corners ``rx``; returns its box."""
        attrs = (
            f'x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" rx="{_num(rx)}"'
            f' fill="{fill}" stroke="{stroke}" stroke-width="{_num(width)}"'
        )
        if dashed:
            attrs += ' stroke-dasharray="6 4"'
        self.parts.append(f"<rect {attrs}/>")
        return _Box(x, y, w, h)

    def box(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        label: str = "",
        role: str = "plain",
        size: float = _TEXT,
        bold: bool = False,
        dashed: bool = False,
    ) -> _Box:
        """A rounded box filled by ``role``'s colour, with ``label`` centred in it."""
        stroke, fill = _role(role)
        b = self.rect(x, y, w, h, fill=fill, stroke=stroke, dashed=dashed)
        if label:
            first = len(self.labels)
            self.text(b.cx, b.cy, label, size=size, bold=bold)
            self.boxed.append((b, self.labels[first:]))
        return b

    def circle(self, cx: float, cy: float, r: float, label: str = "", role: str = "plain"):
        stroke, fill = _role(role)
        self.parts.append(
            f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="{_num(r)}" fill="{fill}"'
            f' stroke="{stroke}" stroke-width="1.5"/>'
        )
        if label:
            self.text(cx, cy, label, size=_TEXT + 3 if len(label) == 1 else _TEXT)
        return _Box(cx - r, cy - r, 2 * r, 2 * r)

    def line(
        self,
        *points: tuple[float, float],
        colour: str = _INK,
        width: float = 1.6,
        dashed: bool = False,
        arrow: bool = True,
        start_arrow: bool = False,
    ) -> None:
        """A polyline through ``points``, with an arrowhead at the end unless ``arrow=False``."""
        colour = PALETTE.get(colour, colour)
        d = "M" + " L".join(f"{_num(x)} {_num(y)}" for x, y in points)
        attrs = (
            f'd="{d}" fill="none" stroke="{colour}" stroke-width="{_num(width)}"'
            ' stroke-linejoin="round"'
        )
        if dashed:
            attrs += ' stroke-dasharray="6 4"'
        if arrow or start_arrow:
            mid = self.markers.setdefault(colour, f"{self.name}-arrow-{len(self.markers)}")
            if arrow:
                attrs += f' marker-end="url(#{mid})"'
            if start_arrow:
                attrs += f' marker-start="url(#{mid})"'
        self.parts.append(f"<path {attrs}/>")

    def arrow(self, a: tuple[float, float], b: tuple[float, float], **kw) -> None:
        """A straight arrow from ``a`` to ``b``."""
        self.line(a, b, **kw)

    def elbow(self, a, b, colour: str = _INK, dashed: bool = False, vertical_first=True, **kw):
        """An arrow from ``a`` to ``b`` with one right-angle bend."""
        corner = (a[0], b[1]) if vertical_first else (b[0], a[1])
        self.line(a, corner, b, colour=colour, dashed=dashed, **kw)

    def path(self, d: str, stroke: str = _INK, width: float = 1.6, fill: str = "none") -> None:
        self.parts.append(
            f'<path d="{d}" fill="{fill}" stroke="{PALETTE.get(stroke, stroke)}"'
            f' stroke-width="{_num(width)}" stroke-linejoin="round"/>'
        )

    def grid(self, x: float, y: float, rows: int, cols: int, cell: float, fill, label=None):
        """A ``rows`` x ``cols`` grid of square cells; ``fill(r, c)`` gives each cell's fill and
        ``label(r, c)`` its text (or None). Returns the grid's outline."""
        for r in range(rows):
            for c in range(cols):
                self.parts.append(
                    f'<rect x="{_num(x + c * cell)}" y="{_num(y + r * cell)}"'
                    f' width="{_num(cell)}" height="{_num(cell)}" fill="{fill(r, c)}"'
                    f' stroke="#FFFFFF" stroke-width="1.5"/>'
                )
                t = label(r, c) if label else None
                if t:
                    self.text(x + (c + 0.5) * cell, y + (r + 0.5) * cell, t, size=MIN_FONT_PX)
        return _Box(x, y, cols * cell, rows * cell)

    def matrix(self, x: float, y: float, rows: int, cols: int, cell: float, role: str, name=""):
        """A matrix drawn as a grid of cells in ``role``'s colour, ``name`` in its middle."""
        stroke, fill = _role(role)
        b = self.grid(x, y, rows, cols, cell, lambda r, c: fill)
        self.rect(x, y, b.w, b.h, stroke=stroke, rx=2)
        if name:
            self.text(b.cx, b.cy, name, size=_TEXT + 2, bold=True)
        return b

    def brace(self, x0: float, x1: float, y: float, label: str, below: bool = True) -> None:
        """A horizontal bracket from ``x0`` to ``x1`` at ``y`` with ``label`` beside it."""
        s = 6 if below else -6
        self.path(
            f"M{_num(x0)} {_num(y)} L{_num(x0)} {_num(y + s)} L{_num(x1)} {_num(y + s)}"
            f" L{_num(x1)} {_num(y)}",
            stroke=_GREY,
            width=1.2,
        )
        self.text((x0 + x1) / 2, y + s + (11 if below else -11), label, size=MIN_FONT_PX)

    def render(self, title: str, alt: str) -> str:
        defs = "".join(
            f'<marker id="{mid}" viewBox="0 0 10 10" refX="9" refY="5"'
            ' markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="10"'
            f' orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z"'
            f' fill="{colour}"/></marker>'
            for colour, mid in self.markers.items()
        )
        h = _num(self.height)
        face = _font_face("".join(self.parts))
        if face:  # the embedded CJK font (it has no Latin glyphs) draws the CJK characters
            defs = face + defs
            family = f"'{_CJK_FAMILY}', {FONT_FAMILY}"
        else:
            family = FONT_FAMILY
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{h}"'
            f' viewBox="0 0 {self.width} {h}" role="img" aria-label="{escape(alt)}"'
            f' font-family="{escape(family)}" font-size="{_TEXT}" fill="{_INK}">'
        )
        body = [
            head,
            f"<title>{escape(title, quote=False)}</title>",
            f"<desc>{escape(alt, quote=False)}</desc>",
            f"<defs>{defs}</defs>" if defs else "",
            f'<rect width="{self.width}" height="{h}" fill="#FFFFFF"/>',
            *self.parts,
            "</svg>",
        ]
        return "\n".join(p for p in body if p) + "\n"


# --- the registry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    draw: object
    title: str
    alt: str
    height: float


_REGISTRY: dict[str, _Spec] = {}


_SUBSCRIPTS = dict(
    zip("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ", strict=True)
)


def _plain(text: str) -> str:
    """``text`` with the label markup made readable as plain text (for alt text): a subscript
    becomes Unicode subscripts where they all exist (s_{t-1} -> sₜ₋₁), else keeps one underscore
    (x_S, d_model); braces go."""

    def sub(m: re.Match) -> str:
        part = m.group(1) or m.group(2)
        if all(ch in _SUBSCRIPTS or ch == "," for ch in part):
            return "".join(_SUBSCRIPTS.get(ch, ch) for ch in part)
        return "_" + part

    text = re.sub(r"_\{([^}]*)\}|_(\w+)", sub, text)
    return re.sub(r"\^\{([^}]*)\}", r"^\1", text)


def _figure(name: str, title: str, alt: str, height: float):
    def register(draw):
        _REGISTRY[name] = _Spec(draw, title, _plain(" ".join(alt.split())), height)
        return draw

    return register


class Diagram:
    """One concept figure: ``.svg`` (the SVG text), ``.alt`` (a description for screen
    readers), ``.title`` and ``.name``. Shown as SVG by Jupyter (``_repr_svg_``)."""

    __slots__ = ("alt", "name", "svg", "title")

    def __init__(self, name: str, title: str, alt: str, svg: str):
        self.name, self.title, self.alt, self.svg = name, title, alt, svg

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return f"<Diagram {self.name!r}: {self.title}>"

    def save(self, path: str | Path) -> Path:
        """Write the SVG to ``path`` (UTF-8, newline endings) and return the path."""
        path = Path(path)
        path.write_text(self.svg, encoding="utf-8", newline="\n")
        return path


def _build(name: str, lang: str | None = None) -> tuple[Diagram, _Canvas]:
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"diagram: unknown name {name!r}; the figures are {', '.join(_REGISTRY)}")
    spec = _REGISTRY[name]
    token = _LANGUAGE.set(_check_language(lang or _LANGUAGE.get()))
    try:
        canvas = _Canvas(name, spec.height)
        spec.draw(canvas)
        # the title and the description for screen readers are messages too, after the labels
        title, alt = _(spec.title), _(spec.alt)
        svg = canvas.render(title, alt)
    finally:
        _LANGUAGE.reset(token)
    return Diagram(name, title, alt, svg), canvas


def diagram(name: str, lang: str | None = None) -> Diagram:
    """The concept figure ``name`` (one of ``attnbook.diagrams.DIAGRAMS``) as a
    :class:`Diagram`, its labels in ``lang`` (one of ``LANGUAGES``; by default the language of
    the enclosing ``with language(...)``, else English).

    Raises ``ValueError`` naming the valid names when ``name`` (or ``lang``) is not one of
    them."""
    return _build(name, lang)[0]


def _messages(name: str) -> list[str]:
    """Every message figure ``name`` draws, in drawing order, once each."""
    token = _SEEN.set([])
    try:
        _build(name, "en")
        seen = _SEEN.get()
    finally:
        _SEEN.reset(token)
    return list(dict.fromkeys(seen))


# --- shared by the figures -------------------------------------------------------------------


def _chain(c: _Canvas, boxes: list[_Box], **kw) -> None:
    """Arrows from each box's right side to the next one's left side."""
    for a, b in zip(boxes, boxes[1:], strict=False):
        c.arrow(a.right, b.left, **kw)


def _cells(c: _Canvas, xs, y, w, h, labels, role) -> list[_Box]:
    return [c.box(x, y, w, h, lab, role) for x, lab in zip(xs, labels, strict=True)]
