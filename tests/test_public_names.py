"""Every module says what it exports: its ``__all__`` holds every public top-level name it
defines (a name without a leading underscore), and every name in it exists."""

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import attnbook

MODULES = ["attnbook"] + [
    m.name
    for m in pkgutil.walk_packages(attnbook.__path__, "attnbook.")
    if not m.name.endswith("__main__")
]


def public_names(module) -> set[str]:
    """The public names ``module``'s source binds at top level: functions, classes and
    assignments, and for a package what it imports from its own modules."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    is_package = Path(module.__file__).name == "__init__.py"
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and is_package:
            names.update(alias.asname or alias.name for alias in node.names)
    return {n for n in names if not n.startswith("_")}


def test_the_modules_are_found():
    assert {"attnbook.attention", "attnbook.cli", "attnbook.train", "attnbook._checks"} <= set(
        MODULES
    )


@pytest.mark.parametrize("name", MODULES)
def test_all_is_complete_and_exists(name):
    module = importlib.import_module(name)
    listed = getattr(module, "__all__", None)
    assert isinstance(listed, list), f"{name} has no __all__ list"
    assert len(listed) == len(set(listed)), f"{name}.__all__ repeats a name"
    missing = public_names(module) - set(listed)
    assert not missing, f"{name}.__all__ lacks {sorted(missing)}"
    absent = [n for n in listed if not hasattr(module, n)]
    assert not absent, f"{name}.__all__ names what it does not have: {absent}"
