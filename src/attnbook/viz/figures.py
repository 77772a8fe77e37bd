"""The book's figures: attention heatmaps with token labels, the three attention steps of one
decoder step, grids of heads and layers, the positional encoding, the attention types side by
side, and the bottleneck's accuracy against length.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .base import _check_2d, _empty_axis_labels_fixed, to_numpy

__all__ = [
    "heatmap",
    "attention_step_figure",
    "attention_grid",
    "positional_encoding_figure",
    "attention_types_figure",
    "BOTTLENECK_MODELS",
    "BOTTLENECK_METRICS",
    "bottleneck_figure",
]


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
    w = _grid_weights(weights)
    n_layers, n_heads, n_q, n_k = w.shape
    n_rows, n_cols, places = _grid_places(w.shape, layer_names, max_cols)
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
        ax.set_title(_head_title(w.shape, layer_names, layer, head), fontsize=8)
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
    with _empty_axis_labels_fixed(fig):
        fig.tight_layout()
    return fig


def _grid_weights(weights) -> np.ndarray:
    """:func:`attention_grid`'s ``weights`` as ``(layers, heads, queries, keys)``."""
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
    return w


def _grid_places(shape, layer_names, max_cols):
    """The rows and columns of :func:`attention_grid` and the ``(layer, head, (row, column))``
    of each map: layers are rows, unless one layer's heads wrap."""
    n_layers, n_heads = shape[:2]
    if layer_names is not None and len(layer_names) != n_layers:
        raise ValueError(f"layer_names must have {n_layers} names, got {len(layer_names)}")
    if max_cols is not None and (
        isinstance(max_cols, bool) or not isinstance(max_cols, int) or max_cols < 1
    ):
        raise ValueError(f"max_cols must be a positive int or None, got {max_cols!r}")
    if n_layers == 1 and max_cols is not None and n_heads > max_cols:
        n_cols = max_cols
        places = [(0, h, divmod(h, max_cols)) for h in range(n_heads)]
    else:
        n_cols = n_heads
        places = [(la, h, (la, h)) for la in range(n_layers) for h in range(n_heads)]
    return max(r for _, _, (r, _) in places) + 1, n_cols, places


def _head_title(shape, layer_names, layer: int, head: int) -> str:
    n_layers, n_heads = shape[:2]
    name = layer_names[layer] if layer_names is not None else f"layer {layer + 1}"
    return f"{name}, head {head + 1}" if n_heads > 1 or n_layers > 1 else ""


def _redraw_attention_grid(
    fig, weights, *, layer_names: Sequence[str] | None = None, max_cols: int | None = None
) -> bool:
    """Put other ``weights`` of the same shape, and their ``layer_names``, into a figure that
    :func:`attention_grid` drew with the same ``max_cols``, keeping its layout and font sizes:
    an explorer's next view is then one draw, not a new figure laid out again.

    Returns False, changing nothing, where a new title would take another size than the old
    one (as "layer 10" after "layer 9"), since the layout would change: draw a new figure then.
    A pixel is allowed (at the figure's resolution, before the view's own): "layer 1" and
    "layer 2" differ by an eighth of one, which moves nothing that can be seen.
    """
    w = _grid_weights(weights)
    n_rows, n_cols, places = _grid_places(w.shape, layer_names, max_cols)
    if len(fig.axes) != n_rows * n_cols:
        raise ValueError(f"fig must hold a {n_rows} x {n_cols} grid, got {len(fig.axes)} axes")
    renderer = fig._get_renderer()
    updates = []
    for layer, head, (row, col) in places:
        ax = fig.axes[row * n_cols + col]  # plt.subplots adds the axes row by row
        (image,) = ax.images
        if image.get_array().shape != w[layer, head].shape:
            raise ValueError(
                f"weights must have the grid's shape, got maps of {w[layer, head].shape} "
                f"for maps of {image.get_array().shape}"
            )
        title = _head_title(w.shape, layer_names, layer, head)
        old = ax.title.get_text()
        size = ax.title.get_window_extent(renderer).size
        ax.title.set_text(title)
        changed = (abs(ax.title.get_window_extent(renderer).size - size) > 1.0).any()
        ax.title.set_text(old)
        if changed:
            return False
        updates.append((image, ax.title, w[layer, head], title))
    for image, text, m, title in updates:
        image.set_data(m)
        text.set_text(title)
    return True


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
