"""The worked single-head example of notes 05, stage by stage: static views of the six stages,
and an editor that recomputes them when a matrix entry changes (with a kernel).
"""

from __future__ import annotations

import ipywidgets as W

from .. import viz
from ..worked import SingleHeadExample, single_head_example
from .static import static_grid

__all__ = [
    "STAGES",
    "worked_stages",
    "worked_stage_explorer",
    "WorkedExampleEditor",
]

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
