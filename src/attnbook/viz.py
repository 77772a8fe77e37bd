"""Pictures and matrix renderings shared by every chapter (matplotlib, LaTeX, HTML).

No chapter writes its own plotting helper: heatmaps of attention weights with token labels,
the per-step picture of the three attention steps, and matrices rendered as LaTeX (for the
prose, typeset by MathJax) or as HTML tables (for widgets, which MathJax does not reach).
"""

from __future__ import annotations

import html
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import font_manager
from matplotlib.text import Text

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

Cells = Iterable[tuple[int, int]]

# A subset of Noto Sans CJK SC (SIL Open Font License, attnbook/fonts/OFL.txt): the 3,755 common
# characters of GB 2312 and every one the book uses (tests/make_cjk_font.py writes it).
CJK_FONT = "Noto Sans CJK SC"
_CJK_FONT_FILE = Path(__file__).with_name("fonts") / "NotoSansSC-attnbook.otf"


def use_cjk_font() -> None:
    """Let every figure draw Chinese labels (猫, 学生) instead of empty boxes.

    matplotlib's default font, DejaVu Sans, has no Chinese glyphs. This registers the CJK font
    the package ships and puts it after the default family, so Latin text looks as before and
    a character DejaVu Sans lacks is taken from the CJK font. Importing :mod:`attnbook.viz`
    calls it; calling it again changes nothing.
    """
    if not any(f.fname == str(_CJK_FONT_FILE) for f in font_manager.fontManager.ttflist):
        font_manager.fontManager.addfont(str(_CJK_FONT_FILE))
    family = plt.rcParams["font.family"]
    family = [family] if isinstance(family, str) else list(family)
    if CJK_FONT not in family:
        plt.rcParams["font.family"] = [*family, CJK_FONT]


use_cjk_font()


def to_numpy(x) -> np.ndarray:
    """A tensor, array or nested list as a float NumPy array (detached, on the CPU)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=float)


def _check_2d(name: str, m: np.ndarray) -> np.ndarray:
    if m.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {m.shape}")
    return m


def heatmap(
    weights,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    *,
    ax=None,
    annotate: bool | None = None,
    fmt: str = ".2f",
    cmap: str = "Blues",
    vmin: float | None = 0.0,
    vmax: float | None = None,
    colorbar: bool = True,
    title: str | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
):
    """Draw a matrix of attention weights: query rows, key columns, token labels on both axes.

    ``annotate`` writes each value in its cell (default: on for matrices up to 12x12).
    Returns the matplotlib ``Axes``.
    """
    m = _check_2d("weights", to_numpy(weights))
    for name, labels, n in (("x_labels", x_labels, m.shape[1]), ("y_labels", y_labels, m.shape[0])):
        if labels is not None and len(labels) != n:
            raise ValueError(
                f"{name} must have {n} labels to match weights of shape {m.shape}, "
                f"got {len(labels)}"
            )
    if ax is None:
        w, h = max(2.5, 0.45 * m.shape[1] + 1.5), max(2.0, 0.4 * m.shape[0] + 1.0)
        _, ax = plt.subplots(figsize=(w, h))
    im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(m.shape[1]))
    ax.set_yticks(range(m.shape[0]))
    ax.set_xticklabels(
        x_labels if x_labels is not None else range(m.shape[1]),
        rotation=90
        if x_labels is not None and max(map(len, map(str, x_labels)), default=0) > 3
        else 0,
    )
    ax.set_yticklabels(y_labels if y_labels is not None else range(m.shape[0]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = m.shape[0] <= 12 and m.shape[1] <= 12
    if annotate:
        top = np.nanmax(m) if vmax is None else vmax
        bottom = np.nanmin(m) if vmin is None else vmin
        middle = (top + bottom) / 2
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(
                    j,
                    i,
                    format(m[i, j], fmt),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if m[i, j] > middle else "black",
                )
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def attention_step_figure(
    keys: Sequence[str],
    scores,
    weights,
    context=None,
    *,
    title: str = "",
    context_labels: Sequence[str] | None = None,
):
    """One decoder step of attention as three panels: scores, softmax weights, context vector.

    ``scores`` and ``weights`` are ``(L_k,)`` over the labelled ``keys``; ``context`` is the
    weighted sum ``(d,)``. Returns the ``Figure``.
    """
    s, w = to_numpy(scores).ravel(), to_numpy(weights).ravel()
    if not (len(keys) == len(s) == len(w)):
        raise ValueError(
            f"keys, scores and weights must have the same length, got {len(keys)}, "
            f"{len(s)} and {len(w)}"
        )
    panels = 3 if context is not None else 2
    fig, axes = plt.subplots(
        1, panels, figsize=(3.1 * panels, 2.4), gridspec_kw={"width_ratios": [3, 3, 2][:panels]}
    )
    pos = np.arange(len(keys))
    axes[0].bar(pos, s, color=["#d62728" if v < 0 else "#1f77b4" for v in s])
    axes[0].set_title("1. alignment scores")
    axes[1].bar(pos, w, color="#2ca02c")
    axes[1].set_ylim(0, 1)
    axes[1].set_title("2. softmax weights")
    for ax in axes[:2]:
        ax.set_xticks(pos)
        ax.set_xticklabels(keys, rotation=45, ha="right")
        ax.axhline(0, color="black", lw=0.6)
    for p, v in zip(pos, w, strict=True):
        axes[1].text(p, v + 0.02, f"{v:.2f}", ha="center", fontsize=7)
    if context is not None:
        c = to_numpy(context).ravel()
        axes[2].barh(np.arange(len(c))[::-1], c, color="#9467bd")
        axes[2].set_yticks(np.arange(len(c))[::-1])
        axes[2].set_yticklabels(
            context_labels if context_labels is not None else [f"c[{i}]" for i in range(len(c))]
        )
        axes[2].axvline(0, color="black", lw=0.6)
        axes[2].set_title("3. context vector")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


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


def figure_to_png(fig, dpi: int = 80, close: bool = True) -> bytes:
    """Render a matplotlib figure to PNG bytes (small by default, for embedded widget views)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    if close:
        plt.close(fig)
    return buf.getvalue()


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
    if fig.get_layout_engine() is not None:
        fig.draw_without_rendering()
    inches = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1).width
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
    if isinstance(width, bool) or not isinstance(width, int) or not 200 <= width <= 2000:
        raise ValueError(f"width must be an int number of pixels from 200 to 2000, got {width!r}")
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
    return figure_to_png(fig, dpi=dpi, close=close)


def attention_grid(
    weights,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    *,
    title: str = "",
    layer_names: Sequence[str] | None = None,
    cell: float = 2.2,
    max_cols: int | None = None,
):
    """Heatmaps of every head (columns) of every layer (rows): ``weights`` is ``(L, H, q, k)``.

    A 3-D tensor ``(H, q, k)`` is one layer; a 2-D one is a single map. Token labels are put
    on the outer axes only. With ``max_cols``, one layer's heads wrap onto rows of at most that
    many maps, so eight heads stay legible at the width of the page. Returns the ``Figure``.
    """
    w = to_numpy(weights)
    if w.ndim == 2:
        w = w[None, None]
    elif w.ndim == 3:
        w = w[None]
    if w.ndim != 4:
        raise ValueError(
            f"weights must be (layers, heads, queries, keys), (heads, queries, "
            f"keys) or (queries, keys), got shape {to_numpy(weights).shape}"
        )
    n_layers, n_heads, n_q, n_k = w.shape
    if layer_names is not None and len(layer_names) != n_layers:
        raise ValueError(f"layer_names must have {n_layers} names, got {len(layer_names)}")
    if max_cols is not None and (
        isinstance(max_cols, bool) or not isinstance(max_cols, int) or max_cols < 1
    ):
        raise ValueError(f"max_cols must be a positive int or None, got {max_cols!r}")
    # (row, column) of each map: layers are rows, unless one layer's heads wrap
    if n_layers == 1 and max_cols is not None and n_heads > max_cols:
        n_cols = max_cols
        places = [(0, h, divmod(h, max_cols)) for h in range(n_heads)]
    else:
        n_cols = n_heads
        places = [(la, h, (la, h)) for la in range(n_layers) for h in range(n_heads)]
    n_rows = max(r for _, _, (r, _) in places) + 1
    fig, axes = plt.subplots(
        n_rows,
        n_cols,
        squeeze=False,
        figsize=(cell * n_cols * max(1.0, n_k / max(n_q, 1)) + 0.6, cell * n_rows + 0.5),
    )
    for layer, head, (row, col) in places:
        ax = axes[row, col]
        heatmap(
            w[layer, head],
            x_labels,
            y_labels,
            ax=ax,
            colorbar=False,
            vmin=0,
            vmax=1,
            annotate=False,
            xlabel="",
            ylabel="",
        )
        name = layer_names[layer] if layer_names is not None else f"layer {layer + 1}"
        ax.set_title(f"{name}, head {head + 1}" if n_heads > 1 or n_layers > 1 else "", fontsize=8)
        if (row + 1, col) in {p for _, _, p in places}:  # a map below shows the key labels
            ax.set_xticklabels([])
        if col > 0:
            ax.set_yticklabels([])
    for row, col in {(r, c) for r in range(n_rows) for c in range(n_cols)} - {
        p for _, _, p in places
    }:
        axes[row, col].set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def positional_encoding_figure(pe, *, max_dims: int | None = None, title: str = ""):
    """The positional-encoding matrix ``(n_positions, d_model)`` as a heatmap: rows are
    positions, columns dimensions (even columns sin, odd columns cos). Returns the ``Figure``."""
    m = _check_2d("pe", to_numpy(pe))
    if max_dims is not None:
        m = m[:, :max_dims]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    im = ax.imshow(m, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel("dimension i")
    ax.set_ylabel("position")
    ax.set_title(title or f"positional encoding ({m.shape[0]} positions x {m.shape[1]} dims)")
    fig.colorbar(im, ax=ax, fraction=0.03, pad=0.02)
    fig.tight_layout()
    return fig


def attention_types_figure(maps: dict, *, title: str = "", cell: float = 2.6):
    """Several attention maps side by side, e.g. a Transformer's encoder self-, decoder self-
    and cross-attention for one layer and head: ``{name: (weights (q, k), key_labels,
    query_labels)}``. Returns the ``Figure``."""
    if not maps:
        raise ValueError("maps must hold at least one attention map, got none")
    fig, axes = plt.subplots(
        1, len(maps), figsize=(cell * len(maps) + 0.8, cell + 0.6), squeeze=False
    )
    for ax, (name, (weights, keys, queries)) in zip(axes[0], maps.items(), strict=True):
        heatmap(
            weights,
            keys,
            queries,
            ax=ax,
            colorbar=False,
            vmin=0,
            vmax=1,
            annotate=False,
            title=name,
            xlabel="keys",
            ylabel="queries",
        )
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


BOTTLENECK_MODELS = {"context": "fixed context C = h_S", "attention": "additive attention"}
BOTTLENECK_METRICS = {"exact": "exact match", "token": "per-token accuracy"}


def bottleneck_figure(
    result: dict,
    models: Sequence[str] = ("context", "attention"),
    *,
    metrics: Sequence[str] = ("exact", "token"),
    title: str = "",
    panel_size: tuple[float, float] = (4.6, 3.0),
):
    """Accuracy against input length from the recorded bottleneck benchmark, one panel per
    metric and one line per model: the shape of Bahdanau et al. (2014), Figure 2.

    ``result`` is ``attnbook.utils.recorded_result("bottleneck")`` (or a dict of the same
    layout: ``config`` with ``train_max`` and ``n_symbols``, ``by_length`` rows with
    ``length`` and, per model, ``{"exact": ..., "token": ...}``). ``models`` picks the curves
    (``"context"``, ``"attention"``), ``metrics`` the panels (``"exact"``, ``"token"``).
    Lengths longer than any training input are shaded; the per-token panel marks guessing
    (1 / n_symbols). Returns the ``Figure``.
    """
    if not isinstance(result, dict) or "by_length" not in result or "config" not in result:
        raise TypeError(
            "result must be the bottleneck benchmark's dict (recorded_result("
            "'bottleneck')), with 'config' and 'by_length'"
        )
    for name, chosen, known in (
        ("models", models, BOTTLENECK_MODELS),
        ("metrics", metrics, BOTTLENECK_METRICS),
    ):
        if isinstance(chosen, str) or not chosen or any(c not in known for c in chosen):
            raise ValueError(
                f"{name} must be a non-empty list drawn from {tuple(known)}, got {chosen!r}"
            )
    cfg, rows = result["config"], result["by_length"]
    lengths = [r["length"] for r in rows]
    fig, axes = plt.subplots(
        1, len(metrics), squeeze=False, figsize=(panel_size[0] * len(metrics), panel_size[1])
    )
    styles = {"context": ("o--", "#d62728"), "attention": ("s-", "#1f77b4")}
    for ax, metric in zip(axes[0], metrics, strict=True):
        for model in models:
            style, color = styles[model]
            ax.plot(
                lengths,
                [r[model][metric] for r in rows],
                style,
                color=color,
                label=BOTTLENECK_MODELS[model],
            )
        if max(lengths) > cfg["train_max"]:
            ax.axvspan(
                cfg["train_max"] + 2.5,
                max(lengths) + 2.5,
                color="grey",
                alpha=0.15,
                label="longer than any training input",
            )
        if metric == "token":
            ax.axhline(1 / cfg["n_symbols"], color="grey", lw=0.8, ls=":", label="guessing")
        ax.set_xlabel("input length")
        ax.set_ylabel(BOTTLENECK_METRICS[metric])
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


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
