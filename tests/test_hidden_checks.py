"""Checks that bite (issue 39): a chapter's hidden assertions back its sentences, so each must be
able to fail.

1. An assertion that reads no value the notebook computed (only literals, names bound to
   literals, and loop variables over literals) cannot fail whatever the chapter computes: it is
   arithmetic, not a check. ``assert len({h * L**2 * (512 // h) for h in (1, 2, 4, 8)}) == 1``
   with ``L = 10`` is one. Such an assertion fails this lint.
2. Each assertion in a hidden cell (``remove-cell``, ``remove-input``) says in a comment which
   sentence of the page it backs: a comment on its own lines, or one directly above it, or above
   the run of assertions it belongs to (with no blank line or other code between).

Set ``ATTNBOOK_ROOT`` to check another checkout's book with this file.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ATTNBOOK_ROOT", Path(__file__).resolve().parents[1]))
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
HIDDEN = {"remove-cell", "remove-input"}
# modules whose names are imported, not computed: math.pi is a literal here
CONSTANT_MODULES = {"math"}


def python(source: str) -> str:
    """A code cell's source with IPython magics and shell lines blanked (same line numbers)."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class _Literals(ast.NodeVisitor):
    """Follows a notebook's code in order and records which names hold only literals: bound to
    an expression whose names are themselves literal (or builtins), by assignment, by a ``for``
    over a literal, or by a comprehension over one."""

    def __init__(self):
        self.literal: set[str] = set(CONSTANT_MODULES)
        self.tautologies: list[ast.Assert] = []

    def is_literal(self, node: ast.AST, bound: frozenset[str] = frozenset()) -> bool:
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            for gen in node.generators:  # the loops first: they bind the names the rest reads
                if not self.is_literal(gen.iter, bound):
                    return False
                bound = bound | _names_stored(gen.target)
                if not all(self.is_literal(c, bound) for c in gen.ifs):
                    return False
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return all(self.is_literal(p, bound) for p in parts)
        if isinstance(node, ast.Lambda | ast.Await | ast.Yield | ast.YieldFrom | ast.NamedExpr):
            return False
        if isinstance(node, ast.Call):
            # a builtin or a math function called on literals is literal (len, sum, range,
            # math.isqrt ...); any other call computes something (a function the notebook
            # defined, a method, another module's)
            func = node.func
            builtin = isinstance(func, ast.Name) and func.id in vars(builtins)
            constant = (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in CONSTANT_MODULES
            )
            if not (builtin or constant):
                return False
        if isinstance(node, ast.Name):
            return node.id in self.literal or node.id in bound or node.id in vars(builtins)
        return all(self.is_literal(child, bound) for child in ast.iter_child_nodes(node))

    def _bind(self, targets, literal: bool) -> None:
        for target in targets:
            if isinstance(target, ast.Subscript | ast.Attribute):  # x[k] = ..., x.a = ...
                self.literal -= _names(target)  # x now holds what was put in it
                continue
            for name in _names_stored(target):
                (self.literal.add if literal else self.literal.discard)(name)

    def visit(self, node):
        # x.append(...), x.update(...), x.fill_(...): a method may change x
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                base = call.func.value
                while isinstance(base, ast.Attribute | ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name) and base.id not in CONSTANT_MODULES:
                    self.literal.discard(base.id)
        return super().visit(node)

    def visit_Assign(self, node):
        self._bind(node.targets, self.is_literal(node.value))

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._bind([node.target], self.is_literal(node.value))

    def visit_AugAssign(self, node):
        literal = self.is_literal(node.value) and _names_stored(node.target) <= self.literal
        self._bind([node.target], literal)

    def visit_For(self, node):
        self._bind([node.target], self.is_literal(node.iter))
        for child in node.body + node.orelse:
            self.visit(child)

    def _defines(self, node):
        self.literal.discard(node.name)  # functions and classes compute

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _defines

    def visit_Import(self, node):
        for alias in node.names:
            name = (alias.asname or alias.name).split(".")[0]
            (self.literal.add if alias.name in CONSTANT_MODULES else self.literal.discard)(name)

    def visit_ImportFrom(self, node):
        for alias in node.names:
            self.literal.discard(alias.asname or alias.name)

    def visit_With(self, node):
        for item in node.items:
            if item.optional_vars is not None:
                self._bind([item.optional_vars], False)
        for child in node.body:
            self.visit(child)

    def visit_Assert(self, node):
        if self.is_literal(node.test):
            self.tautologies.append(node)


def _names_stored(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def tautologies(sources: list[str]) -> list[tuple[int, int, str]]:
    """The assertions of a notebook's code cells (in order) that read no computed value:
    (cell index in ``sources``, line in the cell, the assertion's text)."""
    found, walker = [], _Literals()
    for index, source in enumerate(sources):
        code = python(source)
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        before = len(walker.tautologies)
        for statement in tree.body:
            walker.visit(statement)
        for node in walker.tautologies[before:]:
            found.append((index, node.lineno, ast.get_source_segment(code, node) or ""))
    return found


def uncommented_assertions(source: str) -> list[tuple[int, str]]:
    """The assertions of a cell with no comment of their own: none on their lines, and none
    above them or above the run of assertions they belong to (line, text)."""
    code = python(source)
    lines = code.splitlines()
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert_lines = {i for n in asserts for i in range(n.lineno - 1, n.end_lineno)}
    missing = []
    for node in asserts:
        if any("#" in lines[i] for i in range(node.lineno - 1, node.end_lineno)):
            continue
        i, covered = node.lineno - 2, False
        while i >= 0:
            text = lines[i].strip()
            if text.startswith("#"):
                covered = True
                break
            if i in assert_lines and "#" in lines[i]:
                covered = True  # the run of assertions it belongs to is commented
                break
            if i not in assert_lines:
                break
            i -= 1
        if not covered:
            missing.append((node.lineno, ast.get_source_segment(code, node) or ""))
    return missing


def code_cells(path: Path) -> list[dict]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


# ------------------------------------------------------------------------- the lint itself


def test_the_lint_finds_planted_tautologies_and_passes_real_checks():
    sources = [
        "L = 10\nheads = (1, 2, 4, 8)\nacc = model_accuracy()\nimport math",
        # tautologies: arithmetic on literals, names bound to literals, loops over literals
        "assert len({h * L**2 * (512 // h) for h in heads}) == 1",
        "assert 2 + 2 == 4\nassert math.isqrt(64) ** 2 == 64\nfor h in heads:\n    assert 512 % h == 0",
        "n = L * 3\nassert n == 30",
        # real checks: each reads a value the notebook computed
        "assert acc > 0.9",
        "assert all(x > 0 for x in model_outputs())",
        "for h in heads:\n    assert results[h] > 0.5",
        "ratio = acc / L\nassert ratio < 1",
        "def f():\n    return 3\nassert f() == 3",
    ]
    found = tautologies(sources)
    assert [(cell, line) for cell, line, _ in found] == [(1, 1), (2, 1), (2, 2), (2, 4), (3, 2)]
    assert found[0][2] == "assert len({h * L**2 * (512 // h) for h in heads}) == 1"


def test_the_lint_sees_a_name_rebound_to_a_computed_value():
    assert tautologies(["x = 1", "x = compute()", "assert x == 1"]) == []
    assert tautologies(["x = compute()", "x = 1", "assert x == 1"]) == [(2, 1, "assert x == 1")]


def test_the_comment_rule_accepts_a_comment_on_the_line_above_or_over_a_run():
    source = "\n".join(
        [
            "# the 8 heads of the text",
            "assert a == 8",
            "assert b == 8",
            "",
            "assert c == 1  # chapter 3's claim",
            "x = 1",
            "assert d == 2",
            "assert (",
            "    e == 3  # the sentence it backs",
            ")",
        ]
    )
    assert uncommented_assertions(source) == [(7, "assert d == 2")]


# ------------------------------------------------------------------------- the chapters


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_hidden_check_is_a_tautology(path):
    cells = code_cells(path)
    found = tautologies(["".join(c["source"]) for c in cells])
    assert not found, (
        f"{path.name}: assertions that read no value the notebook computed (they cannot fail): "
        + "; ".join(f"code cell {i + 1} line {line}: {text}" for i, line, text in found)
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_each_hidden_assertion_says_which_sentence_it_backs(path):
    missing = []
    for i, cell in enumerate(code_cells(path)):
        if set(cell.get("metadata", {}).get("tags", [])) & HIDDEN:
            for line, text in uncommented_assertions("".join(cell["source"])):
                missing.append(f"code cell {i + 1} line {line}: {text.splitlines()[0]}")
    assert not missing, (
        f"{path.name}: hidden assertions with no comment saying which sentence they back: "
        + "; ".join(missing)
    )
