"""The static way to build an explorer: views computed in advance, in a ``Stack``, chosen by a
control tied to it with ``jslink``, so the choice works on the static page too.
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as W
from matplotlib.figure import Figure

from .. import viz

__all__ = [
    "STACK",
    "as_view",
    "static_views",
    "static_stepper",
    "static_selector",
    "static_grid",
    "shown_view",
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
