"""Seeding, device choice and the setup every chapter starts with."""

from __future__ import annotations

import inspect
import itertools
import json
import math
import numbers
import os
import random
import textwrap
import time
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from ._checks import check_positive_int

__all__ = [
    "seed_everything",
    "get_device",
    "model_device",
    "setup_notebook",
    "glue",
    "best_time",
    "show_source",
    "Source",
    "recorded_result",
    "RECORDED",
    "DEVICES",
    "GLUE_PREFIX",
    "GLUE_DIGITS",
    "PRINT_WIDTH",
]

DEVICES = ("auto", "cpu", "cuda", "mps")


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, NumPy's and PyTorch's random number generators (all devices)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an int in [0, 2**32 - 1] (NumPy's range), got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def get_device(preference: str = "auto") -> torch.device:
    """Pick the device: ``"auto"`` takes CUDA, then Apple's MPS, then the CPU.

    Naming a device that is not available is an error, not a silent fall-back.
    """
    if preference not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {preference!r}")
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if preference == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if preference == "cuda" and not cuda:
        raise ValueError("device='cuda' was asked for but torch.cuda.is_available() is False")
    if preference == "mps" and not mps:
        raise ValueError("device='mps' was asked for but the MPS backend is not available")
    return torch.device(preference)


def model_device(model) -> torch.device:
    """The device a model's parameters (or, without any, its buffers) live on; CPU if none.

    The package's functions that take a model and tensors (decoding, scoring, the widgets)
    move the tensors there, so a chapter's CPU tensors work with a model on CUDA or MPS.
    """
    if isinstance(model, torch.nn.Module):
        for tensor in itertools.chain(model.parameters(), model.buffers()):
            return tensor.device
    return torch.device("cpu")


# The book's column shows this many characters of code at 1280 px (_static/attnbook.css), the
# line length ruff formats the code to (pyproject.toml); printed output keeps within it too.
PRINT_WIDTH = 100


def _thread_cap() -> int | None:
    """The number of CPU threads the environment allows (``OMP_NUM_THREADS``, a positive
    integer), or None where it says nothing usable."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def setup_notebook(seed: int = 0, device: str = "auto", threads: int | None = 2) -> torch.device:
    """The first cell of every chapter: seed everything, round printed numbers, pick a device.

    ``threads`` fixes PyTorch's CPU thread count so that float results (and the numbers the
    chapter prints) do not depend on how many cores the reader's machine has. An environment
    that allows fewer threads caps it: with ``OMP_NUM_THREADS=1`` set (``make test`` sets it
    where two chapters run side by side on two cores) the chapter runs on one thread. Returns
    the device and prints it.
    """
    if threads is not None:
        check_positive_int("threads", threads)
        threads = min(threads, _thread_cap() or threads)
    seed_everything(seed)
    # arrays and tensors print as wide as the book's column holds code (PRINT_WIDTH characters)
    np.set_printoptions(precision=4, suppress=True, linewidth=PRINT_WIDTH)
    torch.set_printoptions(precision=4, sci_mode=False, linewidth=PRINT_WIDTH)
    if threads is not None:
        torch.set_num_threads(threads)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    dev = get_device(device)
    print(f"attnbook ready: seed={seed}, device={dev.type}")
    return dev


# The output type myst-nb's glue writes; the book build reads it, notebooks do not show it.
GLUE_PREFIX = "application/papermill.record/"


# A float is glued with at most this many significant digits. float32, the dtype of every tensor
# the chapters compute, carries about 7, and the last of them move from one CPU's kernels to
# another's (a softmax glued at 10 digits read 2.899628878 on one machine and 2.899628639 on
# another): 5 leaves two digits of room, and is more than the prose shows.
GLUE_DIGITS = 5


def glue(name: str, value, display: bool = False, digits: int = GLUE_DIGITS):
    """Make ``value`` available to the chapter's prose as ``{glue:text}`name```.

    Every number the text quotes is computed by a cell and glued, so text and output cannot
    disagree. This writes the same output as ``myst_nb.glue`` (which the book build reads)
    but needs only IPython, so a chapter runs where myst-nb is not installed (Colab). Glue
    plain Python values (``float(x)``, ``int(n)``, a ``str``); the prose formats them, for
    example ``{glue:text}`acc:.1%```. Returns ``value`` (a float rounded as it is glued).

    A float is rounded to ``digits`` significant digits, at most ``GLUE_DIGITS`` (5): a
    result computed in float32 carries about 7, and strict nbval compares the glued text
    wherever it runs (``make test``, CI, each path of ``make portability``), on CPUs whose
    kernels move the last of them. The value before rounding is kept in the output's metadata
    (``attnbook.value``, which nbval does not compare), so a test can check that the glued text
    does not sit within ``2**-20`` (relative) of a rounding boundary, where another CPU's last bits
    would flip it.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier-like str, got {name!r}")
    if not isinstance(value, str | numbers.Real) or isinstance(value, bool):
        raise TypeError(
            f"value for {name!r} must be a str, int or float (take .item() of a "
            f"tensor), got {type(value).__name__}"
        )
    if not isinstance(display, bool):
        raise TypeError(f"display must be a bool, got {type(display).__name__} {display!r}")
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= GLUE_DIGITS:
        raise ValueError(
            f"digits must be an int from 1 to {GLUE_DIGITS} (a float32 result carries about 7 "
            f"significant digits, and CPUs differ in the last), got {digits!r}"
        )
    if digits != GLUE_DIGITS and isinstance(value, str):
        raise TypeError(f"digits rounds numbers, but the value for {name!r} is a str")
    exact = None
    if not isinstance(value, str):  # numpy scalars would print as np.float64(...)
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"value for {name!r} must be finite, got {value!r}")
            exact, value = value, float(f"{value:.{digits}g}")
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    if exact is not None:
        metadata["attnbook"] = {"value": repr(exact), "digits": digits}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
    return value


def best_time(fn, repeats: int = 7, number: int = 1) -> float:
    """Seconds one call of ``fn()`` takes: the fastest of ``repeats`` runs of ``number`` calls.

    One warm-up call comes first. The fastest run is the one least disturbed by whatever else
    the machine is doing, so it is the fairest number to compare two pieces of code by. A
    timing is never a reproducible result: chapters show it, and check only what holds with a
    wide margin on any machine.
    """
    for name, value in (("repeats", repeats), ("number", number)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


class Source:
    """The source code of one package object, as a chapter shows it (see :func:`show_source`).

    In a notebook it displays as Markdown: a line naming the object and its file, then the code
    in a fenced Python block. Jupyter Book, JupyterLab and Colab all render that as highlighted
    code, so every reader sees the same code; its plain-text form is the code itself.
    """

    def __init__(self, obj):
        target = inspect.unwrap(obj)
        if isinstance(target, property):
            target = target.fget
        if not (
            inspect.isclass(target)
            or inspect.isfunction(target)
            or inspect.ismethod(target)
            or inspect.ismodule(target)
        ):
            raise TypeError(
                f"obj must be a class, function, method or module of the package, "
                f"got {type(obj).__name__}"
            )
        module = inspect.getmodule(target)
        if module is None or not module.__name__.startswith("attnbook"):
            where = "no module" if module is None else module.__name__
            raise ValueError(f"obj must come from the attnbook package, got {where!r}")
        self.code = textwrap.dedent(inspect.getsource(target))
        self.name = (
            module.__name__
            if inspect.ismodule(target)
            else f"{module.__name__}.{target.__qualname__}"
        )
        src_dir = Path(__file__).resolve().parent.parent  # src/, which holds attnbook/
        self.path = Path(inspect.getfile(target)).resolve().relative_to(src_dir).as_posix()

    def _repr_markdown_(self) -> str:
        fence = "````" if "```" in self.code else "```"
        return f"`{self.name}` in `src/{self.path}`:\n\n{fence}python\n{self.code}{fence}\n"

    def __repr__(self) -> str:
        return f"# {self.name} (src/{self.path})\n{self.code}".rstrip("\n")

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


def show_source(obj) -> Source:
    """Show the real code of a package function, class or method in a chapter.

    The chapters never copy package code into their text: they call
    ``show_source(attnbook.attention.scaled_dot_product_attention)`` as the last line of a code
    cell, and the output is that function's current source, highlighted. The web page, a
    notebook opened in JupyterLab and Colab therefore all show the same, tested code.
    """
    return Source(obj)


RECORDED = ("bottleneck", "train_speed")


def recorded_result(name: str) -> dict:
    """A benchmark result that ships with the package, for chapters that show a run too long
    to repeat in a notebook (``"bottleneck"``: ``benchmarks/bottleneck.py``, accuracy against
    input length with and without attention; ``"train_speed"``: ``benchmarks/train_speed.py``,
    the dates task trained from the command line under a time budget, and step times). The
    benchmark writes this copy when it runs, and a test checks it equals the one recorded in
    ``benchmarks/results/``."""
    if name not in RECORDED:
        raise ValueError(f"name must be one of {RECORDED}, got {name!r}")
    text = resources.files("attnbook").joinpath("recorded", f"{name}.json").read_text("utf-8")
    return json.loads(text)
