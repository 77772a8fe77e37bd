"""The package reads like its design (issue 27): short modules, and no two that import each other.

A module longer than ``LIMIT`` lines must say why in its docstring ("Why one long file: ..."),
for a file the book prints whole and that reads better whole. No module is excused otherwise:
the five that were long when this test was written (transformer, attention, rnn, viz,
widgets) are packages of short modules now.
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attnbook"
MODULES = sorted(p for p in PACKAGE.rglob("*.py"))
LIMIT = 500
REASON = "Why one long file:"


def name_of(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def too_long(path: Path) -> str | None:
    """Why ``path`` breaks the size rule, or None when it keeps it."""
    n = lines(path)
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    if n > LIMIT and REASON not in doc:
        return f"{path.name} has {n} lines (> {LIMIT}) and no {REASON!r} in its docstring"
    return None


@pytest.mark.parametrize("path", MODULES, ids=name_of)
def test_a_module_is_short_or_says_why_it_is_long(path):
    problem = too_long(path)
    assert problem is None, f"{name_of(path)}: {problem}: split it"


def test_the_size_rule_refuses_a_long_module_unless_its_docstring_says_why(tmp_path):
    body = "x = 1\n" * LIMIT
    long = tmp_path / "long.py"
    long.write_text(f'"""A module."""\n{body}', encoding="utf-8")
    assert "has 501 lines" in too_long(long)
    long.write_text(f'"""A module.\n\n{REASON} the book prints it whole."""\n{body}', "utf-8")
    assert too_long(long) is None
    short = tmp_path / "short.py"
    short.write_text('"""A module."""\n' + "x = 1\n" * (LIMIT - 1), encoding="utf-8")
    assert too_long(short) is None


def imports_of(path: Path) -> set[str]:
    """The package modules ``path`` imports (relative or absolute), as dotted names."""
    here = ["attnbook", *path.relative_to(PACKAGE).with_suffix("").parts]
    package = here[:-1] if path.name != "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attnbook")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("attnbook"):
                continue
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}  # "from . import rnn"
    return found


def dotted(path: Path) -> str:
    parts = ["attnbook", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def cycles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles between distinct modules (a package's ``__init__`` importing its own
    submodules, which import their siblings, is not a cycle), found by depth-first search."""
    edges = {
        a: sorted(b for b in deps if b in graph and b != a and not b.startswith(a + "."))
        for a, deps in graph.items()
    }
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in edges[node]:
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = "done"

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    return found


def test_no_modules_import_each_other():
    graph = {dotted(p): imports_of(p) for p in MODULES}
    cycles = cycles_in(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_search_finds_long_and_short_cycles():
    assert cycles_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles_in({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    assert cycles_in({"p": {"p.x"}, "p.x": {"p.y"}, "p.y": set()}) == []


def test_the_import_scan_sees_relative_and_absolute_imports():
    text = (PACKAGE / "diagrams" / "__init__.py").read_text(encoding="utf-8")
    assert re.search(r"from \. import rnn", text)
    found = imports_of(PACKAGE / "diagrams" / "__init__.py")
    assert {"attnbook.diagrams.rnn", "attnbook.diagrams.canvas"} <= found
