"""tests/break_check.py breaks a value in a copy of a chapter and says which cell caught it."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from break_check import break_and_run, main  # noqa: E402


def chapter(tmp_path: Path) -> Path:
    cells = [
        "x = 1  # the value the text quotes",
        "print('shown')",
        "# the sentence: 'x is one'\nassert x == 1",
    ]
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": s,
                "outputs": [],
                "execution_count": None,
            }
            for s in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / "01_x.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_a_break_is_caught_by_the_check_that_backs_it(tmp_path, capsys):
    path = chapter(tmp_path)
    before = path.read_text()
    cell, error = break_and_run(path, 1, "x = 1", "x = 2")
    assert cell == 3 and error.startswith("AssertionError") and "assert x == 1" in error
    assert path.read_text() == before  # the page itself is never touched
    assert (
        main([str(path), "--cell", "1", "--old", "x = 1", "--new", "x = 2", "--expect", "3"]) == 0
    )
    assert "caught: code cell 3 raised AssertionError" in capsys.readouterr().out


def test_a_break_that_no_check_sees_is_reported(tmp_path, capsys):
    path = chapter(tmp_path)
    assert break_and_run(path, 2, "'shown'", "'other'") == (None, "")
    assert main([str(path), "--cell", "2", "--old", "'shown'", "--new", "'other'"]) == 1
    assert "NOT CAUGHT" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("cell", "old", "message"),
    [(9, "x", "--cell must be from 1 to 3"), (1, "y = 5", "--old must occur once")],
)
def test_a_break_that_cannot_be_made_is_refused(tmp_path, cell, old, message):
    with pytest.raises(ValueError, match=message):
        break_and_run(chapter(tmp_path), cell, old, "z")
