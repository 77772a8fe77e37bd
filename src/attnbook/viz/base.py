"""What every picture shares: the CJK font, and tensors turned into NumPy arrays.

Importing :mod:`attnbook.viz` registers the font (:func:`use_cjk_font`), so Chinese labels
draw in every figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import font_manager

__all__ = [
    "Cells",
    "CJK_FONT",
    "use_cjk_font",
    "to_numpy",
]

Cells = Iterable[tuple[int, int]]

# A subset of Noto Sans CJK SC (SIL Open Font License, attnbook/fonts/OFL.txt): the 3,755 common
# characters of GB 2312 and every one the book uses (tests/make_cjk_font.py writes it).
CJK_FONT = "Noto Sans CJK SC"
_CJK_FONT_FILE = Path(__file__).parent.with_name("fonts") / "NotoSansSC-attnbook.otf"


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


@contextmanager
def _empty_axis_labels_fixed(fig) -> Iterator[None]:
    """While laying out, measuring or drawing ``fig``, leave its empty axis labels where they are.

    matplotlib moves an axis label below (beside) the tick labels each time it lays an axis
    out, measuring every tick label again to do so, even for a label with no text, which
    draws nothing and takes no room: in a grid of heatmaps without axis labels that is a third
    of the work. Labels with text are still placed as before.
    """
    fixed = [
        axis
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        if getattr(axis, "_autolabelpos", False) is True and not axis.label.get_text()
    ]
    for axis in fixed:
        axis._autolabelpos = False
    try:
        yield
    finally:
        for axis in fixed:
            axis._autolabelpos = True
