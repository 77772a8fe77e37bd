"""Show that a chapter's hidden checks bite: break a value they back, in a copy, and run it.

Usage::

    .venv/bin/python tests/break_check.py book/08_multi_head_attention.ipynb \\
        --cell 23 --old "acc2 = " --new "acc2 = 0.5 * "

The chapter is copied into a temporary folder, the text ``--old`` in code cell ``--cell``
(counted from 1 over the code cells, as the notebook tests count them) is replaced by ``--new``
(it must occur exactly once there), and the copy runs top to bottom in a fresh kernel until a
cell raises. The page itself is never touched. It prints which code cell raised and its error,
and exits 0 when a cell raised (the check bit), 1 when every cell ran (the check did not bite:
the break passed unnoticed), 2 on a usage error. ``--expect N`` also requires that the cell
that raised is code cell N (the check meant to catch it, not an earlier accident).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def break_and_run(path: Path, cell: int, old: str, new: str) -> tuple[int | None, str]:
    """Run a copy of ``path`` with ``old`` replaced by ``new`` in code cell ``cell``: the number
    of the code cell that raised (None if none did) and its error's last line."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not 1 <= cell <= len(code):
        raise ValueError(f"--cell must be from 1 to {len(code)} (the code cells), got {cell}")
    found = code[cell - 1].source.count(old)
    if found != 1:
        raise ValueError(f"--old must occur once in code cell {cell}, found {found} times: {old!r}")
    code[cell - 1].source = code[cell - 1].source.replace(old, new)
    with tempfile.TemporaryDirectory(prefix="break-check-") as tmp:
        # the chapter's folder, so that relative paths (data, _static) resolve as on the page
        copy = Path(tmp) / "book"
        shutil.copytree(path.parent, copy, ignore=shutil.ignore_patterns("*.ipynb", "_build"))
        client = NotebookClient(
            nb, kernel_name="python3", timeout=900, resources={"metadata": {"path": str(copy)}}
        )
        try:
            client.execute()
        except CellExecutionError as error:
            raised = next(
                (
                    i + 1
                    for i, c in enumerate(code)
                    if any(o.get("output_type") == "error" for o in c.get("outputs", []))
                ),
                None,
            )
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
            lines = [ln for ln in text.strip().splitlines() if ln.strip()]
            # the error's last line, and the line that raised it (IPython marks it ---->)
            where = next((ln.strip() for ln in reversed(lines) if re.match(r"\s*-+>", ln)), "")
            where = where or next((ln.strip() for ln in reversed(lines) if "assert" in ln), "")
            return raised, lines[-1] + (f" at: {where}" if where and where != lines[-1] else "")
    return None, ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", type=Path)
    p.add_argument("--cell", type=int, required=True, help="code cell number, from 1")
    p.add_argument("--old", required=True, help="text to replace (once in that cell)")
    p.add_argument("--new", required=True, help="what to put instead")
    p.add_argument("--expect", type=int, help="the code cell that must raise")
    args = p.parse_args(argv)
    if not args.notebook.is_file():
        p.error(f"notebook: no such file {args.notebook}")
    try:
        raised, error = break_and_run(args.notebook, args.cell, args.old, args.new)
    except ValueError as error:
        p.error(str(error))
    if raised is None:
        print(f"NOT CAUGHT: every cell ran with code cell {args.cell} broken")
        return 1
    print(f"caught: code cell {raised} raised {error}")
    if args.expect is not None and raised != args.expect:
        print(f"but code cell {args.expect} was expected to raise")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
