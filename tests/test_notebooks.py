"""Notebook hygiene, read as JSON: what strict nbval and the rendered book will meet."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from attnbook.utils import GLUE_PREFIX as GLUE  # the output type the book build reads

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
            assert not re.search(r"/(work|tmp|root|home)/[\w.-]+", json.dumps(o)), (
                f"{path.name}: an output shows a machine path"
            )
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


def test_starts_with_the_shared_setup_cell(notebook):
    path, nb = notebook
    first = "".join(code_cells(nb)[0]["source"])
    assert "setup_notebook(" in first, f"{path.name}: first code cell must call setup_notebook"


INSTALL = re.compile(
    r'    commit = "(?P<commit>[0-9a-f]{40})"\n'
    r'    %pip install -q "attnbook @ git\+https://github\.com/attnbook/attnbook@\{commit\}"\n'
)


def git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(BOOK.parent), *args], capture_output=True, text=True)


def test_colab_installs_the_package_the_chapter_ran_with(notebook):
    # The setup cell installs (on Colab) a fixed commit, never a moving branch, and that
    # commit's package is the one in this checkout: make notebooks writes it (tests/
    # execute_notebooks.py), from the last commit that changed src/ or pyproject.toml.
    path, nb = notebook
    setup = "".join(code_cells(nb)[0]["source"])
    found = INSTALL.search(setup)
    assert found, f"{path.name}: the setup cell must install attnbook pinned to a commit"
    commit = found["commit"]
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        pytest.skip(f"commit {commit[:12]} is not in this clone's history (shallow clone?)")
    changed = git("diff", "--name-only", commit, "HEAD", "--", "src", "pyproject.toml").stdout
    assert not changed.strip(), (
        f"{path.name} pins {commit[:12]}, whose package differs from "
        f"HEAD's in {changed.split()}: re-run make notebooks"
    )


def test_every_widget_view_has_saved_state(notebook):
    path, nb = notebook
    views = [
        o["data"][VIEW]["model_id"]
        for c in code_cells(nb)
        for o in c["outputs"]
        if VIEW in o.get("data", {})
    ]
    if not views:
        return
    state = nb["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    missing = [v for v in views if v not in state]
    assert not missing, (
        f"{path.name}: widget views without saved state {missing} (blank on the page)"
    )


def test_ends_with_summary_and_exercises_with_hidden_solutions(notebook):
    path, nb = notebook
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert re.search(r"^## Summary", text, re.M), f"{path.name}: no '## Summary'"
    assert re.search(r"^## Exercises", text, re.M), f"{path.name}: no '## Exercises'"
    assert ":class: dropdown" in text, f"{path.name}: solutions must be hidden in dropdowns"


def test_package_code_is_shown_from_a_code_cell(notebook):
    """JupyterLab and Colab show a Sphinx {literalinclude} as raw text; show_source's output
    reads the same on the web page and in every notebook front end (GUIDE section 2)."""
    path, nb = notebook
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and "{literalinclude}" in "".join(cell["source"]):
            pytest.fail(
                f"{path.name}: markdown cell {i + 1} has a {{literalinclude}}; show the "
                f"package's code with attnbook.show_source(obj) in a remove-input code cell"
            )


# Portability: what strict nbval compares must not depend on the CPU. Results of training
# are tagged nbval-ignore-output and checked by the assertion cell that follows them; the
# checks are test plumbing, hidden from readers (nbval still runs hidden cells).
HIDDEN = {"remove-input", "remove-cell"}


def tags(cell):
    return set(cell.get("metadata", {}).get("tags", []))


def has_assert(cell) -> bool:
    import ast

    source = "".join(cell["source"])
    # IPython magics are not Python: blank them out before parsing
    source = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


def visible_outputs(cell):
    """Outputs a reader sees: all but the glue outputs the book only reads."""
    return [
        o
        for o in cell.get("outputs", [])
        if not all(k.startswith(GLUE) for k in o.get("data", {"": 0}))
    ]


def test_every_ignored_output_is_followed_by_an_assertion(notebook):
    path, nb = notebook
    cells = code_cells(nb)
    for i, cell in enumerate(cells):
        if "nbval-ignore-output" not in tags(cell):
            continue
        following = cells[i + 1] if i + 1 < len(cells) else None
        checked = following is not None and has_assert(following)
        assert checked, (
            f"{path.name}: code cell {i + 1} is nbval-ignore-output, but the next code cell "
            f"asserts nothing; follow it with a cell that checks what the prose claims"
        )


def test_assertion_only_cells_are_hidden(notebook):
    path, nb = notebook
    for i, cell in enumerate(code_cells(nb)):
        if has_assert(cell) and not visible_outputs(cell):
            assert tags(cell) & HIDDEN, (
                f"{path.name}: code cell {i + 1} only checks (asserts, shows nothing); tag it "
                f"remove-input or remove-cell so readers do not see test plumbing"
            )


def test_no_result_depends_on_the_clock(notebook):
    """A cell that reads the clock is a timing, and a timing is never compared as text."""
    path, nb = notebook
    for i, cell in enumerate(code_cells(nb)):
        source = "".join(cell["source"])
        if re.search(
            r"perf_counter|time\.time\(|best_time|max_seconds|--max-seconds|timeit", source
        ):
            assert "nbval-ignore-output" in tags(cell), (
                f"{path.name}: code cell {i + 1} reads the clock or trains for a time budget; "
                f"tag it nbval-ignore-output (and check its claim in the next cell)"
            )


def test_glued_names_are_unique_and_used(notebook):
    path, nb = notebook
    names = [
        o["metadata"]["scrapbook"]["name"]
        for c in code_cells(nb)
        for o in c.get("outputs", [])
        if "scrapbook" in o.get("metadata", {})
    ]
    dupes = sorted({n for n in names if names.count(n) > 1})
    assert not dupes, f"{path.name}: glued more than once: {dupes}"
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    unused = [n for n in names if not re.search(r"\{glue(:\w+)?\}`" + re.escape(n) + r"[`:]", text)]
    assert not unused, f"{path.name}: glued but never used in the prose: {unused}"


# A float computed in float32 carries about 7 significant digits, and another CPU's kernels move
# the last ones: strict nbval compares the glued text on every reader's machine (issue 38).
FLOAT32_RTOL = 2.0**-20  # 8 float32 ulps near 1.0: how far a short computation's result moves


def significant_digits(text: str) -> int:
    from decimal import Decimal

    return len(Decimal(text).normalize().as_tuple().digits)


def glued_floats(nb):
    """(code cell number, name, glued text, attnbook.glue's record of the value before
    rounding and its digits (None if another glue wrote it), compared by nbval) for each float
    glued in the notebook."""
    for i, cell in enumerate(code_cells(nb)):
        compared = "nbval-ignore-output" not in tags(cell)
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {})
            if "scrapbook" not in meta:
                continue
            text = "".join(next(v for k, v in o["data"].items() if k.endswith("text/plain")))
            if re.fullmatch(r"-?(\d+\.\d*|\d*\.\d+)(e[-+]?\d+)?|-?\d+e[-+]?\d+", text):
                yield i + 1, meta["scrapbook"]["name"], text, meta.get("attnbook"), compared


def test_glued_floats_carry_no_more_digits_than_float32_holds(notebook):
    from attnbook.utils import GLUE_DIGITS

    path, nb = notebook
    too_long = [
        f"cell {i} {name} = {text}"
        for i, name, text, _, _ in glued_floats(nb)
        if significant_digits(text) > GLUE_DIGITS
    ]
    assert not too_long, (
        f"{path.name}: floats glued with more than {GLUE_DIGITS} significant digits (float32 "
        f"carries about 7, and CPUs differ in the last); glue them with attnbook.glue: "
        f"{too_long}"
    )


def test_compared_glues_sit_off_rounding_boundaries(notebook):
    """A compared glue whose value lies within a few float32 ulps of a rounding boundary reads
    otherwise on a CPU whose result differs in the last bits: glue it with fewer digits. (A
    value that rounding leaves as it is, such as a constant 0.95, has no boundary near it.)"""
    path, nb = notebook
    fragile = []
    for i, name, text, record, compared in glued_floats(nb):
        if not compared:
            continue
        assert record is not None, f"{path.name}: cell {i} glued {name} without attnbook.glue"
        value, digits = float(record["value"]), record["digits"]
        if value == float(text):
            continue
        moved = {float(f"{value * (1 + s * FLOAT32_RTOL):.{digits}g}") for s in (-1, 1)}
        if moved != {float(text)}:
            fragile.append(f"cell {i} {name} = {record['value']} -> {text}")
    assert not fragile, (
        f"{path.name}: glued values within {FLOAT32_RTOL:.1e} (relative) of a rounding "
        f"boundary, whose text a CPU's last bits would change; glue them with fewer digits: "
        f"{fragile}"
    )


GLUE_REF = re.compile(r"\{glue(?::text)?\}`(\w+)(?::([^`]*))?`")


def test_the_prose_shows_a_glued_float_as_its_unrounded_value_would_show(notebook):
    """Rounding to the glued digits and then to the prose's format must give what the prose
    would show of the value itself (0.124996 glued as 0.125 would read 0.13 at .2f, not 0.12)."""
    path, nb = notebook
    records = {name: (text, rec) for _, name, text, rec, _ in glued_floats(nb) if rec}
    prose = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    wrong = []
    for name, spec in set(GLUE_REF.findall(prose)):
        if name in records and spec:
            text, rec = records[name]
            shown, meant = format(float(text), spec), format(float(rec["value"]), spec)
            if shown != meant:
                wrong.append(f"{name}:{spec} shows {shown}, the value is {meant}")
    assert not wrong, f"{path.name}: glued floats shown otherwise than their values: {wrong}"
