"""Matrices and token weights as text: LaTeX for the prose (typeset by MathJax) and HTML
tables for widgets (which MathJax does not reach).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from .base import Cells, _check_2d, to_numpy

__all__ = [
    "matrix_to_latex",
    "matrix_to_html",
    "token_weights_html",
]


def _fmt(v: float, digits: int) -> str:
    if abs(v) < 0.5 * 10.0 ** (-digits):
        v = 0.0
    text = f"{v:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def matrix_to_latex(
    m, digits: int = 3, *, name: str | None = None, highlight: Cells = (), color: str = "#d62728"
) -> str:
    r"""A matrix as a LaTeX ``bmatrix`` for MathJax, e.g. ``Q = \begin{bmatrix}...``.

    Values are rounded to ``digits`` decimals (trailing zeros dropped). Cells listed in
    ``highlight`` as ``(row, col)`` are coloured and bold.
    """
    a = _check_2d("m", to_numpy(m))
    marked = set(highlight)
    rows = []
    for i in range(a.shape[0]):
        cells = []
        for j in range(a.shape[1]):
            v = _fmt(a[i, j], digits)
            cells.append(rf"\color{{{color}}}{{\mathbf{{{v}}}}}" if (i, j) in marked else v)
        rows.append(" & ".join(cells))
    body = r" \\ ".join(rows)
    prefix = f"{name} = " if name else ""
    return prefix + r"\begin{bmatrix} " + body + r" \end{bmatrix}"


def matrix_to_html(
    m,
    digits: int = 3,
    *,
    title: str | None = None,
    highlight: Cells = (),
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    color: str = "#ffd27f",
) -> str:
    """A matrix as a small HTML table (for widgets: MathJax does not typeset inside them).

    Cells in ``highlight`` get a coloured background.
    """
    a = _check_2d("m", to_numpy(m))
    marked = set(highlight)
    cell = "padding:2px 6px;text-align:right;font-family:monospace;border:1px solid #ddd;"
    head = "padding:2px 6px;color:#666;font-size:85%;"
    out = [
        '<table style="border-collapse:collapse;display:inline-table;margin:4px 10px '
        '4px 0;vertical-align:top;">'
    ]
    if title:
        out.append(
            f'<caption style="caption-side:top;font-weight:bold;text-align:left;">'
            f"{html.escape(title)}</caption>"
        )
    if col_labels is not None:
        out.append(
            "<tr>"
            + ("<th></th>" if row_labels is not None else "")
            + "".join(f'<th style="{head}">{html.escape(str(c))}</th>' for c in col_labels)
            + "</tr>"
        )
    for i in range(a.shape[0]):
        row = "<tr>"
        if row_labels is not None:
            row += f'<th style="{head}">{html.escape(str(row_labels[i]))}</th>'
        for j in range(a.shape[1]):
            bg = f"background:{color};font-weight:bold;" if (i, j) in marked else ""
            row += f'<td style="{cell}{bg}">{_fmt(a[i, j], digits)}</td>'
        out.append(row + "</tr>")
    out.append("</table>")
    return "".join(out)


def token_weights_html(
    tokens: Sequence[str],
    weights,
    scores=None,
    *,
    caption: str = "",
    digits: int = 2,
    rgb: tuple[int, int, int] = (31, 119, 180),
) -> str:
    """One query's attention over a row of tokens, as a small HTML table (for widget views).

    Each token's cell is shaded in proportion to its weight (``weights`` ``(L,)``, in [0, 1]),
    with the weight written under it, and, if given, the raw alignment score under that.
    Much smaller and faster than a PNG per view, so an explorer can hold many views. Tokens
    are HTML-escaped (``<eos>`` shows as such). ``caption`` is HTML, placed above the table.
    """
    w = to_numpy(weights).ravel()
    if len(tokens) != len(w):
        raise ValueError(
            f"tokens and weights must have the same length, got {len(tokens)} "
            f"tokens and weights of shape {to_numpy(weights).shape}"
        )
    s = None if scores is None else to_numpy(scores).ravel()
    if s is not None and len(s) != len(w):
        raise ValueError(
            f"scores must have one value per token ({len(w)}), got shape {to_numpy(scores).shape}"
        )
    r, g, b = rgb
    row_tok, row_w, row_s = [], [], []
    for i, token in enumerate(tokens):
        a = float(np.clip(w[i], 0.0, 1.0))
        ink = ";color:#fff" if a > 0.5 else ""
        row_tok.append(
            f'<td class="t" style="background:rgba({r},{g},{b},{a:.2f}){ink}">'
            f"{html.escape(str(token))}</td>"
        )
        row_w.append(f'<td class="n">{_fmt(w[i], digits)}</td>')
        if s is not None:
            row_s.append(f'<td class="s">{_fmt(s[i], 1)}</td>')
    rows = [
        "<tr>" + "".join(row_tok) + "</tr>",
        "<tr>" + "".join(row_w) + '<td class="s">weight</td></tr>',
    ]
    if s is not None:
        rows.append("<tr>" + "".join(row_s) + '<td class="s">score</td></tr>')
    head = f"<div>{caption}</div>" if caption else ""
    style = (
        "<style>.attnbook-tw{border-collapse:collapse}.attnbook-tw td{padding:1px 3px;"
        "text-align:center;font-family:monospace}.attnbook-tw .t{font-size:14px}"
        ".attnbook-tw .n{font-size:9px}.attnbook-tw .s{font-size:9px;color:#777}</style>"
    )
    return f'{style}{head}<table class="attnbook-tw">{"".join(rows)}</table>'
