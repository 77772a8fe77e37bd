"""Notebook hygiene, read as JSON: what strict nbval and the rendered book will meet."""

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


def test_there_are_chapters():
    assert CHAPTERS, f"no chapters found in {BOOK}"


@pytest.fixture(params=CHAPTERS, ids=[p.stem for p in CHAPTERS])
def notebook(request):
    return request.param, json.loads(request.param.read_text(encoding="utf-8"))


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_executed_top_to_bottom_without_errors(notebook):
    path, nb = notebook
    counts = [c["execution_count"] for c in code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: execution counts {counts}"
    for c in code_cells(nb):
        for o in c["outputs"]:
            assert o["output_type"] != "error", f"{path.name}: stored error {o.get('ename')}"
            assert not re.search(r"/(work|tmp|root|home)/[\w.-]+", json.dumps(o)), \
                f"{path.name}: an output shows a machine path"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


def test_starts_with_the_shared_setup_cell(notebook):
    path, nb = notebook
    first = "".join(code_cells(nb)[0]["source"])
    assert "setup_notebook(" in first, f"{path.name}: first code cell must call setup_notebook"


def test_every_widget_view_has_saved_state(notebook):
    path, nb = notebook
    views = [o["data"][VIEW]["model_id"] for c in code_cells(nb) for o in c["outputs"]
             if VIEW in o.get("data", {})]
    if not views:
        return
    state = nb["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    missing = [v for v in views if v not in state]
    assert not missing, f"{path.name}: widget views without saved state {missing} (blank on the page)"


def test_ends_with_summary_and_exercises_with_hidden_solutions(notebook):
    path, nb = notebook
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert re.search(r"^## Summary", text, re.M), f"{path.name}: no '## Summary'"
    assert re.search(r"^## Exercises", text, re.M), f"{path.name}: no '## Exercises'"
    assert ":class: dropdown" in text, f"{path.name}: solutions must be hidden in dropdowns"
