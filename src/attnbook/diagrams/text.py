"""The labels' text: a tiny markup for sub- and superscripts (``h_S``, ``W^Q``), its SVG
``tspan`` elements, and the estimate of a label's width that the layout and its tests use
(Latin letters by class, CJK characters one em)."""

from __future__ import annotations

from html import escape

from .lang import _CJK

__all__ = ["MIN_FONT_PX"]

MIN_FONT_PX = 13
"""No text is smaller than this at :data:`WIDTH`."""

_TEXT = 15  # the body size of labels, px


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
    if _CJK.match(ch):
        return 1.0  # ideographs and full-width punctuation are one em wide
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
