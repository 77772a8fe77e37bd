"""The book's explorers: decoder steps, attention maps, the positional encoding, and the
softmax temperature, each built from precomputed views (:mod:`attnbook.widgets.static`).
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as W
import matplotlib.pyplot as plt

from .. import viz
from ..viz.figures import _redraw_attention_grid as redraw_attention_grid
from ..viz.views import _render_view as render_view
from .static import static_grid, static_stepper, static_views

__all__ = [
    "decoder_steps_explorer",
    "attention_explorer",
    "positional_encoding_explorer",
    "temperature_explorer",
]


def decoder_steps_explorer(
    keys: Sequence[str],
    outputs: Sequence[str],
    scores,
    weights,
    contexts=None,
    *,
    context_labels: Sequence[str] | None = None,
    width: int = viz.VIEW_WIDTH,
) -> W.VBox:
    """Step through decoder time steps: each view shows that step's scores, weights, context.

    ``scores`` and ``weights`` are ``(T, L_k)`` (one row per output token in ``outputs``),
    ``contexts`` ``(T, d)``, with optional names for its ``d`` coordinates.
    """
    s, w = viz.to_numpy(scores), viz.to_numpy(weights)
    if s.shape != w.shape or s.ndim != 2 or s.shape != (len(outputs), len(keys)):
        raise ValueError(
            f"scores and weights must both have shape (len(outputs), len(keys)) = "
            f"({len(outputs)}, {len(keys)}), got {s.shape} and {w.shape}"
        )
    c = None if contexts is None else viz.to_numpy(contexts)
    views = []
    for t, out in enumerate(outputs):
        fig = viz.attention_step_figure(
            keys,
            s[t],
            w[t],
            None if c is None else c[t],
            context_labels=context_labels,
            title=f"step {t + 1}: producing '{out}'",
        )
        views.append(viz.view_png(fig, width))
    labels = [f"step {t + 1} → {out}" for t, out in enumerate(outputs)]
    return static_stepper(views, description="decoder step", labels=labels)


def attention_explorer(examples: Sequence[dict], *, width: int = viz.VIEW_WIDTH) -> W.VBox:
    """Explore a trained model's attention: example x attention type x layer, all heads shown.

    Each example is ``{"name": str, "attention": {type name: (weights, key_labels,
    query_labels)}}`` with ``weights`` of shape ``(layers, heads, queries, keys)`` (an RNN's
    single map is ``(1, 1, T, S)``). Every example must offer the same attention types, each
    with the same number of layers. The views are precomputed heatmap grids, so the explorer
    works on the static page.
    """
    if not examples:
        raise ValueError("examples must hold at least one example, got none")
    types = list(examples[0]["attention"])
    n_layers = {t: viz.to_numpy(examples[0]["attention"][t][0]).shape[0] for t in types}
    views = []
    for ex in examples:
        if list(ex["attention"]) != types:
            raise ValueError(
                f"every example must have the attention types {types}, example "
                f"{ex.get('name')!r} has {list(ex['attention'])}"
            )
        per_type = []
        for t in types:
            weights, keys, queries = ex["attention"][t]
            w = viz.to_numpy(weights)
            if w.ndim != 4 or w.shape[0] != n_layers[t]:
                raise ValueError(
                    f"attention {t!r} of example {ex.get('name')!r} must be "
                    f"(layers={n_layers[t]}, heads, queries, keys), got {w.shape}"
                )
            per_layer = _layer_views(w, keys, queries, t, width)
            # a type with fewer layers shows its last layer at the slider's later positions
            per_type.append(per_layer + per_layer[-1:] * (max(n_layers.values()) - len(per_layer)))
        views.append(per_type)
    layers = [f"layer {i + 1}" for i in range(max(n_layers.values()))]
    return static_views(
        views,
        [
            ([str(ex.get("name", i)) for i, ex in enumerate(examples)], "example", "dropdown"),
            (types, "attention", "buttons"),
            (layers, "layer", "slider"),
        ],
    )


def _layer_views(w, keys, queries, name: str, width: int) -> list[bytes]:
    """The grids of heads of each layer of ``w`` ``(layers, heads, queries, keys)``, one view
    per layer, as :func:`viz.view_png` draws ``viz.attention_grid(w[layer], ...)``.

    The layers share their labels, so the first layer's figure, laid out and sized once, is
    redrawn with each next layer's weights and titles: the same pixels as a new figure, for
    one draw instead of a figure built, laid out and measured again.
    """
    views, fig, dpi = [], None, None
    cols = _columns(
        w.shape[1], w.shape[-1], f"{name}, layer {w.shape[0]}, head {w.shape[1]}", width
    )
    for layer in range(w.shape[0]):
        names = [f"{name}, layer {layer + 1}"]
        close = layer == w.shape[0] - 1
        if fig is not None and redraw_attention_grid(
            fig, w[layer], layer_names=names, max_cols=cols
        ):
            views.append(viz.figure_to_png(fig, dpi=dpi, close=close))
            continue
        if fig is not None:  # the titles changed size: a new figure, laid out anew
            plt.close(fig)
        fig = viz.attention_grid(w[layer], keys, queries, layer_names=names, max_cols=cols)
        png, dpi = render_view(fig, width, close=close)
        views.append(png)
    return views


def _columns(n_heads: int, n_keys: int, title: str, width: int) -> int:
    """How many heads' maps a row of an explorer's view holds: four where each map, a quarter
    of the view's ``width`` pixels, still gives every one of its ``n_keys`` keys 15 px (or
    the rows' labels crowd each other too) and its ``title`` room, else two (a 2 x 2 grid of
    four heads rather than three and one)."""
    need = max(15 * n_keys + 60, 7 * len(title) + 20)  # pixels, at the views' 11-15 px text
    return 4 if n_heads >= 4 and width // 4 >= need else min(2, n_heads) or 1


def positional_encoding_explorer(
    pe,
    *,
    dims: Sequence[int] = (0, 1, 2, 4, 8, 16),
    positions: Sequence[int] = (0, 1, 5, 10, 20, 40),
    width: int = viz.VIEW_WIDTH,
) -> W.VBox:
    """Two sliders over a positional-encoding matrix ``pe`` ``(n_positions, d_model)``.

    The dimension slider picks a pair ``i`` and shows ``PE(pos, 2i)`` (sin) and
    ``PE(pos, 2i+1)`` (cos) along the positions: low pairs oscillate fast, high pairs slowly.
    The position slider picks a position ``p`` and shows its encoding vector and the dot
    product ``PE(p) . PE(p + k)`` against the offset ``k``: it depends on the distance, peaks
    at 0 and is symmetric. Both work on the static page.
    """
    import numpy as np

    m = viz.to_numpy(pe)
    if m.ndim != 2 or m.shape[1] % 2:
        raise ValueError(f"pe must be (n_positions, even d_model), got shape {m.shape}")
    n, d = m.shape
    for name, values, limit in (("dims", dims, d // 2), ("positions", positions, n)):
        bad = [v for v in values if not 0 <= v < limit]
        if not values or bad:
            raise ValueError(f"{name} must be non-empty and in 0..{limit - 1}, got {list(values)}")
    pos = np.arange(n)
    dim_views = []
    for i in dims:
        fig, ax = plt.subplots(figsize=(7, 2.2))
        ax.plot(pos, m[:, 2 * i], label=f"PE(pos, {2 * i}) = sin")
        ax.plot(pos, m[:, 2 * i + 1], label=f"PE(pos, {2 * i + 1}) = cos", ls="--")
        ax.set_xlabel("position")
        ax.set_ylim(-1.1, 1.1)
        ax.legend(loc="upper right", fontsize=7)
        ax.set_title(
            f"dimension pair i = {i}: wavelength {2 * np.pi * 10000 ** (2 * i / d):.1f} positions",
            fontsize=9,
        )
        fig.tight_layout()
        dim_views.append(viz.view_png(fig, width))
    pos_views = []
    for p in positions:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 2.3))
        ax1.bar(range(d), m[p], color=["#1f77b4" if j % 2 == 0 else "#ff7f0e" for j in range(d)])
        ax1.set_ylim(-1.1, 1.1)
        ax1.set_xlabel("dimension (blue sin, orange cos)")
        ax1.set_title(f"PE({p})", fontsize=9)
        ax2.plot(pos - p, m @ m[p], color="#2ca02c")
        ax2.axvline(0, color="grey", lw=0.6)
        ax2.set_xlabel("offset k")
        ax2.set_title(f"PE({p}) · PE({p} + k)", fontsize=9)
        fig.tight_layout()
        pos_views.append(viz.view_png(fig, width))
    by_dim = static_stepper(
        dim_views, description="dimension pair i", labels=[f"i = {i}" for i in dims]
    )
    by_pos = static_stepper(
        pos_views, description="position", labels=[f"pos = {p}" for p in positions]
    )
    box = W.VBox([by_dim, by_pos])
    box.by_dimension, box.by_position = by_dim, by_pos
    return box


def temperature_explorer(
    d_ks: Sequence[int] = (1, 4, 16, 64, 256, 1024),
    *,
    n_keys: int = 8,
    seed: int = 0,
    width: int = viz.VIEW_WIDTH,
) -> W.VBox:
    """Why the Transformer divides by sqrt(d_k): softmax weights of one random query.

    For each ``d_k`` a query and ``n_keys`` keys are drawn with independent N(0, 1) entries
    (the same draw for both rows of the grid). Row "q·k" shows the softmax of the raw dot
    products, row "q·k / √d_k" of the scaled ones, each with its maximum weight, entropy and
    Jacobian norm (:func:`attnbook.attention.softmax_saturation`).
    """
    import torch

    from ..attention import dot_score, softmax_saturation

    if not d_ks or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in d_ks):
        raise ValueError(f"d_ks must be a non-empty list of positive ints, got {d_ks!r}")
    g = torch.Generator().manual_seed(seed)
    rows = {"q·k (unscaled)": [], "q·k / √d_k (scaled)": []}
    for d in d_ks:
        q = torch.randn(1, d, generator=g, dtype=torch.float64)
        k = torch.randn(n_keys, d, generator=g, dtype=torch.float64)
        raw = dot_score(q, k)[0]
        for views, scores in zip(rows.values(), (raw, raw / d**0.5), strict=True):
            stats = {key: float(v) for key, v in softmax_saturation(scores).items()}
            p = torch.softmax(scores, -1)
            fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.2, 2.3))
            ax1.bar(range(n_keys), scores.numpy(), color="#1f77b4")
            ax1.set_title(f"scores, d_k = {d}")
            ax1.set_xlabel("key")
            ax2.bar(range(n_keys), p.numpy(), color="#2ca02c")
            ax2.set_ylim(0, 1)
            ax2.set_title(
                f"softmax: max {stats['max_weight']:.2f}, entropy "
                f"{stats['entropy']:.2f}, |J| {stats['jacobian_norm']:.3f}",
                fontsize=9,
            )
            ax2.set_xlabel("key")
            fig.tight_layout()
            views.append(viz.view_png(fig, width))
    return static_grid(
        list(rows.values()),
        list(rows),
        [f"d_k = {d}" for d in d_ks],
        row_description="scores",
        col_description="d_k",
    )
