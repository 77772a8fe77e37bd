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
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as W
from matplotlib.figure import Figure

from . import viz
from .worked import SingleHeadExample, single_head_example

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


# ipywidgets 8 has Stack; 7.x (Colab) has Tab, which switches children by the same index.
STACK = getattr(W, "Stack", None) or W.Tab
_TAB_STACK_CLASS = "attnbook-stack"


def _stack(children: Sequence[W.Widget], titles: Sequence[str]) -> W.Box:
    """A box showing one of ``children`` at a time, chosen by its ``selected_index``."""
    stack = STACK(children=list(children), selected_index=0)
    if STACK is W.Tab:  # ipywidgets 7: name the tabs, hide the bar
        for i, title in enumerate(titles):
            stack.set_title(i, str(title))
        stack.add_class(_TAB_STACK_CLASS)
    return stack


def _tab_bar_style() -> list[W.Widget]:
    """With ipywidgets 7, a style rule that hides the tab bar of the stand-in stacks."""
    if STACK is not W.Tab:
        return []
    rule = ", ".join(f".{_TAB_STACK_CLASS} > .{bar}" for bar in ("p-TabBar", "lm-TabBar"))
    return [W.HTML(f"<style>{rule} {{display: none !important;}}</style>")]


def as_view(view) -> W.Widget:
    """Turn a view into a widget: HTML text, PNG bytes, a matplotlib Figure, or a widget."""
    if isinstance(view, W.Widget):
        return view
    if isinstance(view, Figure):
        view = viz.view_png(view)
    if isinstance(view, bytes):
        return W.Image(value=view, format="png", layout=W.Layout(max_width="100%"))
    if isinstance(view, str):
        return W.HTML(value=view)
    raise TypeError(
        f"a view must be HTML (str), PNG (bytes), a matplotlib Figure or a widget, "
        f"got {type(view).__name__}"
    )


def _link_to_stack(control: W.Widget, attribute: str, stack: W.Box):
    """Tie ``control.attribute`` (an int) to ``stack.selected_index``.

    ``jslink`` runs in the browser (the static page); ``observe`` does the same in Python, so
    that code driving the widget without a front end (tests, scripts) sees the same view.
    """
    link = W.jslink((control, attribute), (stack, "selected_index"))

    def follow(change):
        stack.selected_index = change["new"]

    control.observe(follow, names=attribute)
    return link


def _control(kind: str, labels: Sequence[str], description: str) -> tuple[W.Widget, str]:
    """A slider or toggle buttons over ``labels``; returns the widget and its int attribute."""
    if kind == "slider":
        return W.IntSlider(
            value=0,
            min=0,
            max=len(labels) - 1,
            description=description,
            continuous_update=True,
            layout=W.Layout(width="380px"),
            style={"description_width": "initial"},
        ), "value"
    if kind == "buttons":
        return W.ToggleButtons(
            options=list(labels),
            index=0,
            description=description,
            style={"button_width": "auto", "description_width": "initial"},
        ), "index"
    if kind == "dropdown":
        return W.Dropdown(
            options=list(labels),
            index=0,
            description=description,
            style={"description_width": "initial"},
        ), "index"
    raise ValueError(f"control must be 'slider', 'buttons' or 'dropdown', got {kind!r}")


def static_views(views: Sequence, axes: Sequence[tuple[Sequence[str], str, str]]) -> W.VBox:
    """Controls over a nested list of precomputed views; works without a kernel.

    ``axes`` lists one ``(labels, description, kind)`` per level of nesting, outermost first
    (``kind`` is ``"slider"``, ``"buttons"`` or ``"dropdown"``); ``views[i][j]...`` is the view
    for label ``i`` of the first axis, ``j`` of the second, and so on. Every level is a Stack of
    the level below, and each control is jslinked to every Stack of its level, so the browser
    switches views with no kernel. A slider also shows the name of its current label.

    The returned box has ``.controls`` (one per axis), ``.control`` (the last), ``.stack``
    (the outermost Stack) and ``.links``.
    """
    if not axes:
        raise ValueError("axes must describe at least one control, got none")
    made = [_control(kind, labels, description) for labels, description, kind in axes]
    links: list = []

    def build(node, depth: int) -> W.Box:
        labels = axes[depth][0]
        if len(node) != len(labels) or not labels:
            where = "views" if depth == 0 else f"a view list at depth {depth}"
            raise ValueError(
                f"{where} must have one entry per label of axis {depth} "
                f"({len(labels)}), got {len(node)}"
            )
        last = depth == len(axes) - 1
        stack = _stack([as_view(v) if last else build(v, depth + 1) for v in node], labels)
        links.append(_link_to_stack(*made[depth], stack))
        return stack

    root = build(views, 0)
    headers = []
    for (labels, _, kind), (control, attribute) in zip(axes, made, strict=True):
        if kind == "slider":  # a slider shows a number: name it too
            names = _stack([W.HTML(f"<b>{label}</b>") for label in labels], labels)
            links.append(_link_to_stack(control, attribute, names))
            headers.append(W.HBox([control, names]))
        else:
            headers.append(control)
    box = W.VBox([*_tab_bar_style(), *headers, root])
    box.controls = [control for control, _ in made]
    box.control, box.stack, box.links = box.controls[-1], root, links
    return box


def static_stepper(
    views: Sequence, *, description: str = "step", labels: Sequence[str] | None = None
) -> W.VBox:
    """A slider over precomputed views that works without a kernel.

    ``labels`` (one per view, default the view numbers) are shown beside the slider.
    """
    if labels is None:
        labels = [str(i) for i in range(len(views))]
    if len(labels) != len(views):
        raise ValueError(f"labels must have one entry per view ({len(views)}), got {len(labels)}")
    return static_views(views, [(labels, description, "slider")])


def static_selector(views: Sequence, options: Sequence[str], *, description: str = "") -> W.VBox:
    """Toggle buttons choosing one of several precomputed views; works without a kernel."""
    return static_views(views, [(options, description, "buttons")])


def static_grid(
    views: Sequence[Sequence],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    row_description: str = "",
    col_description: str = "",
    row_control: str = "buttons",
    col_control: str = "slider",
) -> W.VBox:
    """Two controls over ``views[row][col]``: :func:`static_views` with two axes."""
    box = static_views(
        views,
        [(row_labels, row_description, row_control), (col_labels, col_description, col_control)],
    )
    box.row_control = box.controls[0]
    return box


def shown_view(box: W.VBox) -> W.Widget:
    """The view a grid or stepper currently shows (what the reader sees)."""
    view = box.stack.children[box.stack.selected_index]
    while isinstance(view, STACK):
        view = view.children[view.selected_index]
    return view


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
            per_layer = []
            for layer in range(max(n_layers.values())):
                fig = viz.attention_grid(
                    w[min(layer, w.shape[0] - 1)],
                    keys,
                    queries,
                    layer_names=[f"{t}, layer {min(layer, w.shape[0] - 1) + 1}"],
                    max_cols=4,
                )
                per_layer.append(viz.view_png(fig, width))
            per_type.append(per_layer)
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
    import matplotlib.pyplot as plt
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
    import matplotlib.pyplot as plt
    import torch

    from .attention import dot_score, softmax_saturation

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


# ---------------------------------------------------------------------------------------------
# the worked single-head example (notes 05)
# ---------------------------------------------------------------------------------------------

STAGES = (
    "X and the weights",
    "Q = XW_Q, K = XW_K, V = XW_V",
    "scores = QKᵀ",
    "scaled = scores / √d_k",
    "weights = softmax(scaled)",
    "Z = weights · V",
)


def worked_stages(
    ex: SingleHeadExample, row: int, *, digits: int = 3, changed: dict[str, set] | None = None
) -> list[str]:
    """HTML views of the six stages of one head, highlighting what produces row ``row``.

    Stage by stage: the input row of X; the rows of Q, K, V it becomes; row ``row`` of the
    scores (query ``row`` against every key); the scaled row; its softmax; and the output row
    of Z, which mixes every row of V. ``changed`` marks edited cells (used by the editor).
    """
    n = ex.X.shape[0]
    if not 0 <= row < n:
        raise ValueError(f"row must be in 0..{n - 1}, got {row}")
    changed = changed or {}
    tokens = [f"x{i + 1}" for i in range(n)]

    def table(name, m, cells=(), rows=None, cols=None):
        cells = set(cells) | set(changed.get(name, ()))
        return viz.matrix_to_html(
            m, digits, title=name, highlight=cells, row_labels=rows, col_labels=cols
        )

    def row_cells(m, i):
        return {(i, j) for j in range(m.shape[1])}

    d = ex.d_k
    all_rows = {(i, j) for i in range(n) for j in range(ex.V.shape[1])}
    views = [
        table("X", ex.X, row_cells(ex.X, row), tokens)
        + table("W_Q", ex.W_Q)
        + table("W_K", ex.W_K)
        + table("W_V", ex.W_V),
        table("X", ex.X, row_cells(ex.X, row), tokens)
        + table("Q", ex.Q, row_cells(ex.Q, row), tokens)
        + table("K", ex.K, rows=tokens)
        + table("V", ex.V, rows=tokens),
        table("Q", ex.Q, row_cells(ex.Q, row), tokens)
        + table("Kᵀ", ex.K.T, cols=tokens)
        + table("scores", ex.scores, row_cells(ex.scores, row), tokens, tokens),
        table("scores", ex.scores, row_cells(ex.scores, row), tokens, tokens)
        + f'<span style="font-size:120%;padding:0 8px;">÷ √{d} =</span>'
        + table("scaled", ex.scaled, row_cells(ex.scaled, row), tokens, tokens),
        table("scaled", ex.scaled, row_cells(ex.scaled, row), tokens, tokens)
        + '<span style="font-size:120%;padding:0 8px;">softmax by row →</span>'
        + table("weights", ex.weights, row_cells(ex.weights, row), tokens, tokens),
        table("weights", ex.weights, row_cells(ex.weights, row), tokens, tokens)
        + table("V", ex.V, all_rows, tokens)
        + table("Z", ex.Z, row_cells(ex.Z, row), tokens),
    ]
    return [
        f"<div><p><b>{STAGES[i]}</b> (highlighted: what produces token x{row + 1})</p>{v}</div>"
        for i, v in enumerate(views)
    ]


def worked_stage_explorer(ex: SingleHeadExample | None = None, *, digits: int = 3) -> W.VBox:
    """Token buttons x stage slider over the worked example; works without a kernel."""
    ex = single_head_example() if ex is None else ex
    n = ex.X.shape[0]
    views = [worked_stages(ex, row, digits=digits) for row in range(n)]
    return static_grid(
        views,
        [f"token x{i + 1}" for i in range(n)],
        list(STAGES),
        row_description="follow",
        col_description="stage",
    )


class WorkedExampleEditor:
    """Change one entry of X, W_Q, W_K or W_V and watch every later matrix recompute.

    Needs a running kernel (Jupyter, Colab, Binder): on the static page the controls do
    nothing and the view shows the notes' default matrices, as the note in the widget says.
    ``self.example`` always holds the current :class:`SingleHeadExample`.
    """

    MATRICES = ("X", "W_Q", "W_K", "W_V")

    def __init__(self, example: SingleHeadExample | None = None, *, digits: int = 3):
        base = single_head_example() if example is None else example
        self.digits = digits
        self.original = {name: getattr(base, name).clone() for name in self.MATRICES}
        self.current = {name: m.clone() for name, m in self.original.items()}
        self.example = base
        self.matrix = W.ToggleButtons(
            options=list(self.MATRICES), description="edit", style={"button_width": "auto"}
        )
        self.row = W.BoundedIntText(
            value=2,
            min=0,
            max=base.X.shape[0] - 1,
            description="row",
            layout=W.Layout(width="140px"),
        )
        self.col = W.BoundedIntText(
            value=0,
            min=0,
            max=base.X.shape[1] - 1,
            description="col",
            layout=W.Layout(width="140px"),
        )
        self.value = W.FloatText(
            value=float(base.X[2, 0]), step=0.5, description="value", layout=W.Layout(width="180px")
        )
        self.reset = W.Button(description="reset", tooltip="back to the notes' matrices")
        self.follow = W.ToggleButtons(
            options=[f"x{i + 1}" for i in range(base.X.shape[0])],
            index=base.X.shape[0] - 1,
            description="follow",
            style={"button_width": "auto"},
        )
        self.output = W.HTML()
        note = W.HTML(
            "<i>Live editing needs a running kernel (open this chapter in Jupyter, "
            "Colab or Binder). On the static page this shows the notes' matrices.</i>"
        )
        self._syncing = False
        self.matrix.observe(self._on_select, names="value")
        self.row.observe(self._on_select, names="value")
        self.col.observe(self._on_select, names="value")
        self.value.observe(self._on_value, names="value")
        self.follow.observe(lambda _: self._render(), names="index")
        self.reset.on_click(self._on_reset)
        self.widget = W.VBox(
            [
                note,
                self.matrix,
                W.HBox([self.row, self.col, self.value, self.reset]),
                self.follow,
                self.output,
            ]
        )
        self._render()

    def set_entry(self, matrix: str, row: int, col: int, value: float) -> SingleHeadExample:
        """Set one entry and recompute (what the controls do); returns the new example."""
        if matrix not in self.MATRICES:
            raise ValueError(f"matrix must be one of {self.MATRICES}, got {matrix!r}")
        rows, cols = self.current[matrix].shape
        if not (0 <= row < rows and 0 <= col < cols):
            raise ValueError(
                f"(row, col) must index {matrix} of shape ({rows}, {cols}), got ({row}, {col})"
            )
        self.current[matrix][row, col] = float(value)
        self._render()
        return self.example

    def _on_select(self, _change=None):
        m = self.current[self.matrix.value]
        self.row.max, self.col.max = m.shape[0] - 1, m.shape[1] - 1
        self._syncing = True
        self.value.value = float(m[self.row.value, self.col.value])
        self._syncing = False

    def _on_value(self, change):
        if not self._syncing:
            self.set_entry(self.matrix.value, self.row.value, self.col.value, change["new"])

    def _on_reset(self, _button=None):
        self.current = {name: m.clone() for name, m in self.original.items()}
        self._on_select()
        self._render()

    def _render(self):
        c = self.current
        self.example = single_head_example(c["X"], c["W_Q"], c["W_K"], c["W_V"])
        changed = {
            name: {tuple(ix) for ix in (c[name] != self.original[name]).nonzero().tolist()}
            for name in self.MATRICES
        }
        views = worked_stages(self.example, self.follow.index, digits=self.digits, changed=changed)
        self.output.value = "".join(views[1:])
