"""The book's concept figures, drawn as SVG by hand-written code.

``diagram(name)`` returns a :class:`Diagram`; a notebook cell that ends with it shows the
figure (``_repr_svg_``) in Jupyter Book, JupyterLab and Colab alike. Every figure is drawn for
the book's text column, about 700 px wide, with text of at least 13 px, one sans-serif font,
the colour-blind-safe Okabe-Ito palette and math as plain Unicode. The output is pure string
building: no randomness, no timestamps, byte-identical on every run and machine.

>>> from attnbook.diagrams import diagram
>>> diagram("masks")            # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
from dataclasses import astuple, dataclass
from html import escape
from pathlib import Path

__all__ = ["DIAGRAMS", "FONT_FAMILY", "MIN_FONT_PX", "PALETTE", "WIDTH", "Diagram", "diagram"]

WIDTH = 700
"""The width, in px, every figure is drawn for (the book's text column)."""

MIN_FONT_PX = 13
"""No text is smaller than this at :data:`WIDTH`."""

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
_TEXT = 15  # the body size of labels, px

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


def _num(v: float) -> str:
    """A coordinate as short, stable text: one decimal at most, no ``-0``."""
    r = round(v, 1)
    if r == 0:
        return "0"
    return f"{r:.1f}".removesuffix(".0")


# --- text: a tiny markup for sub- and superscripts ------------------------------------------
# "h_S", "α_{t,i}", "W^Q", "d_{model}"; a backslash escapes the next character.


def _runs(s: str) -> list[tuple[str, str]]:
    """Split ``s`` into (kind, text) runs, kind "" (normal), "_" (sub) or "^" (super)."""
    runs, buf, i = [], [], 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            buf.append(s[i + 1])
            i += 2
        elif ch in "_^" and i + 1 < len(s):
            if buf:
                runs.append(("", "".join(buf)))
                buf = []
            if s[i + 1] == "{":
                j = s.index("}", i)
                runs.append((ch, s[i + 2 : j]))
                i = j + 1
            else:
                runs.append((ch, s[i + 1]))
                i += 2
        else:
            buf.append(ch)
            i += 1
    if buf:
        runs.append(("", "".join(buf)))
    return runs


_NARROW = set("iljtfrI.,:;'|!()[]{} ·")
_WIDE = set("mwMWQOGDHNU@%—αω×⊕")


def _char_width(ch: str) -> float:
    if ch in _NARROW:
        return 0.32
    if ch in _WIDE:
        return 0.85
    if ch.isupper() or ch.isdigit():
        return 0.64
    if "\u4e00" <= ch <= "\u9fff":
        return 1.0
    return 0.55


def _small(size: float) -> float:
    return max(MIN_FONT_PX, round(size * 0.78))


def _text_width(s: str, size: float = _TEXT) -> float:
    """An estimate (on the generous side) of the width of one line of label ``s``, in px."""
    total = 0.0
    for kind, part in _runs(s):
        fs = size if kind == "" else _small(size)
        total += sum(_char_width(ch) for ch in part) * fs
    return total


def _tspans(s: str, size: float) -> str:
    out, shift = [], 0.0
    for kind, part in _runs(s):
        target = {"": 0.0, "_": 0.3 * size, "^": -0.42 * size}[kind]
        attrs = ""
        if target != shift:
            attrs += f' dy="{_num(target - shift)}"'
            shift = target
        if kind:
            attrs += f' font-size="{_num(_small(size))}"'
        out.append(f"<tspan{attrs}>{escape(part, quote=False)}</tspan>" if attrs else escape(part))
    return "".join(out)


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
        """Label ``s`` (lines split at newlines) centred vertically on ``y``."""
        lines = s.split("\n")
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
            self.text(b.cx, b.cy, label, size=size, bold=bold)
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
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{h}"'
            f' viewBox="0 0 {self.width} {h}" role="img" aria-label="{escape(alt)}"'
            f' font-family="{escape(FONT_FAMILY)}" font-size="{_TEXT}" fill="{_INK}">'
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


def _build(name: str) -> tuple[Diagram, _Canvas]:
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"diagram: unknown name {name!r}; the figures are {', '.join(DIAGRAMS)}")
    spec = _REGISTRY[name]
    canvas = _Canvas(name, spec.height)
    spec.draw(canvas)
    return Diagram(name, spec.title, spec.alt, canvas.render(spec.title, spec.alt)), canvas


def diagram(name: str) -> Diagram:
    """The concept figure ``name`` (one of :data:`DIAGRAMS`) as a :class:`Diagram`.

    Raises ``ValueError`` naming the valid names when ``name`` is not one of them."""
    return _build(name)[0]


# --- the figures ----------------------------------------------------------------------------


def _chain(c: _Canvas, boxes: list[_Box], **kw) -> None:
    """Arrows from each box's right side to the next one's left side."""
    for a, b in zip(boxes, boxes[1:], strict=False):
        c.arrow(a.right, b.left, **kw)


def _cells(c: _Canvas, xs, y, w, h, labels, role) -> list[_Box]:
    return [c.box(x, y, w, h, lab, role) for x, lab in zip(xs, labels, strict=True)]


@_figure(
    "rnn_encoder_decoder",
    "The RNN encoder-decoder and its bottleneck",
    """An encoder RNN reads the source tokens x₁ to x_S and produces hidden states h₁ to h_S.
    Only its last state is kept as the context vector c = h_S, a single fixed-size vector
    between encoder and decoder: the bottleneck. A decoder RNN with states s₁ to s_T writes the
    target tokens y₁ to y_T, each step reading the token it wrote before. A solid arrow from c to
    the first decoder state marks Sutskever et al. (2014), where c is only the decoder's initial
    state; dashed arrows from c to every decoder step mark Cho et al. (2014), where c also
    enters every step.""",
    height=370,
)
def _rnn_encoder_decoder(c: _Canvas) -> None:
    w, h, y = 50, 46, 130
    enc = _cells(c, [30, 98, 166, 250], y, w, h, ["h_1", "h_2", "h_3", "h_S"], "enc")
    dec = _cells(c, [392, 460, 528, 614], y, w, h, ["s_1", "s_2", "s_3", "s_T"], "dec")
    c.text(165, 40, "Encoder: reads x_1 … x_S", bold=True, colour=_dark("blue"))
    c.text(528, 40, "Decoder: writes y_1 … y_T", bold=True, colour=_dark("vermillion"))
    for cells in (enc, dec):
        _chain(c, cells[:3])
        c.text((cells[2].right[0] + cells[3].x) / 2, y + h / 2, "…", size=18)
    for b, lab in zip(enc, ["x_1", "x_2", "x_3", "x_S"], strict=True):
        c.text(b.cx, y + h + 44, lab)
        c.arrow((b.cx, y + h + 34), b.bottom)
    ins, outs = ["<s>", "y_1", "y_2", "y_{T-1}"], ["y_1", "y_2", "y_3", "y_T"]
    for b, lab, out in zip(dec, ins, outs, strict=True):
        c.text(b.cx + 10, y + h + 44, lab)
        c.arrow((b.cx + 10, y + h + 34), (b.cx + 10, y + h))
        c.arrow(b.top, (b.cx, y - 26))
        c.text(b.cx, y - 38, out)
    ctx = c.box(322, y - 4, 46, h + 8, "c", "ctx", size=18, bold=True)
    c.arrow(enc[3].right, ctx.left, colour="green", width=2.2)
    c.arrow(ctx.right, dec[0].left, colour="green", width=2.2)
    c.text(ctx.cx, y - 50, "c = h_S", bold=True, colour=_dark("green"))
    c.text(ctx.cx, y - 30, "one fixed vector", size=13, colour=_dark("green"))
    # Cho et al.: c enters every decoder step, along a bus under the inputs
    bus = y + h + 76
    c.line(ctx.bottom, (ctx.cx, bus), (dec[-1].x + 8, bus), colour="green", dashed=True, arrow=0)
    for b in dec:
        c.line((b.x + 8, bus), (b.x + 8, y + h), colour="green", dashed=True)
    c.text(ctx.cx, bus + 20, "the bottleneck: all of x_1 … x_S in one vector", size=13)
    # the legend
    ly = 322
    c.line((40, ly), (90, ly), colour="green", width=2.2)
    c.text(
        100, ly, "Sutskever et al. (2014): c is only the decoder's initial state", anchor="start"
    )
    c.line((40, ly + 26), (90, ly + 26), colour="green", dashed=True)
    c.text(100, ly + 26, "Cho et al. (2014): c also enters every decoder step", anchor="start")


@_figure(
    "attention_three_steps",
    "Attention in three steps: score, softmax, weighted sum",
    """Three encoder states h₁, h₂, h₃ and the decoder state s_{t-1} go through three steps. Step
    1 scores each encoder state against the decoder state, e_{t,i} = score(s_{t-1}, h_i), giving
    2.0, 1.0 and 0.1. Step 2 turns the scores into weights with a softmax over i: α_{t,i} = 0.66,
    0.24 and 0.10, which sum to 1. Step 3 sums the encoder states with these weights into the
    context vector c_t = Σ_i α_{t,i} h_i = 0.66 h₁ + 0.24 h₂ + 0.10 h₃.""",
    height=360,
)
def _attention_three_steps(c: _Canvas) -> None:
    scores = [2.0, 1.0, 0.1]
    total = sum(math.exp(e) for e in scores)
    alphas = [math.exp(e) / total for e in scores]
    top, row = 118, 56
    for x, head, formula in [
        (200, "1  score", "e_{t,i} = score(s_{t-1}, h_i)"),
        (390, "2  softmax over i", "α_{t,i} = exp e_{t,i} / Σ_j exp e_{t,j}"),
        (600, "3  weighted sum", "c_t = Σ_i α_{t,i} h_i"),
    ]:
        c.text(x, 28, head, size=17, bold=True)
        c.text(x, 56, formula)
    q = c.box(18, 28, 84, 44, "s_{t-1}", "dec")
    c.text(q.cx, 86, "query", size=13, colour=_GREY)
    ctx = c.box(560, top + row - 26, 84, 52, "c_t", "ctx", size=18, bold=True)
    c.line(q.right, (125, q.cy), (125, top + 2 * row + 20), colour=_GREY, dashed=True, arrow=0)
    for i, (e, a) in enumerate(zip(scores, alphas, strict=True)):
        y = top + i * row
        hb = c.box(18, y, 84, 40, f"h_{i + 1}", "enc")
        sb = c.box(150, y, 100, 40, f"e_{{t,{i + 1}}} = {e:.1f}", "attn", size=14)
        c.arrow(hb.right, sb.left)
        c.circle(125, y + 20, 3, role="plain")
        c.arrow(sb.right, (300, y + 20))
        # the weight as a bar whose length is alpha
        c.rect(302, y + 6, 150 * a, 28, fill=_tint("purple", 0.35), stroke=_dark("purple"), rx=3)
        c.text(302 + 150 * a + 8, y + 20, f"α_{{t,{i + 1}}} = {a:.2f}", anchor="start", size=14)
        c.line((500, y + 20), ctx.left, colour="purple", width=1 + 5 * a)
    c.text(125, top + 3 * row + 4, "s_{t-1} compared\nwith each h_i", size=13, colour=_GREY)
    c.text(ctx.cx, ctx.y + ctx.h + 48, "= 0.66 h_1\n+ 0.24 h_2\n+ 0.10 h_3", size=14)
    c.text(390, top + 3 * row + 6, "weights ≥ 0, sum to 1", size=13, colour=_GREY)
    c.text(
        350, 340, "Only step 1 differs between attention variants (the score function).", size=14
    )


@_figure(
    "rnn_with_attention",
    "The RNN decoder with attention, one step",
    """At decoder step t the previous decoder state s_{t-1} is the query. It is scored against
    every encoder state h₁ to h_S; the scores become weights α_{t,1} to α_{t,S} by a softmax, drawn
    as lines whose thickness is the weight. The weighted sum of the encoder states is the context
    vector c_t, which enters the new decoder state s_t together with the previous output
    y_{t-1}; s_t then predicts y_t. The same happens again at every step, with new weights.""",
    height=420,
)
def _rnn_with_attention(c: _Canvas) -> None:
    alphas = [0.05, 0.1, 0.6, 0.2, 0.05]
    labels = ["h_1", "h_2", "h_3", "h_4", "h_S"]
    xs = [40 + 110 * k for k in range(5)]
    ey = 330
    enc = _cells(c, xs, ey, 64, 42, labels, "enc")
    _chain(c, enc)
    for b, k in zip(enc, ["x_1", "x_2", "x_3", "x_4", "x_S"], strict=True):
        c.text(b.cx, ey + 70, k)
        c.arrow((b.cx, ey + 60), b.bottom)
    c.text(xs[4] - 23, ey + 21, "…", size=16)
    att = c.box(190, 200, 330, 60, "", "attn")
    c.text(att.cx, att.cy - 10, "score → softmax → weighted sum", bold=True)
    c.text(att.cx, att.cy + 14, "α_{t,i} = softmax_i score(s_{t-1}, h_i)", size=14)
    for b, a in zip(enc, alphas, strict=True):
        tx = att.x + 20 + (b.cx - 72) * (att.w - 40) / (xs[4] - xs[0])
        c.line((b.cx, ey - 24), (tx, att.y + att.h), colour="purple", width=1 + 7 * a, arrow=0)
        c.text(b.cx, ey - 12, f"{a:.2f}", size=13, colour=_dark("purple"))
    c.text(566, ey - 12, "weights α_{t,i}", size=13, colour=_dark("purple"), anchor="start")
    prev = c.box(60, 60, 100, 46, "s_{t-1}", "dec")
    cur = c.box(420, 60, 100, 46, "s_t", "dec")
    c.arrow(prev.right, cur.left)
    c.text(cur.x - 34, 150, "y_{t-1}", size=14)
    c.line((cur.x - 34, 138), (cur.x - 34, 128), (cur.x + 20, 128), (cur.x + 20, cur.y + cur.h))
    ctx = c.circle(600, 150, 30, "c_t", "ctx")
    c.elbow(att.right, (ctx.cx, ctx.y + ctx.h), colour="green", vertical_first=False)
    c.line((ctx.cx, ctx.y), (ctx.cx, 83), cur.right, colour="green")
    c.text(ctx.cx + 40, 118, "context", size=13, anchor="start", colour=_dark("green"))
    c.elbow(prev.bottom, att.left, vertical_first=True)
    c.text(prev.cx + 10, 160, "query", size=13, colour=_GREY, anchor="start")
    c.arrow(cur.top, (cur.cx, 20))
    c.text(cur.cx + 14, 24, "y_t", anchor="start")


def _flow(c: _Canvas, x: float, steps: list[tuple[str, str]], y0: float) -> None:
    """One score function drawn as q and k flowing down through ``steps`` (label, role)."""
    q = c.box(x + 12, y0, 54, 36, "q", "q")
    k = c.box(x + 100, y0, 54, 36, "k", "k")
    y = y0 + 70
    prev = None
    for label, role in steps:
        b = c.box(x + 12, y, 142, 36, label, role, size=14)
        if prev is None:
            c.arrow(q.bottom, (q.cx, b.y))
            c.arrow(k.bottom, (k.cx, b.y))
        else:
            c.arrow(prev.bottom, b.top)
        prev, y = b, y + 62
    c.arrow(prev.bottom, (prev.cx, prev.y + 56))
    c.text(prev.cx, prev.y + 70, "a score (a number)", size=13, colour=_GREY)


@_figure(
    "score_functions",
    "Four score functions side by side",
    """Four panels, one per score function, each turning a query q and a key k into one number.
    Dot: q · k, no parameters. Scaled dot: q · k / √d_k, no parameters. General (Luong):
    qᵀ W_a k, with a learned matrix W_a. Additive (Bahdanau): v_aᵀ tanh(W_a [q; k]), with a
    learned matrix W_a and vector v_a. The first three need one matrix product for all pairs;
    additive runs a small network per pair.""",
    height=420,
)
def _score_functions(c: _Canvas) -> None:
    panels = [
        ("dot", "q · k", "no parameters", [("q · k", "attn")]),
        ("scaled dot", "q · k / √d_k", "no parameters", [("q · k", "attn"), ("÷ √d_k", "attn")]),
        ("general", "qᵀ W_a k", "learns W_a", [("q W_a", "attn"), ("· k", "attn")]),
        (
            "additive",
            "v_aᵀ tanh(W_a [q; k])",
            "learns W_a, v_a",
            [("W_a [q; k]", "attn"), ("tanh", "attn"), ("· v_a", "attn")],
        ),
    ]
    for n, (name, formula, params, steps) in enumerate(panels):
        x = 6 + n * 173
        c.rect(x, 8, 166, 404, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
        c.text(x + 83, 32, name, size=17, bold=True)
        c.text(x + 83, 58, formula, size=14)
        c.text(x + 83, 82, params, size=13, colour=_GREY)
        _flow(c, x, steps, 104)
    c.text(x + 83, 395, "Bahdanau et al.", size=13, colour=_GREY)
    c.text(6 + 2 * 173 + 83, 395, "Luong et al.", size=13, colour=_GREY)
    c.text(6 + 173 + 83, 395, "Vaswani et al.", size=13, colour=_GREY)
    c.text(6 + 83, 395, "Luong et al.", size=13, colour=_GREY)


@_figure(
    "qkv_projections",
    "Queries, keys and values are three projections of the same X",
    """The input X, n rows (tokens) by d_model columns, is multiplied by three learned matrices
    W^Q, W^K and W^V, each d_model by d_k (d_v for W^V). The products are Q = X W^Q, K = X W^K
    and V = X W^V, each with one row per token: n by d_k (n by d_v for V). The same three matrices
    are used at every position.""",
    height=440,
)
def _qkv_projections(c: _Canvas) -> None:
    cell = 16
    n, d, dk = 4, 6, 3
    xb = c.matrix(30, 170, n, d, cell, "emb", "X")
    c.text(xb.cx, xb.y + xb.h + 18, "n × d_{model}", size=14)
    c.text(xb.cx, xb.y + xb.h + 38, "one row per token", size=13, colour=_GREY)
    rows = [("Q", "q", 14), ("K", "k", 150), ("V", "v", 286)]
    for name, role, y in rows:
        wx = 250
        c.line(
            xb.right,
            (190, xb.cy),
            (190, y + d * cell / 2),
            (wx - 30, y + d * cell / 2),
            colour=_GREY,
        )
        c.text(wx - 16, y + d * cell / 2, "×", size=18)
        w = c.matrix(wx, y, d, dk, cell, role, f"W^{name}")
        c.text(w.x + w.w + 30, w.cy, "=", size=20)
        sub = "v" if name == "V" else "k"
        c.text(w.cx, w.y + w.h + 14, f"d_{{model}} × d_{sub}", size=14)
        out = c.matrix(w.x + w.w + 60, w.y + (d - n) * cell / 2, n, dk, cell, role, name)
        c.text(out.x + out.w + 16, out.cy, f"{name} = X W^{name}", anchor="start", bold=True)
        c.text(out.x + out.w + 16, out.cy + 22, f"n × d_{sub}", anchor="start", size=14)
    c.text(WIDTH / 2, 424, "W^Q, W^K, W^V are learned, and shared by every position.", size=14)


def _token_row(c: _Canvas, x: float, y: float, labels: list[str], role: str, w: float = 58):
    return [c.box(x + k * (w + 8), y, w, 34, lab, role, size=14) for k, lab in enumerate(labels)]


@_figure(
    "self_vs_cross",
    "Self-attention and cross-attention differ only in where Q, K and V come from",
    """Two panels. Self-attention: one sequence X of n tokens provides the queries, the keys and
    the values, Q = X W^Q, K = X W^K, V = X W^V; the weights are n by n and the output has one
    row per token of X. Cross-attention: the decoder's states Y (T target positions) provide the
    queries, Q = Y W^Q, while the encoder's output, the memory M (S source positions), provides
    the keys and values, K = M W^K, V = M W^V; the weights are T by S and the output has one row
    per target position.""",
    height=400,
)
def _self_vs_cross(c: _Canvas) -> None:
    for x, title in [(6, "Self-attention"), (358, "Cross-attention")]:
        c.rect(x, 8, 336, 384, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
        c.text(x + 168, 32, title, size=17, bold=True)
    # self: X gives Q, K, V
    xs = _token_row(c, 30, 330, ["x_1", "x_2", "x_3", "x_4"], "enc", w=62)
    c.text(174, 377, "one sequence X (n tokens)", size=13, colour=_GREY)
    att = c.box(40, 150, 268, 50, "Attention(Q, K, V)", "attn", bold=True)
    for k, (name, role) in enumerate([("Q", "q"), ("K", "k"), ("V", "v")]):
        b = c.box(54 + k * 88, 240, 64, 36, f"X W^{name}", role, size=14)
        c.arrow((b.cx, 326), b.bottom)
        c.arrow(b.top, (b.cx, att.y + att.h))
        c.text(b.cx + 22, 218, name, bold=True, anchor="start")
    c.line((xs[0].x, 318), (xs[-1].x + xs[-1].w, 318), colour=_GREY, width=1.2, arrow=False)
    out = _token_row(c, 30, 66, ["z_1", "z_2", "z_3", "z_4"], "plain", w=62)
    for b in out:
        c.arrow((b.cx, att.y), b.bottom, colour=_GREY, width=1.2)
    c.text(174, 124, "weights n × n", size=13, colour=_GREY, anchor="start")
    # cross: Y gives Q, M gives K and V
    ys = _token_row(c, 372, 330, ["y_1", "y_2", "y_3"], "dec", w=36)
    ms = _token_row(c, 516, 330, ["m_1", "m_2", "m_3", "m_4"], "enc", w=36)
    c.text(ys[1].cx, 377, "decoder Y (T)", size=13, colour=_GREY)
    c.text((ms[0].x + ms[-1].x + 36) / 2, 377, "memory M (S)", size=13, colour=_GREY)
    for row in (ys, ms):
        c.line((row[0].x, 318), (row[-1].x + 36, 318), colour=_GREY, width=1.2, arrow=False)
    att2 = c.box(380, 150, 300, 50, "Attention(Q, K, V)", "attn", bold=True)
    qb = c.box(ys[1].cx - 32, 240, 64, 36, "Y W^Q", "q", size=14)
    kb = c.box(526, 240, 64, 36, "M W^K", "k", size=14)
    vb = c.box(608, 240, 64, 36, "M W^V", "v", size=14)
    c.arrow((qb.cx, 326), qb.bottom)
    for b in (kb, vb):
        c.arrow((b.cx, 326), b.bottom)
    for b, name in [(qb, "Q"), (kb, "K"), (vb, "V")]:
        c.arrow(b.top, (b.cx, att2.y + att2.h))
        c.text(b.cx + 14, 218, name, bold=True, anchor="start")
    out2 = _token_row(c, 380, 66, ["z_1", "z_2", "z_3"], "plain", w=52)
    for b in out2:
        c.arrow((b.cx, att2.y), b.bottom, colour=_GREY, width=1.2)
    c.text(588, 124, "weights T × S", size=13, colour=_GREY)
    c.text(566, 84, "one row per\ntarget position", size=13, colour=_GREY, anchor="start")


@_figure(
    "multi_head",
    "Multi-head attention: split into heads, attend, concatenate, project",
    """Q, K and V, each n by d_model, are split along their columns into h = 4 heads of
    d_k = d_model / h columns, coloured per head. Each head i computes its own scaled dot-product
    attention, head_i = Attention(Q_i, K_i, V_i), giving n by d_k. The four head outputs are
    concatenated side by side back to n by d_model and multiplied by W^O (d_model by d_model),
    which mixes the heads into the output.""",
    height=512,
)
def _multi_head(c: _Canvas) -> None:
    seg, step, x0, bar_h = 150, 160, 50, 28
    c.text(
        WIDTH / 2,
        20,
        "Q = X W^Q,  K = X W^K,  V = X W^V,  each n × d_{model}; h = 4 heads",
        bold=True,
    )
    c.brace(x0, x0 + seg, 60, "d_k = d_{model} / h columns per head", below=False)
    heads = []
    for r, name in enumerate("QKV"):
        y = 66 + r * (bar_h + 6)
        c.text(x0 - 14, y + bar_h / 2, name, bold=True, size=16)
        for k, colour in enumerate(_HEAD_COLOURS):
            c.rect(
                x0 + k * step, y, seg, bar_h, fill=_tint(colour, 0.5), stroke=_dark(colour), rx=2
            )
            c.text(x0 + k * step + seg / 2, y + bar_h / 2, f"{name}_{k + 1}", size=14)
    for k, colour in enumerate(_HEAD_COLOURS):
        b = c.box(x0 + k * step, 204, seg, 60, "", "plain")
        c.rect(b.x, b.y, b.w, b.h, fill=_tint(colour, 0.8), stroke=_dark(colour))
        c.text(b.cx, b.y + 20, f"head_{k + 1}", bold=True)
        c.text(b.cx, b.y + 42, f"Attention(Q_{k + 1}, K_{k + 1}, V_{k + 1})", size=13)
        c.arrow((b.cx, 66 + 3 * (bar_h + 6)), b.top, colour=_dark(colour))
        heads.append(b)
    w = 90
    cx0 = WIDTH / 2 - 2 * w
    for k, colour in enumerate(_HEAD_COLOURS):
        x = cx0 + k * w
        c.rect(x, 330, w, bar_h, fill=_tint(colour, 0.5), stroke=_dark(colour), rx=2)
        c.text(x + w / 2, 330 + bar_h / 2, f"head_{k + 1}", size=14)
        c.arrow(heads[k].bottom, (x + w / 2, 330), colour=_dark(colour))
    c.text(cx0 - 12, 344, "Concat", anchor="end", bold=True)
    c.text(cx0 + 4 * w + 12, 344, "n × d_{model}", anchor="start", size=14)
    wo = c.box(WIDTH / 2 - 70, 384, 140, 34, "× W^O", "attn", bold=True)
    c.arrow((WIDTH / 2, 330 + bar_h), wo.top)
    c.text(wo.x + wo.w + 12, wo.cy, "W^O: d_{model} × d_{model}", anchor="start", size=14)
    c.arrow(wo.bottom, (WIDTH / 2, 450))
    c.text(WIDTH / 2, 466, "output, n × d_{model}", size=14)
    c.text(
        WIDTH / 2,
        496,
        "each head: head_i = softmax(Q_i K_iᵀ / √d_k) V_i, an n × d_k matrix",
        size=14,
        colour=_GREY,
    )


def _mask_grid(c: _Canvas, x: float, title: str, allowed, y: float = 90) -> _Box:
    n, cell = 5, 30
    on, off = _tint("blue", 0.35), "#EEEEEE"
    g = c.grid(
        x,
        y,
        n,
        n,
        cell,
        lambda r, k: on if allowed(r, k) else off,
        lambda r, k: "T" if allowed(r, k) else "F",
    )
    c.text(g.cx, y - 56, title, bold=True)
    for k in range(n):
        c.text(x + (k + 0.5) * cell, y - 14, str(k), size=13, colour=_GREY)
        c.text(x - 12, y + (k + 0.5) * cell, str(k), size=13, colour=_GREY)
    return g


@_figure(
    "masks",
    "A padding mask, a causal mask, and the two combined",
    """Three 5 by 5 grids, rows are query positions 0 to 4 and columns key positions 0 to 4, T
    (True) where attention is allowed and F (False) where it is masked. The padding mask, for a
    sentence of 3 real tokens padded to 5, is False in the last two columns for every query. The
    causal (look-ahead) mask is True on and below the diagonal: position i sees keys 0 to i. The
    decoder's self-attention uses both: their AND is True only where the key is at or before the
    query and not padding.""",
    height=330,
)
def _masks(c: _Canvas) -> None:
    real = 3
    a = _mask_grid(c, 70, "padding mask", lambda r, k: k < real)
    b = _mask_grid(c, 300, "causal mask", lambda r, k: k <= r)
    d = _mask_grid(c, 530, "both (AND)", lambda r, k: k < real and k <= r)
    c.text(a.cx, 52, "3 tokens + 2 <pad>", size=13, colour=_GREY)
    c.text(b.cx, 52, "key j ≤ query i", size=13, colour=_GREY)
    c.text(d.cx, 52, "decoder self-attention", size=13, colour=_GREY)
    c.text((a.x + a.w + b.x) / 2, a.cy, "AND", bold=True)
    c.text((b.x + b.w + d.x) / 2, a.cy, "=", size=22, bold=True)
    for g in (a, b, d):
        c.text(g.cx, g.y + g.h + 18, "key position j →", size=13, colour=_GREY)
    c.text(8, a.cy, "query\ni", size=13, colour=_GREY, anchor="start")
    c.rect(150, 286, 24, 20, fill=_tint("blue", 0.35), stroke="none", rx=0)
    c.text(182, 296, "T = True, attention allowed", anchor="start", size=14)
    c.rect(420, 286, 24, 20, fill="#EEEEEE", stroke="none", rx=0)
    c.text(452, 296, "F = False, masked", anchor="start", size=14)


@_figure(
    "positional_encoding",
    "Sinusoidal positional encoding: one wave per dimension, added to the embedding",
    """Left: the positional encoding's values at positions 0 to 40 for four dimensions of a
    d_model = 16 encoding. Dimensions 0 and 1 (pair i = 0) are sin(pos) and cos(pos), the fastest
    waves; dimension 4 (i = 2) and dimension 12 (i = 6) are sines with longer and longer
    wavelengths: the frequency falls with the dimension pair i and does not depend on the
    position. Right: at each position pos the encoding vector PE_pos is added to the token's
    embedding, and the sum enters the first layer.""",
    height=440,
)
def _positional_encoding(c: _Canvas) -> None:
    d_model, n = 16, 40
    x0, x1 = 150, 440
    rows = [(0, "sin"), (1, "cos"), (4, "sin"), (12, "sin")]
    for r, (dim, fn) in enumerate(rows):
        i = dim // 2
        yc, amp = 58 + r * 78, 24
        c.path(f"M{x0} {yc} L{x1} {yc}", stroke="#CCCCCC", width=1)
        pts = []
        for p in range(4 * n + 1):
            pos = p / 4
            angle = pos / 10000 ** (2 * i / d_model)
            v = math.sin(angle) if fn == "sin" else math.cos(angle)
            pts.append(f"{_num(x0 + (x1 - x0) * pos / n)} {_num(yc - amp * v)}")
        c.path("M" + " L".join(pts), stroke=_dark(_HEAD_COLOURS[r]), width=2.2)
        c.text(x0 - 10, yc - 9, f"dim {dim}", anchor="end", bold=True, size=14)
        c.text(x0 - 10, yc + 11, f"{fn}, i = {i}", anchor="end", size=13, colour=_GREY)
    base = 58 + 3 * 78 + 34
    c.arrow((x0, base), (x1 + 10, base), colour=_GREY, width=1.2)
    for p in range(0, n + 1, 10):
        c.text(x0 + (x1 - x0) * p / n, base + 14, str(p), size=13, colour=_GREY)
    c.text((x0 + x1) / 2, base + 34, "position pos (from 0)", size=14)
    c.text(WIDTH / 2, 396, "PE(pos, 2i) = sin(pos · ω_i),   PE(pos, 2i+1) = cos(pos · ω_i)")
    c.text(
        WIDTH / 2,
        422,
        "ω_i = 1 / 10000^{2i/d} with d = d_{model}: the frequency falls with i",
        size=14,
        colour=_GREY,
    )
    # right: embedding + PE
    cell = 18
    vx = 480
    emb = c.matrix(vx, 64, 6, 1, cell, "emb")
    pe = c.matrix(vx + 80, 64, 6, 1, cell, "ctx")
    out = c.matrix(vx + 160, 64, 6, 1, cell, "enc")
    c.text(emb.cx, 42, "embedding", size=13)
    c.text(pe.cx, 42, "PE_{pos}", size=14)
    c.text(out.cx, 42, "input", size=13)
    c.text((emb.x + emb.w + pe.x) / 2, emb.cy, "+", size=22, bold=True)
    c.text((pe.x + pe.w + out.x) / 2, emb.cy, "=", size=22, bold=True)
    c.text(
        pe.cx,
        226,
        "at each position pos:\nd_{model} numbers,\nadded to the token's\nembedding",
        size=13,
        colour=_GREY,
    )


def _sublayer_stack(c: _Canvas, x: float, pre: bool) -> None:
    """One sublayer with its residual and LayerNorm, bottom to top."""
    cx = x + 120
    c.text(cx, 408, "x", size=17, bold=True)
    order = [("LayerNorm", "norm"), ("Sublayer", "attn")] if pre else [("Sublayer", "attn")]
    y = 330
    prev = (cx, 396)
    for label, role in order:
        b = c.box(cx - 70, y - 40, 140, 40, label, role)
        c.arrow(prev, b.bottom)
        prev, y = b.top, y - 72
    add = c.circle(cx, y - 20, 16, "+", "plain")
    c.arrow(prev, add.bottom)
    # the residual: from x, around on the left, into the add
    c.line((cx, 376), (x + 20, 376), (x + 20, add.cy), add.left)
    c.text(x + 14, (376 + add.cy) / 2, "residual", size=13, colour=_GREY, anchor="end")
    top = add.top
    if not pre:
        b = c.box(cx - 70, add.y - 72, 140, 40, "LayerNorm", "norm")
        c.arrow(top, b.bottom)
        top = b.top
    c.arrow(top, (cx, 44))
    c.text(cx, 32, "output", size=14)


@_figure(
    "add_and_norm",
    "Post-LN (the paper) and pre-LN: where the LayerNorm sits",
    """Two panels, each a sublayer (attention or feed-forward) with its residual connection,
    drawn from the input x at the bottom to the output at the top. Post-LN, as in the paper: the
    sublayer's output is added to x and the sum is normalised, LayerNorm(x + Sublayer(x)). Pre-LN:
    x is normalised first, the sublayer runs on that, and its output is added to the untouched
    x, x + Sublayer(LayerNorm(x)); the residual path then carries x through the whole stack
    unnormalised, and a pre-LN stack ends with one final LayerNorm.""",
    height=500,
)
def _add_and_norm(c: _Canvas) -> None:
    for x, title, formula in [
        (6, "post-LN (the paper)", "LayerNorm(x + Sublayer(x))"),
        (358, "pre-LN (norm\\_first=True)", "x + Sublayer(LayerNorm(x))"),
    ]:
        c.rect(x, 8, 336, 484, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
        _sublayer_stack(c, x + 60, pre=x > 100)
        if x > 100:
            c.text(x + 96, 96, "the stack ends with\none more LayerNorm", size=13, colour=_GREY)
        c.text(x + 168, 446, title, size=17, bold=True)
        c.text(x + 168, 472, formula, size=15)


@_figure(
    "feed_forward",
    "The position-wise feed-forward network",
    """Left: the network for one position, widening the vector from d_model to d_ff (4 times
    wider in the paper: 512 to 2048) with W₁ and a ReLU, then narrowing it back to d_model with W₂:
    FFN(x) = max(0, x W₁ + b₁) W₂ + b₂. Right: four positions x₁ to x₄, each passed through the
    same FFN with the same weights, separately; no arrow joins two positions, because the
    feed-forward network does not mix positions (attention does).""",
    height=400,
)
def _feed_forward(c: _Canvas) -> None:
    cx = 160
    top, mid, bot = (
        _Box(cx - 40, 80, 80, 26),
        _Box(cx - 150, 200, 300, 26),
        _Box(cx - 40, 320, 80, 26),
    )
    c.box(*astuple(bot), role="emb")
    c.box(*astuple(mid), "ReLU(x W_1 + b_1): d_{ff} = 2048", "ffn", size=14)
    c.box(*astuple(top), role="enc")
    c.text(cx + 50, bot.cy, "x: d_{model} = 512", size=14, anchor="start")
    c.text(cx + 50, top.cy, "FFN(x): d_{model} = 512", size=14, anchor="start")
    for lo, hi in ((bot, mid), (mid, top)):
        c.path(
            f"M{_num(lo.x)} {_num(lo.y)} L{_num(hi.x)} {_num(hi.y + hi.h)}"
            f" M{_num(lo.x + lo.w)} {_num(lo.y)} L{_num(hi.x + hi.w)} {_num(hi.y + hi.h)}",
            stroke=_GREY,
            width=1,
        )
    c.text(cx, 273, "W_1: d_{model} × d_{ff}", size=14)
    c.text(cx, 153, "W_2: d_{ff} × d_{model}", size=14)
    c.text(cx, 30, "one position", bold=True, size=16)
    c.text(cx, 376, "FFN(x) = max(0, x W_1 + b_1) W_2 + b_2", size=14)
    # right: the same FFN at every position
    c.text(520, 30, "every position, the same weights", bold=True, size=16)
    c.text(520, 54, "one copy of W_1, b_1, W_2, b_2", size=14, colour=_GREY)
    xs = [370 + 78 * k for k in range(4)]
    for k, x in enumerate(xs):
        b = c.box(x, 180, 62, 60, "FFN", "ffn", bold=True)
        c.text(b.cx, 340, f"x_{k + 1}")
        c.arrow((b.cx, 326), b.bottom)
        c.arrow(b.top, (b.cx, 100))
        c.text(b.cx, 86, f"z_{k + 1}")
    c.text(520, 376, "no arrow between positions:\nthe FFN does not mix them", size=14)


def _tag(c: _Canvas, x: float, y: float, chapters: str) -> None:
    """A small grey pill at ``x`` (its left edge), ``y`` naming the chapters that build a block."""
    w = _text_width(chapters, 13) + 10
    c.rect(x, y - 10, w, 20, fill="#FFFFFF", stroke=_GREY, rx=10, width=1)
    c.text(x + w / 2, y, chapters, size=13, colour=_GREY)


def _column(c: _Canvas, x: float, blocks, side: float) -> list[_Box]:
    """A column of blocks, bottom to top, joined by arrows, with residual connections drawn on
    ``side`` (-1 left, +1 right) and chapter tags on the right. ``blocks`` holds
    (y, label, role, tags, height); an Add & Norm takes its residual from below the block
    under it."""
    bw = 190
    boxes = []
    for y, label, role, tags, h in blocks:
        b = c.box(x, y, bw, h, label, role, size=14)
        if boxes:
            c.arrow(boxes[-1].top, b.bottom)
        if label == "Add & Norm":
            below = boxes[-1]
            start = below.y + below.h + 14
            edge = x + bw + 8 if side > 0 else x - 8
            end = (x + bw, b.cy) if side > 0 else (x, b.cy)
            c.line((below.cx, start), (edge, start), (edge, b.cy), end, colour=_GREY, width=1.3)
        _tag(c, x + bw + (22 if side > 0 else 8), b.cy, tags)
        boxes.append(b)
    return boxes


def _pe_input(c: _Canvas, x: float, label: str, circle_x: float) -> _Box:
    """Tokens, embedding and the positional encoding added, under a stack at ``x``."""
    c.text(x + 95, 772, label, size=14)
    emb = c.box(x, 706, 190, 36, label.split(" ")[0].capitalize() + " embedding", "emb", size=14)
    c.arrow((x + 95, 760), emb.bottom)
    plus = c.circle(x + 95, 664, 12, "+", "plain")
    c.arrow(emb.top, plus.bottom)
    c.circle(circle_x, 664, 16, "~", "ctx")
    c.arrow(
        (circle_x + (16 if circle_x < x else -16), 664), plus.left if circle_x < x else plus.right
    )
    c.text(circle_x, 700, "positional\nencoding", size=13)
    _tag(c, circle_x - 13, 634, "12")
    _tag(c, x + 198 if circle_x < x else x - 38, emb.cy, "13")
    return plus


def _stack(c: _Canvas, x: float, tokens: str, frame_top: float, n_label: str, blocks, side):
    """One side of the Transformer: tokens, embedding and positional encoding, then the
    layer's blocks (see :func:`_column`) in a dashed frame marked ``n_label`` (N times)."""
    plus = _pe_input(c, x, tokens, x - 36 if side < 0 else x + 226)
    fill = "#F4F4F4" if side < 0 else "none"
    c.rect(x - 14, frame_top, 218, 642 - frame_top, fill=fill, stroke=_GREY, dashed=True)
    if side < 0:
        c.text(x - 20, 450, n_label, size=18, bold=True, anchor="end")
    else:
        c.text(x + 212, 415, n_label, size=18, bold=True, anchor="start")
    boxes = _column(c, x, blocks, side)
    c.arrow(plus.top, boxes[0].bottom)
    return boxes


@_figure(
    "transformer",
    "The Transformer (Vaswani et al. 2017, Figure 1), with the chapters that build each block",
    """The encoder-decoder Transformer, bottom to top. Left, the encoder: source tokens, input
    embedding plus positional encoding, then N identical layers of multi-head self-attention and a
    feed-forward network, each followed by Add & Norm with a residual connection. Right, the
    decoder: the target tokens shifted right, output embedding plus positional encoding, then N
    identical layers of masked multi-head self-attention, multi-head cross-attention whose keys
    and values come from the encoder's output (the memory), and a feed-forward network, each
    followed by Add & Norm; then a linear layer and a softmax give the output probabilities. Each
    block carries the numbers of the chapters that build it: 04, 07 and 08 for attention, 09 for
    Add & Norm, 10 for the feed-forward network, 11 for the mask, 12 for the positional encoding,
    13 for the embeddings and the whole model, 14 for training and decoding.""",
    height=912,
)
def _transformer(c: _Canvas) -> None:
    ex, dx = 70, 390  # left edges of the encoder and decoder columns
    enc = _stack(c, ex, "input tokens x_1 … x_S", 346, "N×", [
        (566, "Multi-head\nself-attention", "attn", "04 07 08", 48),
        (506, "Add & Norm", "norm", "09", 36),
        (424, "Feed forward", "ffn", "10", 48),
        (364, "Add & Norm", "norm", "09", 36),
    ], side=-1)  # fmt: skip
    dec = _stack(c, dx, "output tokens, shifted right", 206, "×N", [
        (566, "Masked multi-head\nself-attention", "attn", "07 08 11", 48),
        (506, "Add & Norm", "norm", "09", 36),
        (424, "Multi-head\ncross-attention", "attn", "07 08", 48),
        (364, "Add & Norm", "norm", "09", 36),
        (282, "Feed forward", "ffn", "10", 48),
        (222, "Add & Norm", "norm", "09", 36),
        (150, "Linear", "dec", "13", 36),
        (96, "Softmax", "dec", "13", 36),
    ], side=1)  # fmt: skip
    cross = dec[2]
    blue = _dark("blue")
    c.line(
        enc[-1].top,
        (enc[-1].cx, 300),
        (dx - 40, 300),
        (dx - 40, cross.cy),
        cross.left,
        colour=blue,
        width=1.8,
    )
    c.text(enc[-1].cx + 40, 286, "memory (encoder output)", size=13, colour=blue)
    c.text(dx - 46, cross.cy - 14, "K, V", size=13, colour=blue, anchor="end")
    c.arrow(dec[-1].top, (dec[-1].cx, 58))
    c.text(dec[-1].cx, 42, "output probabilities", size=14)
    _tag(c, dec[-1].cx + 76, 42, "14")
    _tag(c, dx + 95 + 104, 772, "14")
    c.text(
        20,
        806,
        "The numbers are the chapters that build each block:",
        size=13,
        anchor="start",
        bold=True,
    )
    legend = [
        "03  attention in three steps",
        "04  query, key, value",
        "05  score functions",
        "07  self- and cross-attention",
        "08  multi-head attention",
        "09  Add & Norm",
        "10  feed-forward network",
        "11  masking",
        "12  positional encoding",
        "13  the Transformer",
        "14  training and inference",
    ]
    for k, item in enumerate(legend):
        col, row = divmod(k, 4)
        c.text(20 + col * 230, 830 + row * 22, item, size=13, anchor="start")


@_figure(
    "kv_cache",
    "Decoding with a key-value cache",
    """One decoding step t of one decoder layer. Only the newest token, the one written at step
    t-1, is projected: one query row q_t, one key row k_t and one value row v_t. The key and value
    rows are appended to this layer's cache, which already holds k₁ to k_{t-1} and v₁ to v_{t-1}
    from the earlier steps; the query attends over all t cached rows. Below, the cross-attention
    keys and values of the encoder's memory, S rows each, were computed once before the first
    step and are reused, unchanged, at every step. Every decoder layer keeps its own cache.""",
    height=520,
)
def _kv_cache(c: _Canvas) -> None:
    cell = 20
    c.text(90, 28, "step t: new token", size=14, bold=True)
    tok = c.box(40, 44, 100, 36, "y_{t-1}", "dec")
    xs = [("q", "q", 60), ("k", "k", 200), ("v", "v", 340)]
    rows = {}
    for name, role, x in xs:
        r = c.matrix(x + 160, 110, 1, 4, cell, role)
        c.text(r.x - 12, r.cy, f"{name}_t", anchor="end", bold=True)
        rows[name] = r
    c.line(tok.bottom, (tok.cx, 96), (rows["v"].cx, 96), arrow=False, colour=_GREY)
    for r in rows.values():
        c.arrow((r.cx, 96), r.top, colour=_GREY)
    c.text(
        tok.x + tok.w + 14,
        62,
        "only this token is projected: 1 row each, not t rows",
        size=14,
        anchor="start",
    )
    # caches
    t = 5
    for name, key, x in [("K cache", "k", 320), ("V cache", "v", 500)]:
        stroke, fill = _role(key)
        g = c.grid(
            x, 180, t, 4, cell, lambda r, k, fill=fill: fill if r == t - 1 else _tint("grey", 0.8)
        )
        c.rect(x, 180, g.w, g.h, stroke=stroke, rx=2)
        c.text(g.cx, 166, name, bold=True, size=14)
        last, turn = 180 + (t - 0.5) * cell, rows[key].x + rows[key].w + 16
        c.line(rows[key].right, (turn, rows[key].cy), (turn, last), (x + g.w, last), colour=stroke)
        for r in range(t):
            sub = "t" if r == t - 1 else ("{t-1}" if r == t - 2 else str(r + 1))
            if r == t - 3:
                continue
            c.text(x - 8, 180 + (r + 0.5) * cell, f"{key}_{sub}", size=13, anchor="end")
    c.text(395, 296, "k_t, v_t appended; earlier rows reused", size=13, colour=_GREY)
    att = c.box(40, 200, 200, 64, "", "attn")
    c.text(att.cx, 218, "self-attention", bold=True, size=14)
    c.text(att.cx, 244, "softmax(q_t Kᵀ/√d_k) V", size=14)
    c.line(
        rows["q"].bottom, (rows["q"].cx, 150), (att.cx, 150), att.top, colour=_dark("vermillion")
    )
    c.arrow((320, 230), att.right, colour=_GREY)
    c.text(272, 214, "K, V", size=13, colour=_GREY)
    c.text(140, 288, "over all t cached rows", size=13, colour=_GREY)
    # cross-attention memory
    c.rect(20, 320, 660, 150, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
    cross = c.box(40, 360, 200, 64, "", "attn")
    c.text(cross.cx, 378, "cross-attention", bold=True, size=14)
    c.text(cross.cx, 404, "query from above", size=14)
    c.arrow(att.bottom, cross.top)
    for name, key, x in [("memory K", "k", 320), ("memory V", "v", 500)]:
        stroke, fill = _role(key)
        g = c.grid(x, 360, 3, 4, cell, lambda r, k, fill=fill: fill)
        c.rect(x, 360, g.w, g.h, stroke=stroke, rx=2)
        c.text(g.cx, 344, name, bold=True, size=14)
    c.arrow((320, 390), cross.right, colour=_GREY)
    c.text(280, 378, "K, V", size=13, colour=_GREY)
    c.text(
        435,
        446,
        "S rows each: computed once from the encoder output, reused at every step",
        size=13,
    )
    c.text(
        WIDTH / 2, 500, "Every decoder layer keeps its own cache and its own memory K, V.", size=14
    )


DIAGRAMS = tuple(_REGISTRY)
"""The names of the concept figures, in the book's order."""
